"""The guards of an incremental export (``export --since-last NAME``), checked before
anything is read or written: its name (a slug, not a load's cursor name), its format
(the one stored with its cursor) and the store's lock of its name, held while it runs,
so two runs under one name never write the same rows twice."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from connector.store import Store
from connector.store._cursors import CursorMark
from connector.store._lease import FileLock

from ..rules.names import check_name, name_problem

log = logging.getLogger("formsync.export")

LOAD_PREFIX = "load:"  # the loads' cursor names (``pipelines.export.load.cursor_name``)
LOCK_PREFIX = "cursor:"  # the store's lock of an incremental export's name
LOCK_SECONDS = 30.0  # a lease (SQLite) of a run that was killed is free after this


class ExportBusy(ValueError):
    """Another export under the same ``--since-last`` name is running: nothing was done."""


def refuse_load_name(name: str, flag: str = "--since-last") -> None:
    """A ``ValueError`` (one line) when ``name`` is a load's cursor name: an export under
    it would move the load's cursor, and the warehouse would miss those rows."""
    if name.startswith(LOAD_PREFIX):
        raise ValueError(f"{flag} {name!r} is the cursor of formsync load: an export under it would make the "
                         f"load skip those rows; give the export a name of its own, e.g. nightly")


def check_since_last(store: Store, name: str) -> None:
    """Refuse (``ValueError``, one line) an incremental export under ``name`` when it is a
    load's cursor name, or is not a slug (``pipelines.rules.names``) and has no stored
    cursor (a stored one keeps working, with a warning). A slug reads nothing."""
    refuse_load_name(name)
    if (problem := name_problem(name)) is not None:
        if not store.export_cursors.list(name):
            check_name(name, "--since-last")
        log.warning("--since-last %r: %s; it keeps working, but give new exports a slug name", name, problem)


def check_format(stored: Sequence[CursorMark], name: str, fmt: str) -> None:
    """Refuse (``ValueError``, one line) a run in ``fmt`` under ``name`` whose cursors
    (``stored``, read while holding its lock) moved with files of another format."""
    formats = sorted({m.format for m in stored if m.format is not None})
    if formats and formats[0] != fmt:
        raise ValueError(f"--since-last {name!r} writes {formats[0]}: its cursors moved with {formats[0]} files, so "
                         f"a {fmt} run would miss their rows; give {fmt} a name of its own (e.g. {name}-{fmt}) "
                         f"or run formsync export --reset {name}")


def last_run(stored: Sequence[CursorMark]) -> int:
    """The number of the last run under a name (0: none yet; ``--reset`` starts again),
    of its cursors ``stored`` (read while holding its lock): the next run's files carry
    one more as ``{run}``."""
    return max((m.run for m in stored), default=0)


@contextmanager
def cursor_lock(store: Store, name: str, *, ttl_seconds: float = LOCK_SECONDS) -> Iterator[None]:
    """Hold the store's lock ``cursor:NAME`` (``store.run_lock``: on a SQLite file, a
    file lock beside it, which a killed run frees at once) until the block ends, renewed
    meanwhile where it is a lease; ``ExportBusy`` at once when another run holds it."""
    lock = store.run_lock(LOCK_PREFIX + name, ttl_seconds=ttl_seconds)
    if not lock.try_acquire():
        raise ExportBusy(f"--since-last {name!r}: another export under this name is running; nothing was written: "
                         f"run again once it has finished")
    if isinstance(lock, FileLock):  # held until released or the process ends: nothing to renew
        try:
            yield
        finally:
            lock.release()
        return
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl_seconds / 3):
            if not lock.still_held():
                log.warning("--since-last %r: cannot renew the lock of its cursor", name)

    keeper = threading.Thread(target=renew, name=f"lock {name}", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join()
        lock.release()
