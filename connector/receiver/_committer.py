"""How the receiver's group commits reach the database: in a worker thread of the
receiver's own process (``ThreadCommitter``) or in a process of their own
(``ProcessCommitter``, what ``formsync receive`` and the gunicorn application use).

Both take the deliveries as verified (``Delivery``: body, source, time received) and
store them with ``commit_deliveries``: each body is read (``parse_event``), and the
events are stored in one ``Store.store_events`` transaction, or, when one event's data
breaks it, each alone, so the others still land. What a delivery gets is its
``StoreOutcome`` (``set_aside`` for an event no database can store, kept in the dead
letters), or a ``Refusal``: 400 for a body that is not an event, 503
when the database cannot be used now, 500 when this event could not be stored.

The store process holds the reading of bodies and the database work on another core
than the event loop, which then only verifies and answers, so the two never wait for
each other's interpreter lock (a thread's every return from the database waits for
it). The receiver writes each batch of verified deliveries to the process's standard
input and reads one result per delivery from its standard output: frames of a 4-byte
length and a pickle, both ends being this module. The process reads, maps and stores
the batch (with any others that arrived meanwhile: one transaction, one flush to disk),
and answers after the commit. It exits when its standard input closes, so it never outlives its receiver,
even one killed with SIGKILL. It runs in a session of its own and ignores SIGINT and
SIGTERM (a terminal's Ctrl-C, a service manager signalling every process of the
service), so the receiver can have it commit what is pending before both stop. Should it die, its batch is answered 503 (the sender
retries; a retry of a committed event is a duplicate) and the next batch starts
another."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import logging
import os
import pickle
import select
import signal
import struct
import sys
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from sqlalchemy import exc as sa_exc

from ..store import Store
from ..store._mapping import Incoming, StoreOutcome, Unstorable
from ..store._network import bounded_sessions
from ._delivery import UNAVAILABLE, Delivery, Refusal, read_delivery, store_failed

__all__ = ["Committer", "ProcessCommitter", "Result", "StoreProcessError", "ThreadCommitter", "commit_batch",
           "commit_deliveries", "committer_for", "set_aside"]

log = logging.getLogger("connector.receiver")

Result = StoreOutcome | Refusal
"""What a delivery's waiter gets: its event's outcome, or why it was not stored."""

_LENGTH = struct.Struct(">I")
_START_TIMEOUT_S = 120.0  # the process imports the connector and opens the store
_END_TIMEOUT_S = 60.0  # the process commits the batches in flight, then exits
_PIPE_BYTES = 1 << 20  # Linux's default most for an unprivileged process
DEFAULT_COMMIT_TIMEOUT_S = 15.0  # a store process's batch still not committed after this is stuck
_MOST_EVENTS = 1024  # the most events one transaction of the store process takes
_UNREADABLE = Refusal(500, "STORE_FAILED", "store_failed", "the delivery could not be read; nothing was stored")


def _unavailable(error: BaseException) -> bool:
    """Whether ``error`` means the database cannot be used right now (as opposed to a
    problem with one event's data)."""
    if isinstance(error, sa_exc.IntegrityError | sa_exc.DataError):
        return False
    return isinstance(error, sa_exc.DBAPIError | sa_exc.TimeoutError | sa_exc.DisconnectionError | OSError)


def commit_batch(store: Store, items: Sequence[Incoming]) -> list[Result]:
    """Store ``items`` in one transaction; one result per item, in order. Never raises
    for what the database does: a database that cannot be used makes every item
    ``UNAVAILABLE``; an event it refuses gets ``store_failed`` and is logged, and the
    other events of its batch are then stored one by one."""
    try:
        return list(store.store_events(items))
    except Exception as error:
        if _unavailable(error):
            log.warning("database unavailable (%s); %d event(s) not stored", type(error).__name__, len(items))
            return [UNAVAILABLE] * len(items)
        if len(items) == 1:
            return [_failed(items[0], error)]
    return [_commit_one(store, item) for item in items]


def commit_deliveries(store: Store, deliveries: Sequence[Delivery]) -> list[Result]:
    """Read each delivery's body and store the events in one transaction
    (``commit_batch``); one result per delivery, in order: an event no database can
    store is set aside (``set_aside``), a body that is not an event gets its 400 refusal."""
    read = [_read(d) for d in deliveries]
    stored = iter(commit_batch(store, [r for r in read if isinstance(r, Incoming)]))
    aside = iter(set_aside(store, [r for r in read if isinstance(r, Unstorable)]))
    return [next(stored) if isinstance(r, Incoming) else next(aside) if isinstance(r, Unstorable) else r
            for r in read]


def set_aside(store: Store, items: Sequence[Unstorable]) -> list[Result]:
    """Keep ``items`` in the dead letters (``Store.set_aside``); one result per item.
    Never raises for what the database does: unavailable makes every item ``UNAVAILABLE``
    (the sender retries), anything else ``store_failed``."""
    if not items:
        return []
    try:
        return list(store.set_aside(items))
    except Exception as error:
        if _unavailable(error):
            log.warning("database unavailable (%s); %d event(s) not set aside", type(error).__name__, len(items))
            return [UNAVAILABLE] * len(items)
        log.error("%d event(s) could not be set aside (%s)", len(items), type(error).__name__)
        return [store_failed(item.event_id) for item in items]


def _read(delivery: Delivery) -> Incoming | Unstorable | Refusal:
    try:
        return read_delivery(delivery)
    except Exception:  # a body is refused with RefusalError: anything else is a bug
        log.exception("a delivery could not be read")
        return _UNREADABLE


def _commit_one(store: Store, item: Incoming) -> Result:
    try:
        [outcome] = store.store_events([item])
    except Exception as error:
        return UNAVAILABLE if _unavailable(error) else _failed(item, error)
    return outcome


def _failed(item: Incoming, error: BaseException) -> Refusal:
    log.error("event %s type %s could not be stored (%s)", item.event.id, item.event.type, type(error).__name__)
    return store_failed(item.event.id)


class StoreProcessError(RuntimeError):
    """The store process could not be started (the receiver then stores in a thread only
    when told to: ``receiver.store_process = false``)."""


class Committer(Protocol):
    """Where a receiver's batches are stored."""

    depth: int
    """How many batches may be in flight at once."""

    async def start(self) -> None:
        """Get ready to commit (before the first delivery)."""
        ...

    async def commit(self, deliveries: list[Delivery]) -> list[Result]:
        """Store ``deliveries`` (``commit_deliveries``' promise); up to ``depth`` calls at once."""
        ...

    async def close(self) -> None:
        """Release what ``start`` took, after the last batch."""
        ...


class ThreadCommitter:
    """Batches stored in a worker thread of this process, with this very ``store``."""

    depth = 1

    def __init__(self, store: Store) -> None:
        self.store = store

    async def start(self) -> None:
        """Nothing to start: the thread comes from the event loop's executor."""

    async def commit(self, deliveries: list[Delivery]) -> list[Result]:
        return await asyncio.to_thread(commit_deliveries, self.store, deliveries)

    async def close(self) -> None:
        """Nothing to release."""


def committer_for(store: Store, *, process: bool, commit_timeout: float = DEFAULT_COMMIT_TIMEOUT_S) -> Committer:
    """A ``ProcessCommitter`` on ``store.url`` (replacing a store process whose batch
    takes longer than ``commit_timeout`` seconds), or a ``ThreadCommitter`` with ``store``
    itself when ``process`` is false or the database lives in this process's memory
    (in-memory SQLite). The store process opens a plain ``Store(url)``: a ``store``
    with its own clock or behaviour needs ``process=False`` to keep them."""
    if not process or (store.backend == "sqlite" and store.file is None):
        return ThreadCommitter(store)
    return ProcessCommitter(store.url, commit_timeout=commit_timeout, key_file=store.key_file)


class ProcessCommitter:
    """Batches stored by a process of their own on the database at ``url`` (see the
    module docstring). The process opens its own ``Store(url)``. Up to ``depth``
    batches are in flight: the process never waits for the receiver to answer and send
    more, and it stores the batches waiting for it in one transaction."""

    depth = 4

    def __init__(self, url: str, *, commit_timeout: float = DEFAULT_COMMIT_TIMEOUT_S,
                 key_file: Path | None = None) -> None:
        self.url, self.commit_timeout, self.key_file = url, commit_timeout, key_file
        # The database ends what the process leaves behind when it is replaced mid-transaction.
        self._process_url = bounded_sessions(url, commit_timeout)
        self._running: _Running | None = None
        self._starting = asyncio.Lock()

    async def start(self) -> None:
        """Start the store process and wait until it has opened the store. Raises
        ``StoreProcessError`` when it cannot start."""
        await self._current()

    async def commit(self, deliveries: list[Delivery]) -> list[Result]:
        running = None
        try:
            running = await self._current()
            return await asyncio.wait_for(running.commit(deliveries), self.commit_timeout)
        except TimeoutError:
            # A database that stopped answering (a hung server, a link where packets go
            # nowhere) holds the process in a read no driver setting bounds everywhere:
            # replace it. Its transaction never committed, or did so harmlessly (a retry
            # of a stored event is a duplicate).
            log.warning("the store process did not commit a batch within %.0f s (the database does not answer); "
                        "it is stopped, %d event(s) not stored, the next batch starts another", self.commit_timeout,
                        len(deliveries))
            await self._drop(running, kill=True)
        except (OSError, EOFError, asyncio.IncompleteReadError, StoreProcessError) as error:
            log.warning("the store process is not running (%s); %d event(s) not stored, the next batch starts "
                        "another", error, len(deliveries))
            await self._drop(running)
        return [UNAVAILABLE] * len(deliveries)

    async def close(self) -> None:
        """Close the process's input, so it commits what it was sent and exits; wait for it."""
        await self._drop(self._running)

    async def _current(self) -> _Running:
        """The running store process, a new one when there is none or it has died."""
        async with self._starting:
            if self._running is not None and self._running.reader.done():
                await self._drop(self._running)  # it died since the last batch: start another at once
            if self._running is None:
                self._running = await _Running.start(self._process_url, self.key_file)
            return self._running

    async def _drop(self, running: _Running | None, *, kill: bool = False) -> None:
        # Only the process that failed: another batch may have started its successor.
        if running is None:
            return
        if self._running is running:
            self._running = None
        await running.end(kill=kill)


class _Running:
    """One running store process: batches go out as frames, and a reader task hands each
    answer to the batch waiting longest (the process answers in order)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.waiting: deque[asyncio.Future[list[Result]]] = deque()
        self.reader = asyncio.create_task(self._read(), name="formsync-store-process-reader")

    @classmethod
    async def start(cls, url: str, key_file: Path | None = None) -> _Running:
        # -P: the current directory is not searched first, where a folder of the user's
        # own named like this package would be imported instead. A session of its own: a
        # terminal's Ctrl-C, sent to the receiver's process group, does not reach it, even
        # while it starts (before it ignores signals).
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-P", "-m", __name__, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, start_new_session=True)
        except OSError as error:
            raise StoreProcessError(f"the receiver's store process could not be started: {error}") from None
        _widen_pipe(proc)
        try:
            await _send(proc, {"url": url, "key_file": str(key_file) if key_file else None,
                               "log_level": logging.getLogger().getEffectiveLevel()})
            ready = await asyncio.wait_for(_receive(proc), _START_TIMEOUT_S)
        except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError) as error:
            await _end(proc)
            raise StoreProcessError(f"the receiver's store process did not start ({type(error).__name__}; its "
                                    "error is on standard error)") from None
        if ready != "ready":
            await _end(proc)
            raise StoreProcessError(f"the receiver's store process did not start: {ready}")
        return cls(proc)

    async def commit(self, deliveries: list[Delivery]) -> list[Result]:
        if self.reader.done():
            raise EOFError("the store process has exited")
        answer: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
        self.waiting.append(answer)  # before the frame goes: answers come back in this order
        await _send(self.proc, deliveries)
        return await answer

    async def _read(self) -> None:
        try:
            while True:
                results = await _receive(self.proc)
                answer = self.waiting.popleft()
                if not answer.done():
                    answer.set_result(results)
        except (OSError, EOFError, asyncio.IncompleteReadError) as error:
            for answer in self.waiting:
                if not answer.done():
                    answer.set_exception(EOFError(f"the store process exited ({type(error).__name__})"))
            self.waiting.clear()

    async def end(self, *, kill: bool = False) -> None:
        if kill and self.proc.returncode is None:
            self.proc.kill()
        await _end(self.proc)
        self.reader.cancel()


def _widen_pipe(proc: asyncio.subprocess.Process) -> None:
    # A batch is up to a few MB of bodies: a wider pipe takes it in fewer writes, so the
    # process is not left waiting for the event loop to come back and write the rest.
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    transport = proc.stdin.transport if proc.stdin is not None else None
    pipe = transport.get_extra_info("pipe") if transport is not None else None
    if setpipe is not None and pipe is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(pipe.fileno(), setpipe, _PIPE_BYTES)


def _frame(value: Any) -> bytes:
    """``value`` as one frame: its pickle's length, then the pickle."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


async def _send(proc: asyncio.subprocess.Process, value: Any) -> None:
    assert proc.stdin is not None
    proc.stdin.write(_frame(value))
    await proc.stdin.drain()


async def _receive(proc: asyncio.subprocess.Process) -> Any:
    assert proc.stdout is not None
    (size,) = _LENGTH.unpack(await proc.stdout.readexactly(_LENGTH.size))
    return pickle.loads(await proc.stdout.readexactly(size))


async def _end(proc: asyncio.subprocess.Process) -> None:
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), _END_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()


# ======================================================================================
# The store process
# ======================================================================================


class _Frames:
    """The frames arriving on a file descriptor, read whole, with a way to tell whether
    another one is there already."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def _fill(self, size: int) -> bool:
        while len(self.buffer) < size:
            chunk = os.read(self.fd, max(size - len(self.buffer), _PIPE_BYTES))
            if not chunk:
                return False  # the receiver closed our input: time to go
            self.buffer += chunk
        return True

    def next(self) -> Any:
        """The next frame's value (waiting for it), or None at the end of the input."""
        if not self._fill(_LENGTH.size):
            return None
        (size,) = _LENGTH.unpack_from(self.buffer)
        if not self._fill(_LENGTH.size + size):
            return None
        value = pickle.loads(memoryview(self.buffer)[_LENGTH.size:_LENGTH.size + size])
        del self.buffer[:_LENGTH.size + size]
        return value

    def waiting(self) -> bool:
        """Whether more input has arrived (``next`` then returns at once, or as soon as
        the rest of a frame being written is there)."""
        return bool(self.buffer) or bool(select.select([self.fd], [], [], 0)[0])


def _write_frame(stream: IO[bytes], value: Any) -> None:
    stream.write(_frame(value))
    stream.flush()


def _commit_frames(store: Store, batches: list[list[Delivery]]) -> list[list[Result]]:
    """The batches that have arrived, stored in one transaction; one answer per batch."""
    results = iter(commit_deliveries(store, [d for batch in batches for d in batch]))
    return [[next(results) for _ in batch] for batch in batches]


def serve(stdin: int, stdout: IO[bytes]) -> None:
    """The store process's loop on the file descriptor ``stdin``: the settings frame,
    then an answer per batch frame, until the input ends. Batches that arrived while
    the one before was committed share a transaction (and its flush to disk)."""
    frames = _Frames(stdin)
    config = frames.next()
    if config is None:
        return
    logging.basicConfig(level=config["log_level"], format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        # No check of its connection before each transaction (a round trip, dearer than
        # the rest of a small batch's overhead): a dropped connection fails one batch,
        # answered 503 and retried by its senders, and the pool is renewed.
        key_file = Path(config["key_file"]) if config.get("key_file") else None  # the erasures' tombstones
        store = Store(config["url"], pre_ping=False, key_file=key_file)
    except Exception as error:  # the receiver opened this URL already: only a bug gets here
        _write_frame(stdout, f"{type(error).__name__}: {error}")
        return
    gc.collect()
    gc.freeze()  # what start-up made stays: the collector need not rescan it under load
    try:
        _write_frame(stdout, "ready")
        while (batch := frames.next()) is not None:
            batches = [batch]
            while sum(map(len, batches)) < _MOST_EVENTS and frames.waiting():
                if (more := frames.next()) is None:
                    break
                batches.append(more)
            answers = _commit_frames(store, batches)
            log.debug("store process: %d deliveries of %d batches in one transaction", sum(map(len, answers)),
                      len(answers))
            for answer in answers:
                _write_frame(stdout, answer)
    finally:
        store.close()


def main() -> None:
    """The store process: frames on standard input and output, log lines on standard error."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    # Frames travel on a copy of standard output; whatever else writes there goes to
    # standard error instead, where it cannot break a frame.
    frames = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.fileno(), frames)


if __name__ == "__main__":
    main()
