"""Operating formsync: ``status`` reads the store without a token, exits 0 once it wrote the
Prometheus metrics and 4 on events set aside; a warning that repeats while a database is
away is logged once a minute with a count; an interval job runs at start only when its
``run_at_start`` says so."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, Table, select
from typer.testing import CliRunner

from connector._process.repeats import RepeatedWarning
from connector.config.settings import load_settings
from connector.store import Store
from connector.store._jobstore import JOBSTORE_TABLE
from connector.store._lease import LeaseLock
from connector.store._mapping import Unstorable
from pipelines.cli import app
from pipelines.operate.scheduler import SchedulerOptions, serve
from tests.pipelines.test_scheduler import wait_for


def _config(tmp_path: Path, jobs: str = "") -> tuple[Path, Store]:
    db = f"sqlite:///{tmp_path}/store.db"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "{db}"\n{jobs}')
    store = Store(db)
    store.migrate()
    return cfg, store


POLL = '[[jobs]]\nid = "poll"\nkind = "poll"\ninterval_seconds = 300\n'
EXPORT = '[[jobs]]\nid = "nightly"\nkind = "export"\ncron = "0 2 * * *"\nparams = { format = "csv", out = "a.csv" }\n'


def _clean() -> dict[str, str | None]:
    """No FORMSYNC_* variable: the file alone, without a token."""
    return {k: None for k in os.environ if k.startswith("FORMSYNC_")}


def _status(cfg: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["status", "--config", str(cfg), *args], env={**_clean(), "COLUMNS": "400"})


def test_status_reads_the_store_without_a_token_though_jobs_call_the_service(tmp_path: Path) -> None:
    cfg, store = _config(tmp_path, POLL)
    done = _status(cfg)
    assert done.exit_code == 0, done.output
    assert "every 300 s" in done.stdout and "not set" not in done.output, "no token asked for"
    assert "Service token: none (set service.token or run formsync login)" in done.stdout  # said, not required
    # ``formsync run`` with the same file still refuses: its jobs would call the service.
    run = CliRunner().invoke(app, ["run", "--config", str(cfg)], env=_clean())
    assert run.exit_code == 2 and "service.token is not set" in run.output
    store.close()


def test_prometheus_format_exits_0_once_written_and_the_text_format_4(tmp_path: Path) -> None:
    cfg, store = _config(tmp_path, EXPORT)
    store.runs.finish(store.runs.start("nightly", "export", scheduled_at=None, pid=1, host="h"), "error", error="E")
    metrics = _status(cfg, "--format", "prometheus")
    assert metrics.exit_code == 0, metrics.output
    assert 'formsync_problems{kind="job_failed"} 1.0' in metrics.stdout
    assert _status(cfg).exit_code == 4
    store.close()


def test_events_set_aside_make_status_exit_4_like_the_alert(tmp_path: Path) -> None:
    cfg, store = _config(tmp_path)
    assert _status(cfg).exit_code == 0
    store.set_aside([Unstorable("evt_aside", "request.completed", "webhook", b'{"id":"evt_aside"}', 1,
                                "UNSTORABLE_EVENT", "a NUL character in an answer")])
    done = _status(cfg)
    assert done.exit_code == 4, done.output
    assert done.stderr.splitlines()[-1].startswith("attention: 1 signed event(s) set aside: no database could "
                                                   "store them; kept, not lost: formsync dead-letters list")
    metrics = _status(cfg, "--format", "prometheus")
    assert metrics.exit_code == 0 and 'formsync_problems{kind="events_set_aside"} 1.0' in metrics.stdout
    store.close()


def test_a_repeated_warning_is_logged_once_a_minute_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    logger = logging.getLogger("formsync.test.repeats")
    repeats = RepeatedWarning(logger, clock=lambda: now[0])
    error = RuntimeError("(OperationalError) connection refused\n[SQL: SELECT 1]\n(Background on this error at: x)")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        for _ in range(30):  # a retry every 2 s for a minute
            repeats.warn("cannot reach the database: %s", error)
            now[0] += 2
        repeats.warn("cannot reach the database: %s", error)
        repeats.warn("another warning: %s", "x")
    assert [r.getMessage() for r in caplog.records] == [
        "cannot reach the database: (OperationalError) connection refused",
        "cannot reach the database: (OperationalError) connection refused (29 more time(s) in the last 60 s)",
        "another warning: x",
    ]


def test_a_lease_on_a_database_that_is_gone_warns_once_in_one_line(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "gone.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()
    store.database.engine.dispose()
    path.unlink()
    path.mkdir()  # the file gone, a directory in its place: every statement fails
    lock = LeaseLock(store.database, ttl_seconds=30)
    with caplog.at_level(logging.WARNING, logger="formsync.scheduler"):
        assert not any(lock.try_acquire() for _ in range(5))
    said = [r.getMessage() for r in caplog.records if "lease" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0] and said[0].startswith("cannot take the scheduler lease: ")
    store.close()


def test_run_at_start_needs_an_interval(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(EXPORT + "run_at_start = true\n")
    done = CliRunner().invoke(app, ["status", "--config", str(cfg)])
    assert done.exit_code == 2 and "run_at_start applies to an interval_seconds job" in done.output


def test_an_interval_job_first_runs_one_interval_after_start_or_at_start(tmp_path: Path) -> None:
    cfg, store = _config(tmp_path, '[[jobs]]\nid = "later"\nkind = "export"\ninterval_seconds = 3600\n'
                         'params = { format = "csv", out = "a.csv" }\n'
                         '[[jobs]]\nid = "now"\nkind = "export"\ninterval_seconds = 3600\nrun_at_start = true\n'
                         f'params = {{ format = "csv", out = "{tmp_path}/b.csv" }}\n')

    async def start_and_stop() -> None:
        stop = asyncio.Event()
        states: list[str] = []
        task = asyncio.create_task(serve(load_settings(cfg), store, stop=stop, on_state=states.append,
                                         options=SchedulerOptions(lock_poll_seconds=0.2)))
        await wait_for(lambda: store.runs.counts().get("now", 0) >= 1, 20, "the run_at_start job runs")
        stop.set()
        await asyncio.wait_for(task, 20)

    started = time.time()
    asyncio.run(start_and_stop())
    with store.database.reader() as s:
        t = Table(JOBSTORE_TABLE, MetaData(), autoload_with=s.connection())
        stored = dict(s.execute(select(t.c.id, t.c.next_run_time)).all())
    assert store.runs.counts().get("later", 0) == 0  # the default: one interval after start
    assert stored["later"] >= started + 3600 - 5 and stored["now"] >= started + 3600 - 5
    assert "first at start" in _status(cfg).stdout
    assert datetime.fromtimestamp(stored["now"], UTC) > datetime.now(UTC)
    store.close()
