"""Reads of the stored events (``formsync_events``)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import func
from sqlmodel import col, select

from ._database import Database
from ._tables import RawEvent


class EventReads:
    """The stored events repository (``store.events``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def count_stored(self, ids: Iterable[str]) -> int:
        """How many of the event ids ``ids`` are stored."""
        with self._db.reader() as s:
            return len(set(s.exec(select(RawEvent.id).where(col(RawEvent.id).in_(list(ids))))))

    def received(self) -> tuple[int, int | None]:
        """How many events are stored, and when the newest was received (epoch ms)."""
        with self._db.reader() as s:
            n, newest = s.exec(select(func.count(), func.max(RawEvent.received_at))).one()
        return int(n), newest

    def bodies(self, type_: str | None = None) -> list[tuple[str, str]]:
        """``(source, raw body)`` of the stored events (only of ``type_`` when given), in
        the order they were received."""
        stmt = select(RawEvent).order_by(col(RawEvent.received_at), col(RawEvent.id))
        if type_ is not None:
            stmt = stmt.where(RawEvent.type == type_)
        with self._db.reader() as s:
            return [(e.source, e.body) for e in s.exec(stmt)]
