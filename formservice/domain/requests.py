"""Requests: one published form assigned to one recipient, with its own link, prefill,
outcome, reminders, callback and events."""

from __future__ import annotations

import hashlib
import ipaddress
import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field
from sqlalchemy import func
from sqlmodel import Session, col, select

from ..clock import DAY_MS, HOUR_MS, MINUTE_MS
from ..errors import ApiError, conflict, not_found, validation
from ..ids import BASE62, new_id
from ..tables import (
    Document,
    Event,
    Form,
    IdempotencyKey,
    Mail,
    Request,
    Snapshot,
    StoredFile,
    Submission,
    Workspace,
    referenced,
)
from . import events, fieldtypes, schedule
from .base import Ctx, Page, Params, Result, keyset_page, method
from .settings import check_language, settings_of
from .submissions import check_answers, display_of, questions, raise_answer_errors, record_submission
from .translation_drafts import published_languages

MAX_EXPIRY_MS = 365 * DAY_MS
DEFAULT_EXPIRY_MS = 30 * DAY_MS
TEST_LINK_MS = 24 * HOUR_MS
IDEMPOTENCY_MS = 30 * DAY_MS
FREE_INVITATIONS = 10
FREE_TESTS_PER_DAY = 10
MAX_REMINDERS = 8
REMINDER_GAP_MS = 10 * MINUTE_MS
MAX_METADATA_BYTES = 16 * 1024
MAX_DOCUMENTS_BYTES = 100 * 1024 * 1024
TERMINAL = ("completed", "expired", "canceled")
Str255 = Annotated[str, Field(min_length=1, max_length=255)]


# -- params ------------------------------------------------------------------------


class Recipient(Params):
    email: Annotated[str, Field(max_length=320)] | None = None
    name: Annotated[str, Field(max_length=255)] | None = None


class DocumentRef(Params):
    documentId: str
    field: str | None = None
    name: Str255 | None = None


class CreateParams(Params):
    formId: str
    recipient: Recipient | None = None
    prefill: dict[str, Any] | None = None
    readonly: list[str] | None = None
    # hidden fields hold text: a value of another type would only fail at completion
    context: dict[str, Annotated[str, Field(max_length=10_000)]] | None = None
    metadata: dict[str, Any] | None = None
    externalId: Str255 | None = None
    delivery: Literal["none", "email"] = "none"
    expiresAt: int | None = None
    callbackUrl: Annotated[str, Field(max_length=2048)] | None = None
    idempotencyKey: Str255 | None = None
    test: bool = False
    reminders: Annotated[list[str], Field(max_length=schedule.MAX_STEPS)] | None = None
    domainId: str | None = None
    documents: list[DocumentRef] | None = None
    language: Annotated[str, Field(pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")] | None = None


# -- results -----------------------------------------------------------------------


class Created(Result):
    id: str
    status: str
    url: str
    deliveryStatus: str
    externalId: str | None
    deduplicated: bool
    createdAt: int
    expiresAt: int


def url_of(req: Request, base_url: str) -> str:
    return f"{req.base_url or base_url}/r/{req.token}"


def record(req: Request, base_url: str, *, full: bool) -> dict[str, Any]:
    """The request record as ``requests.get`` (full) or ``requests.list`` (summary)
    returns it: epoch ms, ``canceled`` spelling, the callback URL never shown."""
    r: dict[str, Any] = {
        "id": req.id, "workspaceId": req.workspace_id, "formId": req.form_id, "formSnapshotId": req.snapshot_id,
        "submissionId": req.submission_id, "status": req.status, "outcome": req.outcome, "createdVia": "api",
        "isTest": req.is_test, "recipient": {"email": req.recipient_email, "name": req.recipient_name},
        "language": req.language or "en", "externalId": req.external_id, "metadata": req.metadata_,
        "context": req.context or {}, "prefill": req.prefill or {}, "readonlyKeys": req.readonly_keys or [],
        "documents": [{k: d[k] for k in ("field", "name", "size", "contentType") if k in d}
                      for d in req.documents or []],
        "delivery": req.delivery, "deliveryStatus": req.delivery_status, "hasCallback": bool(req.callback_url),
        "callbackFailedAt": req.callback_failed_at, "expiresAt": req.expires_at, "createdAt": req.created_at,
        "updatedAt": req.updated_at, "openedAt": req.opened_at, "startedAt": req.started_at,
        "lastActivityAt": req.last_activity_at, "completedAt": req.completed_at, "expiredAt": req.expired_at,
        "canceledAt": req.canceled_at, "dataPurgedAt": req.data_purged_at, "reminderDueAt": req.reminder_due_at,
        "canceledBy": req.canceled_by, "cancelReason": req.cancel_reason, "reminderStep": req.reminder_step,
        "remindersSent": req.reminders_sent, "url": url_of(req, base_url),
    }
    if full:
        r["answers"] = req.answers
        r["display"] = req.display
        r["timeline"] = req.timeline or []
    return r


class RequestRecord(Result):
    """The full request record (``requests.get``); list items omit answers and timeline."""

    model_config = {"extra": "allow"}
    id: str
    status: str
    url: str
    deliveryStatus: str
    externalId: str | None
    createdAt: int
    expiresAt: int


class RequestPage(Page):
    items: list[dict[str, Any]]


# -- helpers -----------------------------------------------------------------------


def timeline_add(req: Request, type_: str, at: int, **extra: Any) -> None:
    entry = {"id": f"{req.id}:{type_}", "at": at, "type": type_, **{k: v for k, v in extra.items() if v is not None}}
    req.timeline = [*(req.timeline or []), entry]
    req.updated_at = at


def check_https(url: str, param: str) -> str:
    """https, or http to a loopback address (the sandbox runs beside a local receiver);
    every other URL is refused with the hosted service's message."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname:
        host = parts.hostname
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if loopback:
            return url
    raise validation(f"{param} must be an https URL", field=param, reason="HTTPS_REQUIRED")


def body_hash(session: Session, p: CreateParams, form: Form) -> str:
    """The idempotency fingerprint: the whole body except the key, with each document
    counted by its bytes, block and name (a retry that re-uploads its files, or names the
    form's only Documents block that it left out before, still matches)."""
    body = p.model_dump(exclude={"idempotencyKey"}, exclude_unset=True)
    if p.documents:
        snap = session.get(Snapshot, form.snapshot_id) if form.snapshot_id else None
        blocks = [b["key"] for b in (snap.blocks if snap else None) or [] if b.get("type") == "documents"]
        docs = []
        for ref in p.documents:
            doc = session.get(Document, ref.documentId)
            field = ref.field if ref.field is not None or len(blocks) != 1 else blocks[0]
            docs.append({"content": doc.sha256 if doc and doc.sha256 else ref.documentId,
                         "size": doc.size if doc else None, "field": field,
                         "name": ref.name or (doc.name if doc else None)})
        body["documents"] = docs
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def month_start(ms: int) -> int:
    d = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return int(datetime(d.year, d.month, 1, tzinfo=UTC).timestamp() * 1000)


def day_start(ms: int) -> int:
    return ms - ms % DAY_MS


def new_link_token() -> str:
    import secrets

    return "rq_" + "".join(secrets.choice(BASE62) for _ in range(22))


def _field_error(prefix: str, key: str, err: fieldtypes.FieldValueError, reason: str) -> ApiError:
    details: dict[str, Any] = {"field": f"{prefix}.{key}", "reason": reason}
    if err.valid_values is not None:
        details["validValues"] = err.valid_values
    if err.expected:
        details["expectedType"] = err.expected
    return validation(f"{reason}: {prefix}.{key} {err}.", **details)


def check_prefill(fields: dict[str, dict[str, Any]], prefill: dict[str, Any]) -> dict[str, Any]:
    prefillable = sorted(k for k, b in fields.items() if fieldtypes.field_type(b).prefillable)
    out: dict[str, Any] = {}
    for key, value in prefill.items():
        block = fields.get(key)
        if block is None:
            raise validation(f"prefill.{key} is not a field of this form; call fields.list for the keys.",
                             field=f"prefill.{key}", reason="UNKNOWN_FIELD_KEY", validKeys=prefillable)
        ft = fieldtypes.field_type(block)
        if ft.type == "hidden":
            raise validation(f"prefill.{key} is a hidden field; send its value in context, not prefill.",
                             field=f"prefill.{key}", reason="FIELD_NOT_PREFILLABLE", validKeys=prefillable)
        if not ft.prefillable:
            raise validation(f"prefill.{key} is a {ft.type} field, which cannot be prefilled.",
                             field=f"prefill.{key}", reason="FIELD_NOT_PREFILLABLE", validKeys=prefillable)
        try:
            out[key] = fieldtypes.check_value(block, value)
        except fieldtypes.FieldValueError as err:
            raise _field_error("prefill", key, err, "INVALID_PREFILL_VALUE") from None
    return out


def check_documents(ctx: Ctx, form: Form, form_blocks: list[dict[str, Any]],
                    refs: list[DocumentRef]) -> list[dict[str, Any]]:
    """Each referenced document: reserved for this form, uploaded, aimed at one of the
    form's Documents blocks (``field`` may be left out only when there is exactly one);
    together at most 100 MB. Returns what the request stores."""
    blocks = [b for b in form_blocks if b.get("type") == "documents"]
    keys = [b["key"] for b in blocks]
    out, total = [], 0
    for i, ref in enumerate(refs):
        doc = ctx.session.get(Document, ref.documentId)
        if doc is None or doc.workspace_id != ctx.workspace.id:
            raise validation(f"documents.{i}.documentId: no document {ref.documentId}; create it with "
                             "documents.create first.", field=f"documents.{i}.documentId",
                             reason="DOCUMENT_NOT_FOUND", documentId=ref.documentId)
        if doc.form_id != form.id:
            raise validation(f"documents.{i}.documentId: document {doc.id} was created for another form; "
                             "create one for this form with documents.create.", field=f"documents.{i}.documentId",
                             reason="DOCUMENT_NOT_FOUND", documentId=doc.id)
        if doc.uploaded_at is None:
            raise validation(f"Document {doc.id} was reserved but never uploaded: PUT its bytes to the "
                             "uploadUrl first.", field=f"documents.{i}.documentId",
                             reason="DOCUMENT_NOT_UPLOADED", documentId=doc.id)
        if ref.field is None:
            if not blocks:
                raise validation("This form has no Documents block to carry documents; add one in the editor "
                                 "and publish again.", field="documents", reason="INVALID_DOCUMENT_TARGET",
                                 validKeys=keys)
            if len(blocks) != 1:
                raise validation(f'This form has {len(blocks)} Documents blocks; name the target with "field".',
                                 field="documents", reason="INVALID_DOCUMENT_TARGET", validKeys=keys)
            target = keys[0]
        elif ref.field not in keys:
            raise validation(f"documents.{i}.field {ref.field!r} is not a Documents block of this form.",
                             field=f"documents.{i}.field", reason="INVALID_DOCUMENT_TARGET", validKeys=keys)
        else:
            target = ref.field
        total += doc.size
        out.append({"documentId": doc.id, "field": target, "name": ref.name or doc.name, "size": doc.size,
                    "contentType": doc.content_type, "fileId": doc.file_id})
    if total > MAX_DOCUMENTS_BYTES:
        raise validation(f"A request may carry at most 100 MB of documents; these add up to {total} bytes.",
                         field="documents", reason="DOCUMENTS_TOO_LARGE")
    for i, entry in enumerate(out):  # the bytes, read only once the cheap checks passed
        doc = referenced(ctx.session, Document, entry["documentId"])
        stored = ctx.session.get(StoredFile, doc.file_id) if doc.file_id else None
        if stored is None or len(stored.data) != doc.size or (
                doc.sha256 and hashlib.sha256(stored.data).hexdigest() != doc.sha256):
            raise validation(f"Document {doc.id} does not match its declared size or sha256; upload it again "
                             "with documents.create.", field=f"documents.{i}.documentId",
                             reason="DOCUMENT_INVALID", documentId=doc.id)
    return out


def allowance_left(session: Session, ws: Workspace, now: int) -> int:
    used = session.exec(select(func.count()).select_from(Request).where(
        Request.workspace_id == ws.id, col(Request.is_test).is_(False), Request.created_at >= month_start(now))).one()
    return ws.monthly_allowance - used


def reminder_plan(form: Form, req: Request, ws: Workspace) -> list[str]:
    """The idle offsets that apply to a request: its own, else the form's schedule; only
    real requests with a recipient email, and only on plans with reminders."""
    if req.is_test or not req.recipient_email or ws.plan == "free":
        return []
    if req.reminders is not None:
        return req.reminders
    return list((form.settings or {}).get("reminderSteps") or [])


def schedule_next_reminder(form: Form, req: Request, ws: Workspace) -> None:
    steps = reminder_plan(form, req, ws)
    if req.status != "pending" or req.reminder_step >= len(steps) or req.reminders_sent >= MAX_REMINDERS:
        req.reminder_due_at = None
        return
    base = req.last_activity_at or req.created_at
    req.reminder_due_at = base + schedule.offset_ms(steps[req.reminder_step])


# The invitation and reminder, written in the request's language (notes, section 2):
# language -> (reminder subject prefix, greeting, call to fill in). English for the rest.
MAIL_PHRASES: dict[str, tuple[str, str, str]] = {
    "en": ("Reminder: ", "Hello {name},", "Please fill in {form}: {url}"),
    "de": ("Erinnerung: ", "Hallo {name},", "Bitte füllen Sie {form} aus: {url}"),
    "fr": ("Rappel : ", "Bonjour {name},", "Merci de remplir {form} : {url}"),
    "es": ("Recordatorio: ", "Hola {name}:", "Por favor, complete {form}: {url}"),
    "it": ("Promemoria: ", "Gentile {name},", "La preghiamo di compilare {form}: {url}"),
    "nl": ("Herinnering: ", "Hallo {name},", "Vul alstublieft {form} in: {url}"),
    "pt": ("Lembrete: ", "Olá {name},", "Por favor, preencha {form}: {url}"),
}


def mail_text(language: str, kind: str, form_name: str, name: str, url: str) -> tuple[str, str]:
    """Subject and body of an invitation or reminder in ``language`` (its primary
    subtag; English when the service has no wording for it). Pure."""
    reminder, greeting, ask = MAIL_PHRASES.get(language.split("-")[0].lower(), MAIL_PHRASES["en"])
    subject = f"{reminder if kind == 'reminder' else ''}{form_name}"
    return subject, f"{greeting.format(name=name)}\n\n{ask.format(form=form_name, url=url)}\n"


def send_mail(session: Session, req: Request, ws: Workspace, form: Form, kind: str, now: int,
              base_url: str) -> Mail:
    """Hand a mail to the (recorded) outbox: recipients on bounce.test bounce after the
    hand-off; for recipients on fail.test the hand-off itself fails."""
    domain_of_recipient = (req.recipient_email or "").lower().rpartition("@")[2]
    status = {"bounce.test": "bounced", "fail.test": "failed"}.get(domain_of_recipient, "sent")
    settings = form.settings or {}
    domain = next((d["domain"] for d in ws.email_domains or [] if d.get("id") == settings.get("emailDomainId")),
                  "form.formstep.test")
    subject, body = mail_text(req.language or settings.get("language") or "en", kind, form.name,
                              req.recipient_name or "", url_of(req, base_url))
    mail = Mail(id=new_id("mail"), workspace_id=ws.id, request_id=req.id, kind=kind, to=req.recipient_email or "",
                sender=f"noreply@{domain}", subject=subject, body=body, status=status, created_at=now)
    session.add(mail)
    return mail


# -- requests.create ---------------------------------------------------------------------


@method("requests.create", bucket="create")
def requests_create(ctx: Ctx, p: CreateParams) -> Created:
    """Create a request: one published form for one recipient, with its own link. Spends
    one unit of the monthly allowance unless ``test``."""
    s = ctx.session
    form = ctx.form(p.formId)
    if p.idempotencyKey is not None:
        prior = s.get(IdempotencyKey, (ctx.workspace.id, p.idempotencyKey))
        if prior is not None and prior.expires_at > ctx.now:
            if prior.body_hash != body_hash(s, p, form):
                raise conflict(f'Idempotency key "{p.idempotencyKey}" was already used for a different request. '
                               "Use a new key, or resend the original body.", field="idempotencyKey",
                               reason="IDEMPOTENCY_CONFLICT")
            req = referenced(s, Request, prior.request_id)
            return _created(ctx, req, deduplicated=True)
        if prior is not None:
            s.delete(prior)
            s.flush()
    if not form.is_published or form.snapshot_id is None:
        raise validation("FORM_NOT_PUBLISHED: publish the form before creating requests for it.",
                         field="formId", reason="FORM_NOT_PUBLISHED")
    snap = referenced(s, Snapshot, form.snapshot_id)
    fields = questions(snap.blocks or [])
    prefill = check_prefill(fields, p.prefill or {})
    readonly = list(dict.fromkeys(p.readonly or []))
    for i, key in enumerate(readonly):
        if key not in fields:
            raise validation(f"readonly.{i} {key!r} is not a field of this form.", field=f"readonly.{i}",
                             reason="UNKNOWN_FIELD_KEY", validKeys=sorted(prefill))
        if key not in prefill:
            raise validation(f"readonly.{i} {key!r} is not prefilled; every readonly key must also be in prefill.",
                             field=f"readonly.{i}", reason="READONLY_NOT_PREFILLED", validKeys=sorted(prefill))
    hidden = sorted(k for k, b in fields.items() if b["type"] == "hidden")
    context: dict[str, Any] = {}
    for key, value in (p.context or {}).items():
        if key not in hidden:
            raise validation(f"context.{key} is not a hidden field of this form; context takes hidden-field keys "
                             "only.", field=f"context.{key}", reason="UNKNOWN_FIELD_KEY", validKeys=hidden)
        context[key] = value
    if p.metadata is not None and len(json.dumps(p.metadata)) > MAX_METADATA_BYTES:
        raise validation("metadata is over 16 KB of JSON; keep large data on your side and send an id.",
                         field="metadata", reason="METADATA_TOO_LARGE")
    email = p.recipient.email if p.recipient else None
    if email is not None and not fieldtypes.EMAIL_RE.match(email):
        raise validation("recipient.email is not an email address.", field="recipient.email", reason="INVALID_EMAIL")
    if p.delivery == "email" and not email:
        raise validation("delivery email needs recipient.email.", field="recipient.email",
                         reason="RECIPIENT_EMAIL_REQUIRED")
    expires = ctx.now + DEFAULT_EXPIRY_MS if p.expiresAt is None else p.expiresAt
    if expires <= ctx.now:
        raise validation("expiresAt must be in the future (epoch milliseconds).", field="expiresAt",
                         reason="OUT_OF_RANGE")
    if expires > ctx.now + MAX_EXPIRY_MS:
        raise validation("expiresAt may be at most 365 days after creation.", field="expiresAt",
                         reason="OUT_OF_RANGE")
    if p.test:
        expires = min(expires, ctx.now + TEST_LINK_MS)
    if p.callbackUrl is not None:
        check_https(p.callbackUrl, "callbackUrl")
    reminders = None if p.reminders is None else schedule.check_steps(p.reminders, "reminders")
    if reminders and not p.test:
        ctx.require_plan("pro", "reminders", "Request reminders")
    language = check_request_language(ctx, form, p.language) if p.language is not None else None
    base_url = None
    if p.domainId is not None:
        dom = next((d for d in ctx.workspace.custom_domains or [] if d["id"] == p.domainId), None)
        if dom is None:
            raise validation(f"domainId {p.domainId} is not one of this workspace's custom domains.",
                             field="domainId", reason="UNKNOWN_DOMAIN",
                             validValues=[d["id"] for d in ctx.workspace.custom_domains or []])
        base_url = f"https://{dom['domain']}"
    documents = check_documents(ctx, form, snap.blocks or [], p.documents) if p.documents else []
    ws = ctx.workspace
    emailed = p.delivery == "email" and not p.test
    if emailed and ws.plan == "free":
        if ws.free_invitations_used >= FREE_INVITATIONS:
            raise ApiError("UPGRADE_REQUIRED", "This Free workspace has used its 10 free email invitations; "
                           "upgrade, or deliver the url yourself with delivery none.", feature="email_delivery",
                           reason="FREE_INVITATIONS_USED")
    if p.test:
        if ws.plan == "free":
            today = s.exec(select(func.count()).select_from(Request).where(
                Request.workspace_id == ws.id, col(Request.is_test).is_(True),
                Request.created_at >= day_start(ctx.now))).one()
            if today >= FREE_TESTS_PER_DAY:
                raise ApiError("UPGRADE_REQUIRED", "A Free workspace may create 10 test requests a day; try "
                               "tomorrow or upgrade.", feature="test_requests", reason="FREE_TEST_REQUESTS_USED",
                               retryAfterMs=day_start(ctx.now) + DAY_MS - ctx.now)
    elif allowance_left(s, ws, ctx.now) <= 0:
        raise ApiError("UPGRADE_REQUIRED", f"The workspace has spent its monthly allowance of "
                       f"{ws.monthly_allowance} requests.", feature="requests", reason="MONTHLY_ALLOWANCE_REACHED")
    req = Request(
        id=new_id("req"), workspace_id=ws.id, form_id=form.id, snapshot_id=snap.id, token=new_link_token(),
        is_test=p.test, recipient_email=email, recipient_name=p.recipient.name if p.recipient else None,
        language=language, external_id=p.externalId, metadata_=p.metadata, context=context, prefill=prefill,
        readonly_keys=readonly, documents=documents, reminders=reminders, delivery=p.delivery,
        delivery_status="queued" if emailed else "not_requested", callback_url=p.callbackUrl, domain_id=p.domainId,
        base_url=base_url, created_at=ctx.now, updated_at=ctx.now, expires_at=expires, timeline=[],
    )
    timeline_add(req, "created", ctx.now)
    if emailed:
        if ws.plan == "free":
            ws.free_invitations_used += 1
        timeline_add(req, "invitation", ctx.now, deliveryStatus="queued")
    schedule_next_reminder(form, req, ws)
    s.add(req)
    if p.idempotencyKey is not None:
        s.add(IdempotencyKey(workspace_id=ws.id, key=p.idempotencyKey, body_hash=body_hash(s, p, form),
                             request_id=req.id, created_at=ctx.now, expires_at=ctx.now + IDEMPOTENCY_MS))
    s.flush()
    return _created(ctx, req, deduplicated=False)


def _created(ctx: Ctx, req: Request, *, deduplicated: bool) -> Created:
    return Created(id=req.id, status=req.status, url=url_of(req, ctx.base_url), deliveryStatus=req.delivery_status,
                   externalId=req.external_id, deduplicated=deduplicated, createdAt=req.created_at,
                   expiresAt=req.expires_at)


# -- reads ---------------------------------------------------------------------------


class RequestIdParams(Params):
    requestId: str


def own_request(ctx: Ctx, request_id: str) -> Request:
    req = ctx.session.get(Request, request_id)
    if req is None:
        raise not_found("Request", field="requestId")
    if req.workspace_id != ctx.workspace.id:
        raise ApiError("FORBIDDEN", f"Request {request_id} belongs to another workspace.", field="requestId",
                       reason="FOREIGN_WORKSPACE")
    return req


def check_request_language(ctx: Ctx, form: Form, tag: str) -> str:
    """The request's ``language`` in canonical BCP-47 form: the form's own language or one
    it has a published translation in (notes section 2), else VALIDATION_ERROR listing them."""
    language = check_language("language", tag)
    valid = [settings_of(form, ctx.workspace.plan).language,
             *published_languages(ctx.session, form.id)]
    if language not in valid:
        raise validation(f"language {language} is not published for this form; use one of: {', '.join(valid)} "
                         "(publish a translation first with translationDraft_publish).", field="language",
                         reason="UNKNOWN_LANGUAGE", validValues=valid)
    return language


@method("requests.get")
def requests_get(ctx: Ctx, p: RequestIdParams) -> RequestRecord:
    """The whole request record: status, outcome, delivery, timeline, and once completed
    its answers and display."""
    return RequestRecord(**record(own_request(ctx, p.requestId), ctx.base_url, full=True))


class ListParams(Params):
    formId: str | None = None
    workspaceId: str | None = None
    status: Literal["pending", "completed", "expired", "canceled"] | None = None
    outcome: Literal["approve", "changes", "decline"] | None = None
    externalId: str | None = None
    includeTest: bool = False
    limit: Annotated[int, Field(ge=1, le=100)] = 25
    cursor: str | None = None


@method("requests.list")
def requests_list(ctx: Ctx, p: ListParams) -> RequestPage:
    """Requests of a form or a workspace, newest first, filtered by status, outcome
    (which takes precedence over status) or externalId; test requests only with
    ``includeTest``."""
    if p.formId is None and p.workspaceId is None:
        raise validation("Name a formId or a workspaceId to list requests.", reason="SCOPE_REQUIRED",
                         validKeys=["formId", "workspaceId"])
    stmt = select(Request)
    if p.workspaceId is not None:
        ctx.check_workspace(p.workspaceId)
    stmt = stmt.where(Request.workspace_id == ctx.workspace.id)
    if p.formId is not None:
        stmt = stmt.where(Request.form_id == ctx.form(p.formId, trashed_ok=True).id)
    if p.outcome is not None:
        stmt = stmt.where(Request.outcome == p.outcome)
    elif p.status is not None:
        stmt = stmt.where(Request.status == p.status)
    if p.externalId is not None:
        stmt = stmt.where(Request.external_id == p.externalId)
    if not p.includeTest:
        stmt = stmt.where(col(Request.is_test).is_(False))
    rows, nxt = keyset_page(ctx.session, stmt, [Request.created_at, Request.id], lambda r: (r.created_at, r.id),
                            p.limit, p.cursor)
    return RequestPage(items=[record(r, ctx.base_url, full=False) for r in rows], nextCursor=nxt,
                       hasMore=nxt is not None, canPaginate=True)


# -- state changes ---------------------------------------------------------------------


def not_pending(req: Request) -> ApiError:
    return conflict(f"REQUEST_NOT_PENDING: request {req.id} is {req.status}; only a pending request takes this call.",
                    field="requestId", reason="REQUEST_NOT_PENDING")


class CancelParams(Params):
    requestId: str
    reason: Annotated[str, Field(max_length=1000)] | None = None


@method("requests.cancel")
def requests_cancel(ctx: Ctx, p: CancelParams) -> RequestRecord:
    """Cancel a pending request: its link stops working and its callback fires."""
    req = own_request(ctx, p.requestId)
    if req.status != "pending":
        raise not_pending(req)
    req.status = "canceled"
    req.canceled_at = ctx.now
    req.canceled_by = "api"
    req.cancel_reason = p.reason
    req.reminder_due_at = None
    timeline_add(req, "canceled", ctx.now, canceledBy="api", detail=p.reason)
    form = referenced(ctx.session, Form, req.form_id)
    events.emit(ctx.session, type_="request.canceled", workspace_id=req.workspace_id, form=form,
                data={"request": events.request_data(req)}, now=ctx.now, request=req, test=req.is_test)
    return RequestRecord(**record(req, ctx.base_url, full=False))


@method("requests.remind")
def requests_remind(ctx: Ctx, p: RequestIdParams) -> RequestRecord:
    """Email the recipient a reminder now (even with delivery none). Pro or higher; at
    most one manual reminder per 10 minutes and 8 reminders per request."""
    req = own_request(ctx, p.requestId)
    ctx.require_plan("pro", "reminders", "Sending reminders")
    if req.status != "pending":
        raise not_pending(req)
    if req.is_test:
        raise validation("Test requests are never emailed.", field="requestId", reason="TEST_REQUEST")
    if not req.recipient_email:
        raise validation("RECIPIENT_EMAIL_REQUIRED: this request has no recipient email to remind.",
                         field="requestId", reason="RECIPIENT_EMAIL_REQUIRED")
    if req.reminders_sent >= MAX_REMINDERS:
        raise conflict(f"Request {req.id} already had {MAX_REMINDERS} reminders, the most a request gets.",
                       field="requestId", reason="REMINDER_LIMIT_REACHED")
    if req.last_manual_reminder_at is not None and ctx.now - req.last_manual_reminder_at < REMINDER_GAP_MS:
        wait = req.last_manual_reminder_at + REMINDER_GAP_MS - ctx.now
        raise conflict(f"REMINDER_TOO_SOON: one manual reminder per 10 minutes; retry in {wait // 1000 + 1} s.",
                       field="requestId", reason="REMINDER_TOO_SOON", retryAfterMs=wait)
    form = referenced(ctx.session, Form, req.form_id)
    mail = send_mail(ctx.session, req, ctx.workspace, form, "reminder", ctx.now, ctx.base_url)
    req.reminders_sent += 1
    req.last_manual_reminder_at = ctx.now
    timeline_add(req, "reminder", ctx.now, deliveryStatus=mail.status, detail="manual")
    if req.reminders_sent >= MAX_REMINDERS:
        req.reminder_due_at = None
    return RequestRecord(**record(req, ctx.base_url, full=False))


class Replayed(Result):
    dispatchId: str
    eventId: str


@method("requests.replayCallback")
def requests_replay_callback(ctx: Ctx, p: RequestIdParams) -> Replayed:
    """Send the callback of a completed, expired or canceled request again (same event)."""
    req = own_request(ctx, p.requestId)
    if req.status not in TERMINAL:
        raise conflict(f"REQUEST_NOT_TERMINAL: request {req.id} is still pending; there is no callback to replay yet.",
                       field="requestId", reason="REQUEST_NOT_TERMINAL")
    if not req.callback_url:
        raise conflict(f"NO_CALLBACK_TO_REPLAY: request {req.id} was created without a callbackUrl.",
                       field="requestId", reason="NO_CALLBACK_TO_REPLAY")
    event = ctx.session.exec(select(Event).where(Event.request_id == req.id, col(Event.type).in_(
        events.TERMINAL_TYPES)).order_by(col(Event.created_at).desc()).limit(1)).one()  # a terminal request has its event
    d = events.add_delivery(ctx.session, event, "callback", req.callback_url, ctx.now, request_id=req.id)
    return Replayed(dispatchId=d.id, eventId=event.id)


SAMPLE_TYPES = {"request_completed": "completed", "request_expired": "expired", "request_canceled": "canceled"}


class SampleParams(Params):
    formId: str
    # checked in requests_sample (for its message); published as the enum it is
    eventType: Annotated[str, Field(json_schema_extra={"enum": list(SAMPLE_TYPES)})] = "request_completed"


@method("requests.sample")
def requests_sample(ctx: Ctx, p: SampleParams) -> dict[str, Any]:
    """An example ``request.<status>`` event for the form (``test: true``)."""
    types = SAMPLE_TYPES
    if p.eventType not in types:
        raise validation("eventType must be a request event", field="eventType", reason="INVALID_VALUE",
                         validValues=list(types))
    form = ctx.form(p.formId)
    status = types[p.eventType]
    snap = ctx.session.get(Snapshot, form.snapshot_id) if form.snapshot_id else None
    blocks = (snap.blocks if snap else fieldtypes.assign_keys(form.blocks or [])) or []
    from .submissions import sample_answers

    answers = sample_answers(blocks)
    fake = Request(id="req_example000000000000", workspace_id=ctx.workspace.id, form_id=form.id,
                   snapshot_id=form.snapshot_id or "", token="", status=status,
                   outcome="approve" if status == "completed" else None, recipient_email="jane@example.com",
                   recipient_name="Jane Doe", language="en", external_id="run-42", metadata_={"runId": "run-42"},
                   context={}, created_at=ctx.now - HOUR_MS, updated_at=ctx.now, expires_at=ctx.now + DEFAULT_EXPIRY_MS,
                   completed_at=ctx.now, expired_at=ctx.now, canceled_at=ctx.now, cancel_reason="Order withdrawn",
                   answers=answers, display=display_of(blocks, answers))
    if status == "completed":
        sub = Submission(id="sub_example000000000000", form_id=form.id, workspace_id=ctx.workspace.id,
                         respondent_email="jane@example.com", created_at=ctx.now, submitted_at=ctx.now,
                         last_activity_at=ctx.now, language="en")
        data = events.request_completed_data(form, fake, sub)
    else:
        data = {"request": events.request_data(fake)}
    return events.envelope("evt_example000000000000", f"request.{status}", ctx.now, True, data)


# -- completion (the recipient's submit) ----------------------------------------------------


def link_state(req: Request, form: Form, now: int) -> str | None:
    """Why a request link accepts nothing, or None when it is open."""
    if req.status != "pending":
        return req.status
    if now >= req.expires_at:
        return "test-expired" if req.is_test else "expired"
    if form.trashed_at is not None or not form.is_published:
        return "unpublished"
    return None


CLOSED_LINK = {
    "completed": "was already completed",
    "canceled": "was canceled",
    "expired": "has expired",
    "test-expired": "is a test request and its link closed 24 hours after creation",
    "unpublished": "belongs to a form that is unpublished or trashed; publish the form again to reopen the link",
}


def link_closed(req: Request, state: str) -> ApiError:
    """Why the link of ``req`` takes no answers: REQUEST_NOT_PENDING, or FORM_NOT_PUBLISHED
    while the request itself is still pending."""
    reason = "FORM_NOT_PUBLISHED" if state == "unpublished" else "REQUEST_NOT_PENDING"
    return conflict(f"Request {req.id} {CLOSED_LINK[state]}; its link accepts no answers.", field="requestId",
                    reason=reason)


def complete_request(session: Session, service: Any, req: Request, answers: dict[str, Any], now: int,
                     base_url: str) -> Submission:
    """The recipient's submit: validate against the request's snapshot (required
    questions, types, option keys; readonly answers must equal their prefill), store the
    submission, complete the request, and emit ``request.completed`` with its callback."""
    form = referenced(session, Form, req.form_id)
    state = link_state(req, form, now)
    if state is not None:
        raise link_closed(req, state)
    snap = referenced(session, Snapshot, req.snapshot_id)
    blocks = snap.blocks or []
    merged = {**(req.prefill or {}), **answers}
    for key in req.readonly_keys or []:
        if key in answers and answers[key] != (req.prefill or {}).get(key):
            raise validation(f"answers.{key} is readonly for this request and keeps its prefilled value.",
                             field=f"answers.{key}", reason="READONLY_FIELD")
    hidden = {k for k, b in questions(blocks).items() if b["type"] == "hidden"}
    for key in answers:
        if key in hidden:
            raise validation(f"answers.{key} is a hidden field; its value comes from the request's context.",
                             field=f"answers.{key}", reason="FIELD_NOT_ANSWERABLE")
    merged.update(req.context or {})
    clean, errors = check_answers(blocks, merged, require=True)
    raise_answer_errors(errors)
    # BCP-47 like a share-link submission's: the language the form opened in (notes, section 3).
    language = req.language or settings_of(form, referenced(session, Workspace, form.workspace_id).plan).language
    sub = record_submission(session, form, clean, now, completed=True, respondent_email=req.recipient_email,
                            request_id=req.id, language=language, is_test=req.is_test, snapshot=snap)
    req.status = "completed"
    req.completed_at = now
    req.last_activity_at = now
    req.submission_id = sub.id
    req.answers = sub.answers
    req.display = sub.display
    req.draft = None
    req.reminder_due_at = None
    if any(b["type"] == "decision" and b["key"] == "decision" for b in blocks if fieldtypes.is_question(b)):
        req.outcome = clean.get("decision")
    if req.started_at is None:
        req.started_at = now
    timeline_add(req, "completed", now)
    pdf_url = f"{base_url}/api/storage/{sub.pdf_file_id}" if sub.pdf_file_id else None
    events.emit(session, type_="request.completed", workspace_id=req.workspace_id, form=form,
                data=events.request_completed_data(form, req, sub, pdf_url), now=now, request=req,
                submission=sub, test=req.is_test)
    return sub


def expire_request(session: Session, req: Request, now: int) -> None:
    form = referenced(session, Form, req.form_id)
    req.status = "expired"
    req.expired_at = now
    req.reminder_due_at = None
    timeline_add(req, "expired", now)
    events.emit(session, type_="request.expired", workspace_id=req.workspace_id, form=form,
                data={"request": events.request_data(req)}, now=now, request=req, test=req.is_test)
