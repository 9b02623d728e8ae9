"""The receiver under gunicorn's aiohttp worker, two worker processes on one PostgreSQL
database (``connector.serving:receiver_app``, the documented command): the sandbox's
real callback deliveries, then every event delivered again by many clients at once,
are each stored once, and both workers served deliveries."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from connector.signing import formstep_headers
from connector.store import Store
from connector.store._tables import RawEvent, RequestRow, SubmissionRow
from tests.conftest import Sandbox
from tests.connector.test_receiver import CONTACT, encode, rows

GUNICORN = Path(sys.executable).parent / "gunicorn"
COMPLETED, CANCELED = 16, 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def gunicorn(config: Path, db: str, out_dir: Path) -> Iterator[str]:
    """Two gunicorn workers serving the receiver; yields the base URL."""
    port = _free_port()
    log = out_dir / "gunicorn.log"
    env = {**os.environ, "FORMSYNC_CONFIG": str(config), "FORMSYNC_STORE__URL": db, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen([str(GUNICORN), "connector.serving:receiver_app", "--worker-class",
                                 "aiohttp.GunicornWebWorker", "--workers", "2", "--bind", f"127.0.0.1:{port}",
                                 "--access-logfile", "-", "--access-logformat", "served-by %P %s",
                                 "--graceful-timeout", "20"], stdout=out, stderr=out, cwd=out_dir, env=env)
        try:
            deadline = time.monotonic() + 60
            while log.read_text().count("Booting worker") < 2 or not _answers(port):
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


def _served(out_dir: Path) -> Counter[str]:
    """The requests each worker (by pid) answered, from gunicorn's access log."""
    log = (out_dir / "gunicorn.log").read_text()
    return Counter(line.split()[1] for line in log.splitlines() if line.startswith("served-by "))


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


@pytest.mark.slow
async def test_two_gunicorn_workers_store_each_sandbox_event_once(sandbox: Sandbox, pg_database: str,
                                                                  tmp_path: Path) -> None:
    secret = sandbox.pro.signing_secret
    config = tmp_path / "formsync.toml"
    config.write_text(f'[receiver]\ncallback_secrets = ["{secret}"]\n')
    form = sandbox.pro.forms["Contact"]
    with gunicorn(config, pg_database, tmp_path) as base:
        callback = base + "/formsync/events/callbacks"
        made = []
        for i in range(COMPLETED + CANCELED):
            r = await sandbox.rpc("requests.create", {"formId": form, "callbackUrl": callback, "externalId": f"g-{i}"})
            assert r.status == 200, r.body
            made.append(r.data["id"])
        for rid in made[:COMPLETED]:
            assert (await sandbox.helper("requests.complete", {"requestId": rid, "answers": CONTACT})).ok
        for rid in made[COMPLETED:]:
            assert (await sandbox.rpc("requests.cancel", {"requestId": rid, "reason": "Withdrawn"})).ok
        assert {a["status"] for a in (await sandbox.helper("deliveries.flush")).data["attempts"]} <= {200}
        items = (await sandbox.helper("events.list", {"formId": form})).data["items"]
        sent = [(e, d) for e in items for d in e["deliveries"] if d["kind"] == "callback"]
        assert len(sent) == COMPLETED + CANCELED and all(d["state"] == "delivered" for _, d in sent), sent
        payloads = [e["payload"] for e, _ in sent]

        # Every event again, 16 at a time, each on a connection of its own: every delivery is
        # a new accept, which either worker may take (kept-alive connections could all land
        # on the worker that accepted first). A worker still starting on a busy machine
        # accepts nothing yet: the wave repeats (each delivery a duplicate) until both served.
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
            gate = asyncio.Semaphore(16)

            async def again(payload: dict[str, object]) -> str:
                body = encode(payload)
                async with gate, http.post(callback, data=body, headers=formstep_headers(
                        secret, body, int(time.time()), event_id=str(payload["id"]), event_type=str(payload["type"])),
                        ) as resp:
                    assert resp.status == 200, await resp.text()
                    return str((await resp.json())["status"])

            for _ in range(5):
                statuses = await asyncio.gather(*[again(p) for _ in range(3) for p in payloads])
                assert Counter(statuses) == {"duplicate": 3 * len(payloads)}
                if len(_served(tmp_path)) == 2:
                    break
                await asyncio.sleep(1)

    log = (tmp_path / "gunicorn.log").read_text()
    assert log.count("Booting worker") >= 2 and "Traceback" not in log, log
    assert len(_served(tmp_path)) == 2, _served(tmp_path)  # both workers answered deliveries
    store = Store(pg_database)
    try:
        assert sorted(e.id for e in rows(store, RawEvent)) == sorted(str(p["id"]) for p in payloads)
        reqs = {r.id: r.status for r in rows(store, RequestRow)}
        assert reqs == {**dict.fromkeys(made[:COMPLETED], "completed"), **dict.fromkeys(made[COMPLETED:], "canceled")}
        subs = rows(store, SubmissionRow)
        assert len(subs) == COMPLETED and all(s.answers == CONTACT for s in subs)
    finally:
        store.close()
