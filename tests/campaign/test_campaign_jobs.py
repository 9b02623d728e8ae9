"""The scheduled ``remind`` and ``close`` jobs, run by ``formsync run``'s scheduler against
a real sandbox: a close job before its date does nothing and says so; after it, it
cancels what is still pending, once; a remind job reminds, and a run that finds every
request reminded within the 10 minutes skips them without a call, recorded ``skipped``;
a remind job set to run more often than that is refused at start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from connector.config.settings import load_settings
from pipelines.operate.jobs import ConfigError
from pipelines.operate.scheduler import serve
from tests.conftest import Sandbox
from tests.pipelines.test_scheduler import runs, wait_for

from .test_campaign_clock import sent_job

pytestmark = pytest.mark.slow  # the scheduler started twice, each run a poll and calls: 10 s or more


async def test_scheduled_remind_and_close(sandbox: Sandbox, tmp_path: Path) -> None:
    store, cfg = await sent_job(sandbox, tmp_path)
    cfg.write_text(
        cfg.read_text() + f'token = "{sandbox.pro.token}"\n'
        '[[jobs]]\nid = "tick"\nkind = "poll"\ninterval_seconds = 1\n'
        '[[jobs]]\nid = "remind"\nkind = "remind"\nafter = "tick"\nparams = { job = "spring" }\n'
        '[[jobs]]\nid = "later"\nkind = "close"\ninterval_seconds = 1\nparams = { job = "spring", at = "2999-01-01" }\n')
    stop = asyncio.Event()
    task = asyncio.create_task(serve(load_settings(cfg), store, stop=stop))
    try:
        await wait_for(lambda: len(runs(store, "remind")) >= 2 and len(runs(store, "later")) >= 1
                       and all(r.outcome in ("ok", "skipped") for r in runs(store)), 40,
                       "two remind runs and a close run")
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    first, second = sorted(runs(store, "remind"), key=lambda r: r.id or 0)[:2]
    assert (first.outcome, first.summary) == ("ok", "spring: reminded 3 of 3 pending requests; 4 calls")
    assert (second.outcome, second.summary) == ("skipped", "spring: reminded 0 of 3 pending requests; 3 reminded "
                                                           "less than 10 minutes ago, skipped without a call; 1 calls")
    assert runs(store, "later")[0].summary == "spring: nothing yet: the campaign closes from " \
                                              "2999-01-01 00:00 UTC; 0 calls"

    cfg.write_text(cfg.read_text().replace("2999-01-01", "2020-01-01").replace('after = "tick"', 'interval_seconds = 1'))
    with pytest.raises(ConfigError, match=r"job 'remind' \(remind\): runs every 1 s, more often than the service "
                                          r"lets a request be reminded \(once per 10 minutes\); set interval_seconds "
                                          r"= 600 or more"):
        await serve(load_settings(cfg), store, stop=asyncio.Event())
    cfg.write_text(cfg.read_text().replace('kind = "remind"\ninterval_seconds = 1', 'kind = "remind"\n'
                                                                                  'interval_seconds = 3600'))
    stop = asyncio.Event()
    task = asyncio.create_task(serve(load_settings(cfg), store, stop=stop))
    try:
        await wait_for(lambda: len([r for r in runs(store, "later") if r.outcome == "ok" and r.summary
                                    and r.summary.startswith("spring: canceled")]) >= 2, 40,
                       "the close job ran twice after its date")
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    closing = [r.summary for r in sorted(runs(store, "later"), key=lambda r: r.id or 0) if r.summary
               and "nothing yet" not in r.summary]
    assert closing[0].startswith("spring: canceled 3 of 3 pending requests; the campaign is closed")
    assert closing[1].startswith("spring: canceled 0 of 0 pending requests; the campaign is closed on ")
    assert {r.status for r in store.campaign.rows("spring")} == {"canceled"}
