"""The receiver's database goes away while the sandbox delivers, then comes back: the
receiver answers 503 meanwhile (nothing stored, nothing half-stored), recovers its
connections without a restart, and after the sandbox's retries every event is stored
exactly once.

PostgreSQL: the shared server is never stopped; the receiver reaches it through a TCP
proxy (tests/hardening/support.py) that is cut (listener closed, every connection reset)
and restored. SQLite: the database file is moved away and a directory put in its place
(works as root, unlike permissions), with the pooled connections dropped as a lost
volume would drop them."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from connector.store import Store
from connector.store._tables import RawEvent, RequestRow, request_answers
from formservice.delivery import RETRY_SCHEDULE_MS
from tests.conftest import Sandbox
from tests.connector.test_receiver import CONTACT, metric, receiver_settings, rows, running

from .support import ThreadedProxy, report_figures, table_counts

Outage = Callable[[], None]


@contextlib.asynccontextmanager
async def postgresql_behind_proxy(pg_url: str, _tmp: Path) -> AsyncIterator[tuple[Store, Outage, Outage]]:
    url = make_url(pg_url)
    proxy = ThreadedProxy(url.host or "127.0.0.1", url.port or 5432)
    proxy.start()
    store = Store(url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False))
    store.migrate()
    try:
        yield store, proxy.cut, proxy.restore
    finally:
        store.close()
        proxy.close()


@contextlib.asynccontextmanager
async def sqlite_file_moved(_pg: str, tmp: Path) -> AsyncIterator[tuple[Store, Outage, Outage]]:
    path, aside = tmp / "rx.db", tmp / "rx.db.aside"
    store = Store(f"sqlite:///{path}")
    store.migrate()

    def cut() -> None:
        store.database.engine.dispose()
        for suffix in ("", "-wal", "-shm"):
            p = Path(f"{path}{suffix}")
            if p.exists():
                p.rename(Path(f"{aside}{suffix}"))
        path.mkdir()

    def restore() -> None:
        path.rmdir()
        for suffix in ("", "-wal", "-shm"):
            p = Path(f"{aside}{suffix}")
            if p.exists():
                p.rename(Path(f"{path}{suffix}"))

    try:
        yield store, cut, restore
    finally:
        store.close()


BACKENDS = {"postgresql": postgresql_behind_proxy, "sqlite": sqlite_file_moved}


async def flush(sandbox: Sandbox) -> list[dict[str, Any]]:
    r = await sandbox.helper("deliveries.flush")
    assert r.status == 200, r.body
    return r.data["attempts"]


async def deliveries(sandbox: Sandbox, form: str) -> list[dict[str, Any]]:
    """Every callback delivery of the form's events, with its attempts."""
    items = (await sandbox.helper("events.list", {"formId": form})).data["items"]
    return [dict(d, eventId=e["id"], type=e["type"]) for e in items for d in e["deliveries"] if d["kind"] == "callback"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_database_outage_during_deliveries(backend: str, sandbox: Sandbox, tmp_path: Path,
                                                 request: pytest.FixtureRequest) -> None:
    pg_url = request.getfixturevalue("pg_database") if backend == "postgresql" else ""
    form = sandbox.pro.forms["Contact"]
    figures: Counter[str] = Counter()
    async with BACKENDS[backend](pg_url, tmp_path) as (store, cut, restore):
        rs = receiver_settings(callback_secrets=[sandbox.pro.signing_secret])
        # The SQLite outage is the file moved away after this process's connections are
        # closed: a store process would keep writing through its open one, so the commits
        # run here (PostgreSQL's outage, a cut proxy, reaches the store process too).
        async with running(store, rs, store_process=backend != "sqlite") as rx:

            async def make(n: int) -> list[str]:
                ids = []
                for _ in range(n):
                    r = await sandbox.rpc("requests.create", {"formId": form, "callbackUrl": rx.url("callbacks")})
                    assert r.status == 200, r.body
                    ids.append(r.data["id"])
                return ids

            async def complete(ids: list[str]) -> None:
                for rid in ids:
                    r = await sandbox.helper("requests.complete", {"requestId": rid, "answers": CONTACT})
                    assert r.status == 200, r.body

            before, during, canceled = await make(10), await make(15), await make(5)
            await complete(before)
            assert {a["status"] for a in await flush(sandbox)} <= {200}  # flush also waits for the worker's
            assert len(rows(store, RawEvent)) == 10
            stored_before = table_counts(store)

            # -- the outage: two rounds of attempts on the sandbox's schedule, all 503 --
            cut()
            await complete(during)
            for rid in canceled:
                assert (await sandbox.rpc("requests.cancel", {"requestId": rid, "reason": "Outage"})).status == 200
            # The sandbox's background worker also attempts what is due, so a flush returns only
            # the attempts it made itself; the deliveries' own records are checked after.
            for advance in (0, RETRY_SCHEDULE_MS[0]):
                if advance:
                    assert (await sandbox.helper("clock.advance", {"ms": advance})).status == 200
                attempts = await flush(sandbox)
                figures["attempts_during_outage"] += len(attempts)
                assert {a["status"] for a in attempts} <= {503}, attempts
            assert (await rx.get("/healthz"))[0] == 503
            pending = [d for d in await deliveries(sandbox, form) if d["state"] == "pending"]
            assert len(pending) == 20 and all(len(d["attempts"]) >= 2 for d in pending)
            assert all(a["status"] == 503 for d in pending for a in d["attempts"])

            # -- back: the next scheduled retry lands every event --
            restore()
            assert (await sandbox.helper("clock.advance", {"ms": RETRY_SCHEDULE_MS[1]})).status == 200
            attempts = await flush(sandbox)
            assert {a["status"] for a in attempts} <= {200}, attempts
            assert all(d["state"] == "delivered" for d in await deliveries(sandbox, form))
            assert (await rx.get("/healthz"))[0] == 200
            # A sender's late retry of an event already stored is a duplicate: nothing written twice.
            replay = await sandbox.rpc("requests.replayCallback", {"requestId": during[0]})
            assert replay.status == 200, replay.body
            assert {a["status"] for a in await flush(sandbox)} <= {200}
            metrics = await rx.metrics()

        final = await deliveries(sandbox, form)
        assert all(d["state"] == "delivered" for d in final)
        events = {d["eventId"] for d in final}
        stored = rows(store, RawEvent)
        assert sorted(e.id for e in stored) == sorted(events), "every event stored, each once"
        reqs = {r.id: r for r in rows(store, RequestRow)}
        assert {rid: reqs[rid].status for rid in before + during} == dict.fromkeys(before + during, "completed")
        assert {rid: reqs[rid].status for rid in canceled} == dict.fromkeys(canceled, "canceled")
        with store.database.reader() as s:
            answers = {r.id: r.answers for r in s.connection().execute(request_answers())}
        assert all(answers[rid] == CONTACT for rid in before + during)
        counts = table_counts(store)
        assert counts["formsync_events"] == 30 and counts["formsync_requests"] == 30
        assert counts["formsync_submissions"] == 25
        assert stored_before["formsync_events"] == 10
        assert metric(metrics, "formsync_receiver_responses_total", status="500") == 0
        assert metric(metrics, "formsync_receiver_duplicates_total") == 1
        figures["responses_503"] = int(metric(metrics, "formsync_receiver_responses_total", status="503"))
    report_figures("receiver database outage", backend=backend, events=len(events), stored=len(stored),
                   duplicates_stored=len(stored) - len(events), **figures)
