"""The deletion log (``store.deletions``): every submission, request and event removed
from the store by ``formsync erase``, ``formsync purge`` or ``formsync sync --reconcile``,
in the order removed. A load reads it as hard deletes: rows after the last id it passed on."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import col, select

from .database import Database
from .tables import Deletion, SubmissionRow


class DeletionLog:
    """Reads of the deletion log (its rows are written by the removals themselves)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def since(self, after: int = 0, *, kinds: tuple[str, ...] = ("submission",), limit: int = 10_000) -> list[Deletion]:
        """The removals logged after the log id ``after`` (0: from the start), of ``kinds``
        (``submission``, ``request``, ``event``), oldest first, at most ``limit``. A load
        deletes each ``item_id`` and keeps the last ``id`` for its next run."""
        query = (select(Deletion).where(col(Deletion.id) > after, col(Deletion.kind).in_(kinds))
                 .order_by(col(Deletion.id)).limit(limit))
        with self._db.reader() as s:
            return list(s.exec(query).all())

    def restored(self, submission_ids: Sequence[str]) -> set[str]:
        """Of ``submission_ids``, those the store holds unmarked: a reconciled deletion undone
        (the form was restored), which a load must not pass on."""
        found: set[str] = set()
        ids = sorted(set(submission_ids))
        with self._db.reader() as s:
            for start in range(0, len(ids), 500):  # bounded IN lists on every database
                found.update(s.exec(select(SubmissionRow.id).where(
                    col(SubmissionRow.id).in_(ids[start:start + 500]), col(SubmissionRow.gone_at).is_(None))).all())
        return found
