"""Reads of the stored submissions (``formsync_submissions``)."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import col, select

from ._database import Database
from ._tables import SUBMISSIONS, SubmissionRow


class SubmissionReads:
    """The stored submissions repository (``store.submissions``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def completed_counts(self, form_id: str) -> tuple[int, int]:
        """How many completed submissions of the form are stored, and how many of them
        answered a request."""
        done = select(func.count()).select_from(SubmissionRow).where(
            SubmissionRow.form_id == form_id, col(SubmissionRow.is_completed))
        with self._db.reader() as s:
            total = s.exec(done).one()
            from_requests = s.exec(done.where(col(SubmissionRow.request_id).is_not(None))).one()
        return int(total), int(from_requests)

    def times(self, form_id: str) -> list[SubmissionTimes]:
        """Each stored submission of the form with what its retention is counted from."""
        t = SUBMISSIONS.c
        query = sa_select(t.id, t.is_completed, t.submitted_at, t.updated_at, t.created_at).where(t.form_id == form_id)
        with self._db.reader() as s:
            return [SubmissionTimes(r[0], bool(r[1]), r[2], r[3], r[4]) for r in s.connection().execute(query)]


class SubmissionTimes(NamedTuple):
    """A stored submission's id, whether completed, and its times (epoch ms, None unknown)."""

    id: str
    is_completed: bool
    submitted_at: int | None
    updated_at: int | None
    created_at: int | None
