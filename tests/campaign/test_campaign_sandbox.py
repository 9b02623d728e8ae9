"""A whole campaign on a real sandbox over loopback HTTP, on its test clock, with a
SQLite store: send (with a suppressed address), invitations delivered and bounced,
recipients opening and answering on their pages, two reminder rounds that keep the
10-minute rule (a remind within it skips each request without a call), a close at the
deadline, then every output (the funnel command, ``formsync status``, the HTML page in Chromium and the campaign export in CSV, XLSX and
Parquet) giving the same counts."""

from __future__ import annotations

import asyncio
import csv
import json
import os
from pathlib import Path
from typing import Any

import aiohttp
import pandas as pd
import pytest
from typer.testing import CliRunner

from connector.client.rpc import FormClient
from connector.config.settings import OutreachSettings
from connector.store import Store
from formservice.sandbox.recipient import answer_request
from pipelines.campaign import act, read_campaign
from pipelines.cli import app
from pipelines.outreach import run_outreach
from pipelines.rules.contact import contact_rule
from tests.conftest import Sandbox
from tests.pages.test_pages_browser import ARTIFACTS

from .png import pixels

pytestmark = [pytest.mark.slow, pytest.mark.browser]

FAST = {"callsPerMinute": 10000, "createsPerMinute": 10000}
MINUTE = 60_000
DAY = 86_400_000
# 13 sheet rows: 9 reachable, 2 that bounce, one suppressed by file, one by the store's list.
EMAILS = [f"p{i}@example.test" for i in range(9)] + ["b0@bounce.test", "b1@bounce.test", "x@example.test",
                                                     "y@example.test"]


def write_sheet(path: Path, emails: list[str]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["externalId", "name", "email", "topic", "metadata.team"])
        for i, email in enumerate(emails):
            w.writerow([f"c-{i}", f"Person {i}", email, "Sales", f"team {i % 3}"])
    return path


async def answer(http: aiohttp.ClientSession, store: Store, job: str, rows: range) -> None:
    by_number = {r.row_number: r for r in store.campaign.rows(job)}
    for n in rows:
        got = await answer_request(http, by_number[n + 2].url or "", {"topic": "support", "message": f"row {n}"})
        assert got.thanked, got.errors


async def run_cli(args: list[str], env: dict[str, str]) -> Any:
    """The command in a worker thread (it runs its own event loop; the sandbox runs in this one)."""
    result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
    assert result.exit_code == 0, result.output
    return result


async def test_a_whole_campaign_counts_agree_everywhere(sandbox: Sandbox, tmp_path: Path, page: Any) -> None:
    helpers = sandbox.helpers
    await helpers.limits_set(calls_per_minute=FAST["callsPerMinute"], creates_per_minute=FAST["createsPerMinute"])
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.migrate()
    form = sandbox.pro.forms["Contact"]
    sheet = write_sheet(tmp_path / "spring.csv", EMAILS)
    blocked = tmp_path / "do-not-contact.txt"
    blocked.write_text("# opted out\nX@Example.test\n")
    store.campaign.suppress(["y@example.test"], "asked by phone")
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        sent = await run_outreach(fc, store, sheet, form, job="spring", delivery="email",
                                  report_path=tmp_path / "spring-report.csv",
                                  rule=contact_rule(store, OutreachSettings(suppression_file=blocked)))
        assert (sent.sent, sent.invalid, sent.suppressed) == (11, 0, 2)
        report = (tmp_path / "spring-report.csv").read_text()
        assert "suppressed (listed in do-not-contact.txt)" in report and "suppressed (listed: asked by phone)" in report

        await helpers.clock_advance(MINUTE)  # the invitations go out; bounce.test bounces
        await answer(sandbox.http, store, "spring", range(0, 4))
        async with sandbox.http.get(store.campaign.rows("spring")[7].url or "") as resp:  # only looks
            assert resp.status == 200

        # The poll before the reminders sees the two bounces and cancels their requests.
        first = await act(fc, store, "spring", "remind")
        assert (first.candidates, first.done, first.refused, first.suppressed) == (5, 5, {}, 0)
        bounced = [r for r in store.campaign.rows("spring") if r.delivery_status == "bounced"]
        assert [r.status for r in bounced] == ["canceled", "canceled"]
        again = await act(fc, store, "spring", "remind")  # within 10 minutes: each row skipped, no call
        assert (again.done, again.too_recent, again.refused, again.calls) == (0, 5, {}, 1)

        await helpers.clock_advance(11 * MINUTE)
        await answer(sandbox.http, store, "spring", range(4, 6))
        second = await act(fc, store, "spring", "remind")
        assert (second.candidates, second.done, second.not_pending) == (3, 3, 0)
        await helpers.clock_advance(MINUTE)
        await answer(sandbox.http, store, "spring", range(6, 7))

        await helpers.clock_advance(7 * DAY)  # the deadline
        closed = await act(fc, store, "spring", "close", reason="survey closed")
        assert (closed.candidates, closed.done) == (2, 2)
        assert (await act(fc, store, "spring", "close")).candidates == 0  # idempotent
        service = [r async for r in fc.iter_requests(form_id=form, include_test=True)]
        service = [r for r in service if r.externalId and r.externalId.startswith("c-")]

        again = await run_outreach(fc, store, sheet, form, job="spring", delivery="email",
                                   report_path=tmp_path / "again-report.csv",
                                   rule=contact_rule(store, OutreachSettings(suppression_file=blocked)))
        assert (again.sent, again.skipped_existing, again.suppressed) == (0, 11, 2), "sent rows are not suppressed"
        # Bounced addresses stay out of the next job.
        later = await run_outreach(fc, store, write_sheet(tmp_path / "autumn.csv", EMAILS[8:11]), form,
                                   job="autumn", delivery="email", report_path=tmp_path / "autumn-report.csv")
        assert (later.sent, later.suppressed) == (1, 2)
        assert (tmp_path / "autumn-report.csv").read_text().count("suppressed (bounced)") == 2

    c = read_campaign(store, "spring")
    f = c.funnel
    assert (f.rows, f.sent, f.rejected, f.suppressed) == (13, 11, 0, 2), "every sheet row, in one state"
    assert (f.delivered, f.bounced) == (9, 2)
    assert (f.completed, f.canceled, f.pending, f.expired) == (7, 4, 0, 0)
    assert (f.opened, f.started) == (8, 7)
    assert f.reminders_sent == sum(r.remindersSent for r in service) >= 8
    assert f.completed == sum(r.status == "completed" for r in service)
    assert f.median_answer_seconds is not None and f.response_rate == pytest.approx(7 / 11)
    assert [(r.name, r.reminded, r.completed_after) for r in c.rounds] == [
        ("invitations", 0, 4), ("reminder 1", 5, 2), ("reminder 2", 3, 1)]

    config = tmp_path / "formsync.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/s.db"\n[service]\nbase_url = "{sandbox.base_url}"\n')
    env = {"FORMSYNC_SERVICE__TOKEN": sandbox.pro.token, "COLUMNS": "80"}
    shown = json.loads((await run_cli(["campaign", "funnel", "spring", "--json", "--config", str(config)], env)).stdout)
    assert shown == f.model_dump()
    status = (await run_cli(["status", "--config", str(config)], env)).stdout
    assert f.line() in status and all(len(line) <= 80 for line in status.splitlines())

    for suffix in ("csv", "xlsx", "parquet"):
        out = tmp_path / f"spring-campaign.{suffix}"
        await run_cli(["campaign", "export", "spring", "--out", str(out), "--config", str(config)], env)
        table = {"csv": pd.read_csv, "xlsx": pd.read_excel, "parquet": pd.read_parquet}[suffix](out)
        assert len(table) == 13 and list(table.columns[:6]) == ["row", "externalId", "name", "email", "topic", "metadata.team"]
        counts = table["status"].value_counts().to_dict()
        assert counts == {"completed": f.completed, "canceled": f.canceled, "suppressed": f.suppressed}, suffix
        assert table["opened_at"].notna().sum() == 8 and table["answer.message"].notna().sum() == f.completed

    html = tmp_path / "spring.html"
    await run_cli(["campaign", "page", "spring", "--out", str(html), "--config", str(config)], env)
    text = html.read_text()
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "") and "<script" not in text
    await page.goto(html.as_uri())
    kpis = await page.locator(".kpi b").all_inner_texts()
    assert kpis[:3] == [str(f.sent), str(f.completed), f"{f.response_rate:.0%}"]
    rounds = await page.locator("table.rounds tbody tr").all_inner_texts()
    assert [r.split("\t")[0] for r in rounds] == ["invitations", "reminder 1", "reminder 2"]
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "campaign-page.png"
    await page.screenshot(path=str(shot), full_page=True)
    width, height, drawn = pixels(shot)
    colours = set(drawn)
    assert height > 600 and len(colours) > 50  # text, bars and the line: not a blank page
    assert (0x2E, 0x9E, 0x6B) in colours and (0x3D, 0x6F, 0xD9) in colours  # the line and the first bar
    assert os.path.getsize(shot) > 20_000
