"""What needs someone's attention, read from a ``formsync status`` report (pure).

``formsync status`` exits with ``ATTENTION`` (4) when :func:`problems` finds any, so cron or a
monitoring check can act on it; ``formsync status --notify`` and the scheduler send the same
problems to ``[notify]``; the Prometheus rules in ``config/alerts/`` watch the same facts
through ``/metrics``."""

from __future__ import annotations

from connector.client.grant import refused

from .notify import Notice
from .status import StatusReport

STOPPED_AFTER_MS = 2 * 60 * 1000
"""A scheduler whose last beat is older than this has stopped (a restart within it is not a
problem); ``FormsyncSchedulerStopped`` in config/alerts/formsync-rules.yml uses the same 120 s."""

DAY_MS = 24 * 3600 * 1000
TOKEN_WARN_BEFORE_MS = 7 * DAY_MS
"""From day 23 of an API token's 30 (counted from its first use) status says it expires;
``FormsyncApiTokenExpiring`` in config/alerts/formsync-rules.yml uses the same 7 days."""
TOKEN_FIX = "run `formsync login` or set a new token"

STALLED_AFTER_MS = 15 * 60 * 1000
"""An outreach job with rows still to send and no change for this long, while no scheduler
is alive to finish it, has stalled."""


def problems(report: StatusReport, *, stalled_after_ms: int = STALLED_AFTER_MS) -> list[Notice]:
    """The problems in ``report``, scheduler first, then jobs and outreach by id.

    - the scheduler: jobs are configured, a scheduler has beaten on this database, none is
      alive now and the last beat is ``STOPPED_AFTER_MS`` old (a database no scheduler ever
      ran on is not a problem: it may not use one);
    - a job whose last run ended with ``error``;
    - an outreach job with rows recorded but not yet sent, unchanged for ``stalled_after_ms``,
      while no scheduler is alive;
    - events set aside (dead letters): signed events no database could store, kept until
      replayed (``FormsyncEventsSetAside`` in config/alerts/formsync-rules.yml)."""
    found: list[Notice] = []
    sched = report.scheduler
    if (report.jobs and sched.last_beat_at is not None and not sched.alive
            and report.at - sched.last_beat_at >= STOPPED_AFTER_MS):
        found.append(Notice("scheduler_stopped", "scheduler",
                             f"no scheduler is running for {len(report.jobs)} configured job(s); the last one "
                             f"({sched.holder}) stopped beating {_ago(report.at - sched.last_beat_at)} ago; "
                             f"start one: formsync run --config FILE"))
    for job in report.jobs:
        if job.last_outcome == "error":
            found.append(Notice("job_failed", job.id,
                                 f"job {job.id} ({job.kind}): its last run failed; see the last errors "
                                 f"below and the scheduler's log"))
    found += credential_problems(report)
    for p in report.outreach:
        idle = report.at - (p.last_change_at or report.at)
        if p.pending and not sched.alive and idle >= stalled_after_ms:
            found.append(Notice("outreach_stalled", p.job,
                                 f"outreach {p.job}: {p.pending:,} row(s) not sent, nothing sent for "
                                 f"{_ago(idle)}; run it again to continue"))
    if report.dead_letters:
        found.append(Notice("events_set_aside", "receiver",
                             f"{report.dead_letters:,} signed event(s) set aside: no database could store them; "
                             f"kept, not lost: formsync dead-letters list shows why, formsync dead-letters "
                             f"replay stores them"))
    return found


def credential_problems(report: StatusReport) -> list[Notice]:
    """The token formsync calls with: an API token from day 23 after its first use (it
    lasts 30 days from its making, which formsync cannot know: "at most"), a static OAuth
    access token (one hour), and a stored sign-in the service refused for good."""
    creds, found = report.credentials, []
    by, now = creds.token_expires_by, creds.now(report.at)  # the service's clock when status could read it
    if by is not None and now >= by - TOKEN_WARN_BEFORE_MS:
        days = -(-(by - now) // DAY_MS)  # whole days, rounded up
        said = (f"the API token expires in at most {days} day{'s' if days != 1 else ''}" if days > 0
                else "the API token has expired (API tokens last 30 days)")
        found.append(Notice("token_expiring", "service.token", f"{said}: {TOKEN_FIX}"))
    if creds.token_kind == "oauth":
        found.append(Notice("token_expiring", "service.token", "service.token is an OAuth access token (fbo_), which "
                                                               "lasts one hour: run `formsync login` instead, and "
                                                               "remove service.token"))
    if creds.token_kind is None and creds.refused is not None:
        found.append(Notice("sign_in_lost", "sign-in", str(refused(creds.refused))))
    return found


def _ago(ms: int) -> str:
    """``45 s``, ``12 min``, ``3 h``, ``2 d``."""
    seconds = max(0, ms) // 1000
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"
