"""Leader election: only one ``formsync run`` process schedules jobs per database.

Where the database has session locks (PostgreSQL's advisory locks, see its writer) the
lock is one of those, held on a connection of its own: when the holder dies, its
connection closes and the lock is free at once. Elsewhere (SQLite) it is a lease row
(``formsync_scheduler_lease``) that the holder renews; another process may take it once
``expires_at`` has passed (the holder died or hung). Both are synchronous (short
statements); the scheduler calls them from its loop."""

from __future__ import annotations

import logging
import time

from .._process.repeats import RepeatedWarning
from ._database import Database
from ._leader import LOCK_NAME, LeaderLock, holder_id
from ._tables import SchedulerLease

__all__ = ["LOCK_NAME", "LeaderLock", "LeaseLock", "holder_id", "leader_lock"]

log = logging.getLogger("formsync.scheduler")


class LeaseLock:
    """A lease row renewed by its holder; free once it has expired."""

    def __init__(self, db: Database, name: str = LOCK_NAME, *, ttl_seconds: float = 30.0,
                 holder: str | None = None) -> None:
        self._db = db
        self.name = name
        self.ttl_ms = int(ttl_seconds * 1000)
        self.holder = holder or holder_id()
        self._repeats = RepeatedWarning(log)

    def try_acquire(self) -> bool:
        now = int(time.time() * 1000)
        try:
            # One write transaction (BEGIN IMMEDIATE on SQLite): the read and the write
            # cannot interleave with another process's.
            with self._db.session() as s:
                row = s.get(SchedulerLease, self.name)
                if row is None:
                    s.add(SchedulerLease(name=self.name, holder=self.holder, acquired_at=now,
                                         expires_at=now + self.ttl_ms))
                    return True
                if row.holder != self.holder and row.expires_at > now:
                    return False
                if row.holder != self.holder:
                    log.warning("taking over the scheduler lease of %s (expired)", row.holder)
                    row.acquired_at = now
                row.holder, row.expires_at = self.holder, now + self.ttl_ms
                s.add(row)
                return True
        except Exception as e:  # the database is unreachable or busy: not the leader this time
            self._repeats.warn("cannot take the scheduler lease: %s", e)
            return False

    def still_held(self) -> bool:
        return self.try_acquire()

    def release(self) -> None:
        try:
            with self._db.session() as s:
                row = s.get(SchedulerLease, self.name)
                if row is not None and row.holder == self.holder:
                    s.delete(row)
        except Exception as e:  # it expires by itself
            log.warning("cannot release the scheduler lease: %s", e)


def leader_lock(db: Database, name: str = LOCK_NAME, *, ttl_seconds: float = 30.0,
                holder: str | None = None) -> LeaderLock:
    """The lock that fits the database: its session lock where it has one, a lease otherwise."""
    return db.writer.session_lock(db.engine, name) or LeaseLock(db, name, ttl_seconds=ttl_seconds, holder=holder)
