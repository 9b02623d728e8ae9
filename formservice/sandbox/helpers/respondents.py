"""Helpers that do what respondents and recipients do on their pages."""

from __future__ import annotations

from typing import Any

from ...clock import from_ms
from ...domain import events, sharelinks
from ...domain import requests as req_domain
from ...domain import submissions as subs_domain
from ...domain.base import Ctx
from ...domain.timework import remove_submission
from ...errors import ApiError, not_found, validation
from ...pages import flow
from ...tables import Form, ShareLink, Submission
from ..models import (
    CompleteParams,
    DeletedSubmission,
    RequestIdParams,
    ShareSubmitParams,
    ShareSubmitted,
    StartParams,
    SubmissionIdParams,
    SubmissionRef,
    SubmitParams,
    UpdatedSubmission,
    UpdateParams,
)
from .registry import helper


@helper("submissions.create")
def submissions_create(ctx: Ctx, p: SubmitParams) -> SubmissionRef:
    """Store a public-link response to the form's published version, validated as the
    form page validates a submit (drafts skip the required check). A completed one emits
    ``submission.completed`` (to ``submission_created`` subscriptions), as a submit on
    the form's page does; a draft emits nothing."""
    form = ctx.form(p.formId)
    sub = subs_domain.submit_public(ctx, form, p.answers, completed=p.completed,
                                    respondent_email=p.respondentEmail)
    if sub.is_completed:
        events.emit(ctx.session, type_="submission.completed", workspace_id=form.workspace_id, form=form,
                    data=sharelinks.event_data(form, sub, ctx.base_url), now=ctx.now, submission=sub)
    return SubmissionRef(id=sub.id, form_id=form.id, is_completed=sub.is_completed)


@helper("requests.complete")
def requests_complete(ctx: Ctx, p: CompleteParams) -> dict[str, Any]:
    """What a recipient's submit does: validate the answers, complete the request, and
    queue its callback and events."""
    req = req_domain.own_request(ctx, p.requestId)
    req_domain.complete_request(ctx.session, ctx.service, req, p.answers, ctx.now, ctx.base_url)
    return req_domain.record(req, ctx.base_url, full=True)


@helper("shareLinks.submit")
def share_links_submit(ctx: Ctx, p: ShareSubmitParams) -> ShareSubmitted:
    """What a respondent does on a share link's page (the link's url): save a draft
    (``completed: false``; continue it with ``submissionId``), submit, or edit a sent
    submission (``editToken``, from its ``editUrl``). The form's password gate applies."""
    token = sharelinks.token_from_url(p.url)
    link = sharelinks.find_link(ctx.session, token) if token else None
    form = ctx.session.get(Form, link.form_id) if link is not None else None
    if link is None or form is None:
        raise not_found("Share link", field="url", reason="UNKNOWN_SHARE_LINK")
    state = sharelinks.link_state(ctx.session, link, form, ctx.now)
    if state is not None:
        raise sharelinks.link_closed(state)
    sharelinks.check_password(form, p.password)
    sub = sharelinks.save_public(ctx.session, link, form, p.answers, ctx.now, completed=p.completed,
                                 submission_id=p.submissionId, edit_token=p.editToken, base_url=ctx.base_url)
    out = ShareSubmitted(submission_id=sub.id, is_completed=sub.is_completed, edit_count=sub.edit_count)
    edit_url = sharelinks.edit_url(link, sub, ctx.base_url)
    if edit_url is not None:
        out.edit_url = edit_url
    redirect = sharelinks.redirect_for(form, sub)
    if redirect is not None:
        out.redirect_url = redirect
    return out


def _opened(ctx: Ctx, request_id: str) -> flow.Opened:
    """The caller's request ``request_id`` as its page opens it; refused as its link
    refuses answers when that link is closed (completed, expired, canceled, unpublished)."""
    req = req_domain.own_request(ctx, request_id)
    found = flow.open_request(ctx.session, req.token, ctx.now)
    if isinstance(found, flow.Closed):
        raise req_domain.link_closed(req, found.state)  # a request's states: the ones link_closed names
    return found


@helper("requests.open")
def requests_open(ctx: Ctx, p: RequestIdParams) -> dict[str, Any]:
    """What a recipient's first view of the request's page does: set ``openedAt`` and add
    the ``opened`` timeline entry (a later open changes nothing); the request's full record."""
    opened = _opened(ctx, p.requestId)
    flow.mark_opened(opened.req, ctx.now)
    return req_domain.record(opened.req, ctx.base_url, full=True)


@helper("requests.start")
def requests_start(ctx: Ctx, p: StartParams) -> dict[str, Any]:
    """What a recipient's first draft save on the page does (after opening it): keep
    ``answers`` as the draft (types checked, required ones not), set ``startedAt`` (and
    ``openedAt``) with their timeline entries, and move ``lastActivityAt``; the request's
    full record."""
    opened = _opened(ctx, p.requestId)
    flow.mark_opened(opened.req, ctx.now)
    errors = flow.save_draft(ctx.session, opened, p.answers, ctx.now)
    if errors:
        key, problem = next(iter(errors.items()))
        raise validation(f"answers.{key}: {problem}", field=f"answers.{key}", reason="INVALID_ANSWER")
    return req_domain.record(opened.req, ctx.base_url, full=True)


@helper("submissions.update")
def submissions_update(ctx: Ctx, p: UpdateParams) -> UpdatedSubmission:
    """What a respondent's edit of a sent public-link submission does (its edit link):
    the answers go over the sent ones, ``editCount`` and ``updatedAt`` move, and
    ``submission.updated`` is emitted to the form's subscriptions; refused as the edit
    link refuses it (EDITS_NOT_ALLOWED without ``editAfterSubmit``, EDIT_LIMIT_REACHED
    past ``maxEdits``, a closed share link)."""
    sub = ctx.session.get(Submission, p.submissionId)
    if sub is None:
        raise not_found("Submission", field="submissionId", reason="SUBMISSION_NOT_FOUND")
    form = ctx.form(sub.form_id, param="submissionId")
    if sub.request_id is not None or not sub.is_completed:
        what = f"answers request {sub.request_id}" if sub.request_id else "is a draft, not sent yet"
        raise ApiError("CONFLICT", f"Submission {sub.id} {what}; only a sent public-link submission is edited.",
                       field="submissionId", reason="NOT_AN_EDITABLE_SUBMISSION")
    link = ctx.session.get(ShareLink, sub.share_link_id) if sub.share_link_id else None
    state = sharelinks.link_state(ctx.session, link, form, ctx.now) if link is not None else None
    if state is not None:
        raise sharelinks.link_closed(state)
    sub = sharelinks.edit_submission(ctx.session, form, sub, p.answers, ctx.now, ctx.base_url, field="submissionId")
    return UpdatedSubmission(id=sub.id, form_id=form.id, edit_count=sub.edit_count, updated_at=from_ms(sub.updated_at),
                             answers=sub.answers or {})


@helper("submissions.delete")
def submissions_delete(ctx: Ctx, p: SubmissionIdParams) -> DeletedSubmission:
    """Delete one submission, as its form's owner can in the results (the API has no such
    method): it leaves ``submissions.list``; a request it answered keeps its status, its
    answers cleared as a retention purge clears them. What a reconcile is tested against."""
    sub = ctx.session.get(Submission, p.submissionId)
    if sub is None:
        raise not_found("Submission", field="submissionId", reason="SUBMISSION_NOT_FOUND")
    form = ctx.form(sub.form_id, trashed_ok=True, param="submissionId")
    deleted = DeletedSubmission(id=sub.id, form_id=form.id, request_id=sub.request_id)
    remove_submission(ctx.session, sub, ctx.now)
    return deleted
