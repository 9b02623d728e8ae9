"""``formsync run`` and ``formsync status`` against a real sandbox on loopback, on SQLite
files and the PostgreSQL server: every job kind on time, the persistent job store, one
scheduler per database across processes (with takeover after SIGKILL), SIGTERM in the
middle of an outreach and the resume without a duplicate, config errors, the status
table. APScheduler runs on wall time, so the schedules here are 1-2 second intervals."""

from __future__ import annotations

import asyncio
import csv
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, Table, select
from sqlmodel import col
from typer.testing import CliRunner

from connector.settings import load_settings
from connector.store import JobRun, Store
from pipelines.cli import app
from pipelines.scheduler import JOBSTORE_TABLE, SchedulerOptions, serve
from tests.conftest import Sandbox
from tests.connector.conftest import db_url, pg_database  # noqa: F401  (fixtures)

FAST = {"callsPerMinute": 10000, "createsPerMinute": 10000}
HEADER = ["externalId", "name", "email", "topic"]


def write_sheet(path: Path, n: int, *, start: int = 0) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        for i in range(start, start + n):
            w.writerow([f"c-{i}", f"Person {i}", f"p{i}@example.test", "Sales"])
    return path


def config(tmp_path: Path, sandbox: Sandbox, db: str, jobs: str, *, creates: int = 10000,
           name: str = "formsync.toml", extra: str = "") -> Path:
    path = tmp_path / name
    path.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{sandbox.pro.token}"\n'
                    f'workspace_id = "{sandbox.pro.id}"\ncalls_per_minute = 10000\n'
                    f'creates_per_minute = {creates}\n[store]\nurl = "{db}"\n'
                    f'[outreach]\nreport_dir = "{tmp_path / "reports"}"\n{extra}\n{jobs}')
    return path


def runs(store: Store, job_id: str | None = None) -> list[JobRun]:
    with store.reader() as s:
        stmt = select(JobRun).order_by(col(JobRun.started_at), col(JobRun.id))
        if job_id is not None:
            stmt = stmt.where(col(JobRun.job_id) == job_id)
        return list(s.execute(stmt).scalars())


async def wait_for(what: Callable[[], bool], limit: float, message: str) -> float:
    """Poll ``what`` until true (seconds waited) or fail after ``limit`` seconds."""
    t0 = time.monotonic()
    while not what():
        if time.monotonic() - t0 > limit:
            pytest.fail(f"timed out after {limit} s: {message}")
        await asyncio.sleep(0.1)
    return time.monotonic() - t0


async def all_requests(sandbox: Sandbox, form: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"formId": form, "limit": 100}
        if cursor:
            params["cursor"] = cursor
        page = (await sandbox.rpc("requests.list", params)).data
        items.extend(page["items"])
        cursor = page.get("nextCursor")
        if not cursor:
            return items


@pytest.fixture
async def fast(sandbox: Sandbox) -> Sandbox:
    assert (await sandbox.helper("limits.set", FAST, ws="pro")).ok
    return sandbox


async def formsync(*args: str) -> Any:
    """Run the formsync command in a worker thread (it runs its own event loop)."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "400"})


# -- every kind on time, on SQLite and PostgreSQL ------------------------------------------------


async def test_each_job_kind_runs_on_time_and_is_recorded(fast: Sandbox, db_url: str,  # noqa: F811
                                                          tmp_path: Path) -> None:
    sandbox = fast
    form = sandbox.pro.forms["Contact"]
    sheet = write_sheet(tmp_path / "contacts.csv", 5)
    out = tmp_path / "answers.csv"
    jobs = f"""
[[jobs]]
id = "send"
kind = "outreach"
interval_seconds = 2
params = {{ sheet = "{sheet}", form = "{form}" }}

[[jobs]]
id = "poll"
kind = "poll"
interval_seconds = 1

[[jobs]]
id = "sync"
kind = "sync"
interval_seconds = 1
params = {{ form = "{form}" }}

[[jobs]]
id = "export"
kind = "export"
interval_seconds = 2
params = {{ format = "csv", out = "{out}", table = "requests" }}
"""
    settings = load_settings(config(tmp_path, sandbox, db_url, jobs))
    store = Store(db_url)
    store.migrate()
    stop = asyncio.Event()
    states: list[str] = []
    started = time.time()
    task = asyncio.create_task(serve(settings, store, stop=stop, on_state=states.append,
                                     options=SchedulerOptions(lock_poll_seconds=0.5)))
    try:
        await wait_for(lambda: len([r for r in runs(store, "send") if r.outcome != "running"]) >= 2, 12,
                       "two finished outreach runs")
        await wait_for(lambda: len(runs(store, "export")) >= 2 and len(runs(store, "sync")) >= 4, 6,
                       "two export and four sync runs")
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    assert states == ["leading"]
    for job_id, interval in (("send", 2), ("poll", 1), ("sync", 1), ("export", 2)):
        done = runs(store, job_id)
        assert done and all(r.outcome == "ok" and r.error is None for r in done), [(r.outcome, r.error) for r in done]
        assert all(r.pid == os.getpid() and r.finished_at is not None for r in done)
        # The first run comes one interval after the start; the planned times are whole
        # intervals apart (a run still going when the next is due skips that one:
        # max_instances = 1), and each run starts at (about) its planned time.
        assert done[0].scheduled_at is not None
        assert interval - 0.6 <= done[0].scheduled_at / 1000 - started <= interval + 1.5, job_id
        for a, b in zip(done, done[1:], strict=False):
            assert a.scheduled_at is not None and b.scheduled_at is not None
            gap = b.scheduled_at - a.scheduled_at
            assert gap > 0 and gap % (interval * 1000) == 0, (job_id, a.scheduled_at, b.scheduled_at)
        for r in done:
            assert r.scheduled_at is not None and 0 <= r.started_at - r.scheduled_at < 1000, job_id
    sends = runs(store, "send")
    assert sends[0].summary is not None and sends[0].summary.startswith("sent 5, already sent 0")
    assert sends[1].summary is not None and sends[1].summary.startswith("sent 0, already sent 5")
    assert len(await all_requests(sandbox, form)) == 5
    assert "1 forms" not in (runs(store, "sync")[0].summary or "") and "form " + form in (runs(store, "sync")[0].summary or "")
    assert out.is_file() and runs(store, "export")[-1].summary == f"wrote {out} (requests 0 rows)"
    # The job store kept each job with its next run.
    with store.reader() as s:
        t = Table(JOBSTORE_TABLE, MetaData(), autoload_with=s.connection())
        stored = dict(s.execute(select(t.c.id, t.c.next_run_time)).all())
    assert set(stored) == {"send", "poll", "sync", "export"}
    assert all(v is not None and v > started for v in stored.values())
    store.close()
