"""Form settings and translations: formSettings.get/update, translations.listEntries.

A form's saved settings live in ``Form.settings`` as a sparse JSON object: only the
fields ever written are stored (the password as a salted hash under ``passwordHash``),
and a field reverted with ``null`` is removed again, so every other field keeps
following the defaults declared on :class:`Settings`. ``None`` means nothing was ever
saved (``isDefault: true``).

Stored keys are the :class:`Settings` field names, so a direct ``.get(name)`` falls back
to the default when absent; :func:`settings_of` gives the whole effective record, and
:func:`password_matches` checks a respondent's form password.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field, create_model
from sqlmodel import select

from ..errors import upgrade_required, validation
from ..tables import Form, Snapshot, TranslationEntry
from . import fieldtypes, schedule
from .base import PLAN_RANK, Ctx, Page, Params, Result, decode_cursor, encode_cursor, method

DEFAULT_DRAFT_RETENTION_DAYS = 30

DEFAULT_FROM_ADDRESS = "noreply@form.formstep.test"
SUBJECT_MAX, BODY_MAX = 255, 20_000
# BCP-47 shape: language, optional script, optional region, variants.
BCP47_RE = re.compile(
    r"^[A-Za-z]{2,3}(-[A-Za-z]{4})?(-(?:[A-Za-z]{2}|[0-9]{3}))?(-(?:[A-Za-z0-9]{5,8}|[0-9][A-Za-z0-9]{3}))*$"
)
PLACEHOLDER_RE = re.compile(r"\{\{\s*[A-Za-z0-9_.-]+\s*\}\}")
BRACES_RE = re.compile(r"\{\{|\}\}")
PARAM_NAME_RE = re.compile(r"^[A-Za-z0-9_.~-]{1,64}$")
PBKDF2_ROUNDS = 100_000

Subject = Annotated[str, Field(max_length=SUBJECT_MAX)]
Body = Annotated[str, Field(max_length=BODY_MAX)]
Days = Annotated[int, Field(ge=0, le=36500)]


class RedirectQueryParam(Params):
    """One query parameter appended to the redirect URL: ``paramName`` carries the answer
    of the question ``fieldId`` (a question id of the form, as in ``forms.get``)."""

    paramName: str
    fieldId: str


class Settings(Result):
    """Every setting of a form with its default: the single source of the settings shape.
    ``formSettings.get`` returns it as ``settings``; ``formSettings.update`` takes any of
    its writable fields (all but ``hasPassword`` and ``effectiveMaxEdits``) plus
    ``password``, and returns it."""

    # Access
    language: str = Field("en", description="BCP-47 tag of the form's language.")
    requireAuthentication: bool = Field(False, description="Respondents must sign in before answering.")
    showBranding: bool = Field(True, description="Show the service's badge on the form.")
    captchaEnabled: bool = Field(False, description="Ask for a captcha before a submit.")
    passwordEnabled: bool = Field(False, description="Respondents must enter the form password.")
    hasPassword: bool = Field(False, description="Read-only: a password is stored (it is never returned).")
    # Owner notifications (not translatable)
    notifyOnSubmission: bool = Field(True, description="Email the owner on each submission.")
    notificationEmails: Annotated[list[str], Field(max_length=50)] = Field(
        default_factory=list, description="Extra owner addresses; [] mails the workspace owner only.")
    selfNotificationSubject: Subject | None = Field(None, description="null: the built-in subject.")
    selfNotificationEmailBody: Body | None = Field(None, description="null: the built-in body.")
    pdfGenerationEnabled: bool = Field(False, description="Attach a PDF of the submission.")
    showViewSubmissionButton: bool = Field(True, description="The owner email links to the submission.")
    # Respondent notifications (subject and body are translatable once customised)
    respondentNotificationEnabled: bool = Field(False, description="Email the respondent a confirmation.")
    respondentNotificationTo: str | None = Field(
        None, description="Id of the email question whose answer is the recipient; null: the request "
                          "recipient or the respondent's known address.")
    respondentNotificationSubject: Subject | None = Field(None, description="null: the built-in subject.")
    respondentNotificationBody: Body | None = Field(None, description="null: the built-in body.")
    respondentNotificationPdfEnabled: bool = Field(False, description="Attach a PDF to the confirmation.")
    # Reminders (Pro)
    respondentReminderEnabled: bool = Field(False, description="Remind respondents who left a draft.")
    respondentReminderTo: str | None = Field(None, description="Id of the email question to remind.")
    respondentReminderSubject: Subject | None = Field(None, description="null: the built-in subject.")
    respondentReminderBody: Body | None = Field(None, description="null: the built-in body.")
    respondentReminderRequiredFieldIds: list[str] = Field(
        default_factory=list, description="Question ids that must be unanswered for a reminder to go out.")
    reminderSteps: list[str] = Field(
        default_factory=list, description="Idle offsets (<n>h, <n>d, <n>w), at most 5, sorted; [] = none.")
    # After submit
    redirectUrl: str | None = Field(None, description="http(s) URL opened after a submit; null: none.")
    redirectQueryParams: Annotated[list[RedirectQueryParam], Field(max_length=20)] = Field(
        default_factory=list, description="Answers appended to the redirect URL.")
    allowAnotherResponse: bool = Field(False, description="Offer a new response after a submit.")
    maxSubmissionsPerRespondent: Annotated[int, Field(ge=0, le=1000)] = Field(0, description="0 = unlimited.")
    editAfterSubmit: bool = Field(False, description="Respondents may edit a sent submission.")
    maxEdits: Annotated[int, Field(ge=0, le=3)] = Field(
        0, description="Edits per submission; 0 = the plan's most (unlimited on Pro and Business, 3 on Free).")
    effectiveMaxEdits: int | None = Field(
        None, description="Read-only: the edit limit that applies on the current plan; null = unlimited.")
    # Retention
    draftRetentionDays: Days | None = Field(
        DEFAULT_DRAFT_RETENTION_DAYS, description=f"Days a draft is kept; null reverts to {DEFAULT_DRAFT_RETENTION_DAYS}.")
    submissionRetentionDays: Days | None = Field(
        None, description="Days a submission is kept (Business); null reverts to keeping it until deleted.")
    # Sender
    emailDomainId: str | None = Field(None, description="Verified email-domain id (Business); null: default.")


READ_ONLY = frozenset({"hasPassword", "effectiveMaxEdits"})
WRITABLE = [name for name in Settings.model_fields if name not in READ_ONLY]
TRANSLATABLE = ("respondentNotificationSubject", "respondentNotificationBody",
                "respondentReminderSubject", "respondentReminderBody")
SUBJECTS = frozenset({"selfNotificationSubject", "respondentNotificationSubject", "respondentReminderSubject"})
TEMPLATES = SUBJECTS | {"selfNotificationEmailBody", "respondentNotificationBody", "respondentReminderBody"}
REMINDER_GROUP = ("respondentReminderEnabled", "respondentReminderTo", "respondentReminderSubject",
                  "respondentReminderBody", "respondentReminderRequiredFieldIds", "reminderSteps")
# field -> (lowest plan, details.feature, what the message calls it)
GATES: dict[str, tuple[str, str, str]] = {
    **{f: ("pro", "reminders", "Reminders") for f in REMINDER_GROUP},
    "submissionRetentionDays": ("business", "submissionRetention", "Submission retention"),
    "emailDomainId": ("business", "customSender", "A custom sender domain"),
}


class FormIdParams(Params):
    formId: str


def _update_fields() -> dict[str, Any]:
    """The update params: each writable setting with its own type and constraints, every
    one optional (only sent fields are written)."""
    fields: dict[str, Any] = {}  # formId comes from the base
    for name in WRITABLE:
        info = Settings.model_fields[name]
        annotation = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        fields[name] = (annotation, Field(None, description=info.description))
    fields["password"] = (Annotated[str, Field(min_length=4, max_length=128)] | None,
                          Field(None, description="4+ characters; implies passwordEnabled; null removes "
                                                  "the password and the gate."))
    return fields


SettingsUpdateParams = create_model("SettingsUpdateParams", __base__=FormIdParams, **_update_fields())


# -- reading ---------------------------------------------------------------------------


def settings_of(form: Form, plan: str) -> Settings:
    """The form's effective settings on ``plan``: saved values over the defaults, every
    field set (so nothing is dropped when the result is dumped)."""
    stored = form.settings or {}
    values: dict[str, Any] = {
        name: info.get_default(call_default_factory=True) for name, info in Settings.model_fields.items()
    }
    values.update({k: v for k, v in stored.items() if k in Settings.model_fields and k not in READ_ONLY})
    values["hasPassword"] = "passwordHash" in stored
    max_edits = values["maxEdits"]
    values["effectiveMaxEdits"] = max_edits or (3 if PLAN_RANK[plan] < PLAN_RANK["pro"] else None)
    return Settings.model_validate(values)


def password_matches(form: Form, candidate: str) -> bool:
    """True when ``candidate`` is the form's password (false when it has none)."""
    stored = (form.settings or {}).get("passwordHash")
    if not stored:
        return False
    _, rounds, salt, digest = stored.split("$")
    got = hashlib.pbkdf2_hmac("sha256", candidate.encode(), bytes.fromhex(salt), int(rounds)).hex()
    return hmac.compare_digest(got, digest)


def _hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, PBKDF2_ROUNDS).hex()
    return f"pbkdf2_sha256${PBKDF2_ROUNDS}${salt.hex()}${digest}"


class EmailDomain(Result):
    id: str
    domain: str
    verified: bool


class CustomDomain(Result):
    """A custom link domain: its ``id`` is what ``requests.create`` takes as ``domainId``."""

    id: str
    domain: str


class Payment(Result):
    connected: bool


class SettingsDoc(Result):
    settings: Settings
    isDefault: bool
    availableEmailDomains: list[EmailDomain]
    availableCustomDomains: list[CustomDomain]  # ids usable as requests.create domainId
    defaultFromAddress: str
    fromAddress: str  # the sender actually used: the chosen domain's, or the default
    payment: Payment
    fixedDeletionAt: int | None  # a deletion date set in the form builder; retention days clear it


def _verified_domains(ctx: Ctx) -> list[dict[str, Any]]:
    return [d for d in ctx.workspace.email_domains or [] if d.get("verified")]


@method("formSettings.get")
def form_settings_get(ctx: Ctx, p: FormIdParams) -> SettingsDoc:
    """A form's settings (saved values or defaults), the verified sender domains usable as
    emailDomainId, the custom link domains usable as requests.create domainId, the
    default sender and whether a payment provider is connected."""
    form = ctx.form(p.formId)
    s = settings_of(form, ctx.workspace.plan)
    domains = _verified_domains(ctx)
    chosen = next((d for d in domains if d["id"] == s.emailDomainId), None)
    return SettingsDoc(
        settings=s,
        isDefault=form.settings is None,
        availableEmailDomains=[EmailDomain(id=d["id"], domain=d["domain"], verified=True) for d in domains],
        availableCustomDomains=[CustomDomain(id=d["id"], domain=d["domain"])
                                for d in ctx.workspace.custom_domains or []],
        defaultFromAddress=DEFAULT_FROM_ADDRESS,
        fromAddress=f"noreply@{chosen['domain']}" if chosen else DEFAULT_FROM_ADDRESS,
        payment=Payment(connected=bool(ctx.workspace.payment_connected)),
        fixedDeletionAt=form.fixed_deletion_at,
    )


# -- checks of single fields --------------------------------------------------------------


def _questions(form: Form) -> list[dict[str, Any]]:
    """The draft's answerable questions, whose block ids are the field ids settings name."""
    return [b for b in form.blocks or []
            if fieldtypes.is_question(b) and fieldtypes.field_type(b).answerable]


def _check_email_field(form: Form, field: str, value: str) -> str:
    questions = _questions(form)
    email_ids = [b["id"] for b in questions if b["type"] == "email"]
    if value in email_ids:
        return value
    by_id = {b["id"]: b for b in questions}
    if value in by_id:
        raise validation(f"{field} must name an email question; {value} is a {by_id[value]['type']} question.",
                         field=field, reason="NOT_AN_EMAIL_FIELD", validValues=email_ids)
    keyed = next((b for b in questions if b.get("key") == value), None)
    hint = f" {value!r} is the key of question {keyed['id']}; send its id." if keyed else ""
    raise validation(f"{field} must be the id of an email question of this form, or null.{hint}",
                     field=field, reason="UNKNOWN_FIELD_ID", validValues=email_ids)


def _check_field_ids(form: Form, field: str, ids: list[str]) -> list[str]:
    valid = [b["id"] for b in _questions(form)]
    for i, fid in enumerate(ids):
        if fid not in valid:
            raise validation(f"{field}.{i}: {fid!r} is not the id of a question of this form.",
                             field=f"{field}.{i}", reason="UNKNOWN_FIELD_ID", validValues=valid)
    return list(dict.fromkeys(ids))


def _check_template(field: str, text: str) -> str:
    """Subjects and bodies: plain text whose ``{{variable}}`` placeholders are well formed;
    subjects are one line. Stored as given (rendering turns newlines into paragraphs)."""
    if not text.strip():
        raise validation(f"{field} is blank; send null to use the built-in text.", field=field,
                         reason="INVALID_VALUE")
    if field in SUBJECTS and ("\n" in text or "\r" in text):
        raise validation(f"{field} is a subject line and cannot contain line breaks.", field=field,
                         reason="INVALID_VALUE")
    pos = 0
    while (m := BRACES_RE.search(text, pos)) is not None:
        if m.group() == "}}":
            raise validation(f"{field}: '}}}}' at character {m.start()} closes no placeholder; placeholders "
                             f"look like {{{{variable}}}}.", field=field, reason="INVALID_PLACEHOLDER")
        placeholder = PLACEHOLDER_RE.match(text, m.start())
        if placeholder is None:
            snippet = text[m.start(): m.start() + 24]
            raise validation(f"{field}: the placeholder starting at character {m.start()} ({snippet!r}) is not "
                             "closed or not a name; placeholders look like {{variable}} (letters, digits, "
                             "_ . -).", field=field, reason="INVALID_PLACEHOLDER")
        pos = placeholder.end()
    return text


def canonical_language(tag: str) -> str | None:
    """``tag`` in canonical BCP-47 casing (``en-us`` -> ``en-US``), or None when it does not
    have the shape of a language tag."""
    if not BCP47_RE.match(tag):
        return None
    parts = tag.split("-")
    out = [parts[0].lower()]
    for part in parts[1:]:
        if len(part) == 4 and part.isalpha():
            out.append(part.title())
        elif (len(part) == 2 and part.isalpha()) or (len(part) == 3 and part.isdigit()):
            out.append(part.upper())
        else:
            out.append(part.lower())
    return "-".join(out)


def check_language(field: str, tag: str) -> str:
    """``tag`` in canonical BCP-47 form; a VALIDATION_ERROR at ``field`` when it is not one."""
    canon = canonical_language(tag)
    if canon is None:
        raise validation(f"{field}: {tag!r} is not a BCP-47 language tag such as en, de-CH or zh-Hant-TW.",
                         field=field, reason="INVALID_FORMAT")
    return canon


def _check_emails(emails: list[str]) -> list[str]:
    for i, email in enumerate(emails):
        if not fieldtypes.EMAIL_RE.match(email):
            raise validation(f"notificationEmails.{i}: {email!r} is not an email address.",
                             field=f"notificationEmails.{i}", reason="INVALID_FORMAT")
    unique: dict[str, str] = {}
    for email in emails:
        unique.setdefault(email.lower(), email)  # the same address twice is one recipient
    return list(unique.values())


def _check_redirect(url: str) -> str | None:
    url = url.strip()
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in url):
        raise validation(f"redirectUrl must be an http(s) URL such as https://example.com/thanks; got {url!r}. "
                         "Send null or an empty string to remove the redirect.", field="redirectUrl",
                         reason="INVALID_FORMAT")
    if len(url) > 2048:
        raise validation("redirectUrl must have at most 2048 characters.", field="redirectUrl",
                         reason="OUT_OF_RANGE")
    return url


def _check_query_params(form: Form, items: list[RedirectQueryParam]) -> list[dict[str, str]]:
    valid = [b["id"] for b in _questions(form)]
    names: set[str] = set()
    out = []
    for i, item in enumerate(items):
        if not PARAM_NAME_RE.match(item.paramName):
            raise validation(f"redirectQueryParams.{i}.paramName: {item.paramName!r} is not a query parameter "
                             "name (1-64 of letters, digits, _ . ~ -).", field=f"redirectQueryParams.{i}.paramName",
                             reason="INVALID_FORMAT")
        if item.paramName in names:
            raise validation(f"redirectQueryParams.{i}.paramName: {item.paramName!r} is used twice.",
                             field=f"redirectQueryParams.{i}.paramName", reason="DUPLICATE_VALUE")
        if item.fieldId not in valid:
            raise validation(f"redirectQueryParams.{i}.fieldId: {item.fieldId!r} is not the id of a question "
                             "of this form.", field=f"redirectQueryParams.{i}.fieldId", reason="UNKNOWN_FIELD_ID",
                             validValues=valid)
        names.add(item.paramName)
        out.append(item.model_dump())
    return out


def _check_email_domain(ctx: Ctx, domain_id: str) -> str:
    domains = ctx.workspace.email_domains or []
    verified = [d["id"] for d in domains if d.get("verified")]
    if domain_id in verified:
        return domain_id
    known = next((d for d in domains if d["id"] == domain_id), None)
    if known is not None:
        raise validation(f"emailDomainId: {known['domain']} is not verified yet; verify it in the dashboard or "
                         "pick a verified domain from formSettings.get.", field="emailDomainId",
                         reason="EMAIL_DOMAIN_NOT_VERIFIED", validValues=verified)
    raise validation(f"emailDomainId: {domain_id!r} is not an email domain of this workspace; pick one from "
                     "formSettings.get availableEmailDomains, or null for the default sender.",
                     field="emailDomainId", reason="UNKNOWN_EMAIL_DOMAIN", validValues=verified)


# -- formSettings.update ---------------------------------------------------------------------

REMOVE = object()  # marks a field reverted to its default: its key leaves the stored object


def _is_default(name: str, value: Any) -> bool:
    return value is None or value == Settings.model_fields[name].get_default(call_default_factory=True)


def _check_gates(ctx: Ctx, sent: dict[str, Any]) -> None:
    """Paid features refuse a value that turns them on; sending the default is always
    allowed, so a downgraded workspace can still switch a feature off."""
    for name, (plan, feature, what) in GATES.items():
        if name in sent and not _is_default(name, sent[name]) and not ctx.plan_at_least(plan):
            raise upgrade_required(
                f"{what} ({name}) needs the {plan.capitalize()} plan or higher; this workspace is on "
                f"{ctx.workspace.plan.capitalize()}.", feature, field=name, reason="PLAN_REQUIRED")


def _normalise(ctx: Ctx, form: Form, name: str, value: Any) -> Any:
    """The value to store for one sent field (REMOVE: revert to the default), or a
    VALIDATION_ERROR naming what is wrong."""
    checks: dict[str, Callable[[Any], Any]] = {
        "language": lambda v: check_language("language", v),
        "notificationEmails": _check_emails,
        "respondentNotificationTo": lambda v: _check_email_field(form, name, v),
        "respondentReminderTo": lambda v: _check_email_field(form, name, v),
        "respondentReminderRequiredFieldIds": lambda v: _check_field_ids(form, name, v),
        "reminderSteps": lambda steps: schedule.check_steps(steps, "reminderSteps"),
        "redirectUrl": _check_redirect,
        "redirectQueryParams": lambda v: _check_query_params(form, v),
        "emailDomainId": lambda v: _check_email_domain(ctx, v),
    }
    if value is None:
        return REMOVE
    if name in TEMPLATES:
        value = _check_template(name, value)
    elif name in checks:
        value = checks[name](value)
    return REMOVE if value is None else value


@method("formSettings.update")
def form_settings_update(ctx: Ctx, p: SettingsUpdateParams) -> Settings:
    """Write the sent settings (partial update) and return the form's settings; a refused
    update changes nothing."""
    form = ctx.form(p.formId)
    sent = {name: getattr(p, name) for name in p.model_fields_set if name != "formId"}
    if not sent:
        raise validation("Send at least one setting to change.", reason="NOTHING_TO_UPDATE",
                         validKeys=sorted([*WRITABLE, "password"]))
    _check_gates(ctx, sent)
    stored = dict(form.settings or {})
    for name in [n for n in WRITABLE if n in sent]:
        value = _normalise(ctx, form, name, sent[name])
        if value is REMOVE:
            stored.pop(name, None)
        else:
            stored[name] = value
    _apply_password(stored, sent)
    _check_redirect_exclusive(stored, sent)
    form.settings = stored
    if "submissionRetentionDays" in stored and "submissionRetentionDays" in sent:
        form.fixed_deletion_at = None  # a retention rule now decides when submissions go
    _sync_translations(ctx, form, {n: sent[n] for n in TRANSLATABLE if n in sent})
    return settings_of(form, ctx.workspace.plan)


def _apply_password(stored: dict[str, Any], sent: dict[str, Any]) -> None:
    """Rule 1: a password string turns the gate on; null removes password and gate; the
    gate cannot be on without a password."""
    enabled = sent.get("passwordEnabled")
    if "password" in sent:
        if sent["password"] is None:
            if enabled:
                raise validation("password null removes the password gate; it cannot go with passwordEnabled: "
                                 "true.", field="passwordEnabled", reason="CONFLICTING_VALUES")
            stored.pop("passwordHash", None)
            stored.pop("passwordEnabled", None)
            return
        if enabled is False:
            raise validation("Sending a password turns the password gate on; it cannot go with passwordEnabled: "
                             "false.", field="passwordEnabled", reason="CONFLICTING_VALUES")
        stored["passwordHash"] = _hash_password(sent["password"])
        stored["passwordEnabled"] = True
        return
    if enabled and "passwordHash" not in stored:
        raise validation("passwordEnabled: true needs a password; send password (4 characters or more) too.",
                         field="password", reason="PASSWORD_REQUIRED")


def _check_redirect_exclusive(stored: dict[str, Any], sent: dict[str, Any]) -> None:
    """Rule 3: offering another response and redirecting away are exclusive. A params
    problem the caller fixes in the same call, hence VALIDATION_ERROR, not CONFLICT."""
    if stored.get("redirectUrl") and stored.get("allowAnotherResponse"):
        field = "allowAnotherResponse" if sent.get("allowAnotherResponse") else "redirectUrl"
        raise validation("allowAnotherResponse and redirectUrl are mutually exclusive: a form that redirects "
                         "after a submit cannot offer another response. Clear redirectUrl (null) or set "
                         "allowAnotherResponse to false in the same call.", field=field,
                         reason="MUTUALLY_EXCLUSIVE")


def _sync_translations(ctx: Ctx, form: Form, texts: dict[str, str | None]) -> None:
    """Rule 7: a customised respondent subject or body is a translation entry at once;
    reverting it (null) removes the entry. Translations already made are kept when the
    source text changes."""
    for name, text in texts.items():
        key = f"settings.{name}"
        entry = ctx.session.exec(select(TranslationEntry).where(TranslationEntry.form_id == form.id,
                                                                TranslationEntry.key == key)).first()
        if text is None:
            if entry is not None:
                ctx.session.delete(entry)
        elif entry is None:
            ctx.session.add(TranslationEntry(form_id=form.id, key=key, source=text, translations={},
                                             updated_at=ctx.now))
        elif entry.source != text:
            entry.source = text
            entry.updated_at = ctx.now


# -- translations.listEntries ---------------------------------------------------------------


class EntriesParams(Params):
    formId: str
    language: str | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 20
    cursor: str | None = None


class Entry(Result):
    key: str
    source: str
    translation: str | None


class EntryPage(Page):
    items: list[Entry]


def field_sources(snapshot: Snapshot | None) -> list[tuple[str, str]]:
    """(key, source) of the published questions' titles and option labels."""
    out: list[tuple[str, str]] = []
    for d in (snapshot.fields or []) if snapshot else []:
        if d.get("title"):
            out.append((f"field.{d['key']}.title", d["title"]))
        out.extend((f"field.{d['key']}.option.{o['key']}", o["label"]) for o in d.get("options") or [])
    return out


@method("translations.listEntries")
def translations_list_entries(ctx: Ctx, p: EntriesParams) -> EntryPage:
    """The form's translatable texts: customised respondent email subjects and bodies,
    then the published questions' titles and option labels, with their translation into
    ``language`` (null when not translated or no language is named)."""
    form = ctx.form(p.formId)
    language = check_language("language", p.language) if p.language is not None else None
    rows = {e.key: e for e in ctx.session.exec(select(TranslationEntry).where(TranslationEntry.form_id == form.id))}
    settings_keys = [f"settings.{n}" for n in TRANSLATABLE]
    sources = [(k, rows[k].source) for k in settings_keys if k in rows]
    snapshot = ctx.session.get(Snapshot, form.snapshot_id) if form.snapshot_id else None
    sources += field_sources(snapshot)
    start = 0
    if p.cursor is not None:
        (start,) = decode_cursor(p.cursor, 1)
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise validation("cursor is not a cursor this method issued; pass back the nextCursor of the "
                             "previous page.", field="cursor", reason="INVALID_CURSOR")
    page = sources[start: start + p.limit]
    items = []
    for key, source in page:
        done = (rows[key].translations or {}) if key in rows else {}
        items.append(Entry(key=key, source=source,
                           translation=(done.get(language) or done.get(p.language or language)) if language else None))
    end = start + len(page)
    nxt = encode_cursor([end]) if end < len(sources) else None
    return EntryPage(items=items, nextCursor=nxt, hasMore=nxt is not None, canPaginate=True)
