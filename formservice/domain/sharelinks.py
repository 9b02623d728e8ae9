"""Share links: the public URL of a published form (``shareLinks.*``), and what a
respondent does through one: save a draft, submit, edit a sent submission. Also the
sweeps over abandoned public-link drafts: the ``submission.abandoned`` event and the
respondent reminders.

The recipient pages call the plain functions (:func:`find_link`, :func:`link_state`,
:func:`password_ok`, :func:`save_public`, :func:`redirect_for`, :func:`link_url`,
:func:`edit_url`); the JSON-RPC methods manage the links themselves.

Links are ``{base_url}/f/<token>``; the edit link of a sent submission is the share
link with ``?edit=<edit token>``.
"""

from __future__ import annotations

import re
import secrets
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import Field
from sqlalchemy import func
from sqlalchemy.orm import object_session
from sqlmodel import Session, col, select

from ..errors import ApiError, conflict, forbidden, not_found, validation
from ..ids import BASE62, new_id
from ..tables import (
    DraftNotice,
    Event,
    Form,
    Mail,
    ShareLink,
    Snapshot,
    StoredFile,
    Submission,
    Subscription,
    Workspace,
    referenced,
)
from . import events, fieldtypes, schedule
from .base import PLAN_RANK, Ctx, Params, Result, method
from .forms import live_form
from .settings import Settings, password_matches, settings_of
from .submissions import (
    check_answers,
    display_of,
    questions,
    raise_answer_errors,
    record_submission,
    retain_pdf,
    takes_answer,
)

TOKEN_LENGTH = 22
LINK_PATH_RE = re.compile(r"^/f/([A-Za-z0-9]+)/?$")
DEFAULT_SENDER_DOMAIN = "form.formstep.test"
REMINDER_SUBJECT = "Reminder: {{formName}}"
REMINDER_BODY = "You started {{formName}} but have not sent it yet.\n\nContinue here: {{link}}"
PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}")
# why a link takes no answers -> details.reason of the refusal
CLOSED_REASONS = {"trashed": "FORM_TRASHED", "revoked": "SHARE_LINK_REVOKED", "unpublished": "FORM_NOT_PUBLISHED"}
Name = Annotated[str, Field(min_length=1, max_length=255)]


# -- links -----------------------------------------------------------------------------


def new_link_token() -> str:
    return "".join(secrets.choice(BASE62) for _ in range(TOKEN_LENGTH))


def link_url(link: ShareLink, base_url: str) -> str:
    return f"{base_url}/f/{link.token}"


def edit_url(link: ShareLink, sub: Submission, base_url: str) -> str | None:
    """The respondent's link to edit a sent submission, when it has an edit token."""
    return f"{link_url(link, base_url)}?edit={sub.edit_token}" if sub.edit_token else None


def token_from_url(url: str) -> str | None:
    """The link token of a share-link URL (``…/f/<token>``), or None when it is not one."""
    m = LINK_PATH_RE.match(urlsplit(url).path)
    return m.group(1) if m else None


def find_link(session: Session, token: str) -> ShareLink | None:
    """The share link with this token (revoked ones included), or None."""
    return session.exec(select(ShareLink).where(ShareLink.token == token)).first()


def link_state(session: Session, link: ShareLink, form: Form, now: int) -> str | None:
    """Why the link takes no answers, or None when it is open: ``trashed`` (the form is in
    the trash), ``revoked`` (for good, also after a restore) or ``unpublished``. Share
    links have no expiry, so ``session`` and ``now`` do not change the answer today."""
    if form.trashed_at is not None:
        return "trashed"
    if link.revoked:
        return "revoked"
    if not form.is_published or form.snapshot_id is None:
        return "unpublished"
    return None


def link_closed(state: str) -> ApiError:
    """The refusal for a link in ``state`` (see :func:`link_state`)."""
    why = {"trashed": "its form is in the trash", "revoked": "it was revoked (revoking is permanent)",
           "unpublished": "its form is not published"}[state]
    return conflict(f"This share link takes no answers: {why}.", field="url", reason=CLOSED_REASONS[state])


def password_ok(form: Form, password: str | None) -> bool:
    """Whether ``password`` opens the form: True when the form has no password gate
    (``passwordEnabled`` off), else only for the form's password."""
    if not (form.settings or {}).get("passwordEnabled"):
        return True
    return password is not None and password_matches(form, password)


def check_password(form: Form, password: str | None) -> None:
    """Raise FORBIDDEN when ``password`` does not open the form (see :func:`password_ok`)."""
    if password_ok(form, password):
        return
    if password is None:
        raise forbidden("This form is protected by a password; send it as password.", field="password",
                        reason="PASSWORD_REQUIRED")
    raise forbidden("The password is not this form's password.", field="password", reason="PASSWORD_INCORRECT")


# -- shareLinks.* -------------------------------------------------------------------------


class ShareLinkView(Result):
    id: str
    formId: str
    url: str
    name: str | None
    revoked: bool
    revokedAt: int | None
    createdAt: int


class ShareLinkList(Result):
    items: list[ShareLinkView]
    hasMore: bool


def view(link: ShareLink, base_url: str) -> ShareLinkView:
    return ShareLinkView(id=link.id, formId=link.form_id, url=link_url(link, base_url), name=link.name,
                         revoked=link.revoked, revokedAt=link.revoked_at, createdAt=link.created_at)


def _name(name: str | None) -> str | None:
    if name is not None and not name.strip():
        raise validation("name is blank; send a name with some text, or null for none.", field="name",
                         reason="INVALID_VALUE")
    return name


class CreateParams(Params):
    formId: str
    name: Name | None = None


@method("shareLinks.create")
def share_links_create(ctx: Ctx, p: CreateParams) -> ShareLinkView:
    """Create a public URL of a published form: ``{base_url}/f/<token>``."""
    form = live_form(ctx, p.formId)
    if not form.is_published:
        raise validation("FORM_NOT_PUBLISHED: publish the form before creating a share link for it.",
                         field="formId", reason="FORM_NOT_PUBLISHED")
    link = ShareLink(id=new_id("shl"), form_id=form.id, workspace_id=form.workspace_id, token=new_link_token(),
                     name=_name(p.name), created_at=ctx.now)
    ctx.session.add(link)
    return view(link, ctx.base_url)


class FormIdParams(Params):
    formId: str


@method("shareLinks.list")
def share_links_list(ctx: Ctx, p: FormIdParams) -> ShareLinkList:
    """The form's share links, newest first, revoked ones included (``revoked: true``)."""
    form = ctx.form(p.formId, trashed_ok=True)
    rows = ctx.session.exec(select(ShareLink).where(ShareLink.form_id == form.id)
                            .order_by(col(ShareLink.created_at).desc(), col(ShareLink.id).desc())).all()
    return ShareLinkList(items=[view(r, ctx.base_url) for r in rows], hasMore=False)


class UpdateParams(Params):
    shareLinkId: str
    name: Name | None = None
    revoked: bool = False


def own_link(ctx: Ctx, link_id: str) -> ShareLink:
    link = ctx.session.get(ShareLink, link_id)
    if link is None:
        raise not_found("Share link", field="shareLinkId")
    if link.workspace_id != ctx.workspace.id:
        raise forbidden(f"Share link {link_id} belongs to another workspace; this token acts in "
                        f"{ctx.workspace.id} only.", field="shareLinkId", reason="FOREIGN_WORKSPACE")
    return link


@method("shareLinks.update")
def share_links_update(ctx: Ctx, p: UpdateParams) -> ShareLinkView:
    """Rename a share link (``name``; null removes it) or revoke it (``revoked: true``).
    Revoking is permanent: ``revoked: false`` on a revoked link is a CONFLICT."""
    link = own_link(ctx, p.shareLinkId)
    sent = p.model_fields_set - {"shareLinkId"}
    if not sent:
        raise validation("Send name or revoked to change the share link.", reason="NOTHING_TO_UPDATE",
                         validKeys=["name", "revoked"])
    if "revoked" in sent and not p.revoked and link.revoked:
        raise conflict(f"Share link {link.id} was revoked, and revoking is permanent; create a new link with "
                       "shareLinks.create.", field="revoked", reason="SHARE_LINK_REVOKED")
    if "name" in sent:
        link.name = _name(p.name)
    if p.revoked and not link.revoked:
        link.revoked = True
        link.revoked_at = ctx.now
    return view(link, ctx.base_url)


# -- a respondent's save, submit and edit --------------------------------------------------


def new_edit_token() -> str:
    return secrets.token_urlsafe(24)


def form_settings(session: Session, form: Form) -> Settings:
    """The form's effective settings on its workspace's plan."""
    return settings_of(form, referenced(session, Workspace, form.workspace_id).plan)


def event_data(form: Form, sub: Submission, base_url: str) -> dict[str, Any]:
    """``data`` of a submission event: form, submission, answers, display (no request)."""
    pdf_url = f"{base_url}/api/storage/{sub.pdf_file_id}" if sub.pdf_file_id else None
    return {"form": events.form_data(form), "submission": events.submission_data(sub, pdf_url),
            "answers": sub.answers or {}, "display": sub.display or {}}


def _merge(blocks: list[dict[str, Any]], stored: dict[str, Any] | None, sent: dict[str, Any]) -> dict[str, Any]:
    """The answers of a save: what was stored (still a question of ``blocks``; computed
    fields left out, the form computes them again) with the sent answers over it. An
    empty sent value (null, "", []) clears that answer."""
    qs = questions(blocks)
    out = {k: v for k, v in (stored or {}).items() if k in qs and takes_answer(qs[k])}
    for key, value in sent.items():
        if key in qs and fieldtypes.is_empty(value):
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _email_answer(blocks: list[dict[str, Any]], answers: dict[str, Any]) -> tuple[str | None, str | None]:
    """(key, value) of the first answered email question: the respondent's address."""
    qs = questions(blocks)
    return next(((k, v) for k, v in answers.items() if k in qs and qs[k]["type"] == "email"), (None, None))


def _check_respondent_limit(session: Session, form: Form, st: Settings, blocks: list[dict[str, Any]],
                            answers: dict[str, Any], exclude: str | None) -> None:
    """maxSubmissionsPerRespondent (0 = unlimited), counted by respondent email over the
    form's sent public responses; a response without an email cannot be counted."""
    limit = st.maxSubmissionsPerRespondent
    key, email = _email_answer(blocks, answers)
    if not limit or not email:
        return
    stmt = select(func.count()).select_from(Submission).where(
        Submission.form_id == form.id, col(Submission.is_completed).is_(True), col(Submission.is_test).is_(False),
        col(Submission.request_id).is_(None), func.lower(Submission.respondent_email) == email.lower())
    if exclude is not None:
        stmt = stmt.where(Submission.id != exclude)
    sent = session.exec(stmt).one()
    if sent >= limit:
        raise conflict(f"{email} has already sent {sent} response{'s' if sent != 1 else ''} to this form, the most "
                       f"it accepts from one respondent ({limit}).", field=f"answers.{key}",
                       reason="SUBMISSION_LIMIT_REACHED")


def _own_draft(session: Session, form: Form, submission_id: str) -> Submission:
    sub = session.get(Submission, submission_id)
    if sub is None or sub.form_id != form.id or sub.share_link_id is None or sub.request_id is not None:
        raise not_found("Submission", field="submissionId", reason="SUBMISSION_NOT_FOUND")
    if sub.is_completed:
        raise conflict(f"Submission {sub.id} was already sent; edit it through its edit link (editToken) when "
                       "the form allows editing after submit.", field="submissionId", reason="SUBMISSION_COMPLETED")
    return sub


def save_public(session: Session, link: ShareLink, form: Form, answers: dict[str, Any], now: int, *,
                completed: bool, submission_id: str | None = None, edit_token: str | None = None,
                base_url: str) -> Submission:
    """A respondent's save through a share link, validated against the published form.

    - ``completed`` False: a draft (required questions not checked). It starts a new
      draft, or continues the draft ``submission_id``; sent answers go over the saved
      ones, an empty value clears one.
    - ``completed`` True: a submit (required questions checked), of a new response or of
      the draft ``submission_id``; refused with SUBMISSION_LIMIT_REACHED past
      ``maxSubmissionsPerRespondent`` (by respondent email; 0 = unlimited). Emits
      ``submission.completed`` (to ``submission_created`` subscriptions). When the form
      allows ``editAfterSubmit`` the submission gets a fresh secret ``edit_token``.
    - ``edit_token``: an edit of the sent submission holding that token (answers go over
      the sent ones; the result must still pass the submit's checks). Refused with
      EDITS_NOT_ALLOWED unless the form allows ``editAfterSubmit``, and with
      EDIT_LIMIT_REACHED past ``maxEdits`` (0: unlimited on Pro and Business, 3 on
      Free). Counts ``edit_count``, sets ``updated_at``, keeps ``submitted_at``, emits
      ``submission.updated``.

    The link must be open (:func:`link_state`); the password gate is the caller's
    (:func:`password_ok`). Every refusal raises ApiError before anything is stored.
    """
    state = link_state(session, link, form, now)
    if state is not None:
        raise link_closed(state)
    st = form_settings(session, form)
    if edit_token is not None:
        return _edit(session, form, st, answers, now, edit_token, submission_id, completed, base_url)
    draft = _own_draft(session, form, submission_id) if submission_id is not None else None
    snap = referenced(session, Snapshot, form.snapshot_id)
    blocks = snap.blocks or []
    merged = _merge(blocks, draft.answers if draft else None, answers)
    clean, errors = check_answers(blocks, merged, require=completed)
    raise_answer_errors(errors)
    if completed:
        _check_respondent_limit(session, form, st, blocks, clean, draft.id if draft else None)
    if draft is None:
        sub = record_submission(session, form, merged, now, completed=completed, share_link_id=link.id,
                                language=st.language, snapshot=snap)
    else:
        sub = draft
        sub.snapshot_id = snap.id
        sub.answers = clean
        sub.display = display_of(blocks, clean)
        sub.respondent_email = _email_answer(blocks, clean)[1]
        sub.last_activity_at = now
        if completed:
            sub.is_completed = True
            sub.submitted_at = now
            retain_pdf(session, form, sub, now)
    if completed:
        sub.edit_token = new_edit_token() if st.editAfterSubmit else None
        events.emit(session, type_="submission.completed", workspace_id=form.workspace_id, form=form,
                    data=event_data(form, sub, base_url), now=now, submission=sub)
    return sub


def _edit(session: Session, form: Form, st: Settings, answers: dict[str, Any], now: int, edit_token: str,
          submission_id: str | None, completed: bool, base_url: str) -> Submission:
    sub = session.exec(select(Submission).where(Submission.form_id == form.id,
                                                Submission.edit_token == edit_token)).first()
    if sub is None or not sub.is_completed:
        raise ApiError("NOT_FOUND", "No sent submission of this form has this edit token; use the edit link "
                       "the submit gave.", field="editToken", reason="UNKNOWN_EDIT_TOKEN")
    if submission_id is not None and submission_id != sub.id:
        raise validation(f"submissionId {submission_id} is not the submission of this edit token ({sub.id}); send "
                         "one of them.", field="submissionId", reason="CONFLICTING_VALUES")
    if not completed:
        raise validation("An edit is saved as a submit: a sent submission cannot go back to a draft; send "
                         "completed: true.", field="completed", reason="EDIT_NOT_A_DRAFT")
    return edit_submission(session, form, sub, answers, now, base_url, st=st)


def edit_submission(session: Session, form: Form, sub: Submission, answers: dict[str, Any], now: int,
                    base_url: str, *, st: Settings | None = None, field: str = "editToken") -> Submission:
    """A respondent's edit of the sent public submission ``sub`` of ``form``: the answers
    go over the sent ones and must still pass the submit's checks. Refused with
    EDITS_NOT_ALLOWED unless the form allows ``editAfterSubmit``, and EDIT_LIMIT_REACHED
    past ``maxEdits`` (``field`` names the param at fault). Counts ``edit_count``, sets
    ``updated_at``, keeps ``submitted_at``, emits ``submission.updated``."""
    st = st or form_settings(session, form)
    if not st.editAfterSubmit:
        raise conflict("This form does not allow editing a submission after it is sent (editAfterSubmit is off).",
                       field=field, reason="EDITS_NOT_ALLOWED")
    limit = st.effectiveMaxEdits
    if limit is not None and sub.edit_count >= limit:
        raise conflict(f"Submission {sub.id} was already edited {sub.edit_count} time"
                       f"{'s' if sub.edit_count != 1 else ''}, the most this form allows ({limit}).",
                       field=field, reason="EDIT_LIMIT_REACHED")
    snap = session.get(Snapshot, sub.snapshot_id) if sub.snapshot_id else None
    blocks = (snap.blocks if snap else form.blocks) or []
    clean, errors = check_answers(blocks, _merge(blocks, sub.answers, answers), require=True)
    raise_answer_errors(errors)
    sub.answers = clean
    sub.display = display_of(blocks, clean)
    sub.respondent_email = _email_answer(blocks, clean)[1]
    sub.edit_count += 1
    sub.updated_at = now
    sub.last_activity_at = now
    old_pdf = sub.pdf_file_id
    retain_pdf(session, form, sub, now)
    if old_pdf and old_pdf != sub.pdf_file_id:  # the kept PDF shows the answers as they are now
        stale = session.get(StoredFile, old_pdf)
        if stale is not None:
            session.delete(stale)
    events.emit(session, type_="submission.updated", workspace_id=form.workspace_id, form=form,
                data=event_data(form, sub, base_url), now=now, submission=sub)
    return sub


# -- after a submit ----------------------------------------------------------------------------


def _blocks_of(form: Form, sub: Submission) -> list[dict[str, Any]]:
    """The blocks ``sub`` answered: its snapshot's, else the form's (keys frozen at publish)."""
    session = object_session(form)
    snap = session.get(Snapshot, sub.snapshot_id) if session is not None and sub.snapshot_id else None
    return (snap.blocks if snap else form.blocks) or []


def _keys_by_id(blocks: list[dict[str, Any]]) -> dict[str, str]:
    return {b["id"]: b["key"] for b in blocks if fieldtypes.is_question(b) and b.get("id") and b.get("key")}


def _query_value(value: Any, display: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ",".join(str(v) for v in value)
    return str(display) if display is not None else None


def redirect_for(form: Form, submission: Submission) -> str | None:
    """Where the respondent goes after a submit: the form's ``redirectUrl`` with each of
    ``redirectQueryParams`` (``paramName`` = the answer of question ``fieldId``) appended;
    None without a redirect, and for a draft. A question left unanswered adds no
    parameter; a choice adds its option key, a multi-choice its keys joined by commas."""
    settings = form.settings or {}
    url = settings.get("redirectUrl")
    if not url or not submission.is_completed:
        return None
    wanted = settings.get("redirectQueryParams") or []
    if not wanted:
        return url
    keys = _keys_by_id(_blocks_of(form, submission))
    answers, display = submission.answers or {}, submission.display or {}
    pairs = []
    for item in wanted:
        key = keys.get(item["fieldId"])
        text = _query_value(answers.get(key), display.get(key)) if key else None
        if text is not None:
            pairs.append((item["paramName"], text))
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + pairs
    return urlunsplit(parts._replace(query=urlencode(query)))


# -- sweeps over abandoned public-link drafts ----------------------------------------------------


def _public_drafts(form_id: str) -> Any:
    return select(Submission).where(Submission.form_id == form_id, col(Submission.is_completed).is_(False),
                                    col(Submission.is_test).is_(False), col(Submission.share_link_id).is_not(None),
                                    col(Submission.request_id).is_(None))


def _noticed(kind: str, target: str) -> Any:
    """SQL: the draft in the enclosing query already had this follow-up."""
    return select(DraftNotice.submission_id).where(DraftNotice.submission_id == Submission.id,
                                                   DraftNotice.kind == kind, DraftNotice.target == target).exists()


def sweep_abandoned(session: Session, now: int, base_url: str) -> int:
    """Emit ``submission.abandoned`` for public-link drafts without saved changes for a
    ``submission_abandoned`` subscription's idle window: once per draft and subscription,
    delivered only to the subscriptions whose window has elapsed, only in workspaces with
    partial-submission tracking. The hosted service sweeps hourly (up to 1 h late); the
    sandbox sweeps on every tick of its worker and right after ``clock.advance``, so the
    event comes as soon as the window has passed. Returns the number of events."""
    subs = session.exec(select(Subscription).where(Subscription.status == "active",
                                                   Subscription.event_type == "submission_abandoned")).all()
    due: dict[str, tuple[Submission, list[Subscription]]] = {}
    for sub in subs:
        ws = session.get(Workspace, sub.workspace_id)
        if ws is None or not ws.partial_tracking or not sub.idle_window:
            continue
        idle_since = now - schedule.offset_ms(sub.idle_window)
        stmt = _public_drafts(sub.form_id).where(Submission.last_activity_at <= idle_since,
                                                 ~_noticed("abandoned", sub.id))
        for draft in session.exec(stmt):
            due.setdefault(draft.id, (draft, []))[1].append(sub)
    fired = 0
    for draft, targets in due.values():
        form = session.get(Form, draft.form_id)
        if form is None or form.trashed_at is not None:
            continue
        event_id = new_id("evt")
        event = Event(id=event_id, type="submission.abandoned", workspace_id=form.workspace_id, form_id=form.id,
                      submission_id=draft.id, created_at=now,
                      payload=events.envelope(event_id, "submission.abandoned", now, False,
                                              event_data(form, draft, base_url)))
        session.add(event)
        for sub in targets:
            events.add_delivery(session, event, "webhook", sub.target_url, now, subscription_id=sub.id)
            session.add(DraftNotice(submission_id=draft.id, kind="abandoned", target=sub.id, at=now))
        if draft.abandoned_at is None:
            draft.abandoned_at = now
        fired += 1
    return fired


def _render(template: str, values: dict[str, str]) -> str:
    """Fill ``{{name}}`` placeholders; an unknown name renders as nothing."""
    return PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), ""), template)


def remind_abandoned(session: Session, now: int, base_url: str) -> int:
    """Email respondents who left a public-link draft (Pro and Business): one reminder per
    step of the form's ``reminderSteps``, each due that long after the draft's last saved
    change, when ``respondentReminderEnabled`` is on and the draft has an address (the
    answer of ``respondentReminderTo``, else the draft's email answer). None goes out
    while one of ``respondentReminderRequiredFieldIds`` is answered, nor for a closed
    link. Steps that fall due together send one mail. Mails land in the outbox as
    ``respondent-reminder``. Returns the number sent."""
    sent = 0
    forms = session.exec(select(Form).where(col(Form.trashed_at).is_(None), col(Form.is_published).is_(True))).all()
    for form in forms:
        raw = form.settings or {}
        if not raw.get("respondentReminderEnabled") or not raw.get("reminderSteps"):
            continue
        ws = referenced(session, Workspace, form.workspace_id)
        if PLAN_RANK[ws.plan] < PLAN_RANK["pro"]:
            continue
        st = settings_of(form, ws.plan)
        offsets = sorted(schedule.offset_ms(step) for step in st.reminderSteps)
        reminded = select(func.count()).select_from(DraftNotice).where(
            DraftNotice.submission_id == Submission.id, DraftNotice.kind == "reminder").scalar_subquery()
        stmt = _public_drafts(form.id).where(Submission.last_activity_at <= now - offsets[0],
                                             reminded < len(offsets))
        for draft in session.exec(stmt).all():
            sent += _remind(session, form, ws, st, draft, offsets, now, base_url)
    return sent


def _remind(session: Session, form: Form, ws: Workspace, st: Settings, draft: Submission, offsets: list[int],
            now: int, base_url: str) -> int:
    link = session.get(ShareLink, draft.share_link_id)
    if link is None or link_state(session, link, form, now) is not None:
        return 0
    keys = _keys_by_id(_blocks_of(form, draft))
    answers = draft.answers or {}
    chosen = keys.get(st.respondentReminderTo) if st.respondentReminderTo else None
    to = (answers.get(chosen) if chosen else None) or draft.respondent_email
    if not isinstance(to, str) or not to:
        return 0
    if any(keys.get(fid) in answers for fid in st.respondentReminderRequiredFieldIds):
        return 0
    done = set(session.exec(select(DraftNotice.target).where(DraftNotice.submission_id == draft.id,
                                                             DraftNotice.kind == "reminder")).all())
    due = [i for i, off in enumerate(offsets) if draft.last_activity_at + off <= now and str(i) not in done]
    if not due:
        return 0
    for i in due:
        session.add(DraftNotice(submission_id=draft.id, kind="reminder", target=str(i), at=now))
    domain = next((d["domain"] for d in ws.email_domains or [] if d.get("id") == st.emailDomainId),
                  DEFAULT_SENDER_DOMAIN)
    values = {"formName": form.name, "link": link_url(link, base_url),
              **{k: str(v) for k, v in (draft.display or {}).items()}}
    session.add(Mail(id=new_id("mail"), workspace_id=ws.id, submission_id=draft.id, kind="respondent-reminder",
                     to=to, sender=f"noreply@{domain}",
                     subject=_render(st.respondentReminderSubject or REMINDER_SUBJECT, values),
                     body=_render(st.respondentReminderBody or REMINDER_BODY, values),
                     status="bounced" if to.lower().endswith("@bounce.test") else "sent", created_at=now))
    return 1
