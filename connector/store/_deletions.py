"""The deletion log (``store.deletions``): every submission, request and event removed
from the store by ``formsync erase``, ``formsync purge`` or ``formsync sync --reconcile``,
in the order removed. A load reads it as hard deletes: rows placed after the last place
it passed on, in the store's arrival order (taken at commit, so a removal committed after
a read is never placed before what that read saw)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, or_
from sqlmodel import col, select

from ._database import Database, in_lists
from ._tables import Deletion, SubmissionRow


class DeletionLog:
    """Reads of the deletion log (its rows are written by the removals themselves)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def since(self, after: int = 0, *, kinds: tuple[str, ...] = ("submission",), limit: int = 10_000,
              after_id: int | None = None) -> list[Deletion]:
        """The removals placed after ``after`` in the arrival order (0: from the start), of
        ``kinds`` (``submission``, ``request``, ``event``), oldest first, at most ``limit``.
        A load deletes each ``item_id`` and keeps the last ``arrival`` for its next run.
        One removal's rows share a place: the next page of a full one starts after its
        last row, ``after`` its place and ``after_id`` its id."""
        past = col(Deletion.arrival) > after
        if after_id is not None:
            past = or_(past, and_(col(Deletion.arrival) == after, col(Deletion.id) > after_id))
        query = (select(Deletion).where(past, col(Deletion.kind).in_(kinds))
                 .order_by(col(Deletion.arrival), col(Deletion.id)).limit(limit))
        with self._db.reader() as s:
            return list(s.exec(query).all())

    def restored(self, submission_ids: Sequence[str]) -> set[str]:
        """Of ``submission_ids``, those the store holds unmarked: a reconciled deletion undone
        (the form was restored), which a load must not pass on."""
        found: set[str] = set()
        ids = sorted(set(submission_ids))
        with self._db.reader() as s:
            for some in in_lists(ids):
                found.update(s.exec(select(SubmissionRow.id).where(
                    col(SubmissionRow.id).in_(some), col(SubmissionRow.gone_at).is_(None))).all())
        return found
