"""The events set aside (``formsync_dead_letters``): correctly signed, but holding what no
database can store as an event. Reads here; they are written by ``Store.set_aside`` and
removed by ``Store.store_events(..., settles=...)`` in the transaction that stores them."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import func
from sqlmodel import col, select

from ._database import Database
from ._tables import DeadLetter

_BATCH = 500  # rows read at a time while iterating: bodies are up to a few MB each


class DeadLetterReads:
    """The dead-letter repository (``store.dead_letters``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def _exists(self) -> bool:
        return DeadLetter.__tablename__ in self._db.table_names()

    def count(self) -> int:
        """How many events are set aside (0 before the table exists)."""
        if not self._exists():
            return 0
        with self._db.reader() as s:
            return int(s.exec(select(func.count()).select_from(DeadLetter)).one())

    def __iter__(self) -> Iterator[DeadLetter]:
        """Every event set aside, by the time it was received, read in batches (none before the table exists)."""
        last: tuple[int, str] | None = None
        while self._exists():
            query = select(DeadLetter).order_by(col(DeadLetter.received_at), col(DeadLetter.id)).limit(_BATCH)
            if last is not None:
                at, key = last
                query = query.where((col(DeadLetter.received_at) > at)
                                    | ((col(DeadLetter.received_at) == at) & (col(DeadLetter.id) > key)))
            with self._db.reader() as s:
                rows = list(s.exec(query).all())
            yield from rows
            if len(rows) < _BATCH:
                return
            last = (rows[-1].received_at, rows[-1].id)
