"""``formsync status``: what the scheduler and the store hold, read without writing
anything (a database not created or not migrated yet reads as empty)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel
from rich.console import Group
from rich.table import Table
from sqlalchemy import MetaData, func, inspect, select
from sqlalchemy import Table as SqlTable
from sqlalchemy.engine import make_url
from sqlmodel import col

from connector.settings import Settings
from connector.store import JobRun, OutreachJob, OutreachRow, RawEvent, RequestRow, Store

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


def _sqlite_missing(url: str) -> bool:
    u = make_url(url)
    return u.get_backend_name() == "sqlite" and bool(u.database) and not Path(u.database or "").exists()


def collect_status(settings: Settings, store: Store) -> StatusReport:
    """The figures ``formsync status`` shows: configured jobs with their next run (job
    store) and last run (job runs), outreach progress per outreach job, stored pending
    requests, events received, and the newest job errors and failed outreach rows."""
    report = StatusReport(jobs=[JobStatus(id=j.id, kind=j.kind, schedule=schedule_text(j)) for j in settings.jobs])
    if _sqlite_missing(store.url):
        return report
    tables = set(inspect(store.engine).get_table_names())
    by_id = {j.id: j for j in report.jobs}
    with store.reader() as s:
        q = s.execute
        if JOBSTORE_TABLE in tables:
            t = SqlTable(JOBSTORE_TABLE, MetaData(), autoload_with=s.connection())
            for job_id, nxt in q(select(t.c.id, t.c.next_run_time)):
                if job_id in by_id and nxt is not None:
                    by_id[job_id].next_run_at = int(nxt * 1000)
        if "formsync_job_runs" in tables:
            counts = dict(q(select(JobRun.job_id, func.count()).group_by(JobRun.job_id)).all())
            for job in report.jobs:
                job.runs = int(counts.get(job.id, 0))
                last = q(select(JobRun).where(JobRun.job_id == job.id)
                         .order_by(col(JobRun.started_at).desc(), col(JobRun.id).desc()).limit(1)).scalars().first()
                if last is not None:
                    job.last_started_at, job.last_finished_at = last.started_at, last.finished_at
                    job.last_outcome, job.last_summary = last.outcome, last.summary
            for run in q(select(JobRun).where(JobRun.outcome == "error")
                         .order_by(col(JobRun.started_at).desc()).limit(ERRORS_SHOWN)).scalars():
                report.errors.append(RecentError(at=run.finished_at or run.started_at, where=f"job {run.job_id}",
                                                 error=run.error or ""))
        if "formsync_outreach_rows" in tables:
            progress = {j.name: OutreachProgress(job=j.name, form_id=j.form_id)
                        for j in q(select(OutreachJob)).scalars()}
            for name, state, n in q(select(OutreachRow.job_name, OutreachRow.state, func.count())
                                    .group_by(OutreachRow.job_name, OutreachRow.state)):
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
            for row in q(select(OutreachRow).where(OutreachRow.state == "failed")
                         .order_by(col(OutreachRow.updated_at).desc()).limit(ERRORS_SHOWN)).scalars():
                report.errors.append(RecentError(at=row.updated_at, error=row.error or "",
                                                 where=f"outreach {row.job_name} row {row.row_number}"))
        if "formsync_requests" in tables:
            report.pending_requests = int(q(select(func.count()).select_from(RequestRow)
                                            .where(col(RequestRow.status) == "pending")).scalar_one())
        if "formsync_events" in tables:
            n, newest = q(select(func.count(), func.max(RawEvent.received_at))).one()
            report.events_received, report.newest_event_at = int(n), newest
    report.errors = sorted(report.errors, key=lambda e: e.at, reverse=True)[:ERRORS_SHOWN]
    return report


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
