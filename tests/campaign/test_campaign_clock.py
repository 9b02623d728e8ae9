"""One clock and commands that speak, on a real sandbox over loopback HTTP and its test
clock, with a SQLite store: the sandbox's ``Date`` is its test clock and the client reads
the service's time from it; ``campaign remind --idle 3d`` after the clock moved 3 days
finds the idle requests; a request reminded within 10 minutes is skipped without a
call; a dry run, a closed campaign and a free plan's refusal say so in words (JSON with
``--json``); the page is as of the service's time; a scheduled close reads its ``at`` on
the service's clock, and a scheduled remind that can only skip is recorded ``skipped``."""

from __future__ import annotations

import asyncio
import csv
import json
import re
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from connector.client._clock import service_now
from connector.client.rpc import FormClient
from connector.config.settings import load_settings
from connector.store import Store
from pipelines.campaign import read_campaign
from pipelines.cli import app
from pipelines.operate.scheduler import serve
from pipelines.outreach import run_outreach
from tests.conftest import Sandbox
from tests.pipelines.test_scheduler import runs, wait_for

DAY = 86_400_000
MINUTE = 60_000


async def formsync(*args: str, token: str) -> Any:
    """The formsync command in a worker thread (it runs its own event loop)."""
    env = {"COLUMNS": "200", "FORMSYNC_SERVICE__TOKEN": token}
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env=env)


async def sent_job(sandbox: Sandbox, tmp_path: Path, ws: str = "pro", n: int = 3) -> tuple[Store, Path]:
    """A store whose job ``spring`` sent ``n`` requests of workspace ``ws``, and its config."""
    await sandbox.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
    db = f"sqlite:///{tmp_path}/store.db"
    store = Store(db)
    store.migrate()
    sheet = tmp_path / "spring.csv"
    with sheet.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["externalId", "name", "email"])
        w.writerows([[f"c-{i}", f"Person {i}", f"p{i}@example.test"] for i in range(n)])
    workspace = sandbox.workspaces[ws]
    async with FormClient(sandbox.base_url, workspace.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        assert (await run_outreach(fc, store, sheet, workspace.forms["Contact"], job="spring",
                                   report_path=tmp_path / "r.csv")).sent == n
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "{db}"\n[service]\nbase_url = "{sandbox.base_url}"\n'
                   "calls_per_minute = 10000\ncreates_per_minute = 10000\n")
    return store, cfg


async def test_the_sandbox_date_is_its_test_clock_and_the_client_reads_it(sandbox: Sandbox) -> None:
    await sandbox.helpers.clock_advance(3 * DAY)
    service = (await sandbox.helpers.clock_get()).now_ms
    async with sandbox.http.get(f"{sandbox.base_url}/healthz") as resp:
        said = int(parsedate_to_datetime(resp.headers["Date"]).timestamp() * 1000)
    assert service - 1000 <= said <= service + 1000  # the test clock, 3 days ahead of this machine's
    # As the hosted service is read (no sandbox helper): the Date of one HEAD, whole seconds.
    dated = await service_now(sandbox.base_url)
    assert service - 1000 <= dated <= (await sandbox.helpers.clock_get()).now_ms
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        before = (await sandbox.helpers.clock_get()).now_ms
        exact = await fc.service_now()  # a sandbox on this machine: its test clock, to the millisecond
        assert before <= exact <= (await sandbox.helpers.clock_get()).now_ms and fc.stats["calls"] == 0
        await sandbox.helpers.clock_advance(DAY)
        await fc.list_workspaces()  # an answer whose Date disagrees moves the client's idea of the time
        assert (fc.service_clock.known_now() or 0) >= before + DAY - 1000


async def test_remind_speaks_on_the_service_clock(sandbox: Sandbox, tmp_path: Path) -> None:
    store, cfg = await sent_job(sandbox, tmp_path)
    token = sandbox.pro.token
    none_idle = await formsync("campaign", "remind", "spring", "--idle", "3d", "--config", str(cfg), token=token)
    assert none_idle.exit_code == 0, none_idle.output
    assert "done: reminded 0 of 0 pending requests; 3 not idle long enough, left out" in none_idle.output

    await sandbox.helpers.clock_advance(3 * DAY)
    dry = await formsync("campaign", "remind", "spring", "--idle", "3d", "--dry-run", "--config", str(cfg),
                         token=token)
    assert dry.exit_code == 0 and "done: would remind 3 of 3 pending requests (a dry run: nothing was called)" \
        in dry.output, dry.output
    dry_json = json.loads((await formsync("campaign", "remind", "spring", "--idle", "3d", "--dry-run", "--json",
                                           "--config", str(cfg), token=token)).stdout)
    assert (dry_json["done"], dry_json["would_do"], dry_json["calls"]) == (0, 3, 0)

    idle = await formsync("campaign", "remind", "spring", "--idle", "3d", "--config", str(cfg), token=token)
    assert idle.exit_code == 0, idle.output
    lines = idle.output.splitlines()
    assert lines[0].startswith("campaign spring: 3 pending requests as of ") and "(the service's time)" in lines[0]
    assert _day(lines[0]) == (await sandbox.helpers.clock_get()).now_ms // DAY  # the service's date, 3 days ahead
    assert lines[-1] == "done: reminded 3 of 3 pending requests"
    assert {r.last_reminded_at is not None for r in store.campaign.rows("spring")} == {True}

    calls_before = len((await sandbox.helpers.calls_list()).items)
    again = await formsync("campaign", "remind", "spring", "--json", "--config", str(cfg), token=token)
    report = json.loads(again.stdout)
    assert (report["done"], report["too_recent"], report["refused"]) == (0, 3, {})
    remind_calls = [c for c in (await sandbox.helpers.calls_list()).items[calls_before:]
                    if c.method == "requests.remind"]
    assert remind_calls == [], "a request reminded within 10 minutes costs no call"

    await sandbox.helpers.clock_advance(10 * MINUTE + 2000)
    later = await formsync("campaign", "remind", "spring", "--config", str(cfg), token=token)
    assert later.output.splitlines()[-1] == "done: reminded 3 of 3 pending requests", later.output


def _day(line: str) -> int:
    m = re.search(r"as of (\d{4}-\d\d-\d\d)", line)
    assert m is not None, line
    from datetime import UTC, datetime

    return int(datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC).timestamp() * 1000) // DAY


async def test_close_then_remind_says_the_campaign_is_closed_and_the_page_is_as_of_the_service(
        sandbox: Sandbox, tmp_path: Path) -> None:
    store, cfg = await sent_job(sandbox, tmp_path)
    token = sandbox.pro.token
    await sandbox.helpers.clock_advance(5 * DAY)
    closed = await formsync("campaign", "close", "spring", "--reason", "survey closed", "--config", str(cfg),
                            token=token)
    assert closed.exit_code == 0, closed.output
    assert "done: canceled 3 of 3 pending requests; the campaign is closed" in closed.output
    remind = await formsync("campaign", "remind", "spring", "--config", str(cfg), token=token)
    assert remind.exit_code == 0, remind.output
    said = remind.output.splitlines()[-1]
    assert re.fullmatch(r"done: nothing to remind: the campaign spring was closed on \d{4}-\d\d-\d\d \d\d:\d\d UTC "
                        r"\(survey closed\) and no request is pending", said), said

    html = tmp_path / "spring.html"
    page = await formsync("campaign", "page", "spring", "--out", str(html), "--config", str(cfg), token=token)
    assert page.exit_code == 0, page.output
    as_of = (await sandbox.helpers.clock_get()).now_ms
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(as_of / 1000, UTC).strftime("%Y-%m-%d")
    assert f"as of {stamp}" in html.read_text() and f"wrote {html} as of {stamp}" in page.output
    funnel = await formsync("campaign", "funnel", "spring", "--config", str(cfg), token=token)
    line = read_campaign(store, "spring").funnel.line()
    assert funnel.output.splitlines()[-1] == f"done: campaign spring: {line}", funnel.output


async def test_a_free_plan_refusal_is_one_line_and_exit_1(sandbox: Sandbox, tmp_path: Path) -> None:
    _store, cfg = await sent_job(sandbox, tmp_path, ws="free", n=2)
    result = await formsync("campaign", "remind", "spring", "--config", str(cfg), token=sandbox.free.token)
    assert result.exit_code == 1, result.output
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "reminders need the Pro plan or higher" in error[0], result.output
    assert "PLAN_REQUIRED" in error[0] and "0 of 2 done" in error[0] and sandbox.free.token not in result.output
    assert "done:" not in result.output


@pytest.mark.slow  # the scheduler started: about 10 s
async def test_scheduled_close_on_the_service_clock_and_a_skipped_remind(sandbox: Sandbox, tmp_path: Path) -> None:
    store, cfg = await sent_job(sandbox, tmp_path)
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await fc.remind_request(store.campaign.rows("spring")[0].request_id or "")
    from datetime import UTC, datetime, timedelta

    at = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    cfg.write_text(cfg.read_text() + f'token = "{sandbox.pro.token}"\n'
                   '[[jobs]]\nid = "tick"\nkind = "poll"\ninterval_seconds = 1\n'
                   '[[jobs]]\nid = "remind"\nkind = "remind"\nafter = "tick"\nparams = { job = "spring" }\n'
                   f'[[jobs]]\nid = "close"\nkind = "close"\ninterval_seconds = 1\n'
                   f'params = {{ job = "spring", at = "{at}" }}\n')
    stop = asyncio.Event()
    task = asyncio.create_task(serve(load_settings(cfg), store, stop=stop))
    try:
        await wait_for(lambda: any(r.outcome == "skipped" for r in runs(store, "remind"))
                       and len(runs(store, "close")) >= 1, 40, "a skipped remind run and a close run")
        assert all(r.summary and "nothing yet" in r.summary for r in runs(store, "close"))
        await sandbox.helpers.clock_advance(2 * DAY)  # past `at` on the service's clock, not on this machine's
        await wait_for(lambda: any(r.summary and "canceled 3 of 3" in r.summary for r in runs(store, "close")),
                       40, "the close job closing on the service's clock")
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    first = sorted(runs(store, "remind"), key=lambda r: r.id or 0)
    assert first[0].outcome == "ok" and first[0].summary is not None
    assert first[0].summary.startswith("spring: reminded 2 of 3 pending requests; 1 refused (REMINDER_TOO_SOON 1)")
    skipped = next(r for r in first if r.outcome == "skipped")
    assert skipped.summary == ("spring: reminded 0 of 3 pending requests; 3 reminded less than 10 minutes ago, "
                               "skipped without a call; 1 calls")
