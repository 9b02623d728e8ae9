"""Nightly files (``export --since-last NAME``) as a data team runs them: several runs a
day never replace a file, removals reach a deletions file, a run with nothing new writes
nothing, names and formats are checked, one run per name at a time; and the guide's
DuckDB query (docs/warehouse.md) stacks the nights into the store's own table."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from connector.config.settings import JobSettings, Settings
from connector.store import Store
from connector.store._erasure import Person
from connector.store._lease import FileLock, LeaseLock
from pipelines.cli import app
from pipelines.export.nightly import ExportBusy, cursor_lock
from pipelines.export.write import deletions_path, export
from pipelines.operate.jobs import ConfigError, check_jobs, job_warnings, parse_params, summarise
from tests.connector.conftest import db_url, migrated_db_url, mysql_database  # noqa: F401  (fixtures)
from tests.items import list_item

FORM = "form_a"
NIGHT = datetime(2026, 5, 1, 22, 0, tzinfo=UTC)
GUIDE = Path(__file__).parents[2] / "docs" / "warehouse.md"
FIELDS = [{"key": "q", "type": "text", "title": "Q"}, {"key": "email", "type": "email", "title": "Email"}]


def sub(sid: str, q: str, *, edits: int = 0) -> dict[str, Any]:
    return list_item(sid, {"q": q, "email": f"{sid}@example.com"}, edits=edits)


def run(store: Store, out: Path, *, at: datetime = NIGHT, name: str = "nightly", fmt: str = "parquet") -> Any:
    return export(store, fmt, out, since_last=name, at=at)  # type: ignore[arg-type]


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".parquet")


def stacked(folder: Path) -> list[dict[str, Any]]:
    """The guide's own block (the one stacking the nights), run in ``folder`` (which holds
    ``exports/``): its rows."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    block = next(b for b in blocks if "QUALIFY" in b)
    here = os.getcwd()
    os.chdir(folder)
    try:
        scope: dict[str, Any] = {}
        exec(compile(block.replace("print(", "(lambda *_: None)("), str(GUIDE), "exec"), scope)  # noqa: S102
        return by_id(scope["current"].arrow().read_all().to_pylist())
    finally:
        os.chdir(here)


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["submission_id"])


def store_view(store: Store, tmp_path: Path) -> list[dict[str, Any]]:
    whole = tmp_path / "whole.parquet"
    export(store, "parquet", whole, form_id=FORM)
    return by_id(pq.read_table(whole).to_pylist())


def test_nights_with_two_runs_a_day_stack_into_the_stores_table(store: Store, tmp_path: Path) -> None:
    """Three nights, two runs each, an edit, a purge, an erase and a removal with nothing
    changed: the files with the deletions applied as the guide says equal the store's
    table, row for row and value for value."""
    exports = tmp_path / "exports"
    exports.mkdir()
    out = exports / "{form}-{date}-{run}.parquet"
    store.record_fields(FORM, FIELDS)
    store.upsert_submissions([sub("sub_1", "a"), sub("sub_2", "b"), sub("sub_3", "c")], FORM, "Survey")
    assert run(store, out).rows == {"wide": 3}
    store.upsert_submissions([sub("sub_4", "d")], FORM)
    assert run(store, out, at=NIGHT + timedelta(hours=1)).rows == {"wide": 1}, "the second run the same day"
    assert files(exports) == ["survey-2026-05-01-1.parquet", "survey-2026-05-01-2.parquet"]

    night2 = NIGHT + timedelta(days=1)
    store.upsert_submissions([sub("sub_1", "A", edits=1)], FORM)
    store.remove_submissions({"sub_2": FORM}, reason="purge")
    second = run(store, out, at=night2)
    assert second.rows == {"wide": 1} and second.removed == 1
    assert second.deletions == str(exports / "all-2026-05-02-3.deletions.parquet")
    gone = pq.read_table(second.deletions)
    assert gone.column_names == ["id", "kind", "form_id", "removed_at"]
    assert gone.select(["id", "kind", "form_id"]).to_pylist() == [{"id": "sub_2", "kind": "submission",
                                                                    "form_id": FORM}]
    quiet = run(store, out, at=night2 + timedelta(hours=1))
    assert quiet.nothing_new and quiet.rows == {"wide": 0} and summarise("export", quiet) == "nothing new"

    night3 = night2 + timedelta(days=1)
    store.erase(Person(email="sub_3@example.com"))
    store.upsert_submissions([sub("sub_5", "e")], FORM)
    assert run(store, out, at=night3).removed >= 1
    store.remove_submissions({"sub_4": FORM}, reason="purge")
    only = run(store, out, at=night3 + timedelta(hours=1))
    assert only.files == {} and only.removed == 1, "removals and no changed row: the deletions file alone"
    assert files(exports) == [
        "all-2026-05-02-3.deletions.parquet", "all-2026-05-03-4.deletions.parquet",
        "all-2026-05-03-5.deletions.parquet", "survey-2026-05-01-1.parquet", "survey-2026-05-01-2.parquet",
        "survey-2026-05-02-3.parquet", "survey-2026-05-03-4.parquet"]

    assert stacked(tmp_path) == store_view(store, tmp_path)

    night4 = night3 + timedelta(days=1)  # the service stops listing sub_5, then lists it again
    assert store.reconcile(FORM, {"sub_1"}) == (["sub_5"], [])
    assert run(store, out, at=night4).removed == 1
    assert store.reconcile(FORM, {"sub_1", "sub_5"}) == ([], ["sub_5"])
    back = run(store, out, at=night4 + timedelta(hours=1))
    assert back.rows == {"wide": 1} and back.deletions is None, "found again: sent again, no removal"
    view = store_view(store, tmp_path)
    assert [r["submission_id"] for r in view] == ["sub_1", "sub_5"]
    assert stacked(tmp_path) == view


def test_a_file_that_exists_is_never_replaced(store: Store, tmp_path: Path) -> None:
    """Without {run} or {time}, the day's second run finds the day's file: refused before
    anything is written or moved, naming {run}; the documented name works twice a day."""
    store.upsert_submissions([sub("sub_1", "a")], FORM, "Survey")
    daily = tmp_path / "{form}-{date}.parquet"
    run(store, daily)
    store.upsert_submissions([sub("sub_2", "b")], FORM)
    before = store.export_cursors.list("nightly")
    with pytest.raises(ValueError, match=r"survey-2026-05-01.parquet exists .* put \{run\} or \{time\}"):
        run(store, daily)
    assert store.export_cursors.list("nightly") == before
    assert [r["submission_id"] for r in pq.read_table(tmp_path / "survey-2026-05-01.parquet").to_pylist()] == \
        ["sub_1"], "the first run's file is untouched"
    assert files(tmp_path) == ["survey-2026-05-01.parquet"]

    (tmp_path / "all-2026-05-01-2.deletions.parquet").write_text("someone's")
    store.remove_submissions({"sub_1": FORM}, reason="purge")
    with pytest.raises(ValueError, match="deletions.parquet exists .* move it away"):
        run(store, tmp_path / "{form}-{date}-{run}.parquet", name="nightly")  # the deletions file is checked too
    assert store.export_cursors.list("nightly") == before
    assert deletions_path(Path("x/a-1.csv")) == Path("x/a-1.deletions.csv")


def test_the_deletions_file_is_in_the_runs_format(store: Store, tmp_path: Path) -> None:
    store.upsert_submissions([sub("sub_1", "a"), sub("sub_2", "b")], FORM, "Survey")
    run(store, tmp_path / "{form}-{run}.csv", fmt="csv")
    store.remove_submissions({"sub_1": FORM}, reason="purge")
    report = run(store, tmp_path / "{form}-{run}.csv", fmt="csv")
    assert report.files == {} and report.deletions == str(tmp_path / "all-2.deletions.csv")
    lines = (tmp_path / "all-2.deletions.csv").read_text().splitlines()
    assert lines[0] == '"id","kind","form_id","removed_at"' and lines[1].startswith('"sub_1","submission","form_a",')
    assert (tmp_path / "all-2.deletions.schema.json").is_file()
    store.remove_submissions({"sub_2": FORM}, reason="purge")
    booked = run(store, tmp_path / "{form}-{run}.xlsx", name="book", fmt="xlsx")
    assert booked.nothing_new, "a new name starts from the store as it is: no earlier removal"


def test_an_empty_store_writes_nothing(store: Store, tmp_path: Path) -> None:
    for fmt, table in (("parquet", "wide"), ("csv", "long"), ("xlsx", "all")):
        report = export(store, fmt, tmp_path / f"e-{{run}}.{fmt}", table=table, since_last=f"n-{fmt}")  # type: ignore[arg-type]
        assert report.nothing_new and report.files == {} and report.cursors == []
    assert list(tmp_path.glob("e-*")) == []


def test_names_and_formats_are_checked(store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store.upsert_submissions([sub("sub_1", "a")], FORM)
    out = tmp_path / "n-{run}.parquet"
    for bad, said in (("", "a blank name"), ("   ", "a blank name"), ("my job/../x", "holds ' '"),
                      ("-x", "starts with '-'"), ("load:duckdb/formsync_data", "is the cursor of formsync load")):
        with pytest.raises(ValueError, match=re.escape(said)):
            run(store, out, name=bad)
    assert store.export_cursors.list() == [] and not list(tmp_path.glob("n-*"))

    run(store, out)
    store.upsert_submissions([sub("sub_2", "b")], FORM)
    with pytest.raises(ValueError, match="'nightly' writes parquet: .* give csv a name of its own"):
        run(store, tmp_path / "n-{run}.csv", fmt="csv")
    assert [m.format for m in store.export_cursors.list("nightly")] == ["parquet"]
    assert run(store, tmp_path / "c-{run}.csv", name="nightly-csv", fmt="csv").rows == {"wide": 2}

    # A name stored before names were checked keeps working, with a warning.
    store.export_cursors.advance([store.export_cursors.list("nightly")[0].__class__(
        "old name", "wide", FORM, -1, 0, 1, None)])
    assert run(store, tmp_path / "old-{run}.parquet", name="old name").rows == {"wide": 2}
    assert "'old name': 'old name' holds ' '; it keeps working" in caplog.text


def test_one_holder_of_a_names_lock_on_every_database(db_url: str) -> None:  # noqa: F811
    """The lock of a name, held by one store and refused to another at once (PostgreSQL's
    and MariaDB's session locks, a file lock beside a SQLite file), kept past a lease's
    time, free once released."""
    one, two = Store(db_url), Store(db_url)
    one.migrate()
    try:
        with cursor_lock(one, "nightly", ttl_seconds=0.6):
            time.sleep(1)  # past its first lease: renewed meanwhile
            refused_under_nightly_only(two)
        with cursor_lock(two, "nightly"):
            pass
    finally:
        one.close()
        two.close()


def refused_under_nightly_only(store: Store) -> None:
    """``store`` cannot take the run lock of 'nightly' (held elsewhere); 'weekly' it can."""
    with pytest.raises(ExportBusy, match="'nightly': another export under this name is running"):
        with cursor_lock(store, "nightly"):
            pass
    with cursor_lock(store, "weekly"):
        pass


def test_a_sqlite_files_run_lock_is_a_file_beside_it(tmp_path: Path) -> None:
    """On a SQLite file a run's lock is a file in ``<file>-locks/`` (its name quoted, a
    long one hashed), taken without a write to the database; an in-memory SQLite, which
    has no folder, keeps the lease."""
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate()
    try:
        slash = store.run_lock("cursor:a/b c")
        assert isinstance(slash, FileLock) and slash.path == tmp_path / "store.db-locks" / "cursor%3Aa%2Fb%20c.lock"
        long = store.run_lock("cursor:" + "x" * 300)
        assert isinstance(long, FileLock) and len(long.path.name) == 64 + len(".lock")
        with store.database.engine.connect() as conn:
            before = conn.exec_driver_sql("PRAGMA data_version").scalar()
            assert slash.try_acquire() and not store.run_lock("cursor:a/b c").try_acquire()
            assert conn.exec_driver_sql("PRAGMA data_version").scalar() == before, "nothing written to the store"
        slash.release()
        again = store.run_lock("cursor:a/b c")
        assert again.try_acquire()
        again.release()
    finally:
        store.close()
    memory = Store("sqlite://")
    try:
        assert isinstance(memory.run_lock("cursor:nightly"), LeaseLock)
    finally:
        memory.close()


def test_where_no_lock_folder_can_be_made_a_run_lock_is_a_lease_that_still_excludes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A file in the way of ``<file>-locks/``: the run's lock falls back to a lease in the
    database (said in a warning), which refuses a second holder under the same name, not
    one under another, and frees the name when released (long before its ttl)."""
    blocker = tmp_path / "store.db-locks"
    blocker.write_text("in the way")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    one, two = Store(url), Store(url)
    one.migrate()
    try:
        with caplog.at_level("WARNING", logger="formsync.scheduler"):
            first = one.run_lock("cursor:nightly")
        assert isinstance(first, LeaseLock) and f"cannot make the lock file {blocker}" in caplog.text
        assert first.try_acquire()
        second = two.run_lock("cursor:nightly")
        assert isinstance(second, LeaseLock) and not second.try_acquire()
        refused_under_nightly_only(two)
        first.release()
        assert second.try_acquire(), "free once released"
        second.release()
        with cursor_lock(one, "nightly"):
            with pytest.raises(ExportBusy):
                with cursor_lock(two, "nightly"):
                    pass
        with cursor_lock(two, "nightly"):
            pass
    finally:
        one.close()
        two.close()
    assert blocker.is_file() and blocker.read_text() == "in the way", "the file in the way is left as it was"


def test_a_second_run_under_a_name_refuses_at_once(store: Store, tmp_path: Path) -> None:
    store.upsert_submissions([sub("sub_1", "a")], FORM)
    with cursor_lock(store, "nightly"):  # a run under way elsewhere
        started = time.monotonic()
        with pytest.raises(ValueError, match="'nightly': another export under this name is running"):
            run(store, tmp_path / "n-{run}.parquet")
        assert time.monotonic() - started < 5
        assert run(store, tmp_path / "w-{run}.parquet", name="weekly").rows == {"wide": 1}, "another name runs"
    assert store.export_cursors.list("nightly") == [] and not list(tmp_path.glob("n-*"))
    assert run(store, tmp_path / "n-{run}.parquet").rows == {"wide": 1}


def test_the_cli_says_each_refusal_in_one_line(store: Store, tmp_path: Path) -> None:
    env = {"FORMSYNC_STORE__URL": store.url}
    store.upsert_submissions([sub("sub_1", "a")], FORM, "Survey")

    def cli(*args: str) -> Any:
        return CliRunner().invoke(app, ["export", *args], env=env)

    first = cli("--since-last", "nightly", "--out", str(tmp_path / "{form}.parquet"))
    assert first.exit_code == 0 and "wrote " in first.stderr
    store.upsert_submissions([sub("sub_2", "b")], FORM)
    for args, said in ((["--since-last", "nightly", "--out", str(tmp_path / "{form}.parquet")], "put {run} or {time}"),
                       (["--since-last", "load:duckdb/formsync_data", "--out", str(tmp_path / "x-{run}.parquet")],
                        "is the cursor of formsync load"),
                       (["--reset", "load:duckdb/formsync_data"], "is the cursor of formsync load"),
                       (["--since-last", " ", "--out", str(tmp_path / "x-{run}.parquet")], "a blank name"),
                       (["--since-last", "nightly", "--out", str(tmp_path / "x-{run}.csv")], "writes parquet")):
        bad = cli(*args)
        lines = [line for line in bad.stderr.splitlines() if not line.startswith("note: no --config")]
        assert bad.exit_code == 2 and len(lines) == 1 and said in lines[0] and "Traceback" not in bad.output, bad.output
    assert [m.run for m in store.export_cursors.list("nightly")] == [1], "no cursor moved"

    done = cli("--since-last", "nightly", "--out", str(tmp_path / "{form}-{run}.parquet"))
    assert done.exit_code == 0 and json.loads(done.stdout)["rows"] == {"wide": 1}
    quiet = cli("--since-last", "nightly", "--out", str(tmp_path / "{form}-{run}.parquet"))
    report = json.loads(quiet.stdout)
    assert quiet.exit_code == 0 and report["rows"] == {"wide": 0} and report["nothing_new"] is True
    assert "nothing new since the last export under 'nightly': no file written" in quiet.stderr
    assert not (tmp_path / "survey-3.parquet").exists()


def test_job_names_and_export_jobs_are_checked() -> None:
    def job(job_id: str = "nightly-files", **params: Any) -> JobSettings:
        return JobSettings(id=job_id, kind="export", cron="0 2 * * *",
                           params={"format": "parquet", "out": "exports/{form}-{date}-{run}.parquet", **params})

    with pytest.raises(ConfigError, match="job id: 'nightly files' holds ' '"):
        check_jobs(Settings(jobs=[job("nightly files")]), to_run=False)
    with pytest.raises(ConfigError, match="param 'since_last' 'load:duckdb/x' is the cursor of formsync load"):
        parse_params(job(since_last="load:duckdb/x"))
    with pytest.raises(ConfigError, match="param 'job': 'my job/../x' holds ' '"):
        parse_params(JobSettings(id="o", kind="outreach", cron="0 2 * * *",
                                 params={"sheet": "s.csv", "form": "f", "job": "my job/../x"}))
    checked = check_jobs(Settings(jobs=[job(since_last="nightly"),
                                        job("daily", since_last="daily", out="exports/{form}-{date}.parquet")]),
                         to_run=False)
    warned = job_warnings(checked)
    assert len(warned) == 1 and warned[0].startswith("job 'daily' (export): param 'out'") and "{run}" in warned[0]


def test_the_erase_receipt_can_name_the_exports_that_wrote_a_person(db_url: str, tmp_path: Path) -> None:  # noqa: F811
    """``store.exports.names_past`` on SQLite, PostgreSQL and MariaDB: the names whose
    cursor of a submissions table passed the submissions' places."""
    store = Store(db_url)
    store.migrate()
    try:
        _names_past(store, tmp_path)
    finally:
        store.close()


def _names_past(store: Store, tmp_path: Path) -> None:
    store.upsert_submissions([sub("sub_1", "a")], FORM)
    run(store, tmp_path / "a-{run}.parquet", name="early")
    store.upsert_submissions([sub("sub_2", "b")], FORM)
    run(store, tmp_path / "b-{run}.parquet", name="late")
    export(store, "parquet", tmp_path / "l-{run}.parquet", table="long", since_last="answers")
    store.export_cursors.advance([store.export_cursors.list("late")[0].__class__(
        "load:duckdb/x", "wide", FORM, 10**9, 0, 1, None)])  # a load's cursor: no file
    assert store.exports.names_past(["sub_1"]) == ["answers", "early", "late"]
    assert store.exports.names_past(["sub_2"]) == ["answers", "late"]
    assert store.exports.names_past(["sub_2"], files_only=False) == ["answers", "late", "load:duckdb/x"]
    assert store.exports.names_past(["sub_9"]) == []


KILLED = """
import sys, time
import pipelines.export.write as w
real = w._write_parquet
def slow(table, out):
    n = real(table, out)
    print("writing", flush=True)
    time.sleep(30)
    return n
w._write_parquet = slow
from connector.store import Store
store = Store(sys.argv[1])
store.migrate()
w.export(store, "parquet", sys.argv[2], since_last="nightly")
"""


def test_a_run_killed_midway_loses_no_row_and_sends_none_twice(tmp_path: Path) -> None:
    """SIGKILL while the file is written (a real process, which holds the name's lock
    meanwhile): no file, no cursor moved, the lock free at once (a file lock beside the
    SQLite file), and the next run writes every row once."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    store.migrate()
    try:
        store.upsert_submissions([sub(f"sub_{i}", str(i)) for i in range(5)], FORM)
        out = tmp_path / "exports"
        out.mkdir()
        run(store, out / "n-{run}.parquet")
        store.upsert_submissions([sub(f"sub_{i}", str(i)) for i in range(5, 9)], FORM)
        proc = subprocess.Popen([sys.executable, "-c", KILLED, url, str(out / "n-{run}.parquet")],
                                stdout=subprocess.PIPE, text=True, env={**os.environ})
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
        with pytest.raises(ValueError, match="another export under this name is running"):
            run(store, out / "n-{run}.parquet")  # the other process holds the lock
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert files(out) == ["n-1.parquet"] and [m.run for m in store.export_cursors.list("nightly")] == [1]
        assert run(store, out / "n-{run}.parquet").rows == {"wide": 4}, "its lock went with its process"
        written = [r["submission_id"] for f in sorted(out.glob("n-*.parquet")) for r in pq.read_table(f).to_pylist()]
        assert sorted(written) == [f"sub_{i}" for i in range(9)], "every row once"
    finally:
        store.close()
