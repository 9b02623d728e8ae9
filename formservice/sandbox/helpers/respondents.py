"""Helpers that do what respondents and recipients do on their pages."""

from __future__ import annotations

from typing import Any

from ...domain import events, sharelinks
from ...domain import requests as req_domain
from ...domain import submissions as subs_domain
from ...domain.base import Ctx
from ...errors import not_found
from ...tables import Form
from ..models import CompleteParams, ShareSubmitParams, ShareSubmitted, SubmissionRef, SubmitParams
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
