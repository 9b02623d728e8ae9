"""Reads of the stored submissions (``formsync_submissions``)."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import col, select

from .database import Database
from .tables import SubmissionRow


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
