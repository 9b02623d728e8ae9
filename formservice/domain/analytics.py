"""Form analytics (the agent's ``formAnalytics_get``; Pro and Business): the funnel of a
form counted from what the store holds. Test requests and test submissions count
nowhere, as the spec's Limits say.

- Share links: a respondent's first save creates a submission, so views and starts are
  the public submissions (drafts and completed), completions the completed ones. The
  sandbox records no page view that saved nothing.
- Requests: views are the requests whose link was opened, starts those with answers
  saved or sent, completions the completed ones.
"""

from __future__ import annotations

from sqlalchemy import func, or_
from sqlmodel import col, select

from ..tables import Request, Submission
from .agentops import agent_method
from .base import Ctx, Params, Result


class FormRef(Params):
    formId: str


class Funnel(Result):
    views: int
    starts: int
    completions: int


class Analytics(Result):
    formId: str
    views: int
    starts: int
    completions: int
    completionRate: float | None  # completions / views, null without views
    shareLinks: Funnel
    requests: Funnel
    requestsCreated: int


def _count(ctx: Ctx, stmt: object) -> int:
    return int(ctx.session.exec(stmt).one())  # type: ignore[call-overload]


@agent_method("formAnalytics_get")
def analytics_get(ctx: Ctx, p: FormRef) -> Analytics:
    """Views, starts and completions of a form, by channel (share links, requests)."""
    form = ctx.form(p.formId, trashed_ok=True)
    ctx.require_plan("pro", "analytics", "Form analytics")
    subs = select(func.count()).select_from(Submission).where(
        Submission.form_id == form.id, col(Submission.is_test).is_(False), col(Submission.request_id).is_(None))
    started = _count(ctx, subs)
    public = Funnel(views=started, starts=started,
                    completions=_count(ctx, subs.where(col(Submission.is_completed).is_(True))))
    reqs = select(func.count()).select_from(Request).where(Request.form_id == form.id, col(Request.is_test).is_(False))
    created = _count(ctx, reqs)
    by_request = Funnel(
        views=_count(ctx, reqs.where(or_(col(Request.opened_at).is_not(None), col(Request.status) == "completed"))),
        starts=_count(ctx, reqs.where(or_(col(Request.started_at).is_not(None), col(Request.status) == "completed"))),
        completions=_count(ctx, reqs.where(Request.status == "completed")),
    )
    views = public.views + by_request.views
    completions = public.completions + by_request.completions
    return Analytics(formId=form.id, views=views, starts=public.starts + by_request.starts, completions=completions,
                     completionRate=round(completions / views, 4) if views else None, shareLinks=public,
                     requests=by_request, requestsCreated=created)
