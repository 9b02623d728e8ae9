"""Job runs (``formsync_job_runs``): what ``formsync run`` records of every scheduled run
and ``formsync status`` shows."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import func, update
from sqlmodel import col, select

from ._database import Database
from ._tables import JobRun, SchedulerLease

# The scheduler's heartbeat is a row of the lease table (which every database has, whatever
# its leader lock): ``acquired_at`` is the last beat, ``expires_at`` when it goes stale.
HEARTBEAT = "formsync-scheduler-heartbeat"
# What ``formsync status --notify`` last sent (``holder``: a fingerprint of the problems,
# ``acquired_at``: when), so a check run every minute does not repeat itself every minute.
NOTIFIED = "formsync-notified"


@dataclass(frozen=True)
class Heartbeat:
    """The scheduler's last beat: who beat (host:pid:…), when (epoch ms), and until when
    that counts as alive (a scheduler that stops cleanly sets it to its last beat)."""

    holder: str
    beat_at: int
    alive_until: int

    def alive(self, now_ms: int) -> bool:
        return now_ms < self.alive_until

SUMMARY_MAX = 500  # characters of a run's summary kept


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class JobRuns:
    """The job runs repository (``store.runs``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def start(self, job_id: str, kind: str, *, scheduled_at: int | None, pid: int, host: str) -> int:
        """Record a run as started now (outcome ``running``); returns its id."""
        with self._db.session() as s:
            run = JobRun(job_id=job_id, kind=kind, scheduled_at=scheduled_at, started_at=_now_ms(), pid=pid,
                         host=host)
            s.add(run)
            s.flush()
            assert run.id is not None
            return run.id

    def finish(self, run_id: int, outcome: str, *, summary: str | None = None, error: str | None = None) -> None:
        """Record how a run ended (``ok``, ``error`` or ``stopped``), now; the summary is
        cut to ``SUMMARY_MAX`` characters."""
        with self._db.session() as s:
            run = s.get(JobRun, run_id)
            if run is not None:
                run.outcome, run.finished_at = outcome, _now_ms()
                run.summary = summary[:SUMMARY_MAX] if summary else None
                run.error = error
                s.add(run)

    def interrupt_running(self, error: str) -> int:
        """Record every run still marked ``running`` as ended now with ``error``; returns how many."""
        with self._db.session() as s:
            res = s.execute(update(JobRun).where(col(JobRun.outcome) == "running").values(
                outcome="error", finished_at=_now_ms(), error=error))
            return int(getattr(res, "rowcount", 0) or 0)

    def counts(self) -> dict[str, int]:
        """How many runs each job id has."""
        with self._db.reader() as s:
            return {job_id: int(n) for job_id, n in s.exec(
                select(JobRun.job_id, func.count()).group_by(col(JobRun.job_id))).all()}

    def last(self, job_id: str) -> JobRun | None:
        """The job's most recently started run, or None."""
        with self._db.reader() as s:
            return s.exec(select(JobRun).where(JobRun.job_id == job_id)
                          .order_by(col(JobRun.started_at).desc(), col(JobRun.id).desc()).limit(1)).first()

    def recent_errors(self, limit: int) -> list[JobRun]:
        """The last ``limit`` runs that ended in an error, newest first."""
        with self._db.reader() as s:
            return list(s.exec(select(JobRun).where(JobRun.outcome == "error")
                               .order_by(col(JobRun.started_at).desc()).limit(limit)))

    def beat(self, holder: str, *, stale_after_ms: int) -> None:
        """The scheduler ``holder`` is alive now; without another beat within
        ``stale_after_ms`` it counts as gone."""
        now = _now_ms()
        with self._db.session() as s:
            row = s.get(SchedulerLease, HEARTBEAT)
            if row is None:
                row = SchedulerLease(name=HEARTBEAT, holder=holder, acquired_at=now, expires_at=now)
            row.holder, row.acquired_at, row.expires_at = holder, now, now + stale_after_ms
            s.add(row)

    def beat_stopped(self, holder: str) -> None:
        """The scheduler ``holder`` stopped: its last beat stays, it no longer counts as alive."""
        with self._db.session() as s:
            row = s.get(SchedulerLease, HEARTBEAT)
            if row is not None and row.holder == holder:
                row.expires_at = min(row.expires_at, _now_ms())
                s.add(row)

    def heartbeat(self) -> Heartbeat | None:
        """The scheduler's last beat on this database, or None when none ever beat."""
        with self._db.reader() as s:
            row = s.get(SchedulerLease, HEARTBEAT)
            return Heartbeat(row.holder, row.acquired_at, row.expires_at) if row is not None else None

    def notice_due(self, fingerprint: str, *, repeat_ms: int) -> bool:
        """Whether problems with ``fingerprint`` should be sent now: they differ from the last
        ones sent, or those were sent ``repeat_ms`` ago or more. When due, records them as sent."""
        now = _now_ms()
        with self._db.session() as s:
            row = s.get(SchedulerLease, NOTIFIED)
            if row is not None and row.holder == fingerprint and now - row.acquired_at < repeat_ms:
                return False
            row = row or SchedulerLease(name=NOTIFIED, holder=fingerprint, acquired_at=now, expires_at=now)
            row.holder, row.acquired_at, row.expires_at = fingerprint, now, now + repeat_ms
            s.add(row)
            return True
