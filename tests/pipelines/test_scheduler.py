"""``formsync run`` and ``formsync status`` against a real sandbox on loopback, on SQLite
files and the PostgreSQL server: every job kind on time, the persistent job store, one
scheduler per database across processes (with takeover after SIGKILL), SIGTERM in the
middle of an outreach and the resume without a duplicate, config errors, the status
table. APScheduler runs on wall time, so the schedules here are 1-2 second intervals."""

from __future__ import annotations

import asyncio
import csv
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, Table, select
from sqlmodel import col
from typer.testing import CliRunner

from connector.config.settings import load_settings
from connector.models import Event
from connector.store import Store
from connector.store._jobstore import JOBSTORE_TABLE
from connector.store._lease import LeaseLock
from connector.store._mysql import NamedLock
from connector.store._postgresql import AdvisoryLock
from connector.store._tables import JobRun, OutreachRow, RequestRow
from pipelines.cli import app
from pipelines.operate.jobs import check_jobs, trigger_for
from pipelines.operate.scheduler import SchedulerOptions, serve
from tests.conftest import Sandbox
from tests.connector.conftest import db_url, migrated_db_url, mysql_database, pg_database  # noqa: F401  (fixtures)

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
    with store.database.reader() as s:
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
    assert sends[0].summary is not None and sends[0].summary == "done: sent 5 of 5 rows"
    assert sends[1].summary is not None and sends[1].summary.startswith("done: sent 5 of 5 rows (0 now, 5 before)")
    assert len(await all_requests(sandbox, form)) == 5
    # The outreach stored its requests as pending, and the poll job keeps them up to date.
    with store.database.reader() as s:
        stored = list(s.execute(select(RequestRow)).scalars())
    assert len(stored) == 5 and all(r.status == "pending" for r in stored)
    assert (runs(store, "poll")[-1].summary or "").startswith("pending 5: ")
    assert "1 forms" not in (runs(store, "sync")[0].summary or "") and "form " + form in (runs(store, "sync")[0].summary or "")
    assert out.is_file() and runs(store, "export")[-1].summary == f"wrote {out} (requests 5 rows)"
    # The job store kept each job with its next run.
    with store.database.reader() as s:
        t = Table(JOBSTORE_TABLE, MetaData(), autoload_with=s.connection())
        stored = dict(s.execute(select(t.c.id, t.c.next_run_time)).all())
    assert set(stored) == {"send", "poll", "sync", "export"}
    assert all(v is not None and v > started for v in stored.values())
    store.close()


def test_reconcile_keeps_unchanged_jobs_and_reschedules_changed_ones(tmp_path: Path) -> None:
    """The job store across restarts: an unchanged job keeps its persisted next run, a
    changed one is rescheduled, one no longer configured is removed."""
    db = f"sqlite:///{tmp_path}/s.db"
    store = Store(db)
    store.migrate()

    def cfg(jobs: str) -> Any:
        path = tmp_path / "r.toml"
        path.write_text(f'[store]\nurl = "{db}"\n{jobs}')
        return load_settings(path)

    nightly = '[[jobs]]\nid = "nightly"\nkind = "export"\ncron = "0 2 * * *"\n' \
              'params = { format = "csv", out = "x.csv" }\n'
    hourly = '[[jobs]]\nid = "hourly"\nkind = "export"\ncron = "M * * * *"\n' \
             'params = { format = "parquet", out = "y.parquet" }\n'

    async def start_and_stop(settings: Any) -> dict[str, float]:
        stop = asyncio.Event()
        states: list[str] = []
        task = asyncio.create_task(serve(settings, store, stop=stop, on_state=states.append,
                                         options=SchedulerOptions(lock_poll_seconds=0.2)))
        await wait_for(lambda: states == ["leading"], 10, "the scheduler leads")
        stop.set()
        await asyncio.wait_for(task, 10)
        with store.database.reader() as s:
            t = Table(JOBSTORE_TABLE, MetaData(), autoload_with=s.connection())
            return {k: v for k, v in s.execute(select(t.c.id, t.c.next_run_time)).all()}

    first = asyncio.run(start_and_stop(cfg(nightly + hourly.replace("M", "7"))))
    now = datetime.now(UTC)
    expected = trigger_for(cfg(nightly).jobs[0]).get_next_fire_time(None, now)
    assert expected is not None and first["nightly"] == expected.timestamp()
    assert datetime.fromtimestamp(first["hourly"], UTC).minute == 7
    # Move the stored nightly run: a restart with the same definition must keep it.
    with store.database.session() as s:
        t = Table(JOBSTORE_TABLE, MetaData(), autoload_with=s.connection())
        s.execute(t.update().where(t.c.id == "nightly").values(next_run_time=first["nightly"] + 3600 * 24))
    second = asyncio.run(start_and_stop(cfg(nightly + hourly.replace("M", "9"))))
    assert second["nightly"] == first["nightly"] + 3600 * 24
    assert datetime.fromtimestamp(second["hourly"], UTC).minute == 9
    third = asyncio.run(start_and_stop(cfg(hourly.replace("M", "9"))))
    assert set(third) == {"hourly"}
    store.close()


# -- one scheduler per database ---------------------------------------------------------------


def test_lease_lock_on_sqlite(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/l.db")
    store.migrate()
    a = store.leader_lock(ttl_seconds=1.0, holder="a")
    b = store.leader_lock(ttl_seconds=1.0, holder="b")
    assert isinstance(a, LeaseLock) and isinstance(b, LeaseLock)  # SQLite has no session locks
    assert a.try_acquire() and not b.try_acquire()
    assert a.still_held() and not b.try_acquire()  # renewing keeps it
    time.sleep(1.1)  # a stops renewing (dead or hung): the lease expires
    assert b.try_acquire() and not a.still_held()
    b.release()
    assert a.try_acquire()
    store.close()


@pytest.mark.parametrize("db_url", ["postgresql", "mysql"], indirect=True)
def test_session_lock_on_postgresql_and_mysql(db_url: str) -> None:  # noqa: F811
    s1, s2 = Store(db_url), Store(db_url)
    a, b = s1.leader_lock(), s2.leader_lock()
    assert type(a) is type(b) is (NamedLock if s1.backend == "mysql" else AdvisoryLock)
    try:
        assert a.try_acquire() and not b.try_acquire()
        assert a.still_held()
        assert a.conn is not None
        a.conn.invalidate()  # the holder's session ends (as when its process dies)
        a.conn = None
        assert not a.still_held()
        # The server ends the session (and frees the lock) as soon as it sees the close.
        deadline = time.monotonic() + 5
        while not b.try_acquire():
            assert time.monotonic() < deadline, "the lock of a closed session was not released"
            time.sleep(0.05)
        assert b.still_held()
        b.release()
        assert a.try_acquire()
        a.release()
    finally:
        s1.close()
        s2.close()


async def start_run(cfg: Path, tmp_path: Path, tag: str, env: dict[str, str] | None = None
                    ) -> asyncio.subprocess.Process:
    """``formsync run`` in a child process (its output in files under tmp_path)."""
    out = (tmp_path / f"{tag}.out").open("wb")
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pipelines.cli", "run", "--config", str(cfg), "--lock-poll-seconds", "0.5",
        stdout=out, stderr=out, env={**os.environ, **(env or {})})


async def started(tmp_path: Path, tag: str) -> None:
    """Wait until the child has started (it says whether it leads or waits); importing
    takes a while on a busy machine, and that is not what the tests time."""
    out = tmp_path / f"{tag}.out"
    await wait_for(lambda: out.exists() and b"formsync scheduler " in out.read_bytes(), 90,
                   f"formsync run ({tag}) starts")


async def ended(proc: asyncio.subprocess.Process, limit: float = 20) -> int:
    try:
        return await asyncio.wait_for(proc.wait(), limit)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"formsync run {proc.pid} did not exit within {limit} s")


@pytest.mark.slow  # two child processes, a SIGKILL and a takeover: bounded, about 15-30 s
@pytest.mark.parametrize("db_url", ["postgresql", "mysql"], indirect=True)
async def test_two_processes_never_run_a_job_twice_and_the_second_takes_over(
        fast: Sandbox, db_url: str, tmp_path: Path) -> None:  # noqa: F811
    form = fast.pro.forms["Contact"]
    jobs = f"""
[[jobs]]
id = "poll"
kind = "poll"
interval_seconds = 1

[[jobs]]
id = "sync"
kind = "sync"
interval_seconds = 1
params = {{ form = "{form}" }}
"""
    cfg = config(tmp_path, fast, db_url, jobs)
    store = Store(db_url)
    store.migrate()
    procs = [await start_run(cfg, tmp_path, "one"), await start_run(cfg, tmp_path, "two")]
    try:
        await started(tmp_path, "one")
        await started(tmp_path, "two")
        await wait_for(lambda: len([r for r in runs(store) if r.outcome == "ok"]) >= 6, 20, "six runs")
        await asyncio.sleep(1.5)  # the follower has had three chances to take the lock meanwhile
        pids = {r.pid for r in runs(store)}
        assert len(pids) == 1 and pids <= {p.pid for p in procs}, pids
        leader = next(p for p in procs if p.pid in pids)
        follower = next(p for p in procs if p is not leader)
        assert follower.returncode is None
        leader.send_signal(signal.SIGKILL)
        killed_at = time.time()
        await ended(leader)
        took = await wait_for(lambda: any(r.pid == follower.pid for r in runs(store)), 10,
                              "the follower takes over")
        # One lock poll (0.5 s) plus the first interval (1 s), with slack for a busy machine.
        assert took < 10.0
        first = min(r.started_at for r in runs(store) if r.pid == follower.pid)
        assert first / 1000 - killed_at < 10.0
        await wait_for(lambda: len([r for r in runs(store) if r.pid == follower.pid and r.outcome == "ok"]) >= 4,
                       10, "the follower runs the jobs")
        follower.send_signal(signal.SIGTERM)
        assert await ended(follower) == 0
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()
    every = runs(store)
    assert {r.pid for r in every} == {leader.pid, follower.pid}
    assert all(r.outcome in ("ok", "error") and r.finished_at is not None for r in every)
    assert all(r.error.startswith("interrupted") for r in every if r.outcome == "error" and r.error)
    for job_id in ("poll", "sync"):
        mine = sorted((r for r in every if r.job_id == job_id), key=lambda r: r.started_at)
        for a, b in zip(mine, mine[1:], strict=False):
            assert a.finished_at is not None and b.started_at >= a.finished_at, (job_id, a, b)
    store.close()


# -- SIGTERM in the middle of an outreach, then a restart ------------------------------------------


@pytest.mark.slow  # two child processes one after the other: bounded, about 10-20 s
async def test_sigterm_mid_outreach_then_restart_sends_each_row_exactly_once(
        sandbox: Sandbox, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    before = {r["id"] for r in await all_requests(sandbox, form)}
    # 20 creates a minute: the first 20 rows go at once, then the run waits for the window.
    assert (await sandbox.helper("limits.set", {"callsPerMinute": 10000, "createsPerMinute": 20})).ok
    sheet = write_sheet(tmp_path / "contacts.csv", 60)
    db = f"sqlite:///{tmp_path}/store.db"
    jobs = f'[[jobs]]\nid = "spring"\nkind = "outreach"\ninterval_seconds = 1\n' \
           f'params = {{ sheet = "{sheet}", form = "{form}" }}\n'
    cfg = config(tmp_path, sandbox, db, jobs, creates=20)
    store = Store(db)
    store.migrate()

    def sent() -> int:
        with store.database.reader() as s:
            return len(s.execute(select(OutreachRow).where(col(OutreachRow.state) == "sent")).all())

    proc = await start_run(cfg, tmp_path, "first")
    try:
        await started(tmp_path, "first")
        await wait_for(lambda: sent() >= 5, 20, "the outreach has sent five rows")
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        assert await ended(proc) == 0
        # Well before the rate window (60 s) would have let the next row go.
        assert time.monotonic() - t0 < 15
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    (stopped,) = runs(store, "spring")
    done = sent()
    assert stopped.outcome == "stopped" and stopped.summary is not None and stopped.summary.startswith(
        f"stopped: sent {done} of 60 rows, {60 - done} left")
    assert 5 <= done < 60
    # What the store says was sent is exactly what the service holds.
    created = [r for r in await all_requests(sandbox, form) if r["id"] not in before]
    with store.database.reader() as s:
        rows = list(s.execute(select(OutreachRow)).scalars())
    assert sorted(r["id"] for r in created) == sorted(r.request_id for r in rows if r.request_id)
    assert all(r.state == "pending" and r.request_id is None for r in rows if r.state != "sent")

    # The restart resumes: the window is open again, and the rest is sent.
    assert (await sandbox.helper("limits.set", FAST)).ok
    proc = await start_run(cfg, tmp_path, "second", env={"FORMSYNC_SERVICE__CREATES_PER_MINUTE": "10000"})
    try:
        await started(tmp_path, "second")
        await wait_for(lambda: any(r.outcome == "ok" for r in runs(store, "spring")), 20, "the resumed run ends")
        proc.send_signal(signal.SIGTERM)
        assert await ended(proc) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    resumed = next(r for r in runs(store, "spring") if r.outcome == "ok")
    assert resumed.summary == f"done: sent 60 of 60 rows ({60 - done} now, {done} before)"
    created = [r for r in await all_requests(sandbox, form) if r["id"] not in before]
    assert len(created) == 60
    assert sorted(r["externalId"] for r in created) == sorted(f"c-{i}" for i in range(60))
    with store.database.reader() as s:
        rows = list(s.execute(select(OutreachRow)).scalars())
    assert len(rows) == 60 and all(r.state == "sent" for r in rows)
    assert sorted(r.request_id for r in rows if r.request_id) == sorted(r["id"] for r in created)
    store.close()


# -- configuration errors ---------------------------------------------------------------------------

BAD_JOBS = {
    "unknown kind": ('[[jobs]]\nid = "mailer"\nkind = "mail"\ninterval_seconds = 5\n',
                     ["job 'mailer': kind", "'outreach', 'poll', 'sync', 'export', 'load', 'remind', 'close', 'files', 'purge' or 'views'", "'mail'"]),
    "cron and interval": ('[[jobs]]\nid = "both"\nkind = "poll"\ncron = "* * * * *"\ninterval_seconds = 5\n',
                          ["job 'both'", "exactly one of cron or interval_seconds"]),
    "neither cron nor interval": ('[[jobs]]\nid = "never"\nkind = "poll"\n',
                                  ["job 'never'", "give one of cron, interval_seconds or after"]),
    "after an unknown job": ('[[jobs]]\nid = "p"\nkind = "poll"\ninterval_seconds = 5\n'
                             '[[jobs]]\nid = "e"\nkind = "export"\nafter = "sync"\n'
                             'params = { format = "csv", out = "a.csv" }\n',
                             ["job 'e': after = 'sync' names no configured job; job ids: p"]),
    "after in a cycle": ('[[jobs]]\nid = "a"\nkind = "poll"\nafter = "b"\n'
                         '[[jobs]]\nid = "b"\nkind = "sync"\nafter = "a"\n',
                         ["job 'a': after makes a cycle (a -> b -> a)", "needs cron or interval_seconds"]),
    "missing param": ('[[jobs]]\nid = "spring"\nkind = "outreach"\ninterval_seconds = 5\n'
                      'params = { form = "form_x" }\n',
                      ["job 'spring' (outreach): missing param 'sheet'", "required: sheet, form"]),
    "unknown param": ('[[jobs]]\nid = "p"\nkind = "poll"\ninterval_seconds = 5\nparams = { forms = "f" }\n',
                      ["job 'p' (poll): unknown param 'forms'", "optional: form"]),
    "bad param value": ('[[jobs]]\nid = "x"\nkind = "export"\ninterval_seconds = 5\n'
                        'params = { format = "json", out = "a.json" }\n',
                        ["job 'x' (export): param 'format'", "'csv', 'xlsx' or 'parquet'", "'json'"]),
    "bad cron": ('[[jobs]]\nid = "nightly"\nkind = "poll"\ncron = "61 2 * * *"\n',
                 ["job 'nightly': bad cron '61 2 * * *'", "minute hour day month day-of-week"]),
    "cron with too few fields": ('[[jobs]]\nid = "short"\nkind = "poll"\ncron = "0 2 *"\n',
                                 ["job 'short': bad cron '0 2 *'"]),
    "duplicate ids": ('[[jobs]]\nid = "a"\nkind = "poll"\ninterval_seconds = 5\n'
                      '[[jobs]]\nid = "a"\nkind = "sync"\ninterval_seconds = 5\n',
                      ["job ids must be unique; repeated: a"]),
}


@pytest.mark.parametrize("case", sorted(BAD_JOBS))
def test_bad_job_config_is_a_clear_error_and_starts_nothing(case: str, tmp_path: Path) -> None:
    jobs, fragments = BAD_JOBS[case]
    db = tmp_path / "store.db"
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f'[service]\ntoken = "fb_x"\n[store]\nurl = "sqlite:///{db}"\n{jobs}')
    for command in ("run", "status"):
        res = CliRunner().invoke(app, [command, "--config", str(cfg)], env={"COLUMNS": "400"})
        assert res.exit_code == 2, (command, res.output)
        text = " ".join(res.output.split())
        for fragment in fragments:
            assert fragment in text, (command, fragment, res.output)
    assert not db.exists()  # nothing was started, not even the database


@pytest.mark.parametrize("misplaced", [
    '[service]\ntokn = "fb_Misplaced0000000000000000000000"\n',  # a misspelled key
    '[receiver]\nwebhook_secrets = "whsec_Misplaced000000000000000000"\n',  # text where a list belongs
])
def test_a_settings_error_in_run_or_status_never_echoes_a_secret(misplaced: str, tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'{misplaced}[store]\nurl = "sqlite:///{tmp_path}/s.db"\n'
                   '[[jobs]]\nid = "p"\nkind = "poll"\ninterval_seconds = 5\n')
    for command in ("run", "status"):
        res = CliRunner().invoke(app, [command, "--config", str(cfg)], env={"COLUMNS": "400"})
        assert res.exit_code == 2, (command, res.output)
        assert "Misplaced" not in res.output, (command, res.output)
        text = " ".join(res.output.split())
        assert "tokn" in text or "webhook_secrets" in text, "the error still names the setting"


def test_a_job_talking_to_the_service_needs_a_token(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/s.db"\n[[jobs]]\nid = "p"\nkind = "poll"\n'
                   f'interval_seconds = 5\n')
    res = CliRunner().invoke(app, ["run", "--config", str(cfg)], env={"COLUMNS": "400"})
    assert res.exit_code == 2
    assert "job 'p' (poll) talks to the service, but service.token is not set" in " ".join(res.output.split())


def test_run_with_nothing_to_do_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/s.db"\n')
    res = CliRunner().invoke(app, ["run", "--config", str(cfg)], env={"COLUMNS": "400"})
    assert res.exit_code == 2 and "nothing to run" in res.output


# -- formsync status ----------------------------------------------------------------------------


def table_row(output: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{output}")


def test_status_on_an_empty_database(tmp_path: Path) -> None:
    db = tmp_path / "none.db"
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{db}"\n[[jobs]]\nid = "nightly"\nkind = "export"\n'
                   f'cron = "0 2 * * *"\nparams = {{ format = "csv", out = "a.csv" }}\n')
    res = CliRunner().invoke(app, ["status", "--config", str(cfg)], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert table_row(res.output, "nightly")[1:7] == ["export", "cron 0 2 * * *", "-", "-", "-", "0"]
    assert table_row(res.output, "(none)")[1:5] == ["0", "0", "0", "0"]  # no requests
    assert "Deliveries received: 0\n" in res.output
    assert "no scheduler has run on this database" in res.output
    assert f"note: the store sqlite:///{db} is new or empty" in res.stderr
    assert not db.exists()  # status only reads


def test_status_on_a_store_holding_only_a_sign_in_does_not_call_it_empty(tmp_path: Path) -> None:
    db = tmp_path / "signed.db"
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{db}"\n[service]\nbase_url = "http://127.0.0.1:41501"\n')
    store = Store(f"sqlite:///{db}")
    store.migrate()
    assert not store.holds_rows(), "a migrated store holds nothing yet"
    store.grants.save_client("http://127.0.0.1:41501", "cl_1", None, "k1")
    store.grants.sign_in("http://127.0.0.1:41501", workspace_id="ws_1", scope="forms",
                         tokens={"refresh_token": b"sealed"})
    assert store.holds_rows()
    store.close()
    res = CliRunner().invoke(app, ["status", "--config", str(cfg)], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert "new or empty" not in res.stderr
    assert (f"note: no scheduled job, outreach or delivery is recorded in the store sqlite:///{db} yet (it holds "
            "the sign-in of formsync login)") in res.stderr
    assert "Service sign-in: workspace ws_1" in res.output


async def test_status_shows_jobs_progress_requests_deliveries_and_errors(fast: Sandbox, tmp_path: Path) -> None:
    sandbox = fast
    form = sandbox.pro.forms["Contact"]
    sheet = write_sheet(tmp_path / "contacts.csv", 4)
    with sheet.open("a", newline="") as fh:  # a row the service refuses: its expiry is in the past
        csv.writer(fh).writerow(["c-late", "Late", "late@example.test", "Sales"])
    past = tmp_path / "past.csv"
    with sheet.open() as src, past.open("w", newline="") as dst:
        rows = list(csv.reader(src))
        w = csv.writer(dst)
        w.writerow([*rows[0], "expiresAt"])
        for r in rows[1:]:
            w.writerow([*r, "2001-01-01" if r[0] == "c-late" else ""])
    db = f"sqlite:///{tmp_path}/store.db"
    jobs = f"""
[[jobs]]
id = "spring"
kind = "outreach"
interval_seconds = 1
params = {{ sheet = "{past}", form = "{form}" }}

[[jobs]]
id = "broken"
kind = "outreach"
interval_seconds = 1
params = {{ sheet = "{tmp_path / 'missing.csv'}", form = "{form}" }}

[[jobs]]
id = "nightly"
kind = "export"
cron = "0 2 * * *"
params = {{ format = "csv", out = "{tmp_path / 'n.csv'}" }}
"""
    cfg = config(tmp_path, sandbox, db, jobs)
    store = Store(db)
    store.migrate()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(load_settings(cfg), store, stop=stop))
    try:
        await wait_for(lambda: any(r.outcome == "ok" for r in runs(store, "spring"))
                       and any(r.outcome == "error" for r in runs(store, "broken")), 20, "both jobs ran")
        res = await formsync("status", "--config", str(cfg))
        assert re.search(r"scheduler alive \(.+:\d+:\w+\), last beat \d+ s ago", res.output), res.output
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    # Requests read from the service (3 of the 4 still pending) and two deliveries received.
    created = await all_requests(sandbox, form)
    done = created[0]["id"]
    assert (await sandbox.helper("requests.complete", {"requestId": done, "answers": {"email": "a@b.test"}})).ok
    records = [(await sandbox.rpc("requests.get", {"requestId": r["id"]})).data for r in created]
    store.upsert_requests(records, source="poll")
    with store.database.reader() as s:
        pending = len(s.execute(select(RequestRow).where(col(RequestRow.status) == "pending")).all())
    assert pending == 3
    newest = "2026-03-04T05:06:07.000Z"
    store.store_events([Event.model_validate(
        {"id": f"evt_{i}", "type": "form.archived", "createdAt": newest, "apiVersion": "2025-01-01", "test": False,
         "data": {"form": {"id": form}}}) for i in range(2)])

    res = await formsync("status", "--config", str(cfg))
    assert res.exit_code == 4, res.output  # attention: the broken job's last run failed
    assert "attention: job broken (outreach): its last run failed" in res.stderr
    spring = table_row(res.output, "spring")
    assert spring[1:3] == ["outreach", "every 1 s"]
    assert spring[5] == "ok" and int(spring[6]) >= 1
    broken = table_row(res.output, "broken")
    assert broken[5] == "error"
    nightly = table_row(res.output, "nightly")
    nxt = trigger_for(load_settings(cfg).jobs[2]).get_next_fire_time(None, datetime.now(UTC))
    assert nxt is not None and nightly[3] == nxt.strftime("%Y-%m-%d %H:%M") and nightly[4:7] == ["-", "-", "0"]
    assert "no scheduler running; the last one beat at" in res.output
    # Outreach progress in one line, the words of its run: 4 sent, the late row refused.
    assert re.search(rf"spring \({form}\)\n +sent 4 of 5 rows( \(\d now, \d before\))?; 1 refused by the service \(see ",
                     res.output), res.output
    assert re.search(r"spring-report\.csv\), done \d{4}-\d\d-\d\d \d\d:\d\d UTC", res.output.replace("\n", "")), res.output
    assert table_row(res.output, form)[1:5] == ["1", "0", "0", "3"]
    assert f"Deliveries received: 2, newest {_received(store)} UTC" in res.output
    # Last errors: the broken job and the refused row.
    assert "job broken" in res.output and "FileNotFoundError: sheet" in res.output
    late = next(ln for ln in res.output.splitlines() if "outreach spring row 6" in ln)
    assert "expiresAt" in late
    store.close()


def _received(store: Store) -> str:
    from pipelines.operate.status import collect_status

    newest = collect_status(load_settings(None, store={"url": store.url}), store).newest_event_at
    assert newest is not None
    return datetime.fromtimestamp(newest / 1000, UTC).strftime("%Y-%m-%d %H:%M")


# -- the receiver in the same process ------------------------------------------------------------


async def test_receiver_runs_beside_the_jobs_when_enabled(fast: Sandbox, tmp_path: Path) -> None:
    sandbox = fast
    form = sandbox.pro.forms["Contact"]
    db = f"sqlite:///{tmp_path}/store.db"
    receiver = f'[receiver]\nenabled = true\nport = 0\ncallback_secrets = ["{sandbox.pro.signing_secret}"]\n'
    jobs = f'[[jobs]]\nid = "sync"\nkind = "sync"\ninterval_seconds = 1\nparams = {{ form = "{form}" }}\n'
    settings = load_settings(config(tmp_path, sandbox, db, jobs, extra=receiver))
    store = Store(db)
    store.migrate()
    stop = asyncio.Event()
    urls: list[str] = []
    task = asyncio.create_task(serve(settings, store, stop=stop, on_receiver_ready=urls.append))
    try:
        await wait_for(lambda: bool(urls), 10, "the receiver listens")
        async with sandbox.http.get(urls[0] + "/healthz") as resp:
            assert resp.status == 200
        r = await sandbox.rpc("requests.create", {"formId": form, "callbackUrl": urls[0] + "/formsync/events/callbacks"})
        done = await sandbox.helper("requests.complete", {"requestId": r.data["id"],
                                                          "answers": {"name": "Ada", "email": "ada@example.test"}})
        assert done.ok, done.body
        [attempt] = (await sandbox.helper("deliveries.flush")).data["attempts"]
        assert attempt["status"] == 200 and attempt["state"] == "delivered"
        flushed = time.time() * 1000
        await wait_for(lambda: any(x.outcome == "ok" and x.started_at > flushed for x in runs(store, "sync")),
                       10, "the sync job runs beside the receiver")
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    with store.database.reader() as s:
        [req] = s.execute(select(RequestRow)).scalars()
    assert (req.id, req.status, req.source) == (r.data["id"], "completed", "callback")
    # Stopping the scheduler stopped the receiver too.
    with pytest.raises(OSError):
        async with sandbox.http.get(urls[0] + "/healthz"):
            pass
    store.close()


async def test_a_receiver_that_cannot_listen_stops_a_leading_scheduler_with_its_error(
        fast: Sandbox, tmp_path: Path) -> None:
    sandbox = fast
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        db = f"sqlite:///{tmp_path}/store.db"
        receiver = f'[receiver]\nenabled = true\nport = {port}\ncallback_secrets = ["{sandbox.pro.signing_secret}"]\n'
        jobs = (f'[[jobs]]\nid = "sync"\nkind = "sync"\ninterval_seconds = 1\n'
                f'params = {{ form = "{sandbox.pro.forms["Contact"]}" }}\n')
        settings = load_settings(config(tmp_path, sandbox, db, jobs, extra=receiver))
        store = Store(db)
        store.migrate()
        with pytest.raises(OSError):  # the port in use, reported rather than scheduling on without a receiver
            await asyncio.wait_for(serve(settings, store), 20)
        store.close()
    finally:
        taken.close()


def test_the_example_config_jobs_are_valid(tmp_path: Path) -> None:
    """The commented [[jobs]] of config/formsync.example.toml, uncommented, pass the checks."""
    example = Path(__file__).parents[2] / "config" / "formsync.example.toml"
    text = example.read_text()
    jobs = text[text.index("# [[jobs]]"):]
    lines = [ln[2:] if ln.startswith("# ") else "" for ln in jobs.splitlines()]
    cfg = tmp_path / "c.toml"
    cfg.write_text(text[:text.index("# [[jobs]]")] + "\n".join(lines))
    settings = load_settings(cfg, service={"token": "fb_x"})
    assert [j.kind for j in settings.jobs] == ["outreach", "poll", "sync", "export", "export", "export", "load", "remind",
                                                 "close"]
    assert settings.jobs[-3].after == "sync-contact"
    assert set(check_jobs(settings)) == {j.id for j in settings.jobs}


async def test_a_failed_run_is_one_log_line_with_its_job_id_and_no_success_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The export's directory is removed after the checks, so the run itself fails.
    db = f"sqlite:///{tmp_path}/store.db"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "{db}"\n[[jobs]]\nid = "nightly"\nkind = "export"\ninterval_seconds = 1\n'
                   f'params = {{ format = "csv", out = "{tmp_path / "gone" / "w.csv"}" }}\n')
    store = Store(db)
    store.migrate()
    stop = asyncio.Event()
    caplog.set_level("INFO")
    task = asyncio.create_task(serve(load_settings(cfg), store, stop=stop))
    try:
        await wait_for(lambda: any(r.outcome == "error" for r in runs(store, "nightly")), 20, "the job ran")
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    failed = [r for r in caplog.records if r.levelname == "ERROR"]
    assert failed and all(r.getMessage().startswith("job nightly (export) failed: TargetError: the directory")
                          and "\n" not in r.getMessage() and r.exc_info is None for r in failed), failed
    assert not [r for r in caplog.records if "executed successfully" in r.getMessage()]
    assert runs(store, "nightly")[0].error.startswith("TargetError: the directory")  # type: ignore[union-attr]
