"""Reads of outreach progress (``formsync_outreach_jobs`` / ``formsync_outreach_rows``)
for ``formsync status`` and the demo. The outreach ledger's own writes are not here."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func
from sqlmodel import col, select

from ._database import Database
from ._tables import OutreachJob, OutreachRow, RequestRow


class OutreachProgressReads:
    """The outreach progress repository (``store.outreach_progress``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def jobs(self) -> dict[str, str]:
        """Every outreach job: name -> form id."""
        with self._db.reader() as s:
            return {j.name: j.form_id for j in s.exec(select(OutreachJob))}

    def outcomes(self) -> dict[str, dict[str, Any]]:
        """Each job's last recorded run outcome (see ``OutreachLedger.record_outcome``)."""
        with self._db.reader() as s:
            return {j.name: dict((j.settings or {}).get("outcome") or {}) for j in s.exec(select(OutreachJob))}

    def state_counts(self) -> list[tuple[str, str, int]]:
        """``(job name, row state, rows)`` for every job and state that has rows."""
        with self._db.reader() as s:
            return [(job, state, int(n)) for job, state, n in s.exec(
                select(OutreachRow.job_name, OutreachRow.state, func.count())
                .group_by(col(OutreachRow.job_name), col(OutreachRow.state)))]

    def failed_rows(self, limit: int) -> list[OutreachRow]:
        """The last ``limit`` rows that failed, most recently updated first."""
        with self._db.reader() as s:
            return list(s.exec(select(OutreachRow).where(OutreachRow.state == "failed")
                               .order_by(col(OutreachRow.updated_at).desc()).limit(limit)))

    def requests_of(self, job: str) -> dict[str, str]:
        """The requests a job created: request id -> the sheet row's key."""
        with self._db.reader() as s:
            rows = s.exec(select(OutreachRow).where(OutreachRow.job_name == job,
                                                     col(OutreachRow.request_id).is_not(None)))
            return {r.request_id: r.row_key for r in rows if r.request_id}

    def sent_count(self, job: str) -> int:
        """How many of a job's rows have a request."""
        with self._db.reader() as s:
            return int(s.exec(select(func.count()).select_from(OutreachRow).where(
                OutreachRow.job_name == job, col(OutreachRow.request_id).is_not(None))).one())

    def links(self, job: str) -> list[tuple[str, str | None]]:
        """``(row key, request url)`` of each request a job created, in sheet row order."""
        with self._db.reader() as s:
            rows = s.exec(select(OutreachRow.row_key, RequestRow.url)
                          .join(RequestRow, col(OutreachRow.request_id) == col(RequestRow.id))
                          .where(OutreachRow.job_name == job).order_by(col(OutreachRow.row_number)))
            return [(key, url) for key, url in rows]

    def last_changes(self) -> dict[str, int]:
        """Each job's newest row change (epoch ms)."""
        with self._db.reader() as s:
            return {job: int(at) for job, at in s.exec(
                select(OutreachRow.job_name, func.max(OutreachRow.updated_at)).group_by(col(OutreachRow.job_name)))}
