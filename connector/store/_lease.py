"""Leader election: only one ``formsync run`` process schedules jobs per database.

Where the database has session locks (PostgreSQL's advisory locks, see its writer) the
lock is one of those, held on a connection of its own: when the holder dies, its
connection closes and the lock is free at once. Elsewhere (SQLite) it is a lease row
(``formsync_scheduler_lease``) that the holder renews; another process may take it once
``expires_at`` has passed (the holder died or hung). Both are synchronous (short
statements); the scheduler calls them from its loop.

A lock held for one short run (``run_lock``: an incremental export's name) is, on a
SQLite file, a file lock beside it (``FileLock``) rather than a lease: taking a lease is
a write transaction synced to disk, and releasing it another, which cost such a run more
than its own work; the kernel frees a file lock the moment its holder's process ends."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from pathlib import Path
from urllib.parse import quote

from .._process.repeats import RepeatedWarning
from ._database import Database
from ._leader import LOCK_NAME, LeaderLock, holder_id
from ._tables import SchedulerLease

__all__ = ["LOCK_NAME", "FileLock", "LeaderLock", "LeaseLock", "holder_id", "leader_lock", "run_lock"]

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


class FileLock:
    """An exclusive ``flock`` on a file of its own: held by one open file at a time (two
    stores of one process exclude each other too), freed by the kernel when its holder's
    process ends however it ends, and taking it writes nothing to disk. The file stays
    (removing it while another process opens it would let two hold the lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def still_held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # the lock goes with the file's last descriptor


def lock_file(database: Path, name: str) -> Path:
    """Where ``FileLock`` keeps the lock ``name`` of the SQLite file ``database``: in
    ``<file>-locks/`` beside it (as SQLite's own ``-wal`` and ``-shm``), one file per
    name, the name quoted (a long one as its hash)."""
    quoted = quote(name, safe="-_.")
    stem = quoted if len(quoted) <= 200 else hashlib.sha256(name.encode()).hexdigest()
    return database.with_name(f"{database.name}-locks") / f"{stem}.lock"


def run_lock(db: Database, database: Path | None, name: str, *, ttl_seconds: float = 30.0) -> LeaderLock:
    """The lock of one run under ``name``: the database's session lock where it has one,
    a ``FileLock`` beside the SQLite file ``database``, else (an in-memory SQLite, or a
    folder where no lock file can be made) a lease of ``ttl_seconds``."""
    if (lock := db.writer.session_lock(db.engine, name)) is not None:
        return lock
    if database is not None:
        held = FileLock(lock_file(database, name))
        try:
            held.path.parent.mkdir(exist_ok=True)
            return held
        except OSError as e:
            log.warning("cannot make the lock file %s (%s): a lease in the database instead", held.path, e)
    return LeaseLock(db, name, ttl_seconds=ttl_seconds)
