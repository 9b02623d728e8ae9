"""The agent endpoint's guides: skills (short markdown how-tos, served by ``load_skill``
and as ``skill://<topic>`` resources) and the texts of its four prompts."""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.fieldtypes import FIELD_TYPES


@dataclass(frozen=True)
class Skill:
    topic: str
    title: str
    description: str
    markdown: str

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

QUESTION_TYPES = """# Question types

Insert questions with `editor_insertQuestion {formId, type, title, ...}`; the change goes
to the form's draft and reaches `fields_list` and requests after `form_publish`.

| type | what it takes | answer |
|---|---|---|
| text, textarea, email, phone, url | title | text |
| number | title | a number |
| date / time | title | `YYYY-MM-DD` / `HH:MM` |
| rating | `maxStars` (1-10, default 5) | whole stars |
| scale | `min`, `max` (default 0-10) | a whole number |
| switch | title | true or false |
| select, radio, picture-choice | `options: [{label, key?}]` | one option key |
| checkbox, ranking | `options` | a list of option keys |
| matrix | `rows`, `columns` | `{rowKey: columnKey}` |
| hidden | title | set by a request's `context`, never shown |
| calculated | `formula` such as `quantity * unit_price` | computed |
| file, signature | title | uploaded files |
| payment, schedule-appointment | title | set by the provider |
| group | `members` (plain questions), `repeating` | a list of member objects |
| documents | `documents: [{name}]` | none: files the recipient reads |
| decision | use `editor_insertDecisionQuestion` | `approve`, `changes`, `decline` |

A question's `key` is derived from its title unless you send one (letters, digits, `_`,
`.`, `-`). Keys are unique in a form and frozen once published. Only the question keyed
`decision`, inserted with `editor_insertDecisionQuestion`, sets a request's `outcome`; a
radio built by hand never does. Option keys are derived from labels when omitted.
""" + "\nAll types: " + ", ".join(FIELD_TYPES) + ".\n"

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
Colours and font are the theme: `formTheme_get` / `formTheme_set` (load the `settings`
catalog).
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
    Skill("question-types", "Question types", "Every field type, what it takes and what its answer looks like.",
          QUESTION_TYPES),
    Skill("form-settings", "Form settings", "Access, notifications, reminders, redirects, retention, sender.",
          FORM_SETTINGS),
    Skill("documents", "Documents", "Attach files to a request: Documents block, upload, reference.", DOCUMENTS),
    Skill("share-links", "Share links", "Public links of a published form.", SHARE_LINKS),
]}


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


def capabilities_text(catalogs: dict[str, tuple[str, list[str]]], core: list[str]) -> str:
    lines = [
        "This server manages forms, their settings and submissions, and per-recipient requests of the Form "
        "Collection Service.",
        "",
        f"tools/list shows the core tools: {', '.join(core)}. Call load_tools {{catalog}} to see the others "
        "with their input schemas; every tool can be called at any time (there is no session), load_tools is "
        "only how you discover them. Catalogs:",
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
2. Insert: editor_insertQuestion {formId, type, title, key?, required?, options?, ...} for any field type
   (load_skill question-types), editor_insertContent (heading, paragraph, divider, image),
   editor_insertDocumentsBlock, editor_insertDecisionQuestion (key decision: the request outcome),
   editor_insertEmbedded {url}. Place with index or afterElementId; the default is the end.
3. Change: editor_updateElement {formId, elementId, ...attributes}, editor_deleteElement,
   editor_formatText {elementId, text, style} (bold, italic, underline, strike, code, link with url, plain).
4. Logic: a rule is {id?, when: {field, op, value}, then: {action, target}}; op is equals, notEquals,
   contains, gt or lt; action is show, hide or jump (forward); field is a question key, target an element id
   or key. editor_insertLogic adds one, editor_setLogic replaces all, editor_testLogic {answers} shows which
   rules fire and which elements show.
5. form_publish freezes the draft into a new version: only then do fields_list, form_get and requests see
   the change. Published keys are frozen.
"""


def prompt_text(name: str, identity: dict[str, str], catalogs: dict[str, tuple[str, list[str]]],
                core: list[str]) -> str:
    """The text of prompt ``name`` (one of :data:`PROMPTS`)."""
    if name == "identity":
        return identity_text(identity["userName"], identity["userEmail"], identity["workspaceName"],
                             identity["workspaceId"], identity["plan"])
    if name == "capabilities":
        return capabilities_text(catalogs, core)
    return DATA_TOOLS if name == "data_tools" else EDITOR_TOOLS
