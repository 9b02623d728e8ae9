"""The disk under a SQLite store, for real: a small tmpfs mounted for the test, filled up,
remounted read-only, and the store file locked by another process. Under each, over
HTTP with signed deliveries: the receiver answers 503 (or the CLI a one-line error with
its exit code), ``/healthz`` says why, nothing acknowledged is lost, and what was refused
is stored when the sender retries once the fault clears. Needs root (mount)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.store import Store
from connector.store._mapping import Unstorable
from tests.connector.test_receiver import FORMSYNC, encode, envelope, events_in, running, signed

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

FS_BYTES = 4 << 20
PADDING = "x" * 200_000  # a body that makes the write-ahead log grow: it needs new blocks


@contextlib.contextmanager
def small_tmpfs() -> Iterator[Path]:
    """A 4 MiB tmpfs mounted on a fresh directory named for this suite; unmounted (and the
    directory removed) afterwards, whatever happened."""
    where = Path(tempfile.mkdtemp(prefix="formsync-disk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES},mode=0755", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


def remount(fs: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(fs)], check=True)


def fill(path: Path) -> None:
    """Write ``path`` until the file system has no block left."""
    with path.open("wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * (64 << 10))


def body(eid: str, padded: bool = True) -> bytes:
    return encode(envelope(eid, data={**envelope()["data"], "answers": {"note": PADDING if padded else "short"}}))


async def deliver(rx, bodies: list[bytes]) -> list[int]:  # type: ignore[no-untyped-def]
    return [(await rx.post(b, signed(b), "callbacks"))[0] for b in bodies]


async def health(rx) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    status, text = await rx.get("/healthz")
    assert time.monotonic() - started < 5, "the health check answers within its bound"
    return status, text


async def test_a_full_disk_and_a_read_only_file_system(tmp_path: Path) -> None:
    with small_tmpfs() as fs:
        db = fs / "store.db"
        store = Store(f"sqlite:///{db}")
        store.migrate()
        try:
            async with running(store) as rx:
                assert await deliver(rx, [body("evt_before")]) == [200]
                assert (await health(rx))[0] == 200

                # Full: refused with 503 while no block is left, and /healthz says so.
                fill(fs / "filler")
                full = [body(f"evt_full_{i}") for i in range(3)]
                answers = await deliver(rx, full)
                assert set(answers) <= {200, 503} and 503 in answers, answers
                status, text = await health(rx)
                assert status == 503 and "not writable (disk full" in text, text
                (fs / "filler").unlink()
                assert (await health(rx))[0] == 200
                assert await deliver(rx, full) == [200] * 3  # the sender's retries are stored
            # Read-only: the same. Linux remounts a file system read-only only while no file
            # is open for writing on it (unless the kernel does it on an error): this
            # receiver commits in a thread of this process, its connections closed first.
            async with running(store, store_process=False) as rx:
                store.close()
                await asyncio.to_thread(remount, fs, "ro")
                try:
                    ro = [body(f"evt_ro_{i}", padded=False) for i in range(3)]
                    assert await deliver(rx, ro) == [503] * 3
                    status, text = await health(rx)
                    assert status == 503 and "not writable (read-only file system)" in text, text
                finally:
                    await asyncio.to_thread(remount, fs, "rw")
                assert (await health(rx))[0] == 200
                assert await deliver(rx, ro) == [200] * 3
        finally:
            store.close()
        assert events_in(db) == 7  # nothing acknowledged lost, nothing twice


@pytest.mark.slow  # three command runs: about 20 s on a busy machine
def test_the_cli_says_a_full_or_read_only_disk_in_one_line(tmp_path: Path) -> None:
    with small_tmpfs() as fs:
        db = fs / "store.db"
        store = Store(f"sqlite:///{db}")
        store.migrate()
        good = body("evt_aside", padded=True)
        store.set_aside([Unstorable("evt_aside", "request.completed", "callback", good, 1, "UNSTORABLE_EVENT", "old")])
        store.close()
        cfg = tmp_path / "formsync.toml"
        cfg.write_text(f'[store]\nurl = "sqlite:///{db}"\n')

        def replay() -> subprocess.CompletedProcess[str]:
            return subprocess.run([str(FORMSYNC), "dead-letters", "replay", "--config", str(cfg)], capture_output=True,
                                  text=True, timeout=60, check=False)

        fill(fs / "filler")
        done = replay()
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("error: the database sqlite:///") and "is not writable (disk full" in done.stderr
        assert "nothing was lost" in done.stderr
        (fs / "filler").unlink()
        remount(fs, "ro")
        try:
            done = replay()
            assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
            assert "is not writable (read-only file system)" in done.stderr, done.stderr
        finally:
            remount(fs, "rw")
        done = replay()
        assert done.returncode == 0 and '"stored":1' in done.stdout, done.stderr  # the dead letter was kept
        assert events_in(db) == 1


LOCKER = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
c.execute("ROLLBACK")
"""


async def test_a_store_file_locked_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store = Store(f"sqlite:///{db}")
    store.migrate()
    try:
        async with running(store) as rx:
            locker = await asyncio.create_subprocess_exec(sys.executable, "-c", LOCKER, str(db),
                                                          stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            try:
                assert locker.stdout is not None and await locker.stdout.readline() == b"locked\n"
                status, text = await health(rx)
                assert status == 503 and "locked by another process" in text, text
                # A delivery waits for the lock (up to the busy timeout) rather than fail at once...
                waiting = asyncio.create_task(deliver(rx, [body("evt_locked", padded=False)]))
                await asyncio.sleep(1.5)
                assert not waiting.done()
            finally:
                assert locker.stdin is not None
                locker.stdin.close()  # ...and is stored once the other process lets go
                await asyncio.wait_for(locker.wait(), 10)
            assert await asyncio.wait_for(waiting, 30) == [200]
            assert (await health(rx))[0] == 200
    finally:
        store.close()
    assert events_in(db) == 1
