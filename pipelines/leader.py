"""Leader election: only one ``formsync run`` process schedules jobs per database.

* PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) held on a dedicated
  connection. When the holder dies, its connection closes and PostgreSQL releases the
  lock at once, so a waiting process takes over on its next attempt.
* MySQL / MariaDB: a named lock (``GET_LOCK``), held the same way by its session.
* SQLite: a lease row (``formsync_scheduler_lease``) that the holder renews; another
  process may take it once ``expires_at`` has passed (the holder died or hung).

Both are synchronous (short SQL statements); the scheduler calls them from its loop."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
import uuid
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.engine import Connection

from connector.store import SchedulerLease, Store

log = logging.getLogger("formsync.scheduler")
LOCK_NAME = "formsync-scheduler"


def holder_id() -> str:
    """This process, as a lease holder: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def advisory_key(name: str) -> int:
    """A stable signed 64-bit advisory lock key derived from ``name``."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class LeaderLock(Protocol):
    def try_acquire(self) -> bool:
        """Take the lock if free (or already ours); True when we hold it now."""

    def still_held(self) -> bool:
        """Confirm (and, for a lease, renew) that we hold the lock; False when lost."""

    def release(self) -> None:
        """Give the lock up (idempotent)."""


class AdvisoryLock:
    """A PostgreSQL session advisory lock on a connection of its own (or, subclassed, any
    lock that lives as long as its session)."""

    take = "SELECT pg_try_advisory_lock(:k)"
    give = "SELECT pg_advisory_unlock(:k)"

    def __init__(self, store: Store, name: str = LOCK_NAME) -> None:
        self.store = store
        self.key: int | str = advisory_key(name)
        self.conn: Connection | None = None

    def _drop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.invalidate()  # never back to the pool: the session may hold the lock
                self.conn.close()
            except Exception:  # the connection is already broken; nothing more to do
                pass
            self.conn = None

    def try_acquire(self) -> bool:
        try:
            if self.conn is None:
                self.conn = self.store.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            got = self.conn.execute(text(self.take), {"k": self.key}).scalar() == 1
        except Exception as e:  # the database is unreachable: not the leader, try again later
            log.warning("cannot reach the database for the scheduler lock: %s", e)
            self._drop()
            return False
        return got

    def still_held(self) -> bool:
        if self.conn is None:
            return False
        try:
            # The lock lives as long as this session, and only release() unlocks it: a live
            # connection means we still hold it.
            self.conn.execute(text("SELECT 1"))
            return True
        except Exception as e:
            log.warning("lost the database connection holding the scheduler lock: %s", e)
            self._drop()
            return False

    def release(self) -> None:
        if self.conn is not None:
            try:
                self.conn.execute(text(self.give), {"k": self.key})
            except Exception:  # closing the session below releases it anyway
                pass
            self._drop()


class NamedLock(AdvisoryLock):
    """A MySQL / MariaDB named lock (``GET_LOCK``, not waiting) on a connection of its
    own: like PostgreSQL's advisory lock, the server frees it when the session ends."""

    take = "SELECT GET_LOCK(:k, 0)"
    give = "SELECT RELEASE_LOCK(:k)"

    def __init__(self, store: Store, name: str = LOCK_NAME) -> None:
        super().__init__(store, name)
        self.key = name


class LeaseLock:
    """A lease row renewed by its holder; free once it has expired."""

    def __init__(self, store: Store, name: str = LOCK_NAME, *, ttl_seconds: float = 30.0,
                 holder: str | None = None) -> None:
        self.store = store
        self.name = name
        self.ttl_ms = int(ttl_seconds * 1000)
        self.holder = holder or holder_id()

    def try_acquire(self) -> bool:
        now = int(time.time() * 1000)
        try:
            # One write transaction (BEGIN IMMEDIATE on SQLite): the read and the write
            # cannot interleave with another process's.
            with self.store.session() as s:
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
            log.warning("cannot take the scheduler lease: %s", e)
            return False

    def still_held(self) -> bool:
        return self.try_acquire()

    def release(self) -> None:
        try:
            with self.store.session() as s:
                row = s.get(SchedulerLease, self.name)
                if row is not None and row.holder == self.holder:
                    s.delete(row)
        except Exception as e:  # it expires by itself
            log.warning("cannot release the scheduler lease: %s", e)


def leader_lock(store: Store, *, lease_seconds: float = 30.0) -> LeaderLock:
    """The lock that fits the store's database: advisory on PostgreSQL, named on MySQL /
    MariaDB, a lease otherwise."""
    if store.engine.dialect.name == "postgresql":
        return AdvisoryLock(store)
    if store.engine.dialect.name == "mysql":
        return NamedLock(store)
    return LeaseLock(store, ttl_seconds=lease_seconds)
