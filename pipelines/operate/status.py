"""``formsync status``: what the scheduler and the store hold, read without writing
anything (a database not created or not migrated yet reads as empty)."""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping
from datetime import UTC, datetime

from pydantic import BaseModel
from rich.console import Group
from rich.table import Table
from rich.text import Text

from connector.client._field_lists import HELD_BACK_FIX
from connector.client._pacing import token_key
from connector.client.grant import GrantError, token_kind
from connector.client.rpc import TokenSource
from connector.config.settings import ServiceSettings, Settings
from connector.store import Store
from connector.store._grants import holds_grant
from connector.store._jobstore import JOBSTORE_TABLE
from connector.store._tables import FormField, JobRun, OutreachRow, RawEvent, RequestRow, Suppression

from ..campaign.funnel import Funnel, funnel
from ..outreach.counts import RunCounts, job_counts, recorded_counts
from .jobs import schedule_text

ERRORS_SHOWN = 10
SERVICE_TIME_SECONDS = 5.0  # how long status waits for the service's time
STATUSES = ("completed", "expired", "canceled", "pending")


class JobStatus(BaseModel):
    id: str
    kind: str
    schedule: str
    next_run_at: int | None = None  # epoch ms, from the job store; None before the first start or when paused
    last_started_at: int | None = None
    last_finished_at: int | None = None
    last_outcome: str | None = None
    last_summary: str | None = None
    runs: int = 0


class OutreachProgress(BaseModel):
    job: str
    form_id: str
    # The sheet's rows in their states now (``job_counts``): the last run's counts, or
    # for a run that ended before it could record them (the process was killed), the ledger's.
    counts: RunCounts = RunCounts(rows=0)
    last_change_at: int | None = None
    funnel: Funnel | None = None  # None on a store not migrated to the campaign's columns yet
    last_run: RunCounts | None = None  # the counts the last run recorded
    report: str | None = None  # the last run's report file

    @property
    def pending(self) -> int:
        """Rows recorded without a confirmed request: a stopped or interrupted send."""
        return self.counts.left

    @property
    def interrupted(self) -> bool:
        """Rows are left to send and no run recorded stopping there: a run was killed."""
        return bool(self.counts.left) and not self.counts.stopped

    def line(self) -> str:
        """The job's rows in the words ``formsync outreach`` ends a run with (``sent 494
        of 495 rows; 1 rejected (see ...), done 2026-06-30 16:35 UTC``), with how its last
        run ended."""
        c, when = self.counts, f"{_when(self.last_change_at)} UTC"
        text = c.outcome(self.report if c.problems and c == self.last_run else None)
        if self.interrupted:
            return f"{text}, interrupted {when}, run again to continue"
        return f"{text}, stopped {when}, run again to continue" if c.stopped else f"{text}, done {when}"


class SchedulerState(BaseModel):
    """The scheduler's heartbeat as ``formsync status`` read it."""

    holder: str | None = None
    last_beat_at: int | None = None
    alive: bool = False

    def line(self, now_ms: int) -> str:
        if self.last_beat_at is None:
            return "no scheduler has run on this database (start one: formsync run --config FILE)"
        if self.alive:
            return f"scheduler alive ({self.holder}), last beat {max(0, now_ms - self.last_beat_at) // 1000} s ago"
        return f"no scheduler running; the last one beat at {_when(self.last_beat_at)} UTC"


class FormRequests(BaseModel):
    """Stored requests of one form by status."""

    form_id: str
    completed: int = 0
    expired: int = 0
    canceled: int = 0
    pending: int = 0


class RecentError(BaseModel):
    at: int
    where: str
    error: str


API_TOKEN_DAYS = 30  # an API token (fb_) expires this long after it was made; it cannot be extended


class Credentials(BaseModel):
    """Which token formsync calls the service with, as far as the store tells: a static
    ``service.token`` (its kind, and when formsync first used it), or the sign-in of
    ``formsync login`` (its workspace, its last refresh, a refusal for good)."""

    token_kind: str | None = None  # api (fb_) or oauth (fbo_), when service.token is set
    token_first_used_at: int | None = None
    signed_in: bool = False  # a sign-in is stored for service.base_url
    workspace_id: str | None = None
    refreshed_at: int | None = None
    refused: str | None = None  # why the service refused the stored chain for good (invalid_grant)
    # The service's time when status asked it (``read_service_time``): a token's age is
    # measured on it. None: not asked (no token nor sign-in) or no answer: this machine's clock.
    service_at: int | None = None

    def now(self, local_at: int) -> int:
        """The time a token's age is measured at: the service's, else ``local_at``."""
        return self.service_at if self.service_at is not None else local_at

    @property
    def token_expires_by(self) -> int | None:
        """The latest the API token can expire (epoch ms): 30 days after its first use."""
        if self.token_kind != "api" or self.token_first_used_at is None:
            return None
        return self.token_first_used_at + API_TOKEN_DAYS * 24 * 3600 * 1000

    def line(self, now_ms: int) -> str:
        if self.token_kind == "oauth":
            return "Service token: an OAuth access token (fbo_), which lasts one hour"
        if self.token_kind == "api":
            by = self.token_expires_by
            left = "" if by is None else f", expires {_when(by)} UTC at the latest"
            local = "" if by is None or self.service_at is not None else " (its age by this machine's clock)"
            return f"Service token: an API token (fb_){left}{local}" + (
                ", set beside a stored sign-in" if self.signed_in else "")
        if self.signed_in:
            return (f"Service sign-in: workspace {self.workspace_id}, renewed {_when(self.refreshed_at)} UTC"
                    + (f"; refused by the service ({self.refused})" if self.refused else ""))
        return "Service token: none (set service.token or run formsync login)"


class StatusReport(BaseModel):
    at: int = 0  # when it was read (epoch ms)
    store_empty: bool = True  # nothing stored at all (``Store.holds_rows``): a new or emptied store
    nothing_ran: bool = True  # no job run, outreach, request or delivery stored yet
    scheduler: SchedulerState = SchedulerState()
    jobs: list[JobStatus] = []
    outreach: list[OutreachProgress] = []
    requests: list[FormRequests] = []
    pending_requests: int = 0
    events_received: int = 0
    newest_event_at: int | None = None
    dead_letters: int = 0  # correctly signed events set aside: no database can store them
    errors: list[RecentError] = []
    held_back: dict[str, list[str]] = {}  # form id -> answered keys no fields.list read named yet
    sqlite_views: int | None = None  # the views of a SQLite store (Store.parsed_views); None on a server
    credentials: Credentials = Credentials()


async def read_service_time(service: ServiceSettings, tokens: TokenSource | None) -> int | None:
    """The service's time now (epoch ms; a sandbox's exact test clock), asked once with
    the token or the sign-in (``tokens``) within ``SERVICE_TIME_SECONDS``, no retry;
    None when it does not answer (status then measures on this machine's clock)."""
    from connector.client.rpc import FormClient
    from connector.errors import FormsyncError

    try:
        async with FormClient.from_settings(service, tokens, timeout=SERVICE_TIME_SECONDS, max_retries=0) as fc:
            return await asyncio.wait_for(fc.service_now(), SERVICE_TIME_SECONDS)
    except (FormsyncError, GrantError, OSError, TimeoutError, ValueError):
        return None


MANY_SQLITE_VIEWS = 4000
"""A SQLite store's views from which ``formsync status`` says what they cost (two per form
named from its name: the view and its alias for one release)."""
MANY_VIEWS_FIX = "with thousands of forms use PostgreSQL or MariaDB (store.url), whose server keeps the views"

TOP_FORMS = 50
"""The forms with the most requests that keep a ``formsync_requests`` series of their own."""
OTHER_FORM = "other"
"""The ``form`` of the requests of every other form, summed."""


def form_series(counts: Iterable[tuple[str, Mapping[str, int]]], keep: Collection[str] = (),
                top: int = TOP_FORMS) -> list[FormRequests]:
    """Request counts by form (``RequestReads.each_form_status``: each form once, with its
    counts by status) as ``/metrics`` shows them (pure): the forms among ``keep`` and the
    ``top`` forms with the most requests (ties by form id), by id, and the rest summed
    under ``OTHER_FORM`` (only when some form was). ``counts`` is read once, holding the
    shown forms only: the memory does not grow with the number of forms."""
    wanted = set(keep)
    kept: dict[str, Mapping[str, int]] = {}
    totals: Counter[str] = Counter()
    seen = 0

    def tap() -> Iterator[tuple[str, Mapping[str, int]]]:
        nonlocal seen
        for form, by_status in counts:
            seen += 1
            totals.update({s: by_status.get(s, 0) for s in STATUSES})
            if form in wanted:
                kept[form] = by_status
            yield form, by_status

    forms = tap()
    best = heapq.nsmallest(top, forms, key=lambda f: (-sum(f[1].get(s, 0) for s in STATUSES), f[0]))
    for _ in forms:  # the forms after the top ones (nsmallest may stop early): still counted
        pass
    shown = {**dict(best), **kept}
    out = [FormRequests(form_id=f, **{s: n for s, n in shown[f].items() if s in STATUSES}) for f in sorted(shown)]
    if seen > len(shown):
        out.append(FormRequests(form_id=OTHER_FORM, **{
            s: totals[s] - sum(c.get(s, 0) for c in shown.values()) for s in STATUSES}))
    return out


def collect_status(settings: Settings, store: Store, service_at: int | None = None, *,
                   forms: Collection[str] | None = None) -> StatusReport:
    """The figures ``formsync status`` shows: configured jobs with their next run (job
    store) and last run (job runs), outreach progress per outreach job, stored pending
    requests, events received, and the newest job errors and failed outreach rows.
    ``service_at`` is the service's time (``read_service_time``), which a token's age is
    measured on. With ``forms``, the requests are those of ``form_series`` (the top forms
    and ``forms``, the rest summed) and the held-back keys are not read: what the metrics
    show, read in memory bounded in the number of forms; without, every form's."""
    report = StatusReport(at=int(time.time() * 1000),
                          jobs=[JobStatus(id=j.id, kind=j.kind, schedule=schedule_text(j)) for j in settings.jobs])
    if not store.exists():
        return report
    tables = store.table_names()
    next_runs = store.scheduled_jobs.next_run_times(JOBSTORE_TABLE)
    for job in report.jobs:
        job.next_run_at = next_runs.get(job.id)
    if JobRun.__tablename__ in tables:
        _add_runs(report, store)
        beat = store.runs.heartbeat()
        if beat is not None:
            report.scheduler = SchedulerState(holder=beat.holder, last_beat_at=beat.beat_at,
                                              alive=beat.alive(report.at))
    if OutreachRow.__tablename__ in tables:
        _add_outreach(report, store)
    if RequestRow.__tablename__ in tables:
        report.pending_requests = store.requests.pending_count()
        counts = store.requests.each_form_status(STATUSES)  # the one read of both the metrics and the text
        report.requests = (form_series(counts, forms) if forms is not None else
                           [FormRequests(form_id=form, **by_status) for form, by_status in sorted(counts)])
    if RawEvent.__tablename__ in tables:
        report.events_received, report.newest_event_at = store.events.received()
    if FormField.__tablename__ in tables and forms is None:  # by form: the text only shows them
        report.held_back = store.held_back_fields()
        report.sqlite_views = store.parsed_views()
    report.dead_letters = store.dead_letters.count()
    report.credentials = _credentials(settings, store)
    report.credentials.service_at = service_at
    report.errors = sorted(report.errors, key=lambda e: e.at, reverse=True)[:ERRORS_SHOWN]
    report.nothing_ran = not (any(j.runs for j in report.jobs) or report.outreach or report.requests
                              or report.events_received or report.dead_letters)
    report.store_empty = not store.holds_rows()
    return report


def _credentials(settings: Settings, store: Store) -> Credentials:
    out = Credentials()
    if settings.service.token is not None:
        value = settings.service.token.get_secret_value()
        out.token_kind = token_kind(value)
        out.token_first_used_at = store.grants.token_first_used(token_key(value))
    row = store.grants.get(settings.service.base_url.rstrip("/"))
    if row is not None and holds_grant(row):
        out.signed_in, out.workspace_id, out.refreshed_at, out.refused = (True, row.workspace_id, row.refreshed_at,
                                                                            row.failure)
    return out


def _add_runs(report: StatusReport, store: Store) -> None:
    counts = store.runs.counts()
    for job in report.jobs:
        job.runs = counts.get(job.id, 0)
        last = store.runs.last(job.id)
        if last is not None:
            job.last_started_at, job.last_finished_at = last.started_at, last.finished_at
            job.last_outcome, job.last_summary = last.outcome, last.summary
    for run in store.runs.recent_errors(ERRORS_SHOWN):
        report.errors.append(RecentError(at=run.finished_at or run.started_at, where=f"job {run.job_id}",
                                         error=run.error or ""))


def _add_outreach(report: StatusReport, store: Store) -> None:
    reads = store.outreach_progress
    jobs, outcomes, changes = reads.jobs(), reads.outcomes(), reads.last_changes()
    states: dict[str, Counter[str]] = {name: Counter() for name in jobs}
    for name, state, n in reads.state_counts():
        states.setdefault(name, Counter())[state] += n
    progress: dict[str, OutreachProgress] = {}
    for name, held in states.items():
        outcome = outcomes.get(name, {})
        progress[name] = OutreachProgress(
            job=name, form_id=jobs.get(name, "?"), counts=job_counts(held, outcome),
            last_run=recorded_counts(outcome), report=outcome.get("report"),
            last_change_at=max(changes.get(name, 0), int(outcome.get("at", 0))) or None)
    if Suppression.__tablename__ in store.table_names():  # made by the migration that added the funnel's columns
        for p in progress.values():
            p.funnel = funnel(p.job, store.campaign.rows(p.job), p.counts)
    report.outreach = sorted(progress.values(), key=lambda p: p.job)
    for row in reads.failed_rows(ERRORS_SHOWN):
        report.errors.append(RecentError(at=row.updated_at, error=row.error or "",
                                         where=f"outreach {row.job_name} row {row.row_number}"))


def _when(ms: int | None) -> str:
    """A time as every line and table of ``formsync status`` says it: ``2026-12-05 03:18``
    (UTC: the lines say so after it, the tables in their titles)."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _table(title: str, *columns: str, whole: str | None = None) -> Table:
    """A table whose cells fold within 80 columns, but for column ``whole`` (an id), never
    wrapped nor cut: the others give way."""
    table = Table(title=title, title_justify="left", expand=False, show_edge=False)
    for name in columns:
        if name == whole:
            table.add_column(name, no_wrap=True, overflow="ignore")
        else:  # no narrower than its header or a job's kind, which read whole
            table.add_column(name, overflow="fold", min_width=min(len(name), 8))
    return table


def render_status(report: StatusReport) -> Group:
    """The report at a glance, within 80 columns (times in UTC, one format): the scheduler's heartbeat,
    the jobs, each outreach job in one line, the requests per form, deliveries, the events
    set aside, the last errors."""
    jobs = _table("Jobs (times UTC)", "job", "kind", "schedule", "next run", "last run", "outcome", "runs", whole="job")
    for j in report.jobs:
        jobs.add_row(Text(j.id), j.kind, Text(j.schedule), _when(j.next_run_at), _when(j.last_started_at),
                     j.last_outcome or "-", str(j.runs))
    if not report.jobs:
        jobs.add_row("(no jobs configured)", "", "", "", "", "", "")
    outreach = [Text("Outreach", style="italic")]
    for p in report.outreach:
        outreach += [Text(f"  {p.job} ({p.form_id})"), Text(f"    {p.line()}")]
        if p.funnel is not None and p.funnel.sent:
            outreach.append(Text(f"    {p.funnel.line()}"))
    if not report.outreach:
        outreach.append(Text("  (no outreach job yet)"))
    requests = _table("Requests per form", "form", *STATUSES)
    for f in report.requests:
        requests.add_row(Text(f.form_id), *(f"{n:,}" for n in (f.completed, f.expired, f.canceled, f.pending)))
    if not report.requests:
        requests.add_row("(none)", "0", "0", "0", "0")
    received = (f"Deliveries received: {report.events_received:,}"
                + (f", newest {_when(report.newest_event_at)} UTC" if report.newest_event_at else ""))
    aside = f"Events set aside: {report.dead_letters:,}" + (
        " (see formsync dead-letters list)" if report.dead_letters else "")
    errors = _table("Last errors", "when (UTC)", "where", "error")
    for e in report.errors:
        errors.add_row(_when(e.at), Text(e.where), Text(e.error))  # Text: a [bracket] in an error is no markup
    if not report.errors:
        errors.add_row("-", "(none)", "")
    held = "; ".join(f"form {f}: {', '.join(keys)}" for f, keys in report.held_back.items())
    schemas = ([Text(f"Fields held back from views and exports (no field list read yet): {held}"),
                Text(f"  fix: {HELD_BACK_FIX}")] if report.held_back else [])
    views = report.sqlite_views
    many = ([Text(f"SQLite store with {views:,} views: every connection to the file keeps each one parsed "
                  f"(about 4 KiB a view)"), Text(f"  fix: {MANY_VIEWS_FIX}")]
            if views is not None and views >= MANY_SQLITE_VIEWS else [])
    return Group(Text(report.scheduler.line(report.at)), Text(report.credentials.line(report.at)), jobs, *outreach,
                 requests, Text(received), Text(aside), *schemas, *many, errors)
