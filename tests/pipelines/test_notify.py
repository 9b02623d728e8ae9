"""Saying that something went wrong: the problems ``formsync status`` finds (pure), its exit
code 4, and notices sent to a real webhook on loopback and to a real command, by the
scheduler (a failed run, its stop) and by ``formsync status --notify``."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from typer.testing import CliRunner

from connector.config.settings import NotifySettings, load_settings
from connector.store import Store
from connector.store._ledger import PendingRow
from pipelines.cli import app
from pipelines.operate.health import problems
from pipelines.operate.notify import Notice, payload, send
from pipelines.operate.scheduler import serve
from pipelines.operate.status import JobStatus, OutreachProgress, SchedulerState, StatusReport
from pipelines.outreach.counts import RunCounts

NOW = 1_800_000_000_000
MIN = 60_000


def report(**kw: Any) -> StatusReport:
    return StatusReport(at=NOW, **kw)


# -- the problems (pure) -----------------------------------------------------------------------


def test_a_healthy_report_has_no_problem() -> None:
    alive = SchedulerState(holder="h:1", last_beat_at=NOW - 5000, alive=True)
    jobs = [JobStatus(id="s", kind="sync", schedule="every 60 s", last_outcome="ok")]
    assert problems(report(scheduler=alive, jobs=jobs)) == []
    # No scheduler ever ran here: the user may run jobs by hand; nothing to say.
    assert problems(report(jobs=jobs)) == []
    # A scheduler stopped, but no job is configured any more.
    assert problems(report(scheduler=SchedulerState(holder="h:1", last_beat_at=NOW - 10 * MIN))) == []
    # A scheduler stopped a minute ago: a restart, not yet a problem.
    assert problems(report(scheduler=SchedulerState(holder="h:1", last_beat_at=NOW - MIN), jobs=jobs)) == []


def test_a_stopped_scheduler_a_failed_job_and_a_stalled_outreach_are_each_one_problem() -> None:
    gone = SchedulerState(holder="h:1", last_beat_at=NOW - 125 * MIN, alive=False)
    jobs = [JobStatus(id="nightly", kind="export", schedule="cron 0 2 * * *", last_outcome="error"),
            JobStatus(id="s", kind="sync", schedule="every 60 s", last_outcome="ok")]
    outreach = [OutreachProgress(job="spring", form_id="f", counts=RunCounts(rows=10, sent=4, left=6), last_change_at=NOW - 20 * MIN),
                OutreachProgress(job="recent", form_id="f", counts=RunCounts(rows=10, sent=4, left=6), last_change_at=NOW - MIN),
                OutreachProgress(job="done", form_id="f", counts=RunCounts(rows=10, sent=10), last_change_at=NOW - 90 * MIN)]
    found = problems(report(scheduler=gone, jobs=jobs, outreach=outreach))
    assert [(p.kind, p.subject) for p in found] == [
        ("scheduler_stopped", "scheduler"), ("job_failed", "nightly"), ("outreach_stalled", "spring")]
    assert found[0].line() == ("attention: no scheduler is running for 2 configured job(s); the last one (h:1) "
                               "stopped beating 2 h ago; start one: formsync run --config FILE")
    assert found[2].message == "outreach spring: 6 row(s) not sent, nothing sent for 20 min; run it again to continue"


def test_an_outreach_is_not_stalled_while_a_scheduler_runs_it() -> None:
    alive = SchedulerState(holder="h:1", last_beat_at=NOW, alive=True)
    slow = [OutreachProgress(job="spring", form_id="f", counts=RunCounts(rows=9, left=9), last_change_at=NOW - 60 * MIN)]
    assert problems(report(scheduler=alive, outreach=slow)) == []


def test_the_payload_is_what_a_chat_webhook_shows() -> None:
    body = payload(Notice("job_failed", "nightly", "job nightly (export) failed: OSError: disk full"), host="db1",
                   at=datetime(2026, 11, 26, 12, 0, tzinfo=UTC))
    assert body == {"text": "formsync on db1: job nightly (export) failed: OSError: disk full", "kind": "job_failed",
                    "subject": "nightly", "message": "job nightly (export) failed: OSError: disk full", "host": "db1",
                    "at": "2026-11-26T12:00:00+00:00"}


# -- the targets: a real webhook and a real command ------------------------------------------------


class Hook:
    """A webhook on loopback that keeps what it is sent and answers ``status``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.status = 200
        self.url = ""

    async def take(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        return web.Response(status=self.status)


@pytest.fixture
async def hook() -> AsyncIterator[Hook]:
    h = Hook()
    app_ = web.Application()
    app_.router.add_post("/services/T0/B0/s3cr3tpath", h.take)
    async with TestServer(app_, host="127.0.0.1") as server:
        h.url = str(server.make_url("/services/T0/B0/s3cr3tpath"))
        yield h


async def test_a_notice_reaches_the_webhook_and_a_refusal_is_one_warning_without_the_url(
        hook: Hook, caplog: pytest.LogCaptureFixture) -> None:
    settings = NotifySettings(webhook_url=hook.url)
    notice = Notice("job_failed", "nightly", "job nightly (export) failed: x")
    assert await send(settings, notice)
    assert hook.bodies[0]["kind"] == "job_failed" and hook.bodies[0]["text"].endswith("failed: x")
    hook.status = 500
    assert not await send(settings, notice)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "answered 500" in warnings[0]
    assert "s3cr3tpath" not in caplog.text
    # A kind left out of notify.on is not sent.
    assert await send(NotifySettings(webhook_url=hook.url, on=["job_failed"]),
                      Notice("scheduler_stopped", "scheduler", "stopped"))
    assert len(hook.bodies) == 2


def recorder(tmp_path: Path) -> tuple[list[str], Path]:
    """A command that appends its environment's notice and its stdin to a file."""
    out = tmp_path / "notices.jsonl"
    script = ("import json, os, sys; body = json.load(sys.stdin); "
              f"open({str(out)!r}, 'a').write(json.dumps([os.environ['FORMSYNC_NOTICE_KIND'], body]) + '\\n')")
    return [sys.executable, "-c", script], out


def notices(out: Path) -> list[list[Any]]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


async def test_a_notice_runs_the_command_with_the_json_on_its_stdin(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    command, out = recorder(tmp_path)
    assert await send(NotifySettings(command=command), Notice("scheduler_stopped", "scheduler", "it stopped"))
    [[kind, body]] = notices(out)
    assert kind == "scheduler_stopped" and body["message"] == "it stopped"
    assert not await send(NotifySettings(command=[sys.executable, "-c", "raise SystemExit(3)"]),
                          Notice("job_failed", "j", "x"))
    assert not await send(NotifySettings(command=[str(tmp_path / "missing")]), Notice("job_failed", "j", "x"))
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"notify: notify.command {sys.executable} exited with 3",
        f"notify: cannot start notify.command {tmp_path / 'missing'}: No such file or directory"]


# -- who sends them ------------------------------------------------------------------------------


async def test_the_scheduler_notifies_a_failed_run_and_its_own_stop(tmp_path: Path, hook: Hook) -> None:
    db = f"sqlite:///{tmp_path}/store.db"
    cfg = tmp_path / "formsync.toml"
    # The export's directory is removed after the checks, so the run itself fails.
    cfg.write_text(f'[store]\nurl = "{db}"\n[notify]\nwebhook_url = "{hook.url}"\n'
                   f'[[jobs]]\nid = "nightly"\nkind = "export"\ninterval_seconds = 1\n'
                   f'params = {{ format = "csv", out = "{tmp_path / "gone" / "w.csv"}" }}\n')
    store = Store(db)
    store.migrate()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(load_settings(cfg), store, stop=stop))
    try:
        for _ in range(200):
            if hook.bodies:
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
        store.close()
    kinds = [b["kind"] for b in hook.bodies]
    assert kinds[0] == "job_failed" and kinds[-1] == "scheduler_stopped", kinds
    assert hook.bodies[0]["message"].startswith("job nightly (export) failed: TargetError: the directory")


def test_status_exits_4_with_attention_lines_and_notify_does_not_repeat_itself(tmp_path: Path) -> None:
    command, out = recorder(tmp_path)
    db = f"sqlite:///{tmp_path}/store.db"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "{db}"\n[notify]\ncommand = {json.dumps(command)}\n'
                   '[[jobs]]\nid = "nightly"\nkind = "export"\ncron = "0 2 * * *"\n'
                   'params = { format = "csv", out = "a.csv" }\n')
    store = Store(db)
    store.migrate()
    run = store.runs.start("nightly", "export", scheduled_at=None, pid=1, host="h")
    store.runs.finish(run, "ok")
    cli = CliRunner()
    healthy = cli.invoke(app, ["status", "--config", str(cfg), "--notify"], env={"COLUMNS": "400"})
    assert healthy.exit_code == 0 and "attention" not in healthy.stderr, healthy.output
    store.runs.finish(store.runs.start("nightly", "export", scheduled_at=None, pid=1, host="h"), "error", error="E")
    store.ledger.open_job("spring", "form_1", "c.csv", {})
    store.ledger.record_pending("spring", [PendingRow("r1", 2, "h", "k1")])
    first = cli.invoke(app, ["status", "--config", str(cfg), "--notify"], env={"COLUMNS": "400"})
    assert first.exit_code == 4, first.output
    assert first.stderr.splitlines()[-1] == "attention: job nightly (export): its last run failed; see the last " \
                                            "errors below and the scheduler's log"
    assert [k for k, _ in notices(out)] == ["job_failed"]
    again = cli.invoke(app, ["status", "--config", str(cfg), "--notify"], env={"COLUMNS": "400"})
    assert again.exit_code == 4 and [k for k, _ in notices(out)] == ["job_failed"]  # not repeated
    store.close()
