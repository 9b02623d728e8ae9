"""The pipelines against a sandbox that injects every kind of fault (``faults.set``: 429
bursts, 5xx, latency, connections cut mid-answer and answers dropped after the service
committed): outreach, poll and sync each finish their job with no row lost and no
request created twice, counted on the service's side."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from connector.client.rpc import FormClient
from connector.store import Store
from connector.store._tables import OutreachRow
from pipelines.outreach import run_outreach
from pipelines.sync.poll import poll_once
from pipelines.sync.submissions import sync_form
from tests.conftest import Sandbox
from tests.connector.test_faults import MIXED_RULES, QUICK, set_faults
from tests.pipelines.test_outreach import sheet_rows, write_csv
from tests.pipelines.test_poll_sync import create_pending, now_of, request_rows, submission_ids, submit

FAST = {"callsPerMinute": 10000, "createsPerMinute": 10000}
# Every kind of fault on a fixed cadence of call numbers: short jobs meet each kind too.
CADENCE: tuple[dict[str, Any], ...] = (
    {"kind": "rate_limited", "every": 3, "retryAfterMs": 5},
    {"kind": "error_5xx", "every": 4, "status": 502},
    {"kind": "reset", "every": 5},
    {"kind": "drop_after_commit", "every": 7},
    {"kind": "latency", "every": 2, "latencyMs": 10},
)
FIGURES: dict[str, Any] = {}  # per job: calls, retries, faults injected (printed with -s)


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[FormClient]:
    assert (await sandbox.helper("limits.set", FAST)).ok
    async with FormClient(sandbox.base_url, sandbox.pro.token, **QUICK) as fc:
        yield fc


async def faults_done(sandbox: Sandbox, client: FormClient, job: str) -> dict[str, int]:
    """Clear the plan, check it injected every kind of fault, and keep the figures."""
    view = (await sandbox.helper("faults.clear")).data
    injected = view["injected"]
    for kind, n in injected.items():
        assert n > 0, f"{job}: the plan injected no {kind}: {injected}"
    FIGURES[job] = {"calls": client.stats["calls"], "retries": client.stats["retries"], **injected}
    print(job, FIGURES[job])
    return injected


@pytest.mark.slow  # 100 rows through every fault kind: about 10-12 s
async def test_outreach_of_100_rows_under_every_fault_sends_each_row_exactly_once(
        sandbox: Sandbox, client: FormClient, store: Store, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    sheet = write_csv(tmp_path / "contacts.csv", sheet_rows(100, bad=False))
    await set_faults(sandbox, *MIXED_RULES, seed=31)
    report_path = tmp_path / "report.csv"
    report = await run_outreach(client, store, sheet, form, job="faulty", report_path=report_path)
    injected = await faults_done(sandbox, client, "outreach")
    assert (report.rows, report.sent, report.failed, report.invalid) == (100, 100, 0, 0)

    listed = [r async for r in client.iter_requests(form_id=form) if (r.externalId or "").startswith("c-")]
    assert sorted(r.externalId for r in listed) == sorted(f"c-{i}" for i in range(100))  # none lost, none twice
    with store.database.session() as s:
        rows = [(r.state, r.request_id) for r in s.exec(select(OutreachRow).where(OutreachRow.job_name == "faulty"))]
    assert len(rows) == 100 and {state for state, _ in rows} == {"sent"}
    assert {rid for _, rid in rows} == {r.id for r in listed}
    # A create whose answer was lost was sent again and found deduplicated: the service
    # saw more creates than rows, yet made one request per row.
    creates = (await sandbox.helper("calls.list", {"method": "requests.create"})).data["count"]
    assert creates > 100 and injected["drop_after_commit"] + injected["reset"] > 0

    again = await run_outreach(client, store, sheet, form, job="faulty", report_path=report_path)
    assert (again.sent, again.skipped_existing) == (0, 100)


async def test_poll_under_every_fault_stores_every_status_change(
        sandbox: Sandbox, client: FormClient, store: Store) -> None:
    form = sandbox.pro.forms["Contact"]
    ids = await create_pending(client, store, form, 40)
    done, gone = ids[:15], ids[15:25]
    answers = {"name": "Grace Hopper", "email": "grace@example.test", "topic": "sales"}
    for rid in done:
        assert (await sandbox.helper("requests.complete", {"requestId": rid, "answers": answers})).ok
    for rid in gone:
        assert (await sandbox.rpc("requests.cancel", {"requestId": rid})).ok
    now = await now_of(sandbox)
    client.stats.update(calls=0, retries=0)
    await set_faults(sandbox, *CADENCE)
    report = await poll_once(client, store, now_ms=now)
    await faults_done(sandbox, client, "poll")
    assert (report.pending_before, report.updated, report.completed, report.canceled) == (40, 25, 15, 10)
    rows = request_rows(store)
    assert all(rows[i].status == "completed" for i in done)
    assert all(got == answers for got, _ in store.requests.answers(done).values())
    assert all(rows[i].status == "canceled" for i in gone)
    assert all(rows[i].status == "pending" for i in ids[25:])


async def test_sync_under_every_fault_stores_every_submission_once(
        sandbox: Sandbox, client: FormClient, store: Store) -> None:
    form = sandbox.pro.forms["Contact"]
    made = {await submit(sandbox, form, f"Person {i}") for i in range(250)}
    client.stats.update(calls=0, retries=0)
    await set_faults(sandbox, *CADENCE)
    first = await sync_form(client, store, form)
    late = {await submit(sandbox, form, f"Late {i}") for i in range(3)}
    second = await sync_form(client, store, form)
    full = await sync_form(client, store, form, full=True)
    await faults_done(sandbox, client, "sync")
    assert first.fetched == 253  # the 250 and the seed's 3 completed
    assert second.fetched == 3 and full.fetched == 256
    assert made | late <= submission_ids(store, form)
    assert len(submission_ids(store, form)) == 256
