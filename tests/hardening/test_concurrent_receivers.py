"""Two receivers on one PostgreSQL or MariaDB database (two applications in this process, each with
its own Store and connection pool; or two ``formsync receive`` processes), fed the same events at the same time in
different orders: each
event is stored once (one receiver answers ``stored``, the other ``duplicate``), no
table holds a duplicate row, and the newest version of every submission and request
wins whatever order the versions arrived in."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from connector.store import Store
from connector.store._mapping import answer_tuples
from connector.store._tables import RawEvent, RequestRow, SubmissionRow
from tests.connector.conftest import pg_connect
from tests.connector.test_receiver import CB_SECRET, encode, rows, running, signed

from .support import receive_process, report_figures, table_counts

COMPLETED, CANCELED, SEED = 60, 20, 5
CONCURRENCY = 32


def _at(minute: int) -> str:
    return f"2026-05-01T10:{minute:02d}:00.000Z"


def completion_events(i: int) -> list[dict[str, Any]]:
    """Request i completed, then its submission edited twice: three versions, the last
    (edit 2, the latest updatedAt) the newest."""
    request = {"id": f"req_c{i}", "externalId": f"ext-{i}", "status": "completed", "outcome": None,
               "createdAt": _at(0), "completedAt": _at(1)}
    form = {"id": "form_1", "name": "Contact", "snapshotId": "snap_1"}
    out = []
    for edit in range(3):
        submission = {"id": f"sub_c{i}", "respondentEmail": None, "submittedAt": _at(1),
                      "updatedAt": _at(1 + 10 * edit) if edit else None, "editCount": edit, "pdfUrl": None,
                      "language": None}
        answers = {"name": f"Person {i} v{edit}", "topic": ["sales", "support", "other"][edit]}
        data = {"form": form, "submission": submission, "answers": answers, "display": answers}
        kind = "submission.updated" if edit else "request.completed"
        if not edit:
            data["request"] = request
        out.append({"id": f"evt_c{i}_{edit}", "type": kind, "createdAt": _at(1 + 10 * edit),
                    "apiVersion": "2026-09-24", "test": False, "data": data})
    return out


def cancel_event(i: int) -> dict[str, Any]:
    return {"id": f"evt_x{i}", "type": "request.canceled", "createdAt": _at(5), "apiVersion": "2026-09-24",
            "test": False, "data": {"request": {"id": f"req_x{i}", "status": "canceled", "createdAt": _at(0),
                                                "canceledAt": _at(5), "cancelReason": "Withdrawn"}}}


@contextlib.asynccontextmanager
async def two_receivers(mode: str, url: str, tmp_path: Path) -> AsyncIterator[list[str]]:
    """The callback URLs of two receivers on the database at ``url``."""
    if mode == "apps":
        a, b = Store(url), Store(url)
        a.migrate()
        b.migrate()  # a second migration of the same database is a no-op
        try:
            async with running(a) as rx_a, running(b) as rx_b:
                yield [rx_a.url("callbacks"), rx_b.url("callbacks")]
        finally:
            a.close()
            b.close()
        return
    config = tmp_path / "formsync.toml"
    config.write_text(f'[receiver]\ncallback_secrets = ["{CB_SECRET}"]\n')
    with contextlib.ExitStack() as stack:
        procs = [stack.enter_context(receive_process(config, tmp_path, db=url, name=f"receive-{i}")) for i in range(2)]
        yield [events_url + "/callbacks" for _, events_url in procs]


def _empty_database(request: pytest.FixtureRequest, database: str) -> str:
    """The URL of an empty database of kind ``database``."""
    if database == "mysql":
        return str(request.getfixturevalue("mysql_database"))  # a fresh database per test
    url = str(request.getfixturevalue("pg_database"))
    with pg_connect(url.rsplit("/", 1)[1]) as conn:  # each mode starts on an empty schema
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return url


@pytest.mark.slow
@pytest.mark.parametrize("database", ["postgresql", "mysql"])
@pytest.mark.parametrize("mode", ["apps", "processes"])
async def test_two_receivers_on_one_database_store_each_event_once(mode: str, database: str, tmp_path: Path,
                                                                   request: pytest.FixtureRequest) -> None:
    url = _empty_database(request, database)
    events = [e for i in range(COMPLETED) for e in completion_events(i)] + [cancel_event(i) for i in range(CANCELED)]
    bodies = {e["id"]: encode(e) for e in events}
    rng = random.Random(SEED)
    order_a, order_b = list(bodies), list(bodies)
    rng.shuffle(order_a)
    rng.shuffle(order_b)
    async with two_receivers(mode, url, tmp_path) as (url_a, url_b), aiohttp.ClientSession() as http:
        semaphore = asyncio.Semaphore(CONCURRENCY)

        async def deliver(url: str, eid: str) -> tuple[str, str]:
            async with semaphore, http.post(url, data=bodies[eid], headers=signed(bodies[eid])) as resp:
                answer = await resp.json()
                assert resp.status == 200, answer
                return eid, answer["status"]

        # Interleaved: both receivers get every event, at the same time, in their own orders.
        tasks = [deliver(url, eid) for pair in zip(order_a, order_b, strict=True)
                 for url, eid in ((url_a, pair[0]), (url_b, pair[1]))]
        outcomes = await asyncio.gather(*tasks)
    store_a = Store(url)
    try:
        assert_each_event_once(store_a, events, bodies, outcomes, mode)
    finally:
        store_a.close()


def assert_each_event_once(store_a: Store, events: list[dict[str, Any]], bodies: dict[str, bytes], outcomes: list[tuple[str, str]],
          mode: str) -> None:
    per_event: dict[str, Counter[str]] = {}
    for eid, status in outcomes:
        per_event.setdefault(eid, Counter())[status] += 1
    assert all(c == Counter(stored=1, duplicate=1) for c in per_event.values()), \
        {k: v for k, v in per_event.items() if v != Counter(stored=1, duplicate=1)}

    counts = table_counts(store_a)
    assert counts["formsync_events"] == len(events)
    assert counts["formsync_submissions"] == COMPLETED
    assert counts["formsync_requests"] == COMPLETED + CANCELED
    assert sorted(e.id for e in rows(store_a, RawEvent)) == sorted(bodies)

    subs = {s.id: s for s in rows(store_a, SubmissionRow)}
    answers: dict[str, dict[str, Any]] = {}
    for sub in subs.values():  # the long form, as export derives it
        answers[sub.id] = {a[1]: json.loads(a[5]) for a in answer_tuples(sub.id, sub.answers, sub.display)}
    for i in range(COMPLETED):
        newest = completion_events(i)[-1]
        sub = subs[f"sub_c{i}"]
        assert (sub.edit_count, sub.last_event_id, sub.request_id) == (2, newest["id"], f"req_c{i}"), sub
        assert sub.answers == newest["data"]["answers"] == answers[sub.id]
    reqs = {r.id: r for r in rows(store_a, RequestRow)}
    assert all(reqs[f"req_c{i}"].status == "completed" and reqs[f"req_c{i}"].submission_id == f"sub_c{i}"
               for i in range(COMPLETED))
    assert all(reqs[f"req_x{i}"].status == "canceled" and reqs[f"req_x{i}"].cancel_reason == "Withdrawn"
               for i in range(CANCELED))
    report_figures("two receivers on one database", mode=mode, events=len(events), deliveries=len(outcomes),
                   stored=sum(c["stored"] for c in per_event.values()),
                   duplicates_answered=sum(c["duplicate"] for c in per_event.values()),
                   duplicate_rows=counts["formsync_events"] - len(events))
