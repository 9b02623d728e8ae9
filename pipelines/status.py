"""``formsync status``: what the scheduler and the store hold, read without writing
anything (a database not created or not migrated yet reads as empty)."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel
from rich.console import Group
from rich.table import Table

from connector.settings import Settings
from connector.store import JobRun, OutreachRow, RawEvent, RequestRow, Store

from .jobs import schedule_text
from .scheduler import JOBSTORE_TABLE

ERRORS_SHOWN = 10


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
    rows: int = 0
    sent: int = 0
    failed: int = 0
    pending: int = 0  # recorded, no request confirmed yet (a stopped or interrupted send)
    changed: int = 0


class RecentError(BaseModel):
    at: int
    where: str
    error: str


class StatusReport(BaseModel):
    jobs: list[JobStatus] = []
    outreach: list[OutreachProgress] = []
    pending_requests: int = 0
    events_received: int = 0
    newest_event_at: int | None = None
    errors: list[RecentError] = []


def collect_status(settings: Settings, store: Store) -> StatusReport:
    """The figures ``formsync status`` shows: configured jobs with their next run (job
    store) and last run (job runs), outreach progress per outreach job, stored pending
    requests, events received, and the newest job errors and failed outreach rows."""
    report = StatusReport(jobs=[JobStatus(id=j.id, kind=j.kind, schedule=schedule_text(j)) for j in settings.jobs])
    if not store.exists():
        return report
    tables = store.table_names()
    next_runs = store.scheduled_jobs.next_run_times(JOBSTORE_TABLE)
    for job in report.jobs:
        job.next_run_at = next_runs.get(job.id)
    if JobRun.__tablename__ in tables:
        _add_runs(report, store)
    if OutreachRow.__tablename__ in tables:
        _add_outreach(report, store)
    if RequestRow.__tablename__ in tables:
        report.pending_requests = store.requests.pending_count()
    if RawEvent.__tablename__ in tables:
        report.events_received, report.newest_event_at = store.events.received()
    report.errors = sorted(report.errors, key=lambda e: e.at, reverse=True)[:ERRORS_SHOWN]
    return report


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
    report.outreach = sorted(progress.values(), key=lambda p: p.job)
    for row in reads.failed_rows(ERRORS_SHOWN):
        report.errors.append(RecentError(at=row.updated_at, error=row.error or "",
                                         where=f"outreach {row.job_name} row {row.row_number}"))


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def render_status(report: StatusReport) -> Group:
    """The report as Rich tables: jobs, outreach, store, last errors (times in UTC)."""
    jobs = Table(title="Jobs (times UTC)", title_justify="left")
    for name in ("job", "kind", "schedule", "next run", "last run", "outcome", "runs", "summary"):
        jobs.add_column(name, overflow="fold")
    for j in report.jobs:
        jobs.add_row(j.id, j.kind, j.schedule, _when(j.next_run_at), _when(j.last_started_at),
                     j.last_outcome or "-", str(j.runs), j.last_summary or "")
    if not report.jobs:
        jobs.add_row("(no jobs configured)", "", "", "", "", "", "", "")
    outreach = Table(title="Outreach", title_justify="left")
    for name in ("outreach job", "form", "rows", "sent", "failed", "pending", "changed"):
        outreach.add_column(name, overflow="fold")
    for p in report.outreach:
        outreach.add_row(p.job, p.form_id, str(p.rows), str(p.sent), str(p.failed), str(p.pending), str(p.changed))
    if not report.outreach:
        outreach.add_row("(none)", "", "", "", "", "", "")
    store = Table(title="Store", title_justify="left")
    store.add_column("what")
    store.add_column("count")
    store.add_column("newest (UTC)")
    store.add_row("pending requests", str(report.pending_requests), "")
    store.add_row("deliveries received", str(report.events_received), _when(report.newest_event_at))
    errors = Table(title="Last errors", title_justify="left")
    for name in ("when (UTC)", "where", "error"):
        errors.add_column(name, overflow="fold")
    for e in report.errors:
        errors.add_row(_when(e.at), e.where, e.error)
    if not report.errors:
        errors.add_row("-", "(none)", "")
    return Group(jobs, outreach, store, errors)
