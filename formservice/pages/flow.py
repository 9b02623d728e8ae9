"""The rules of the recipient pages, without HTTP: which links are open, what opening,
saving a draft and submitting change on a request, how readonly, prefill and context
values merge into the answers, and how uploaded files are stored.

The handlers in :mod:`formservice.pages.views` only read the request and render."""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, select

from ..domain import fieldtypes, requests, sharelinks
from ..domain.submissions import check_answers, questions
from ..tables import (
    Document,
    Form,
    Request,
    ShareLink,
    Snapshot,
    StoredFile,
    Submission,
    Workspace,
    referenced,
)

MAX_UPLOAD_BYTES = 25 * 1024 * 1024


@dataclass(frozen=True)
class Closed:
    """Why a link takes nothing: the HTTP status of its page, a title and an explanation."""

    state: str
    status: int
    title: str
    message: str


# Status choices: 410 Gone for links that stopped working for good (expired, canceled,
# closed test links, forms taken down); a completed request reads 200 on GET (the link
# still works and says so) and 409 on POST (the answers it would store conflict with
# the submission already made); an unknown token is 404.
CLOSED: dict[str, Closed] = {
    "expired": Closed("expired", 410, "This link has expired",
                      "The request behind this link expired, so it no longer takes answers. "
                      "Ask the sender for a new link."),
    "test-expired": Closed("test-expired", 410, "This test link has closed",
                           "Test links close 24 hours after they are created; this one takes no more answers."),
    "canceled": Closed("canceled", 410, "This request was canceled",
                       "The sender canceled this request, so it no longer takes answers."),
    "completed": Closed("completed", 200, "Already submitted",
                        "This request was already submitted. Thank you: there is nothing more to do."),
    "unpublished": Closed("unpublished", 410, "This form is not available",
                          "The form behind this link was taken down by its owner and takes no answers."),
    "revoked": Closed("revoked", 410, "This link was revoked",
                      "The owner of this form revoked this link; it takes no answers."),
    "trashed": Closed("trashed", 410, "This form is not available",
                      "The form behind this link was deleted by its owner and takes no answers."),
    "unknown": Closed("unknown", 404, "Link not found",
                      "There is no form at this address. Check the link you were sent."),
    "unknown-edit": Closed("unknown-edit", 404, "Edit link not valid",
                           "This edit link does not match a sent response of this form. Use the edit link "
                           "shown after your submit."),
}
POST_COMPLETED_STATUS = 409


def closed(state: str, *, posted: bool = False) -> Closed:
    """The page for a link in ``state``; a POST to a completed request is a 409."""
    page = CLOSED[state]
    if posted and state == "completed":
        return Closed(page.state, POST_COMPLETED_STATUS, page.title, page.message)
    return page


def find_request(session: Session, token: str) -> Request | None:
    return session.exec(select(Request).where(Request.token == token)).first()


@dataclass
class Opened:
    """A request link resolved: the request, its form and the blocks of its snapshot."""

    req: Request
    form: Form
    blocks: list[dict[str, Any]]


def open_request(session: Session, token: str, now: int) -> Opened | Closed:
    """The request behind a link token when the link is open, else the page saying why
    it is not (unknown, expired, canceled, completed, closed test link, form taken down)."""
    req = find_request(session, token)
    if req is None:
        return CLOSED["unknown"]
    form = referenced(session, Form, req.form_id)
    state = requests.link_state(req, form, now)
    if state == "expired" and req.is_test:  # the expiry sweep marks closed test links expired too
        state = "test-expired"
    if state is not None:
        return CLOSED[state]
    snap = session.get(Snapshot, req.snapshot_id)
    return Opened(req, form, (snap.blocks if snap else None) or [])


def mark_opened(req: Request, now: int) -> None:
    """The first view of an open link sets ``openedAt`` and adds the ``opened`` entry."""
    if req.opened_at is None:
        req.opened_at = now
        requests.timeline_add(req, "opened", now)


def mark_started(req: Request, now: int) -> None:
    """The first draft save or submit sets ``startedAt`` and adds the ``started`` entry."""
    if req.started_at is None:
        req.started_at = now
        requests.timeline_add(req, "started", now)


def initial_values(req: Request) -> dict[str, Any]:
    """What the page shows first: the prefill, overlaid by a saved draft; readonly fields
    always show their prefill."""
    prefill = req.prefill or {}
    values = {**prefill, **(req.draft or {})}
    for key in req.readonly_keys or []:
        if key in prefill:
            values[key] = prefill[key]
    return values


def recipient_answers(req: Request, posted: dict[str, Any]) -> dict[str, Any]:
    """The posted answers a recipient may give: readonly fields keep their prefill
    whatever was posted for them (disabled inputs post nothing anyway)."""
    readonly = set(req.readonly_keys or [])
    return {k: v for k, v in posted.items() if k not in readonly}


def merged_answers(req: Request, answers: dict[str, Any]) -> dict[str, Any]:
    """What a submit checks: prefill, overlaid by the recipient's answers, overlaid by
    the context (hidden fields take their values from the request only)."""
    return {**(req.prefill or {}), **answers, **(req.context or {})}


def error_text(err: fieldtypes.FieldValueError) -> str:
    """A field error as a sentence for the page."""
    if err.reason == "REQUIRED":
        return "This question is required."
    text = str(err)
    return f"{text[:1].upper()}{text[1:]}."


def field_errors(blocks: list[dict[str, Any]], answers: dict[str, Any], *, require: bool) -> dict[str, str]:
    """Every problem with ``answers`` at once, by field key (``group.<i>.<member>`` inside
    a repeating group), as page text."""
    _, errors = check_answers(blocks, answers, require=require)
    return {k: error_text(e) for k, e in errors.items()}


def computed_values(blocks: list[dict[str, Any]], values: dict[str, Any]) -> dict[str, Any]:
    """The calculated fields' values over the answers given so far (invalid ones
    ignored); a field none of whose inputs is answered yet has no value to show."""
    qs = questions(blocks)
    clean, _ = check_answers(blocks, {k: v for k, v in values.items() if k in qs}, require=False)
    out = {}
    for key, block in qs.items():
        inputs = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", str(block.get("formula") or "")))
        if block["type"] == "calculated" and key in clean and inputs & {k for k in clean if k != key}:
            out[key] = clean[key]
    return out


def save_draft(session: Session, opened: Opened, answers: dict[str, Any], now: int) -> dict[str, str]:
    """Keep the recipient's answers as the request's draft without completing it. Values
    of the wrong type are refused (the errors are returned, nothing is stored); missing
    required answers are fine in a draft. Counts as activity: ``lastActivityAt`` moves
    and the idle reminder schedule restarts from it."""
    req = opened.req
    errors = field_errors(opened.blocks, merged_answers(req, answers), require=False)
    if errors:
        return errors
    req.draft = dict(answers)
    req.last_activity_at = now
    req.updated_at = now
    mark_started(req, now)
    ws = referenced(session, Workspace, req.workspace_id)
    requests.schedule_next_reminder(opened.form, req, ws)
    return {}


def submit(session: Session, service: Any, opened: Opened, answers: dict[str, Any], now: int,
           base_url: str) -> tuple[Submission | None, dict[str, str]]:
    """The recipient's final submit: every field problem at once when there are any
    (nothing stored), else the request is completed through
    :func:`formservice.domain.requests.complete_request`."""
    req = opened.req
    errors = field_errors(opened.blocks, merged_answers(req, answers), require=True)
    if errors:
        return None, errors
    mark_started(req, now)
    return requests.complete_request(session, service, req, answers, now, base_url), {}


def summary(blocks: list[dict[str, Any]], display: dict[str, Any]) -> list[tuple[str, str]]:
    """(question title, display text) of a completed response in form order; hidden
    fields (the request's context) are never shown to the recipient."""
    rows = []
    for key, block in questions(blocks).items():
        if block["type"] == "hidden" or key not in display or display[key] in ("", None):
            continue
        rows.append((block.get("title") or key, str(display[key])))
    return rows


def store_upload(session: Session, filename: str, content_type: str | None, data: bytes, now: int,
                 base_url: str) -> dict[str, Any]:
    """Keep an uploaded file; the answer's file object ``{name, type, size, url}`` with
    the url served at ``{base}/api/storage/<id>``."""
    stored = StoredFile(id=str(uuid.uuid4()), content_type=content_type or "application/octet-stream", data=data,
                        created_at=now)
    session.add(stored)
    return {"name": filename, "type": stored.content_type, "size": len(data),
            "url": f"{base_url}/api/storage/{stored.id}"}


def documents_of(session: Session, req: Request | None, block: dict[str, Any],
                 base_url: str) -> list[dict[str, Any]]:
    """The files a Documents block offers: the request's documents attached to it, then
    the block's authored documents; each ``{name, url|None}``."""
    out = []
    for doc in (req.documents or []) if req is not None else []:
        if doc.get("field") == block.get("key"):
            url = f"{base_url}/api/storage/{doc['fileId']}" if doc.get("fileId") else None
            out.append({"name": doc.get("name") or "Document", "url": url})
    for authored in block.get("documents") or []:
        url = None
        if authored.get("documentId"):
            row = session.get(Document, authored["documentId"])
            if row is not None and row.file_id:
                url = f"{base_url}/api/storage/{row.file_id}"
        out.append({"name": authored.get("name") or "Document", "url": url})
    return out


# -- share links ----------------------------------------------------------------------------


@dataclass
class OpenedLink:
    """A share link resolved: the link, its form and the blocks of the published snapshot."""

    link: ShareLink
    form: Form
    blocks: list[dict[str, Any]]


def open_share_link(session: Session, token: str, now: int) -> OpenedLink | Closed:
    """The share link behind ``token`` when it takes answers, else the page saying why
    not (unknown, revoked, form unpublished or trashed)."""
    link = sharelinks.find_link(session, token)
    if link is None:
        return CLOSED["unknown"]
    form = referenced(session, Form, link.form_id)
    state = sharelinks.link_state(session, link, form, now)
    if state is not None:
        return CLOSED[state]
    snap = session.get(Snapshot, form.snapshot_id)
    return OpenedLink(link, form, (snap.blocks if snap else None) or [])


def _cookie_key(session: Session, form: Form) -> bytes:
    """The key that signs a link's cookies: derived from the workspace's server-side
    secret with a label of its own, so a cookie signature is never a callback signature."""
    ws = referenced(session, Workspace, form.workspace_id)
    return hmac.new(ws.signing_secret.encode(), b"formservice.pages.cookie", hashlib.sha256).digest()


def _sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def password_cookie(session: Session, opened: OpenedLink) -> str:
    """The cookie value proving the form password was entered on this link; it stops
    working when the password changes."""
    stored = (opened.form.settings or {}).get("passwordHash") or ""
    return _sign(_cookie_key(session, opened.form), f"password:{opened.link.token}:{stored}")


def unlocked(session: Session, opened: OpenedLink, cookie: str | None) -> bool:
    """Whether the respondent may see and answer the form: no password gate, or the
    password cookie of this link and password."""
    if sharelinks.password_ok(opened.form, None):
        return True
    return cookie is not None and hmac.compare_digest(cookie, password_cookie(session, opened))


def draft_cookie(session: Session, opened: OpenedLink, submission_id: str) -> str:
    return f"{submission_id}.{_sign(_cookie_key(session, opened.form), f'draft:{opened.link.token}:{submission_id}')}"


def draft_from_cookie(session: Session, opened: OpenedLink, cookie: str | None) -> Submission | None:
    """The respondent's saved draft named by a signed cookie, while it is still a draft
    of this form through a share link (a sent or purged one is forgotten)."""
    if not cookie or "." not in cookie:
        return None
    sub_id, _ = cookie.rsplit(".", 1)
    if not hmac.compare_digest(cookie, draft_cookie(session, opened, sub_id)):
        return None
    sub = session.get(Submission, sub_id)
    if (sub is None or sub.form_id != opened.form.id or sub.is_completed or sub.share_link_id is None
            or sub.request_id is not None):
        return None
    return sub


def sent_submission(session: Session, form: Form, edit_token: str) -> Submission | None:
    """The sent submission of ``form`` that ``edit_token`` edits, or None."""
    sub = session.exec(select(Submission).where(Submission.form_id == form.id,
                                                Submission.edit_token == edit_token)).first()
    return sub if sub is not None and sub.is_completed else None


def another_response_allowed(session: Session, form: Form) -> bool:
    return sharelinks.form_settings(session, form).allowAnotherResponse
