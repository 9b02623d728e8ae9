"""The receiver's committers (``connector.receiver._committer``): a batch mixing events and bodies
that are not, and for the store process what happens when it dies, when its receiver
is killed or interrupted. The receiver's own tests (test_receiver.py) run through it too."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from connector.receiver._committer import ProcessCommitter, StoreProcessError, ThreadCommitter, committer_for
from connector.receiver._delivery import Delivery, Refusal
from connector.store import Store
from connector.store._mapping import StoreOutcome

from .conftest import pg_connect
from .test_receiver import CB_SECRET, FORMSYNC, counts, encode, envelope, events_in, running, signed


def store_processes(parent: int) -> list[int]:
    """The ids of ``parent``'s children running the store process."""
    found = []
    for task in Path(f"/proc/{parent}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue  # it ended meanwhile
            if b"connector.receiver._committer" in cmdline:
                found.append(int(pid))
    return found


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # a zombie has exited; its parent has not reaped it yet


async def until(check: Any, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


# -- which committer ----------------------------------------------------------------------------


def test_a_file_or_server_database_gets_a_process_and_memory_a_thread(tmp_path):
    on_file = Store(f"sqlite:///{tmp_path / 'c.db'}")
    in_memory = Store("sqlite://")
    try:
        chosen = committer_for(on_file, process=True)
        assert isinstance(chosen, ProcessCommitter) and chosen.url == on_file.url
        assert isinstance(committer_for(on_file, process=False), ThreadCommitter)
        # another process could not see this process's in-memory database
        assert isinstance(committer_for(in_memory, process=True), ThreadCommitter)
    finally:
        on_file.close()
        in_memory.close()


async def test_a_store_process_that_cannot_start_says_why():
    committer = ProcessCommitter("nosuchdb://somewhere/x")
    with pytest.raises(StoreProcessError, match="did not start: ValueError: unsupported database URL"):
        await committer.start()


async def test_a_folder_named_connector_where_the_receiver_runs_is_not_imported(tmp_path):
    """The store process is started with ``-P``: a project's own ``connector/`` in the
    current directory does not shadow this package."""
    shadow = tmp_path / "connector"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise ImportError("the project\'s own connector package")\n')
    db = tmp_path / "cwd.db"
    config = tmp_path / "formsync.toml"
    config.write_text(f'[receiver]\ncallback_secrets = ["{CB_SECRET}"]\n')
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "receive", "--config", str(config), "--port", "0", "--db", f"sqlite:///{db}",
        cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert "listening on http://" in line, line
        url = line.split("listening on ", 1)[1].split()[0]
        body = encode(envelope("evt_cwd"))
        async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=signed(body)) as resp:
            assert resp.status == 200
    finally:
        proc.terminate()
        await proc.wait()
    assert events_in(db) == 1


# -- bodies read by the committer ---------------------------------------------------------------


@pytest.mark.parametrize("process", [True, False], ids=["process", "thread"])
async def test_a_body_that_is_not_a_storable_event_is_refused_and_its_batch_stored(sqlite_store, process):
    """The committer reads each body: one that is not JSON gets its 400, an event no
    database can store is set aside (across the process boundary too), each in its place,
    and the events around them are stored."""
    bodies = [encode(envelope("evt_good1")), b'{"id": "evt_x", ', encode(envelope("evt_good2")),
              json.dumps({**envelope("evt_nul"), "note": "a\x00b"}).encode()]  # U+0000 written as its escape
    committer = committer_for(sqlite_store, process=process)
    await committer.start()
    try:
        results = await committer.commit([Delivery(b, "webhook", 1) for b in bodies])
    finally:
        await committer.close()
    assert results[0] == StoreOutcome("evt_good1", "request.completed", "stored")
    assert results[2] == StoreOutcome("evt_good2", "request.completed", "stored")
    assert isinstance(results[1], Refusal) and (results[1].status, results[1].code) == (400, "INVALID_JSON")
    assert isinstance(results[3], StoreOutcome) and results[3].status == "set_aside"  # kept in the dead letters
    assert results[3].reason is not None and "U+0000" in results[3].reason
    [letter] = list(sqlite_store.dead_letters)
    assert (letter.event_id, letter.field, letter.body) == ("evt_nul", "note", bodies[3])
    assert counts(sqlite_store)["events"] == 2


async def test_batches_waiting_for_the_store_process_share_one_transaction(tmp_path, capfd):
    """While the process waits for the write lock with one batch, two more arrive: once
    the lock is free they are stored together, and every delivery gets its own result."""
    path = tmp_path / "co.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.DEBUG)  # the process logs each transaction at this level
    committer = ProcessCommitter(store.url)
    try:
        await committer.start()
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")

        def batch(prefix: str, n: int) -> list[Delivery]:
            return [Delivery(encode(envelope(f"evt_{prefix}{i}")), "callback", 1) for i in range(n)]

        first = asyncio.create_task(committer.commit(batch("a", 2)))
        await asyncio.sleep(0.3)  # the first batch is in the process, waiting for the lock
        later = [asyncio.create_task(committer.commit(batch(p, 3))) for p in "bc"]
        await asyncio.sleep(0.3)
        blocker.execute("ROLLBACK")
        blocker.close()
        results = await asyncio.gather(first, *later)
    finally:
        await committer.close()
        root.setLevel(level)
    assert [[getattr(r, "status", r) for r in rs] for rs in results] == [["stored"] * 2, ["stored"] * 3, ["stored"] * 3]
    assert [[getattr(r, "event_id", r) for r in rs] for rs in results][2] == ["evt_c0", "evt_c1", "evt_c2"]
    logged = capfd.readouterr().err
    assert "2 deliveries of 1 batches in one transaction" in logged
    assert "6 deliveries of 2 batches in one transaction" in logged
    assert counts(store)["events"] == 8
    store.close()


async def test_a_body_the_reader_breaks_on_is_answered_500_and_its_batch_stored(sqlite_store, monkeypatch):
    """A reader bug (stood in for by a patched ``parse_event``: no real body is known to
    cause one) costs that delivery a 500, not the batch or the store process."""
    import connector.receiver._delivery

    real = connector.receiver._delivery.parse_event

    def broken_on_one(raw: bytes) -> Any:
        if b"evt_boom" in raw:
            raise RuntimeError("a bug")
        return real(raw)

    monkeypatch.setattr(connector.receiver._delivery, "parse_event", broken_on_one)
    committer = ThreadCommitter(sqlite_store)
    results = await committer.commit([Delivery(encode(envelope(e)), "webhook", 1) for e in ("evt_ok", "evt_boom")])
    assert results[0] == StoreOutcome("evt_ok", "request.completed", "stored")
    assert isinstance(results[1], Refusal) and (results[1].status, results[1].code) == (500, "STORE_FAILED")
    assert counts(sqlite_store)["events"] == 1


async def test_a_connection_the_server_dropped_fails_one_batch_with_503_then_reconnects(pg_database):
    """The store process does not check its connection before each transaction: when
    PostgreSQL has dropped it (a restart, an idle timeout), that batch is answered 503,
    which its sender retries, and the next one runs on a new connection."""
    store = Store(pg_database)
    store.migrate()
    committer = ProcessCommitter(pg_database)
    await committer.start()
    try:
        def delivery(eid: str) -> list[Delivery]:
            return [Delivery(encode(envelope(eid)), "webhook", 1)]

        assert (await committer.commit(delivery("evt_p1")))[0] == StoreOutcome("evt_p1", "request.completed", "stored")
        with pg_connect(pg_database.rsplit("/", 1)[1]) as admin:
            dropped = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                    "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
        assert dropped is not None and dropped[0] >= 1
        [refused] = await committer.commit(delivery("evt_p2"))
        assert isinstance(refused, Refusal) and (refused.status, refused.code) == (503, "UNAVAILABLE")
        for eid in ("evt_p2", "evt_p3"):  # the retry, and the next event
            assert (await committer.commit(delivery(eid)))[0] == StoreOutcome(eid, "request.completed", "stored")
    finally:
        await committer.close()
    assert counts(store)["events"] == 3
    store.close()


# -- the store process dying --------------------------------------------------------------------


async def test_a_dead_store_process_is_replaced_and_its_batch_answered_503(tmp_path):
    """The store process is killed while it waits for the SQLite write lock with a batch
    and another is queued behind it: both are answered 503 (the sender retries), and the
    next delivery starts a new process and is stored."""
    path = tmp_path / "rx.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()
    try:
        async with running(store) as rx:
            first = encode(envelope("evt_first"))
            assert (await rx.post(first, signed(first)))[0] == 200
            [pid] = store_processes(os.getpid())
            blocker = sqlite3.connect(path, isolation_level=None)
            blocker.execute("BEGIN IMMEDIATE")
            try:
                stuck = [encode(envelope(f"evt_stuck{i}")) for i in range(2)]
                posts = []
                for body in stuck:  # two batches: one in the process waiting for the lock, one behind it
                    posts.append(asyncio.create_task(rx.post(body, signed(body))))
                    await asyncio.sleep(0.3)
                assert not any(p.done() for p in posts)
                os.kill(pid, signal.SIGKILL)
                for status, answer, headers in await asyncio.wait_for(asyncio.gather(*posts), 15):
                    assert status == 503 and answer["error"]["code"] == "UNAVAILABLE" and headers["Retry-After"]
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            await until(lambda: gone(pid))
            for body in stuck:  # the sender's retries land
                status, answer, _ = await rx.post(body, signed(body))
                assert (status, answer["status"]) == (200, "stored")
            assert [p for p in store_processes(os.getpid()) if p != pid]
        assert counts(store)["events"] == 3
    finally:
        store.close()


async def test_a_store_process_gone_between_batches_costs_no_delivery(sqlite_store):
    async with running(sqlite_store) as rx:
        body = encode(envelope("evt_one"))
        assert (await rx.post(body, signed(body)))[0] == 200
        [pid] = store_processes(os.getpid())
        os.kill(pid, signal.SIGKILL)
        await until(lambda: gone(pid))
        await asyncio.sleep(0.2)  # the receiver has seen its output end
        body = encode(envelope("evt_two"))
        status, answer, _ = await rx.post(body, signed(body))
        assert (status, answer["status"]) == (200, "stored")
    assert counts(sqlite_store)["events"] == 2


# -- the receiver's own end ----------------------------------------------------------------------


async def _formsync_receive(tmp_path: Path, db: Path) -> tuple[asyncio.subprocess.Process, str]:
    config = tmp_path / "formsync.toml"
    config.write_text(f'[receiver]\ncallback_secrets = ["{CB_SECRET}"]\n')
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "receive", "--config", str(config), "--port", "0", "--db", f"sqlite:///{db}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
    assert "listening on http://" in line, line
    return proc, line.split("listening on ", 1)[1].split()[0]


async def test_the_store_process_ends_when_its_receiver_is_killed(tmp_path):
    proc, url = await _formsync_receive(tmp_path, tmp_path / "k.db")
    try:
        body = encode(envelope("evt_k"))
        async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=signed(body)) as resp:
            assert resp.status == 200
        [child] = store_processes(proc.pid)
        proc.kill()
        await proc.wait()
        await until(lambda: gone(child), 10)  # its input closed with the receiver
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_ctrl_c_to_the_whole_group_still_stores_what_was_pending(tmp_path):
    """Ctrl-C reaches the receiver's process group, and a service manager may send
    SIGTERM to every process of the service: the store process keeps going until the
    receiver has had every pending delivery committed and answered."""
    db = tmp_path / "int.db"
    proc, url = await _formsync_receive(tmp_path, db)
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        async with aiohttp.ClientSession() as http:

            async def send(eid: str) -> int:
                body = encode(envelope(eid))
                async with http.post(url, data=body, headers=signed(body)) as resp:
                    return resp.status

            posts = [asyncio.create_task(send(f"evt_int{i:02d}")) for i in range(12)]
            await asyncio.sleep(0.8)  # every delivery is waiting for its commit
            assert not any(p.done() for p in posts)
            [child] = store_processes(proc.pid)
            os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
            os.kill(child, signal.SIGTERM)  # a service manager stopping every process of the service
            await asyncio.sleep(0.5)
            assert not gone(child), "the store process waits for its receiver"
            blocker.execute("ROLLBACK")
            assert await asyncio.gather(*posts) == [200] * 12
        await asyncio.wait_for(proc.wait(), 30)
        assert proc.returncode == 0  # a stop asked for, done cleanly
        await until(lambda: gone(child), 10)
    finally:
        blocker.close()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert events_in(db) == 12
