"""The agent endpoint's guides: skills (short markdown how-tos, served by ``load_skill``
and as ``skill://<topic>`` resources) and the texts of its four prompts."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from ..domain.editor_inserts import INSERTS
from ..domain.fieldtypes import FIELD_TYPES
from ..domain.themes import FONTS


@dataclass(frozen=True)
class Skill:
    topic: str
    title: str
    description: str
    markdown: str
    listed: bool = True  # on resources/list and in load_skill's schema; unlisted ones still load

    @property
    def uri(self) -> str:
        return f"skill://{self.topic}"


REQUESTS = """# Requests

A request assigns one **published** form to one named recipient. It has its own link
(`url`), optional prefilled answers, and once the recipient submits, `answers`, `display`
and (when the form has the decision question) an `outcome`: `approve`, `changes` or
`decline`.

1. Call `fields_list {formId}` first. Use only the `key`s it returns: `prefill` takes the
   keys of visible, prefillable questions (a choice takes its option **key**, not its
   label; a date is `YYYY-MM-DD`); `context` takes hidden-field keys only; `readonly`
   lists prefilled keys the recipient cannot change. Re-read after every publish.
2. Call `request_create {formId, recipient: {name, email}, prefill, externalId, ...}`.
   Use `idempotencyKey` (your own id) when a retry could repeat the call: the same key
   with the same body returns the original request with `deduplicated: true`. Use
   `test: true` while trying things out: test requests spend no allowance and send no
   email. `delivery: "email"` makes the service send the invitation (Pro or Business,
   or one of a Free workspace's 10 invitations); otherwise share `url` yourself.
3. Without a `callbackUrl`, poll `request_get {requestId}` on the order of minutes (not
   seconds) until `status` leaves `pending`, and never past `expiresAt`. Statuses:
   `pending`, `completed`, `expired`, `canceled`.
4. `request_remind` emails the recipient again (Pro; one per 10 minutes, 8 at most);
   `request_cancel` closes the link for good; `request_list` filters by `status`,
   `outcome` or `externalId` and needs `formId` or `workspaceId`.

Every request created spends one unit of the monthly allowance, answered or not.
`request_create` and `document_create` share a limit of 60 calls per minute, inside the
120 tool calls per minute of the token. A failure names a `details.reason` (such as
`UNKNOWN_FIELD_KEY` with `validKeys`) and a `suggestion`: follow it and retry.
"""

def _takes(params: type[BaseModel]) -> str:
    names = [n for n in params.model_fields if n not in ("formId", "index", "afterElementId")]
    return ", ".join(f"`{n}`" for n in names) or "nothing else"


def _question_types() -> str:
    rows = "\n".join(f"| `{i.tool}` | {i.element} | {_takes(i.params)} |" for i in INSERTS)
    return f"""# Question types

Each kind of element has its own insert tool with a precise input schema; all of them go
to the form's draft, placed at `index` or after `afterElementId` (the end by default), and
reach `fields_list` and requests after `form_publish`.

| tool | element (type in editor_getDocument) | takes |
|---|---|---|
{rows}
| `editor_insertDecisionQuestion` | decision | `title`, `required`, `description`, `labels` |
| `editor_insertDocumentsBlock` | documents | `title`, `key`, `description`, `documents` |
| `editor_insertEmbedded` | embed | `url`, `title`, `height` |

Answers: text, email, phone and url answer text; number a number; date `YYYY-MM-DD`, time
`HH:MM`; rating whole stars (1 to `maxStars`); scale a whole number from `min` to `max`;
switch true or false; radio, select and picture-choice one option **key**; checkbox and
ranking a list of option keys; matrix `{{rowKey: columnKey}}`; a hidden field is set by a
request's `context` and never shown; a calculated field or variable is computed; file and
signature are uploaded files; payment and appointment are set by their provider; a
repeating group answers a list of member objects; a Documents block answers nothing.

A question's `key` is derived from its title unless you send one (letters, digits, `_`,
`.`, `-`). Keys are unique in a form and frozen once published. Only the question keyed
`decision`, inserted with `editor_insertDecisionQuestion`, sets a request's `outcome`; a
radio built by hand never does. Option keys are derived from labels when omitted.

All field types: {", ".join(FIELD_TYPES)}.
"""


QUESTION_TYPES = _question_types()

LOGIC_RULES = """# Logic rules

A rule is `{id?, when: {field, op, value}, then: {action, target}}`:

- `field` is a question's key; `op` is `equals`, `notEquals`, `contains`, `gt` or `lt`
  (which ops apply depends on the question: `gt`/`lt` on numbers, ratings, scales, dates
  and times; `contains` on text and multi-choice);
- `action` is `show`, `hide` or `jump` (forward only); `target` is an element id or key.

`editor_insertLogic` adds one rule, `editor_setLogic {rules}` replaces them all (`[]`
removes every rule), and `editor_testLogic {answers, rules?}` evaluates the saved rules (or
the ones you send) against sample answers: which rules fire, which elements are visible or
hidden, and where a jump lands. Test before you publish. Deleting an element with
`editor_deleteElement` removes the rules that name it; renaming a key rewrites them.
"""

EDITING_FLOWS = """# Editing flows

1. Read the draft: `editor_getDocument {formId}` gives every element (id, type, title,
   key) and the logic rules, and `hasUnpublishedChanges`.
2. Change it: the `editor_insert*` tools add elements (one tool per kind, see the
   `question-types` guide), `editor_updateElement` changes attributes of one element
   (only what you send; its type stays), `editor_deleteElement` removes one,
   `editor_formatText` styles part of a text.
3. Publish: `form_publish` freezes the draft into a new version. Only then do
   `fields_list`, `form_get` and new requests see the change; requests already sent keep
   the version they were created with. Published keys are frozen.

Build a new form with `form_create`, insert its questions, then publish. Every tool
answers the element it changed and the draft's revision (`draftRev`).
"""

FORM_BEST_PRACTICES = """# Form best practices

- Ask only what you need, and prefill what you already know (`request_create` `prefill`,
  `readonly` for what must not change): the recipient then only confirms or corrects.
- Give every question a clear title and a stable `key` you choose yourself: answers,
  prefill, exports and integrations address it, and it is frozen once published.
- Use the specific insert tool for each answer you expect (a date question for a date, a
  contact question for an email): answers come back typed and checked.
- Use hidden fields for what you pass along but never show (`context`), and the decision
  question when you need an approve / changes / decline outcome.
- Mark required only what the form cannot do without; test logic with
  `editor_testLogic`; publish, then read `fields_list` before sending requests.
"""

FORM_THEMES = """# Form themes

`formTheme_get {formId}` answers the form's colours (`primary`, `background`, `text`,
`buttonText`, hex strings) and its `font`, with `isDefault` while nothing was set.
`formTheme_set {formId, colors?, font?}` changes only what you send (a colour set to
null, or to its default, reverts to the default); `reset: true` alone restores the
default theme. Fonts: """ + ", ".join(FONTS) + """.

A theme is presentation: it needs no publish and changes no answers. This endpoint keeps
one theme per form (the hosted service also offers a dark variant, which this one does
not model).
"""

ANALYTICS = """# Analytics

`formAnalytics_get {formId}` (Pro and Business) answers the form's funnel: `views`,
`starts`, `completions` and `completionRate` (completions / views, null without views),
split by channel into `shareLinks` and `requests`, plus `requestsCreated`. Test requests
and test submissions count nowhere.

For share links a respondent's first save counts as a view and a start; for requests, an
opened link is a view and saved answers a start. The answers themselves are read with
`formSubmission_list` (share links) and `request_get` / `request_list` (requests).
"""

TOON_FORMAT = """# TOON format

Every tool of this endpoint answers one text item holding **JSON**:
`{"success": true, ...}` or `{"success": false, "error", "code", "details",
"suggestion"}`. It does not answer in TOON (a compact, token-saving text notation for
tables of objects); read the results as JSON.

When you pass a long list of uniform objects on to a person or another step, you may
write it as a table yourself (one header line of field names, one line per item); the
tools themselves take and return JSON only.
"""

FORM_SETTINGS = """# Form settings

`formSettings_get {formId}` returns `settings` (saved values over the defaults),
`isDefault`, the verified sender domains usable as `emailDomainId`, and whether a payment
provider is connected. `formSettings_update {formId, ...}` is a partial update: only the
settings you send change, and a refused update changes nothing.

- **Access:** `language` (BCP-47), `requireAuthentication`, `showBranding`,
  `captchaEnabled`, `password` (4+ characters; sending one turns `passwordEnabled` on;
  `null` removes the gate).
- **Notifications:** owner emails (`notifyOnSubmission`, `notificationEmails`) and
  respondent emails (`respondentNotificationEnabled`, `respondentNotificationTo`: the id
  of an email question). Subjects and bodies accept `{{variable}}` placeholders; a
  customised respondent subject or body becomes translatable at once.
- **Reminders (Pro):** `reminderSteps` such as `["1d", "3d"]` (at most 5) apply to
  abandoned drafts and to requests with a recipient email.
- **After submit:** `redirectUrl` (http(s)) excludes `allowAnotherResponse`;
  `maxSubmissionsPerRespondent` (0 = unlimited), `editAfterSubmit`, `maxEdits` (max 3).
- **Retention:** `draftRetentionDays`, `submissionRetentionDays` (Business), 0-36500;
  `null` reverts to the default. **Sender:** `emailDomainId` (Business).

A setting a plan does not include answers `UPGRADE_REQUIRED` with `details.feature`.
Colours and font are the theme: `formTheme_get` / `formTheme_set` (load the
`form-appearance` catalog).
"""

DOCUMENTS = """# Documents

A request can hand its recipient files to read or sign: PDFs and images (`application/pdf`,
`image/png`, `image/jpeg`, `image/webp`, `image/gif`, `image/svg+xml`, `image/avif`,
`image/bmp`, `image/tiff`), 25 MB per file and 100 MB per request.

1. The form needs a Documents block: `editor_insertDocumentsBlock {formId, title}`, then
   `form_publish`. `fields_list` shows it as `type: documents`.
2. `document_create {formId, name, contentType, size}` (the exact byte count) reserves
   the upload and returns `{id, uploadUrl, expiresAt}`.
3. PUT the raw bytes to `uploadUrl` within one hour, with `Content-Type` equal to the
   declared type and **no** Authorization header (the URL is its own credential).
4. `request_create {..., documents: [{documentId, field?, name?}]}`. `field` names the
   Documents block and may be left out only when the form has exactly one. A skipped
   upload fails with `DOCUMENT_NOT_UPLOADED`; one upload can serve many requests.
"""

SHARE_LINKS = """# Share links

A share link is the public URL of a **published** form: anyone with it can respond, and
each response arrives as a submission (`formSubmission_list`), not as a request.

- `formShareLink_list {formId}`: every link of the form, revoked ones included.
- `formShareLink_create {formId, name?}`: a new link (load the `share-links` catalog);
  the form must be published.
- `formShareLink_update {shareLinkId, name?, revoked?}`: rename, or `revoked: true` to
  close the link. Revoking is permanent: create a new link instead of un-revoking.

Trashing a form (`form_delete`) revokes its active links; restoring it does not bring
them back. Unpublishing closes every link until the form is published again. The form's
password gate, submission limits and redirect (see `form-settings`) apply on its links.
Use a request instead of a share link when you need to know who answered, prefill
answers, or be told when it is done.
"""

SKILLS: dict[str, Skill] = {s.topic: s for s in [
    Skill("requests", "Requests", "Send a form to one recipient, follow it, and read the outcome.", REQUESTS),
    Skill("question-types", "Question types", "Every insert tool, what it takes and what its answer looks like.",
          QUESTION_TYPES),
    Skill("logic-rules", "Logic rules", "Show, hide and jump rules: their shape, ops, and how to test them.",
          LOGIC_RULES),
    Skill("editing-flows", "Editing flows", "Read the draft, change it, publish it.", EDITING_FLOWS),
    Skill("form-best-practices", "Form best practices", "Forms that are quick to answer and easy to use.",
          FORM_BEST_PRACTICES),
    Skill("form-themes", "Form themes", "A form's colours and font.", FORM_THEMES),
    Skill("form-settings", "Form settings", "Access, notifications, reminders, redirects, retention, sender.",
          FORM_SETTINGS),
    Skill("analytics", "Analytics", "A form's funnel: views, starts, completions, by channel.", ANALYTICS),
    Skill("toon-format", "TOON format", "How tool results read (JSON), and tables of results.", TOON_FORMAT),
    Skill("documents", "Documents", "Attach files to a request: Documents block, upload, reference.", DOCUMENTS,
          listed=False),
    Skill("share-links", "Share links", "Public links of a published form.", SHARE_LINKS, listed=False),
]}
LISTED_SKILLS = [t for t, s in SKILLS.items() if s.listed]


# -- prompts ---------------------------------------------------------------------------------

PROMPTS: dict[str, str] = {
    "identity": "Who you act for: the person, workspace and plan behind this token.",
    "capabilities": "What this server can do: the tool catalogs, limits and how results look.",
    "data_tools": "How to use the request and data tools: fields, requests, submissions, analytics.",
    "editor_tools": "How to edit a form: the draft, question types, logic rules, publishing.",
}


def identity_text(user_name: str, user_email: str, workspace_name: str, workspace_id: str, plan: str) -> str:
    return (
        f"You act for {user_name} <{user_email}> in the workspace {workspace_name!r} ({workspace_id}), on the "
        f"{plan.capitalize()} plan.\n\n"
        "This token reaches this one workspace only: use its id wherever a tool asks for workspaceId, and ids "
        "from form_list, request_list and workspaceFolder_list elsewhere. Features the plan does not include "
        "answer UPGRADE_REQUIRED with details.feature: tell the user rather than retrying. Never ask for or "
        "reveal the workspace's request signing secret: no tool returns it."
    )


def capabilities_text(catalogs: dict[str, tuple[str, list[str]]]) -> str:
    lines = [
        "This server manages forms, their settings and submissions, and per-recipient requests of the Form "
        "Collection Service.",
        "",
        "tools/list shows every tool with its input schema; load_tools {catalog} adds a catalog's usage notes. "
        "There is no session: every tool can be called at any time. Catalogs:",
    ]
    lines += [f"- {name}: {desc} ({', '.join(tools)})" for name, (desc, tools) in catalogs.items()]
    lines += [
        "",
        "Every tool result is one JSON text: {success: true, ...} or {success: false, error, code, details, "
        "suggestion}. Follow the suggestion and retry; details.reason names the cause. Request tools add a "
        "`next` line saying what to do next.",
        "Each tools/call spends one of the token's 120 calls per minute (shared with the JSON-RPC API); "
        "request_create and document_create also share 60 per minute. Over the limit a tool answers "
        "RATE_LIMITED with details.retryAfterMs: wait that long. tools/list, prompts and resources are free.",
        "Guides: load_skill {topic} or the resources skill://<topic>.",
    ]
    return "\n".join(lines)


DATA_TOOLS = """Request and data tools.

- fields_list {formId}: the published field keys. Read it before request_create and after each publish;
  never guess keys.
- request_create: one form, one recipient, one link. Prefill with option keys, hidden fields in context,
  an idempotencyKey for safe retries, test: true while experimenting. Then share the url.
- request_get {requestId}: poll on the order of minutes until status leaves pending (completed, expired,
  canceled), bounded by expiresAt. Completed requests carry answers, display and outcome.
- request_list {formId | workspaceId, status?, outcome?, externalId?}: newest first, paginated with cursor.
- request_remind, request_cancel, request_replayCallback: act on one request.
- document_create: reserve a file upload for a request's Documents block (load_skill documents).
- formSubmission_list {formId}: responses, newest first, answers keyed by field key with display text
  (drafts on Pro). formAnalytics_get {formId} (Pro): views, starts and completions by channel.

Answers are keyed by field key; a choice answer is its option key, display holds the label.
"""

EDITOR_TOOLS = """Editor tools: they change a form's DRAFT only.

1. editor_getDocument {formId}: the draft's elements (id, type, title, key, ...) and logic rules.
2. Insert: one tool per kind of element, each with a precise schema (load_skill question-types):
   questions (editor_insertTextQuestion, editor_insertRadioQuestion {options}, editor_insertMatrixQuestion
   {rows, columns}, ...), editor_insertDecisionQuestion (key decision: the request outcome), content
   (editor_insertHeader, editor_insertParagraph, editor_insertImage, editor_insertList, editor_insertTable,
   editor_insertRow, editor_insertEmbedded, editor_insertPageDivider, editor_insertDocumentsBlock), data
   (editor_insertHiddenField, editor_insertCalculatedField, editor_insertVariable,
   editor_insertRepeatingGroup). Place with index or afterElementId; the default is the end.
3. Change: editor_updateElement {formId, elementId, ...attributes}, editor_deleteElement,
   editor_formatText {elementId, text, style} (bold, italic, underline, strike, code, link with url, plain).
4. Logic: a rule is {id?, when: {field, op, value}, then: {action, target}}; op is equals, notEquals,
   contains, gt or lt; action is show, hide or jump (forward); field is a question key, target an element id
   or key. editor_insertLogic adds one, editor_setLogic replaces all, editor_testLogic {answers} shows which
   rules fire and which elements show.
5. form_publish freezes the draft into a new version: only then do fields_list, form_get and requests see
   the change. Published keys are frozen.
"""


def prompt_text(name: str, identity: dict[str, str], catalogs: dict[str, tuple[str, list[str]]]) -> str:
    """The text of prompt ``name`` (one of :data:`PROMPTS`)."""
    if name == "identity":
        return identity_text(identity["userName"], identity["userEmail"], identity["workspaceName"],
                             identity["workspaceId"], identity["plan"])
    if name == "capabilities":
        return capabilities_text(catalogs)
    return DATA_TOOLS if name == "data_tools" else EDITOR_TOOLS
