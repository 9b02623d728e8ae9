"""The pipelines at scale and under rate limits, against a real sandbox over loopback
HTTP with SQLite stores: a 500-row sheet with 5% bad rows, a 429 storm, and poll beside
other jobs of the same token, all counted on the server (``calls.list``). The sandbox's
window is shortened with ``limits.set windowMs`` so several full windows pass in seconds."""

from __future__ import annotations

import asyncio
import csv
import math
from collections import Counter
from pathlib import Path

import pytest

from connector.client.rpc import FormClient
from connector.store import Store
from pipelines.outreach import run_outreach
from pipelines.sync.poll import poll_once
from pipelines.sync.submissions import sync_form
from tests.conftest import Sandbox
from tests.pipelines.test_poll_sync import FAST, create_pending

pytestmark = pytest.mark.slow

TOPICS = ["Sales", "support", "OTHER"]


def new_store(path: Path) -> Store:
    s = Store(f"sqlite:///{path}")
    s.migrate()
    return s


def good_row(i: int) -> dict[str, str]:
    return {"externalId": f"r-{i}", "name": f"Person {i}", "email": f"p{i}@example.test",
            "topic": TOPICS[i % 3], "message": f"hello {i}", "readonly": "name" if i % 5 == 0 else "",
            "expiresAt": ""}


def write_sheet(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(good_row(0)))
        w.writeheader()
        w.writerows(rows)
    return path


async def creates_on_server(sandbox: Sandbox, since: int = 0) -> list[int]:
    items = (await sandbox.helper("calls.list", {"method": "requests.create", "since": since})).data["items"]
    return [int(i["at"]) for i in items]


async def external_ids_on_server(client: FormClient, form: str) -> Counter[str]:
    return Counter([r.externalId async for r in client.iter_requests(form_id=form) if r.externalId])


def most_in_window(times: list[int], window_ms: int) -> int:
    """The largest number of ``times`` in any window ``(t - window, t]``, as the service counts."""
    times = sorted(times)
    return max((sum(1 for u in times if t - window_ms < u <= t) for t in times), default=0)


async def test_500_rows_with_5_percent_bad_report_each_and_send_the_good_ones_exactly_once(
        sandbox: Sandbox, tmp_path: Path) -> None:
    assert (await sandbox.helper("limits.set", FAST)).ok
    form = sandbox.pro.forms["Contact"]
    rows = [good_row(i) for i in range(500)]
    bad: dict[int, tuple[str, str, str]] = {}  # sheet row number -> (column, problem part, accepted part)
    for n, i in enumerate(range(7, 500, 20)):  # 25 bad rows (5%), four kinds in turn
        kind = n % 4
        if kind == 0:
            rows[i]["topic"] = "Billing"
            bad[i + 2] = ("topic", "'Billing' is not an option of topic", "Sales (sales)")
        elif kind == 1:
            rows[i]["readonly"] = "message"
            rows[i]["message"] = ""
            bad[i + 2] = ("readonly", "readonly key 'message' is not prefilled", "name")
        elif kind == 2:
            rows[i]["expiresAt"] = "next week"
            bad[i + 2] = ("expiresAt", "'next week' is not a date or time", "ISO date")
        else:
            rows[i]["externalId"] = "r-0"
            bad[i + 2] = ("externalId", "same row identity as row 2", "one row per externalId")
    assert len(bad) == 25
    sheet = write_sheet(tmp_path / "big.csv", rows)
    store = new_store(tmp_path / "s.db")
    report_path = tmp_path / "report.csv"
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        rep = await run_outreach(fc, store, sheet, form, job="big", report_path=report_path)
        assert (rep.rows, rep.sent, rep.invalid, rep.failed, rep.changed) == (500, 475, 25, 0, 0)
        with report_path.open() as fh:
            lines = list(csv.DictReader(fh))
        assert list(lines[0]) == ["row", "column", "problem", "accepted"]
        assert [int(ln["row"]) for ln in lines] == sorted(bad), "one line per bad row, in sheet order"
        for ln in lines:
            column, problem, accepted = bad[int(ln["row"])]
            assert ln["column"] == column and problem in ln["problem"] and accepted in ln["accepted"], ln
        sent_ids = {r["externalId"] for i, r in enumerate(rows) if i + 2 not in bad}
        on_server = await external_ids_on_server(fc, form)
        assert set(on_server) == sent_ids and set(on_server.values()) == {1}, "every good row once, no bad row"
        creates = await creates_on_server(sandbox)
        assert len(creates) == 475

        again = await run_outreach(fc, store, sheet, form, job="big", report_path=report_path)
        assert (again.sent, again.skipped_existing, again.invalid) == (0, 475, 25)
        assert len(await creates_on_server(sandbox)) == 475, "the second run made no create"
        assert len(list(csv.DictReader(report_path.open()))) == 25
    store.close()


async def test_a_429_storm_loses_no_row_and_duplicates_none(sandbox: Sandbox, tmp_path: Path) -> None:
    # The service admits 4 creates per 400 ms; the client believes it may send 10000 a
    # minute, so almost every create after the 4th of a window is refused and waited out.
    assert (await sandbox.helper("limits.set", {"callsPerMinute": 10000, "createsPerMinute": 4,
                                                "windowMs": 400})).ok
    form = sandbox.pro.forms["Contact"]
    rows = [good_row(i) for i in range(24)]
    sheet = write_sheet(tmp_path / "storm.csv", rows)
    store = new_store(tmp_path / "s.db")
    # A client that gives up at once on RATE_LIMITED: the refused rows fail, nothing is lost.
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000, creates_per_minute=10000,
                          max_retries=0) as fc:
        first = await run_outreach(fc, store, sheet, form, job="storm", report_path=tmp_path / "r.csv")
        assert fc.stats["rate_limited"] == first.failed > 0 and first.sent + first.failed == 24
        assert "rate limit" in (tmp_path / "r.csv").read_text().lower(), "the failed rows are in the report"
    # A client that waits retryAfterMs: the rest go out through the storm.
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000, creates_per_minute=10000,
                          max_retries=20) as fc:
        second = await run_outreach(fc, store, sheet, form, job="storm", report_path=tmp_path / "r.csv")
        assert fc.stats["rate_limited"] > 0, "the storm went on"
        assert (second.sent, second.skipped_existing, second.failed) == (first.failed, first.sent, 0)
        on_server = await external_ids_on_server(fc, form)
    assert set(on_server) == {r["externalId"] for r in rows} and set(on_server.values()) == {1}
    creates = await creates_on_server(sandbox)
    assert len(creates) == 24, "each row was created once: refused creates are not counted"
    # A create's stored time trails its admission by its handling (a few ms, more on a busy
    # machine): windows 50 ms short of the limit's keep that jitter from counting a fifth.
    assert most_in_window(creates, 350) <= 4
    store.close()


async def test_poll_beside_other_jobs_of_the_same_token_stays_within_the_budget(
        sandbox: Sandbox, tmp_path: Path) -> None:
    assert (await sandbox.helper("limits.set", FAST)).ok
    form = sandbox.pro.forms["Contact"]
    poll_store, sync_store, out_store = (new_store(tmp_path / f"{n}.db") for n in ("poll", "sync", "out"))
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        pending = await create_pending(fc, poll_store, form, 150)
    for i in range(140):
        assert (await sandbox.helper("submissions.create", {"formId": form, "answers": {
            "name": f"S {i}", "email": f"s{i}@example.test"}})).ok
    sheet = write_sheet(tmp_path / "more.csv", [good_row(1000 + i) for i in range(8)])

    # 12 calls per second, in a 1 s window: three jobs of one token need about 19 calls.
    window_ms, limit = 1000, 12
    assert (await sandbox.helper("limits.set", {"callsPerMinute": limit, "createsPerMinute": limit,
                                                "windowMs": window_ms})).ok
    since = int((await sandbox.helper("clock.get")).data["now"])
    options = {"calls_per_minute": limit, "creates_per_minute": limit, "rate_window": window_ms / 1000}
    async with FormClient(sandbox.base_url, sandbox.pro.token, **options) as poller, \
            FormClient(sandbox.base_url, sandbox.pro.token, **options) as syncer, \
            FormClient(sandbox.base_url, sandbox.pro.token, **options) as sender:
        assert poller.pacer is syncer.pacer is sender.pacer, "one token, one budget"
        polled, synced, sent = await asyncio.wait_for(asyncio.gather(
            poll_once(poller, poll_store),
            sync_form(syncer, sync_store, form),
            run_outreach(sender, out_store, sheet, form, job="beside",
                         report_path=tmp_path / "r.csv")), timeout=60)
        refused = poller.stats["rate_limited"] + syncer.stats["rate_limited"] + sender.stats["rate_limited"]
    items = (await sandbox.helper("calls.list", {"since": since})).data["items"]
    times = [int(i["at"]) for i in items]
    assert len(times) == polled.calls + synced.calls + 9 > limit, "more calls than one window holds"
    assert most_in_window(times, window_ms) <= limit, "no window of the service saw more than the budget"
    assert refused == 0, "the shared pacer, not the service, held the jobs back"
    assert polled.calls <= math.ceil(len(pending) / 100) + 1 and polled.still_pending == 150
    assert synced.fetched == 143 and sent.sent == 8
    for s in (poll_store, sync_store, out_store):
        s.close()
