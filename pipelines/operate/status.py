"""``formsync status``: what the scheduler and the store hold, read without writing
anything (a database not created or not migrated yet reads as empty)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from pydantic import BaseModel
from rich.console import Group
from rich.table import Table
from rich.text import Text

from connector.client.field_lists import HELD_BACK_FIX
from connector.client.grant import GrantError, token_kind
from connector.client.pacing import token_key
from connector.client.rpc import TokenSource
from connector.config.settings import ServiceSettings, Settings
from connector.store import FormField, JobRun, OutreachRow, RawEvent, RequestRow, Store, Suppression
from connector.store.grants import holds_grant
from connector.store.jobstore import JOBSTORE_TABLE

from ..campaign.funnel import Funnel, funnel
from ..campaign.read import invalid_rows
from ..outreach.counts import RunCounts, recorded_counts
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
    rows: int = 0  # rows recorded in the ledger (the valid rows of the sheet)
    sent: int = 0
    failed: int = 0
    pending: int = 0  # recorded, no request confirmed yet (a stopped or interrupted send)
    changed: int = 0
    suppressed: int = 0  # refused by the contact rule (see pipelines.outreach.contact)
    sheet_rows: int | None = None  # rows the last run read from the sheet (None before a run ended)
    rejected: int = 0  # rows the last run rejected before sending
    last_change_at: int | None = None
    funnel: Funnel | None = None  # None on a store not migrated to the campaign's columns yet
    last_run: RunCounts | None = None  # the counts the last run ended with
    report: str | None = None  # the last run's report file

    def line(self) -> str:
        """The last run's outcome in the words ``formsync outreach`` ended it with (``sent
        494 of 495 rows; 1 rejected (see ...), done 16:35``), or, for a run that ended
        before it could say (the process was killed), what the ledger holds."""
        when = _clock(self.last_change_at)
        if self.last_run is not None and (not self.pending or self.last_run.stopped):
            run = self.last_run
            text = run.outcome(self.report if run.problems else None)
            return f"{text}, stopped {when}, run again to continue" if run.stopped else f"{text}, done {when}"
        total = max(self.sheet_rows or 0, self.rows)
        bad = self.rejected + self.failed + self.changed
        text = f"{self.sent:,} of {total:,} sent, {bad:,} rejected"
        text += f", {self.suppressed:,} suppressed" if self.suppressed else ""
        if self.pending:
            return f"{text}, interrupted {when}, run again to continue"
        return f"{text}, done {when}"


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
    store_empty: bool = True  # no job run, outreach, request or delivery stored yet
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


def collect_status(settings: Settings, store: Store, service_at: int | None = None) -> StatusReport:
    """The figures ``formsync status`` shows: configured jobs with their next run (job
    store) and last run (job runs), outreach progress per outreach job, stored pending
    requests, events received, and the newest job errors and failed outreach rows.
    ``service_at`` is the service's time (``read_service_time``), which a token's age is
    measured on."""
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
        report.requests = [FormRequests(form_id=form, **{k: v for k, v in counts.items() if k in STATUSES})
                           for form, counts in sorted(store.requests.status_by_form().items())]
    if RawEvent.__tablename__ in tables:
        report.events_received, report.newest_event_at = store.events.received()
    if FormField.__tablename__ in tables:
        report.held_back = store.held_back_fields()
    report.dead_letters = store.dead_letters.count()
    report.credentials = _credentials(settings, store)
    report.credentials.service_at = service_at
    report.errors = sorted(report.errors, key=lambda e: e.at, reverse=True)[:ERRORS_SHOWN]
    report.store_empty = not (any(j.runs for j in report.jobs) or report.outreach or report.requests
                              or report.events_received or report.dead_letters)
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
    progress = {name: OutreachProgress(job=name, form_id=form_id) for name, form_id in reads.jobs().items()}
    for name, state, n in reads.state_counts():
        p = progress.setdefault(name, OutreachProgress(job=name, form_id="?"))
        p.rows += n
        if state == "sent":
            p.sent += n
        elif state == "failed":
            p.failed += n
        elif state in ("pending", "sending"):
            p.pending += n
        elif state == "changed":
            p.changed += n
        elif state == "suppressed":
            p.suppressed += n
    outcomes, changes = reads.outcomes(), reads.last_changes()
    for p in progress.values():
        outcome = outcomes.get(p.job, {})
        p.sheet_rows, p.rejected = outcome.get("rows"), int(outcome.get("invalid", outcome.get("rejected", 0)))
        p.last_run, p.report = recorded_counts(outcome), outcome.get("report")
        p.last_change_at = max(changes.get(p.job, 0), int(outcome.get("at", 0))) or None
    if Suppression.__tablename__ in store.table_names():  # made by the migration that added the funnel's columns
        for p in progress.values():
            p.funnel = funnel(p.job, store.campaign.rows(p.job), invalid_rows(outcomes.get(p.job)))
    report.outreach = sorted(progress.values(), key=lambda p: p.job)
    for row in reads.failed_rows(ERRORS_SHOWN):
        report.errors.append(RecentError(at=row.updated_at, error=row.error or "",
                                         where=f"outreach {row.job_name} row {row.row_number}"))


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _clock(ms: int | None) -> str:
    """A time as ``16:35`` (UTC), with the date when it is not today."""
    if ms is None:
        return "-"
    at = datetime.fromtimestamp(ms / 1000, UTC)
    return at.strftime("%H:%M") if at.date() == datetime.now(UTC).date() else at.strftime("%Y-%m-%d %H:%M")


def _short(ms: int | None) -> str:
    return "-" if ms is None else datetime.fromtimestamp(ms / 1000, UTC).strftime("%m-%d %H:%M")


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def render_status(report: StatusReport) -> Group:
    """The report at a glance, within 80 columns (times in UTC): the scheduler's heartbeat,
    the jobs, each outreach job in one line, the requests per form, deliveries, the events
    set aside, the last errors."""
    jobs = _table("Jobs (times UTC)", "job", "kind", "schedule", "next run", "last run", "outcome", "runs")
    for j in report.jobs:
        jobs.add_row(Text(j.id), j.kind, Text(j.schedule), _short(j.next_run_at), _short(j.last_started_at),
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
        errors.add_row(_short(e.at), Text(e.where), Text(e.error))  # Text: a [bracket] in an error is no markup
    if not report.errors:
        errors.add_row("-", "(none)", "")
    held = "; ".join(f"form {f}: {', '.join(keys)}" for f, keys in report.held_back.items())
    schemas = ([Text(f"Fields held back from views and exports (no field list read yet): {held}"),
                Text(f"  fix: {HELD_BACK_FIX}")] if report.held_back else [])
    return Group(Text(report.scheduler.line(report.at)), Text(report.credentials.line(report.at)), jobs, *outreach,
                 requests, Text(received), Text(aside), *schemas, errors)
