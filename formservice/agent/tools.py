"""The agent endpoint's tools: what each one runs, its input schema, its catalog, and how
its result reads (``{success: true, ...}`` or ``{success: false, error, code, details,
suggestion}``, plus a ``next`` line on request tools).

A tool either mirrors a JSON-RPC method (its params model is the method's, so schemas,
validation and errors match ``/api/v1``), runs an agent-only operation of
:mod:`formservice.domain.agentops` registered under the tool's name, or is a guide
(``load_tools``, ``load_skill``) answered here. ``tools/list`` shows every tool with its
input schema; ``load_tools`` adds a catalog's usage notes. Older names of ours (the
catalogs ``editor``, ``settings``, ...; ``editor_insertQuestion``, ``editor_insertContent``)
stay callable but are not listed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any

from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations
from pydantic import Field

from ..clock import iso
from ..domain.agentops import AGENT_METHODS
from ..domain.base import METHODS, Params
from ..domain.editor_inserts import INSERTS
from ..errors import ApiError, validation
from ..openapi import to_json_schema
from ..service import Caller, Service
from ..validation import parse_params
from .guides import LISTED_SKILLS, SKILLS

log = logging.getLogger("formservice.mcp")

CATALOGS: dict[str, str] = {
    "request-lifecycle": "Send a published form to one recipient and follow the request to its outcome.",
    "editor-inserts": "Insert elements into a form's draft: one tool per kind of question, content, data or logic.",
    "editor-actions": "Read a form's draft, change, move, format or remove its elements, and set and test its logic.",
    "form-lifecycle": "List, read, create, rename, publish, unpublish, trash and restore forms.",
    "form-appearance": "A form's theme: colours and font.",
    "form-behavior": "A form's behaviour settings: access, notifications, reminders, redirect, retention, sender.",
    "form-sharing": "Public share links of published forms.",
    "form-translations": "Languages of a form and their translation drafts.",
    "form-data": "Submissions and analytics of a form.",
    "workspace-management": "The workspace and its folders.",
}
# Older catalog names, still answered by load_tools but no longer listed.
LEGACY_CATALOGS: dict[str, tuple[str, ...]] = {
    "editor": ("editor-inserts", "editor-actions"), "settings": ("form-behavior", "form-appearance"),
    "share-links": ("form-sharing",), "folders": ("workspace-management",), "translations": ("form-translations",),
    "data": ("form-data",), "guides": ("guides",),
}
NOTES: dict[str, str] = {
    "request-lifecycle": "Call fields_list before request_create; poll request_get on the order of minutes until "
                         "status leaves pending, bounded by expiresAt (load_skill requests).",
    "editor-inserts": "Each insert changes the draft only; form_publish makes it reach fields_list and requests "
                      "(load_skill question-types).",
    "editor-actions": "editor_getDocument gives element ids; test logic with editor_testLogic before publishing "
                      "(load_skill logic-rules, editing-flows).",
    "form-lifecycle": "form_get shows the last published version; form_publish is safe to call twice.",
    "form-appearance": "A theme needs no publish (load_skill form-themes).",
    "form-behavior": "formSettings_update is a partial update; plan-gated settings answer UPGRADE_REQUIRED "
                     "(load_skill form-settings).",
    "form-sharing": "revoked: true is permanent; trashing a form revokes its links.",
    "form-translations": "Write drafts, then publish a language; only published languages reach respondents.",
    "form-data": "formAnalytics_get needs Pro (load_skill analytics).",
    "workspace-management": "A token reaches one workspace: workspace_list gives its id.",
}


@dataclass(frozen=True)
class ToolDef:
    name: str
    catalog: str
    description: str
    method: str | None = None  # a JSON-RPC method (METHODS) the tool mirrors
    guide: Callable[[Any], dict[str, Any]] | None = None  # answered here, without the store
    guide_params: type[Params] | None = None
    bucket: str | None = None  # a second rate limit (beside the per-token one)
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    next: Callable[[dict[str, Any]], str] | None = None
    listed: bool = True  # on tools/list; an unlisted tool (an older name of ours) is still callable

    @property
    def params(self) -> type[Params]:
        if self.guide_params is not None:
            return self.guide_params
        if self.method is not None:
            m = METHODS.get(self.method)
            return m.params if m is not None else Unavailable
        return AGENT_METHODS[self.name].params


class Unavailable(Params):
    """The input of a tool whose method this build does not have: it accepts anything and
    answers that the tool is unavailable."""

    model_config = {"extra": "allow"}


# -- next lines --------------------------------------------------------------------------


def _after_create(r: dict[str, Any]) -> str:
    mailed = " (the invitation email is queued)" if r.get("deliveryStatus") == "queued" else ""
    return (f"Share the url with the recipient{mailed}; call request_get on the order of minutes until status "
            f"leaves pending, bounded by expiresAt ({iso(r.get('expiresAt'))}).")


def _after_get(r: dict[str, Any]) -> str:
    status = r.get("status")
    if status == "pending":
        return (f"Still pending: call request_get again in a few minutes (not seconds) until status leaves pending, "
                f"and not past expiresAt ({iso(r.get('expiresAt'))}); request_remind nudges the recipient (Pro).")
    if status == "completed":
        outcome = f"; outcome is {r['outcome']}" if r.get("outcome") else ""
        return f"Completed: read answers (by field key) and display{outcome}. Nothing more to poll."
    if status == "expired":
        return "Expired unanswered: create a new request with request_create if the answer is still needed."
    return "Canceled: the link no longer opens; create a new request with request_create if still needed."


def _after_list(r: dict[str, Any]) -> str:
    more = " Pass nextCursor as cursor for the next page." if r.get("hasMore") else ""
    return f"Call request_get with an item's id for its answers and timeline.{more}"


def _after_cancel(r: dict[str, Any]) -> str:
    return "Canceled for good: the link no longer opens, and a callbackUrl receives request.canceled once."


def _after_remind(r: dict[str, Any]) -> str:
    return (f"Reminder sent ({r.get('remindersSent')} so far); the next manual one is possible in 10 minutes. "
            "Keep polling request_get on the order of minutes.")


def _after_replay(r: dict[str, Any]) -> str:
    return f"The callback is queued again as event {r.get('eventId')}; receivers deduplicate by event id."


def _after_document(r: dict[str, Any]) -> str:
    return (f"PUT the raw bytes to uploadUrl within one hour with Content-Type {r.get('contentType')} and no "
            f"Authorization header, then pass {{documentId: {r.get('id')!r}}} in request_create documents.")


def _after_edit(r: dict[str, Any]) -> str:
    return ("The draft changed: editor_getDocument shows it; call form_publish to make it reach fields_list, "
            "form_get and new requests.")


# -- guides --------------------------------------------------------------------------------


class LoadToolsParams(Params):
    catalog: Annotated[str, Field(json_schema_extra={"enum": list(CATALOGS)})] | None = Field(
        None, description="A catalog name; omitted: the list of catalogs and their tool names.")


class LoadSkillParams(Params):
    topic: Annotated[str, Field(json_schema_extra={"enum": LISTED_SKILLS})] = Field(
        description="The guide to load: " + ", ".join(LISTED_SKILLS) + ".")


def _one_of(name: str, value: str, listed: list[str]) -> ApiError:
    return validation(f"{name} {value!r} is not one of: {', '.join(listed)}.", field=name, reason="INVALID_VALUE",
                      validValues=listed)


def catalog_tools(catalog: str) -> list[str]:
    """The tools of ``catalog`` (a listed name or an older one), listed ones first."""
    if catalog not in CATALOGS and catalog not in LEGACY_CATALOGS:
        raise _one_of("catalog", catalog, list(CATALOGS))
    parts = LEGACY_CATALOGS.get(catalog, (catalog,))
    tools = [t for t in _DEFS if t.catalog in parts]
    return [t.name for t in tools if t.listed] + [t.name for t in tools if not t.listed]


def catalog_markdown(catalog: str) -> str:
    """A catalog as the resource ``skill://<catalog>`` reads: what it is for, how to use it,
    and its tools."""
    lines = [f"# {catalog}", "", CATALOGS[catalog], "", NOTES[catalog], ""]
    lines += [f"- `{n}`: {TOOLS[n].description}" for n in catalog_tools(catalog) if TOOLS[n].listed]
    return "\n".join(lines) + "\n"


def load_tools(p: LoadToolsParams) -> dict[str, Any]:
    if p.catalog is None:
        return {"catalogs": [{"name": c, "description": d, "tools": names_in(c)} for c, d in CATALOGS.items()],
                "note": "Call load_tools {catalog} for usage notes and input schemas. tools/list shows every tool, "
                        "and every tool is callable at any time."}
    names = catalog_tools(p.catalog)
    out: dict[str, Any] = {"catalog": p.catalog, "description": CATALOGS.get(p.catalog, ""),
                           "tools": [sdk_tool(TOOLS[n]).model_dump(by_alias=True, mode="json", exclude_none=True)
                                     for n in names],
                           "note": "These tools can be called with tools/call right away."}
    if p.catalog in CATALOGS:
        out["notes"] = NOTES[p.catalog]
        out["uri"] = f"skill://{p.catalog}"
    return out


def load_skill(p: LoadSkillParams) -> dict[str, Any]:
    skill = SKILLS.get(p.topic)
    if skill is None:
        raise _one_of("topic", p.topic, LISTED_SKILLS)
    return {"topic": skill.topic, "title": skill.title, "uri": skill.uri, "markdown": skill.markdown}


# -- the tools -----------------------------------------------------------------------------


def _t(name: str, catalog: str, description: str, **kw: Any) -> ToolDef:
    return ToolDef(name=name, catalog=catalog, description=description, **kw)


_DEFS = [
    # guides
    _t("load_tools", "guides", "Load the usage notes and input schemas of a catalog of tools: "
       + ", ".join(CATALOGS) + "; omit catalog for the list.",
       guide=load_tools, guide_params=LoadToolsParams, read_only=True, idempotent=True),
    _t("load_skill", "guides", "Load a short how-to guide (markdown): " + ", ".join(LISTED_SKILLS) + ".", guide=load_skill, guide_params=LoadSkillParams, read_only=True, idempotent=True),
    # request lifecycle
    _t("fields_list", "request-lifecycle", "The addressable field keys of a form's published version (key, type, "
       "required, prefillable, options). Call before request_create instead of guessing keys; re-read after "
       "every publish.", method="fields.list", read_only=True, idempotent=True),
    _t("request_create", "request-lifecycle", "Create a request: one published form for one recipient, with its "
       "own link, prefill (field keys from fields_list; choices take option keys), context (hidden fields), "
       "externalId, idempotencyKey, callbackUrl, documents, test. Spends one unit of the monthly allowance "
       "unless test.", method="requests.create", bucket="create", next=_after_create),
    _t("request_get", "request-lifecycle", "One request: status (pending, completed, expired, canceled), outcome, "
       "delivery, timeline; answers and display once completed.", method="requests.get", read_only=True,
       idempotent=True, next=_after_get),
    _t("request_list", "request-lifecycle", "Requests of a form (formId) or the workspace (workspaceId), newest "
       "first, filtered by status, outcome or externalId; test requests only with includeTest.",
       method="requests.list", read_only=True, idempotent=True, next=_after_list),
    _t("request_cancel", "request-lifecycle", "Cancel a pending request for good: its link stops working and its "
       "callback fires.", method="requests.cancel", destructive=True, next=_after_cancel),
    _t("request_remind", "request-lifecycle", "Email the recipient of a pending request a reminder now (Pro; one "
       "per 10 minutes, 8 per request).", method="requests.remind", next=_after_remind),
    _t("request_replayCallback", "request-lifecycle", "Send the callback of a completed, expired or canceled "
       "request again.", method="requests.replayCallback", next=_after_replay),
    _t("document_create", "request-lifecycle", "Reserve a document upload for a request's Documents block: "
       "formId, name, contentType (PDF or image), size in bytes; returns uploadUrl to PUT the bytes to.",
       method="documents.create", bucket="create", next=_after_document),
    # form lifecycle
    _t("form_list", "form-lifecycle", "The workspace's forms, newest first (workspaceId from workspace_list); "
       "query is a fuzzy name search.", method="forms.list", read_only=True, idempotent=True),
    _t("form_get", "form-lifecycle", "A form with the questions of its last published version (editor_getDocument "
       "shows the draft).", read_only=True, idempotent=True),
    _t("form_create", "form-lifecycle", "Create an empty, unpublished form.", method="forms.create"),
    _t("form_update", "form-lifecycle", "Rename, move (folderId), or decorate (emoji, cover, logo) a form; never "
       "changes its content.", method="forms.update", idempotent=True),
    _t("form_publish", "form-lifecycle", "Publish the form: the draft's changes become the new version that "
       "fields_list and requests use.", method="forms.publish", idempotent=True),
    _t("form_unpublish", "form-lifecycle", "Unpublish the form: respondents can no longer open it.",
       method="forms.unpublish", destructive=True, idempotent=True),
    _t("form_delete", "form-lifecycle", "Move the form to the trash; its active share links are revoked for good.",
       method="forms.delete", destructive=True, idempotent=True),
    _t("form_restore", "form-lifecycle", "Take a form out of the trash (revoked share links stay revoked).",
       method="forms.restore", idempotent=True),
    # share links
    _t("formShareLink_list", "form-sharing", "The share links of a form, revoked ones included.",
       method="shareLinks.list", read_only=True, idempotent=True),
    _t("formShareLink_create", "form-sharing", "Create a public link of a published form.",
       method="shareLinks.create"),
    _t("formShareLink_update", "form-sharing", "Rename a share link, or revoke it (revoked: true is permanent).",
       method="shareLinks.update"),
    # data
    _t("formSubmission_list", "form-data", "A form's submissions, newest first, answers by field key with display "
       "text (drafts on Pro).", method="submissions.list", read_only=True, idempotent=True),
    _t("formAnalytics_get", "form-data", "Views, starts and completions of a form, by channel (Pro).", read_only=True,
       idempotent=True),
    # settings
    _t("formSettings_get", "form-behavior", "A form's settings, the usable sender domains and payment state.",
       method="formSettings.get", read_only=True, idempotent=True),
    _t("formSettings_update", "form-behavior", "Change some of a form's settings (partial update).",
       method="formSettings.update", idempotent=True),
    _t("formTheme_get", "form-appearance", "A form's colours and font.", read_only=True, idempotent=True),
    _t("formTheme_set", "form-appearance", "Change a form's colours (hex) and font, or reset: true.", idempotent=True),
    # folders
    _t("workspace_list", "workspace-management", "The workspace this token acts in (its id is the workspaceId other tools take).",
       method="workspaces.list", read_only=True, idempotent=True),
    _t("workspaceFolder_list", "workspace-management", "The workspace's folders with their form counts.", method="folders.list",
       read_only=True, idempotent=True),
    _t("workspaceFolder_create", "workspace-management", "Create a folder (names are unique in the workspace).",
       method="folders.create"),
    _t("workspaceFolder_update", "workspace-management", "Rename a folder.", method="folders.update", idempotent=True),
    _t("workspaceFolder_delete", "workspace-management", "Delete a folder; its forms move to the workspace root.",
       method="folders.delete", destructive=True),
    # translations
    _t("translationLanguage_list", "form-translations", "The languages a form is translated into, with progress.",
       read_only=True, idempotent=True),
    _t("translationLanguage_delete", "form-translations", "Remove a language from a form: translations and drafts.",
       destructive=True),
    _t("translationDraft_get", "form-translations", "Every translatable text of a form with its translation into a "
       "language and the waiting draft.", read_only=True, idempotent=True),
    _t("translationDraft_update", "form-translations", "Write draft translations (text key -> text, null to remove); "
       "respondents see them after translationDraft_publish.", idempotent=True),
    _t("translationDraft_publish", "form-translations", "Publish a language's drafts.", idempotent=True),
    # editor
    _t("editor_getDocument", "editor-actions", "A form's draft: elements (id, type, title, key, ...) and logic rules.",
       read_only=True, idempotent=True),
    _t("editor_insertQuestion", "editor-inserts", "Insert a question of any field type (load_skill question-types) into "
       "the draft, at index or after afterElementId (the per-type insert tools say the same with precise schemas).",
       next=_after_edit, listed=False),
    _t("editor_insertContent", "editor-inserts", "Insert a heading or paragraph (text in title), a divider, an "
       "image, a list, a row or a table.", next=_after_edit, listed=False),
    _t("editor_insertDocumentsBlock", "editor-inserts", "Insert a Documents block: files shown to every recipient; a "
       "request attaches its own with document_create.", next=_after_edit),
    _t("editor_insertDecisionQuestion", "editor-inserts", "Insert the decision question (key decision: approve, changes, "
       "decline) whose answer is a request's outcome.", next=_after_edit),
    _t("editor_insertEmbedded", "editor-inserts", "Insert embedded content shown by URL (video, map, page).",
       next=_after_edit),
    _t("editor_insertLogic", "editor-inserts", "Add a logic rule {id?, when: {field, op, value}, then: {action, target}}: "
       "op equals, notEquals, contains, gt, lt; action show, hide, jump.", next=_after_edit),
    _t("editor_setLogic", "editor-actions", "Replace every logic rule of the form ([] removes them).", next=_after_edit),
    _t("editor_testLogic", "editor-actions", "Evaluate the logic rules (saved, or sent) against sample answers: which "
       "rules fire, which elements show.", read_only=True, idempotent=True),
    _t("editor_updateElement", "editor-actions", "Change attributes of one element (title, required, options, ...), "
       "or move it (index or afterElementId).", next=_after_edit),
    _t("editor_deleteElement", "editor-actions", "Remove one element from the draft, with the logic rules naming it.",
       destructive=True, next=_after_edit),
    _t("editor_formatText", "editor-actions", "Style part of an element's text: bold, italic, underline, strike, code, "
       "link (with url), plain.", next=_after_edit),
    # one insert tool per kind of element, each a thin schema over the one insert
    *(_t(i.tool, "editor-inserts", i.description, next=_after_edit) for i in INSERTS),
]

TOOLS: dict[str, ToolDef] = {t.name: t for t in _DEFS}
_ORDER = {c: i for i, c in enumerate([*CATALOGS, "guides"])}


def names_in(catalog: str) -> list[str]:
    """The listed tools of a listed catalog."""
    return [t.name for t in _DEFS if t.catalog == catalog and t.listed]


@cache
def _schema(model: type[Params]) -> dict[str, Any]:
    schema: dict[str, Any] = to_json_schema(model.model_json_schema())
    schema.pop("title", None)
    return schema


def sdk_tool(t: ToolDef) -> Tool:
    """The tool as ``tools/list`` and ``load_tools`` show it."""
    annotations = ToolAnnotations(readOnlyHint=t.read_only, destructiveHint=t.destructive if not t.read_only else None,
                                  idempotentHint=t.idempotent if not t.read_only else None, openWorldHint=False)
    description = t.description
    if t.params is Unavailable:
        description += f" (Unavailable in this build: it has no {t.method} method.)"
    return Tool(name=t.name, title=t.name.replace("_", " "), description=description,
                inputSchema=_schema(t.params), annotations=annotations)


def listed_tools() -> list[Tool]:
    """What ``tools/list`` shows: every listed tool, catalog by catalog, the guides last."""
    return [sdk_tool(t) for t in sorted(_DEFS, key=lambda t: _ORDER[t.catalog]) if t.listed]


# -- running and results -------------------------------------------------------------------


def run(service: Service, caller: Caller, t: ToolDef, arguments: dict[str, Any] | None) -> Any:
    """The tool's JSON result, or ApiError. Store-backed tools run in one transaction
    through ``Service.invoke`` (already throttled by the binding)."""
    if t.guide is not None:
        return t.guide(parse_params(t.params, arguments or {}))
    if t.method is not None:
        if t.method not in METHODS:
            raise ApiError("METHOD_NOT_FOUND", f"{t.name} is unavailable: this build of the service has no "
                           f"{t.method} method.", reason="TOOL_UNAVAILABLE")
        return service.invoke(caller, t.method, arguments, throttle=False)
    return service.invoke(caller, t.name, arguments, throttle=False, registry=AGENT_METHODS)


def success(t: ToolDef, data: Any) -> CallToolResult:
    body: dict[str, Any] = {"success": True, **(data if isinstance(data, dict) else {"result": data})}
    if t.next is not None:
        body["next"] = t.next(body)
    return _result(body, is_error=False)


def failure(t: ToolDef | None, err: ApiError) -> CallToolResult:
    body = {"success": False, "error": err.message, "code": err.code, "details": err.details,
            "suggestion": suggestion(t.name if t else "", err)}
    return _result(body, is_error=True)


def _result(body: dict[str, Any], *, is_error: bool) -> CallToolResult:
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], isError=is_error)


def _keys_tool(tool: str) -> str:
    if tool.startswith("editor_"):
        return "editor_getDocument (the draft's question keys)"
    if tool.startswith("translation"):
        return "translationDraft_get (the translatable text keys)"
    return "fields_list (the published field keys)"


def suggestion(tool: str, err: ApiError) -> str:
    """How an agent fixes the call, from the error's reason (else its code)."""
    d = err.details
    field = d.get("field", "the param")
    valid = d.get("validKeys") or d.get("validValues")
    shown = f": {', '.join(map(str, valid[:20]))}" + (" …" if valid and len(valid) > 20 else "") if valid else ""
    by_reason: dict[str, str] = {
        "UNKNOWN_FIELD_KEY": f"Call {_keys_tool(tool)} and use one of validKeys{shown}.",
        "UNKNOWN_PARAM": f"Remove {field}; this tool accepts{shown}.",
        "REQUIRED": f"Add {field} and call again.",
        "INVALID_TYPE": f"Send {field} as {d.get('expectedType', 'the type the inputSchema names')}.",
        "FORM_NOT_PUBLISHED": "Publish the form with form_publish, then call again.",
        "FORM_EMPTY": "Add a question with editor_insertQuestion (or content), then publish.",
        "FORM_TRASHED": "Restore the form with form_restore first.",
        "DOCUMENT_NOT_UPLOADED": "PUT the file's bytes to the uploadUrl document_create returned, then retry.",
        "DOCUMENT_NOT_FOUND": "Create the document for this form with document_create and upload it.",
        "INVALID_DOCUMENT_TARGET": f"Name the Documents block in documents[].field, one of validKeys{shown}.",
        "REQUEST_NOT_PENDING": "Call request_get to see the status; only a pending request takes this call.",
        "REQUEST_NOT_TERMINAL": "Wait until the request is completed, expired or canceled.",
        "NO_CALLBACK_TO_REPLAY": "Only requests created with a callbackUrl have a callback; poll request_get.",
        "IDEMPOTENCY_CONFLICT": "Use a new idempotencyKey, or resend exactly the original body.",
        "MONTHLY_ALLOWANCE_REACHED": "The monthly allowance is spent: tell the user; test: true requests still work.",
        "FREE_INVITATIONS_USED": "Use delivery none and share the url yourself, or ask the user to upgrade.",
        "RECIPIENT_EMAIL_REQUIRED": "Create the request with recipient.email, or deliver the url yourself.",
        "REMINDER_TOO_SOON": f"Wait {d.get('retryAfterMs')} ms before the next manual reminder.",
        "SCOPE_REQUIRED": "Send formId, or workspaceId (workspace_list gives it).",
        "FOREIGN_WORKSPACE": "This token acts in one workspace: use ids from workspace_list, form_list, request_list.",
        "DUPLICATE_FIELD_KEY": "Pick another key, or omit key to derive one from the title.",
        "DUPLICATE_NAME": "Pick another name, or use the existing folder (details.folderId).",
        "DUPLICATE_RULE_ID": "Pick another rule id, or omit id.",
        "DECISION_EXISTS": "The form has its decision question already; change it with editor_updateElement.",
        "KEY_FROZEN": "Keep the published key; delete the question and insert a new one to change it.",
        "ELEMENT_NOT_FOUND": "Call editor_getDocument for the element ids.",
        "UNKNOWN_ELEMENT": "Call editor_getDocument and target one of its element ids.",
        "NOT_APPLICABLE": f"Drop {field}; this element takes{shown}.",
        "NOTHING_TO_UPDATE": f"Send at least one of{shown}.",
        "UNKNOWN_LANGUAGE": "Use a language translationLanguage_list shows.",
        "TOOL_UNAVAILABLE": "Tell the user this tool is unavailable here; no retry will help.",
        "PLAN_REQUIRED": f"This needs a higher plan (feature {d.get('feature')}): tell the user, or do without it.",
    }
    reason = d.get("reason")
    if reason in by_reason:
        return by_reason[reason]
    if reason in ("INVALID_VALUE", "OUT_OF_RANGE", "INVALID_FORMAT") or valid:
        return f"Fix {field}" + (f"; accepted{shown}." if valid else " as the error says.")
    by_code = {
        "RATE_LIMITED": f"Wait {d.get('retryAfterMs')} ms, then retry the same call; tools/list, prompts and "
                        "resources cost nothing meanwhile.",
        "UPGRADE_REQUIRED": f"This needs a higher plan (feature {d.get('feature')}): tell the user.",
        "NOT_FOUND": "Check the id: form_list, request_list, workspaceFolder_list and editor_getDocument list what "
                     "exists.",
        "FORBIDDEN": "This token acts in one workspace only: use its ids.",
        "CONFLICT": "Read the current state first, then adjust the call.",
        "VALIDATION_ERROR": "Fix the arguments as the error says; load_tools shows the tool's input schema.",
        "METHOD_NOT_FOUND": "Call load_tools to see the tools.",
        "INTERNAL_ERROR": "Retry later: the call changed nothing.",
    }
    return by_code.get(err.code, "Fix the call as the error says.")


def internal_error(exc: BaseException) -> ApiError:
    log.exception("tool failed unexpectedly", exc_info=exc)
    return ApiError("INTERNAL_ERROR", "Unexpected server error; the call changed nothing. Retry later.")
