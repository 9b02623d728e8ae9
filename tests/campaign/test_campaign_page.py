"""The campaign page says what a campaign owner asks first: open, or closed when and why;
which form (by name); what became of every sheet row (rejected and suppressed ones too,
any state ``RunCounts`` holds); and a chart whose axes are labelled, with one y label and
a legend. The pure rules on fixed inputs; the page in real Chromium, from fixed figures
and from a job sent to, and closed on, a real sandbox over loopback HTTP."""

from __future__ import annotations

import asyncio
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from connector.client.rpc import FormClient
from connector.store import Store
from connector.store._campaign import CampaignRow
from pipelines.campaign import act, read_campaign
from pipelines.campaign.funnel import Closed, closed, cumulative_completions, funnel, rounds
from pipelines.campaign.page import campaign_page
from pipelines.cli import app
from pipelines.outreach import run_outreach
from pipelines.outreach.counts import RunCounts, row_states
from tests.conftest import Sandbox

from .png import pixels

T0 = 1_780_000_000_000
MIN = 60_000


class WithHeld(RunCounts):
    """The counts as a later version may hold them: one more row state."""

    held_back: int = 0


def _row(n: int, status: str | None, **kw: Any) -> CampaignRow:
    rid = None if status is None else f"req_{n}"
    return CampaignRow(f"ext:{n}", n, "sent" if rid else "pending", rid, status=status, created_at=T0,
                       delivery_status="sent" if rid else None, **kw)


ROWS = [_row(2, "completed", completed_at=T0 + 10 * MIN), _row(3, "completed", completed_at=T0 + 90 * MIN),
        _row(4, "canceled", canceled_at=T0 + 120 * MIN, cancel_reason="survey closed"),
        _row(5, "canceled", canceled_at=T0 + 120 * MIN, cancel_reason="survey closed"),
        _row(6, "completed", completed_at=T0 + 100 * MIN)]
RECORDED = [{"kind": "remind", "at": T0 + 60 * MIN, "done": 3}, {"kind": "close", "at": T0 + 120 * MIN, "done": 2}]


def test_a_campaign_is_closed_by_its_close_round_with_its_requests_reason() -> None:
    assert closed(RECORDED[:1], ROWS) is None
    assert closed(RECORDED, ROWS) == Closed(at=T0 + 120 * MIN, reason="survey closed")
    assert closed([{"kind": "close", "at": T0}], ROWS[:2]) == Closed(at=T0, reason=None)


def test_every_row_state_is_listed_in_words_a_new_one_too() -> None:
    counts = WithHeld(rows=10, invalid=2, sent=5, suppressed=1, left=1, held_back=1)
    assert row_states(counts) == [("rejected", 2), ("suppressed", 1), ("sent by an earlier run", 0),
                                  ("changed since sent, not sent again", 0), ("sent", 5),
                                  ("refused by the service", 0), ("left to send", 1), ("held back", 1)]


def _page() -> str:
    f = funnel("spring", ROWS)
    return campaign_page(f, "form_abc", rounds(ROWS, [(T0 + 60 * MIN, 3)]), cumulative_completions(ROWS),
                         T0 + 130 * MIN, form_name="Spring <survey>", closed=closed(RECORDED, ROWS),
                         counts=WithHeld(rows=8, invalid=2, sent=5, suppressed=1))


def test_the_page_names_the_form_and_escapes_what_it_shows() -> None:
    html = _page()
    assert "form Spring &lt;survey&gt; (form_abc)" in html and "<survey>" not in html
    assert "<script" not in html and "src=" not in html and "href=" not in html
    still_open = campaign_page(funnel("spring", ROWS[:2]), "form_abc", [], [], T0)
    assert '<p class="state open"><b>Open</b>' in still_open and "form form_abc ·" in still_open
    assert "No run of this job has recorded its rows yet." in still_open


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _chart_end(html: str) -> tuple[str, float]:
    """The time the chart's x axis ends at, and where its line ends (x)."""
    end = re.search(r'text-anchor="end">([0-9: -]+)</text><text class="axis"', html)
    line = re.search(r'<polyline [^>]* points="([^"]+)"', html)
    assert end is not None and line is not None, html
    return end.group(1), float(line.group(1).split()[-1].split(",")[0])


def test_the_chart_runs_to_the_close_or_the_as_of_whichever_is_later() -> None:
    # last answer T0+100 min, last reminder T0+60, closed T0+120, as of T0+130
    assert _chart_end(_page()) == (_utc(T0 + 130 * MIN), 616.0)
    f, late_close = funnel("spring", ROWS), Closed(at=T0 + 200 * MIN)
    page = campaign_page(f, "form_abc", [], cumulative_completions(ROWS), T0 + 150 * MIN, closed=late_close)
    assert _chart_end(page) == (_utc(T0 + 200 * MIN), 616.0)


@pytest.mark.browser
async def test_the_page_in_chromium_says_its_state_rows_and_chart(page: Any, tmp_path: Path) -> None:
    html = tmp_path / "spring.html"
    html.write_text(_page(), encoding="utf-8")
    await page.goto(html.as_uri())
    assert await page.locator(".sub").first.inner_text() == "form Spring <survey> (form_abc) · as of 2026-05-28 22:36 UTC"
    assert await page.locator(".state").inner_text() == (
        "Closed 2026-05-28 22:26 UTC: survey closed; its pending requests were canceled.")
    rows = [r.split("\t") for r in await page.locator("table.rows tr").all_inner_texts()]
    assert ["rejected", "2"] in rows and ["suppressed", "1"] in rows and rows[-1] == ["sheet rows", "8"]
    chart = page.locator('svg[aria-label="completed responses over time"]')
    axes = await chart.locator("text.axis").all_text_contents()
    assert axes == ["responses", "time (UTC)"]  # one y label, one x label
    assert await chart.locator(".legend text").all_text_contents() == [
        "completed responses", "requests sent (5)", "reminder round"]
    box = await chart.bounding_box()
    assert box is not None and box["width"] == 640
    shot = tmp_path / "campaign-page.png"
    await page.screenshot(path=str(shot), full_page=True)
    _, _, drawn = pixels(shot)
    colours = set(drawn)
    assert (0xEC, 0xEE, 0xF2) in colours and (0x2E, 0x9E, 0x6B) in colours  # the closed badge, the line
    shutil.copy(shot, Path("/tmp") / "formsync-campaign-page.png")


def _formsync(*args: str, env: dict[str, str]) -> Any:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.browser
async def test_a_closed_job_on_the_sandbox_shows_closed_named_and_every_row(sandbox: Sandbox, tmp_path: Path,
                                                                           page: Any) -> None:
    await sandbox.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.migrate()
    sheet = tmp_path / "spring.csv"
    sheet.write_text("externalId,name,email\nc-1,Ada,ada@example.test\nc-2,Bo,not-an-address\n"
                     "c-3,Cy,cy@example.test\n")
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        sent = await run_outreach(fc, store, sheet, sandbox.pro.forms["Contact"], job="spring", delivery="email",
                                  report_path=tmp_path / "r.csv")
        assert (sent.sent, sent.invalid) == (2, 1)
        assert read_campaign(store, "spring").closed is None
        await sandbox.helpers.clock_advance(3 * 86_400_000)
        assert (await act(fc, store, "spring", "close", reason="survey closed")).done == 2
    c = read_campaign(store, "spring")
    assert c.closed is not None and c.closed.reason == "survey closed"
    config = tmp_path / "formsync.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/s.db"\n[service]\nbase_url = "{sandbox.base_url}"\n')
    env = {"FORMSYNC_SERVICE__TOKEN": sandbox.pro.token}
    html = tmp_path / "spring.html"
    await asyncio.to_thread(_formsync, "campaign", "page", "spring", "--out", str(html), "--config", str(config),
                            env=env)
    await page.goto(html.as_uri())
    assert (await page.locator(".sub").first.inner_text()).startswith(
        f"form Contact ({sandbox.pro.forms['Contact']}) · as of ")
    state = await page.locator(".state").inner_text()
    assert state.startswith("Closed ") and state.endswith(": survey closed; its pending requests were canceled.")
    rows = [r.split("\t") for r in await page.locator("table.rows tr").all_inner_texts()]
    assert ["rejected", "1"] in rows and ["sent", "2"] in rows and rows[-1] == ["sheet rows", "3"]
