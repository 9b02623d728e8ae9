"""``formsync load`` through dlt, into the embedded DuckDB (the default) and the real
PostgreSQL: one table per form typed by the data contract, the long answers, requests;
an edit replaces its row and its answers, a field added to the form is a new nullable
column, a row stored late comes with the next load; dlt's state stays beside the store,
never in the home directory."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from connector.config.settings import JobSettings, load_settings
from connector.store import Column, Store
from connector.store._schema import OWN
from pipelines.cli import app
from pipelines.export.load import DLT_TYPES, LoadReport, dlt_column, load, pipeline_name
from pipelines.jobs import LoadParams
from pipelines.operate.jobs import parse_params, summarise
from pipelines.operate.scheduler import SchedulerOptions, serve
from tests.connector.conftest import PG_HOST, PG_PORT, PG_USER, pg_connect
from tests.items import list_item

FORM = "form_load"
FIELDS = [{"key": "score", "type": "number", "title": "Score"}, {"key": "stars", "type": "rating", "title": "Stars"},
          {"key": "tags", "type": "checkbox", "title": "Tags", "options": [{"key": "a", "label": "A"}]}]
DATE_FIELD = {"key": "visit", "type": "date", "title": "Visit"}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The working directory (``formsync.duckdb`` lands there) and a home directory to watch."""
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def filled(here: Path) -> Store:
    (here / "data").mkdir()
    store = Store(f"sqlite:///{here / 'data' / 'formsync.db'}")
    store.migrate()
    store.record_fields(FORM, FIELDS)
    store.upsert_submissions([list_item("sub_1", {"score": 5, "stars": 4, "tags": ["a"]}), list_item("sub_2", {"score": 1.5})],
                             FORM, "Load Test")
    store.upsert_requests([{"id": "req_1", "status": "pending", "formId": FORM, "createdAt": 1_780_000_000_000}])
    store.refresh_views([FORM])  # the view takes its name from the form's, now that a submission names it
    return store


def test_the_dlt_mapper_gives_each_logical_type() -> None:
    assert dlt_column(OWN[0]) == {"data_type": "text", "nullable": False}
    assert dlt_column(Column("at", "timestamp")) == {"data_type": "timestamp", "nullable": True, "timezone": True}
    assert {t: dlt_column(Column("c", t))["data_type"] for t in ("number", "integer", "date", "keys", "records")} \
        == {"number": "double", "integer": "bigint", "date": "date", "keys": "json", "records": "json"}
    assert set(DLT_TYPES) == {"text", "number", "integer", "boolean", "date", "time", "timestamp", "keys",
                              "records", "json"}


def _duck(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.sql(sql).fetchall()


def test_load_into_duckdb_merges_evolves_and_picks_up_late_rows(filled: Store, here: Path) -> None:
    store = filled
    table = store.schema(FORM).name
    env = {"FORMSYNC_STORE__URL": store.url}
    first = CliRunner().invoke(app, ["load"], env=env)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["rows"] == {table: 2, "answers": 4, "requests": 1}
    db = here / "formsync.duckdb"
    types = dict(_duck(db, f"SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = "
                           f"'formsync_data' AND table_name = '{table}'"))
    assert (types["score"], types["stars"], types["tags"], types["stored_at"], types["completed"]) == \
        ("DOUBLE", "BIGINT", "JSON", "TIMESTAMP WITH TIME ZONE", "BOOLEAN")

    store.upsert_submissions([list_item("sub_1", {"score": 7}, edits=1)], FORM)  # an edit drops two answers
    store.record_fields(FORM, [*FIELDS, DATE_FIELD])  # a field added to the form
    store.upsert_submissions([list_item("sub_3", {"score": 2, "visit": "2026-05-03"})], FORM)
    report = load(store)
    assert report.rows == {table: 2, "answers": 3, "requests": 0}
    rows = _duck(db, f"SELECT submission_id, score, stars, visit FROM formsync_data.{table} ORDER BY 1")
    assert [(r[0], r[1], r[2], None if r[3] is None else str(r[3])) for r in rows] == [
        ("sub_1", 7.0, None, None), ("sub_2", 1.5, None, None), ("sub_3", 2.0, None, "2026-05-03")]
    assert _duck(db, "SELECT field_key FROM formsync_data.answers WHERE submission_id = 'sub_1'") == [("score",)]
    assert load(store).rows == {table: 0, "answers": 0, "requests": 0}, "nothing new"

    assert (here / "data" / "formsync-dlt" / "pipelines" / "formsync_load_duckdb_formsync_data").is_dir(), \
        "dlt's state beside the store, a pipeline per destination and dataset"
    assert list((here / "home").iterdir()) == [], "nothing in the home directory"
    assert [m.name for m in store.export_cursors.list()][0] == "load:duckdb/formsync_data"


def test_a_load_that_leaves_held_back_keys_out_names_them_in_one_line(filled: Store, here: Path) -> None:
    filled.upsert_submissions([list_item("sub_9", {"score": 3, "shoe": 42})], FORM)  # no token: "shoe" stays held
    result = CliRunner().invoke(app, ["load"], env={"FORMSYNC_STORE__URL": filled.url})
    assert result.exit_code == 0, result.output
    held = [line for line in result.stderr.splitlines() if "held back" in line]
    assert len(held) == 1 and f"form {FORM}: shoe" in held[0] and "service.token" in held[0], result.stderr
    clean = CliRunner().invoke(app, ["load"], env={"FORMSYNC_STORE__URL": filled.url})
    assert "held back" in clean.stderr, "said by every load while the key is held"
    filled.record_fields(FORM, [*FIELDS, {"key": "shoe", "type": "number", "title": "Shoe"}])
    last = CliRunner().invoke(app, ["load"], env={"FORMSYNC_STORE__URL": filled.url})
    assert last.exit_code == 0 and "held back" not in last.stderr, last.output
    table = filled.schema(FORM).name
    assert json.loads(last.stdout)["rows"][table] == 1, "the column came: only the row answering it goes again"


def test_dry_run_counts_and_sends_nothing(filled: Store, here: Path) -> None:
    report = load(filled, dry_run=True)
    assert report.dry_run and report.rows == {filled.schema(FORM).name: 2, "answers": 4, "requests": 1}
    assert not (here / "formsync.duckdb").exists() and filled.export_cursors.list() == []


def test_without_the_extra_one_line_names_it(filled: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dlt", None)  # as if not installed
    result = CliRunner().invoke(app, ["load"], env={"FORMSYNC_STORE__URL": filled.url})
    assert result.exit_code == 2 and "pip install 'formsync[warehouse]'" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_load_into_postgresql(filled: Store, pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pg_dataset_db = pg_database.rsplit("/", 1)[1]
    # dlt asks for a password; the server trusts loopback and ignores it
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", f"postgresql://{PG_USER}:trusted@{PG_HOST}:{PG_PORT}/"
                                                              f"{pg_dataset_db}")
    table = filled.schema(FORM).name
    assert load(filled, destination="postgres", dataset="forms").rows[table] == 2
    filled.upsert_submissions([list_item("sub_2", {"score": 9.5}, edits=1)], FORM)
    assert load(filled, destination="postgres", dataset="forms").rows[table] == 1
    with pg_connect(pg_dataset_db) as conn:
        types = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns WHERE "
                                  "table_schema = 'forms' AND table_name = %s", (table,)).fetchall())
        assert (types["score"], types["stars"], types["submitted_at"]) == \
            ("double precision", "bigint", "timestamp with time zone")
        assert conn.execute(f"SELECT submission_id, score FROM forms.{table} ORDER BY 1").fetchall() == \
            [("sub_1", 5.0), ("sub_2", 9.5)]


def test_load_job_params_and_summary() -> None:
    job = JobSettings(id="warehouse", kind="load", after="nightly-sync", params={"dataset": "forms"})
    params = parse_params(job)
    assert isinstance(params, LoadParams) and params.dataset == "forms" and params.destination is None
    report = LoadReport(destination="duckdb", dataset="forms", rows={"answers": 3})
    assert summarise("load", report) == "loaded into duckdb/forms (answers 3)"


async def test_the_scheduler_runs_the_load_and_incremental_export_jobs(filled: Store, here: Path) -> None:
    """``formsync run``'s jobs: a load, and an export of the rows new since its last run
    into a file of its own each time (``{run}``); a run with nothing new writes no file
    and is recorded ``nothing new``."""
    cfg = here / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "{filled.url}"\n[load]\ndataset = "nightly"\n'
                   '[[jobs]]\nid = "warehouse"\nkind = "load"\ninterval_seconds = 1\n'
                   '[[jobs]]\nid = "files"\nkind = "export"\ninterval_seconds = 1\n'
                   f'params = {{ format = "csv", out = "{here}/new-{{form}}-{{run}}.csv", since_last = "files" }}\n')
    stop = asyncio.Event()
    task = asyncio.create_task(serve(load_settings(cfg), filled, stop=stop,
                                     options=SchedulerOptions(lock_poll_seconds=0.5)))
    try:
        for _ in range(300):
            done = {j: filled.runs.last(j) for j in ("warehouse", "files")}
            if (here / "new-load-test-1.csv").exists() and all(r and r.outcome != "running" for r in done.values()) \
                    and done["files"] and done["files"].summary == "nothing new":
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    first = filled.runs.last("warehouse")
    assert first is not None and first.outcome == "ok", first
    assert (first.summary or "").startswith("loaded into duckdb/nightly (")
    assert _duck(here / "formsync.duckdb", f"SELECT count(*) FROM nightly.{filled.schema(FORM).name}") == [(2,)]
    assert len((here / "new-load-test-1.csv").read_text().splitlines()) == 3, "the rows once"
    files = filled.runs.last("files")
    assert files is not None and (files.outcome, files.summary) == ("ok", "nothing new"), files
    assert not (here / "new-load-test-2.csv").exists(), "then nothing new: no file"


def test_a_load_in_parts_sends_the_same_rows(filled: Store, here: Path, monkeypatch: pytest.MonkeyPatch,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """Parts of one byte each (a load package per batch): the tables hold what one part
    would give, the long table's delete-insert keeps every submission's answers, and dlt
    warns of nothing (a user would read a warning on every large load)."""
    import pipelines.export.load as load_module

    monkeypatch.setattr(load_module, "PART_BYTES", 1)
    table = filled.schema(FORM).name
    filled.upsert_submissions([list_item(f"sub_{i}", {"score": i}) for i in range(3, 9)], FORM)
    with caplog.at_level(logging.WARNING, logger="dlt"):
        assert load(filled).rows == {table: 8, "answers": 10, "requests": 1}
    assert [r.getMessage() for r in caplog.records if r.name.startswith("dlt")] == []
    db = here / "formsync.duckdb"
    assert _duck(db, f"SELECT count(*), count(DISTINCT submission_id) FROM formsync_data.{table}") == [(8, 8)]
    assert _duck(db, "SELECT submission_id, count(*) FROM formsync_data.answers GROUP BY 1 ORDER BY 1")[:2] == \
        [("sub_1", 3), ("sub_2", 1)]
    loads = _duck(db, "SELECT count(*) FROM formsync_data._dlt_loads")[0][0]
    assert loads > 1, "one load package per part"
    assert load(filled).rows == {table: 0, "answers": 0, "requests": 0}
    assert _duck(db, "SELECT count(*) FROM formsync_data._dlt_loads")[0][0] == loads


def test_a_load_that_fits_one_part_is_one_load_package(filled: Store, here: Path) -> None:
    """No part is made of nothing: a load whose rows fit a part makes one package, its
    ``_dlt_loads`` one row (an empty part would load, and be counted, for nothing)."""
    load(filled)
    assert _duck(here / "formsync.duckdb", "SELECT count(*) FROM formsync_data._dlt_loads") == [(1,)]


def test_a_part_holds_batches_up_to_its_bytes_and_the_next_takes_up_where_it_stopped(
        filled: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts are bounded by their batches' Arrow bytes: a budget of one byte takes one batch
    a part, a budget of a batch and a byte takes two; every batch is in exactly one part and
    no part is empty."""
    import pipelines.export.load as load_module
    from pipelines.export.load import warehouse_source

    monkeypatch.setattr(load_module, "BATCH_ROWS", 10)  # form batches of 2 submissions, long of 1
    filled.upsert_submissions([list_item(f"sub_{i}", {"score": i, "tags": ["a"]}) for i in range(3, 8)], FORM)

    def parts(size: float) -> list[list[tuple[str, int, int]]]:
        with filled.exports.snapshot():
            return [[(name, b.num_rows, b.nbytes) for name, r in p.resources.items() if name != "campaign_rows"
                     for b in r] for p in warehouse_source(filled, f"parts-{size}").parts(size)]

    whole = parts(float("inf"))
    assert len(whole) == 1
    assert [n for name, n, _ in whole[0] if name == filled.schema(FORM).name] == [2, 2, 2, 1], "BATCH_ROWS // 5 a read"
    one = parts(1)
    assert [len(p) for p in one] == [1] * len(whole[0]), "one batch a part"
    assert sorted(b for p in one for b in p) == sorted(whole[0])
    first = whole[0][0][2]
    assert [len(p) for p in parts(first + 1)][0] == 2


def test_a_load_failing_in_a_later_part_moves_nothing_and_the_next_sends_each_row_once(
        filled: Store, here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each part is loaded before the next is read: a failure in the second part leaves the
    first loaded and the cursors where they were; the next load sends every row again and
    the destination keeps one of each (the merge on the submission id)."""
    import pipelines.export.load as load_module
    from pipelines.export.load import LoadFailed

    monkeypatch.setattr(load_module, "PART_BYTES", 1)  # a part per batch
    filled.upsert_submissions([list_item(f"sub_{i}", {"score": i}) for i in range(3, 9)], FORM)
    real, seen = load_module._for_dlt, []

    def failing_second(batch: Any) -> Any:
        seen.append(batch.num_rows)
        if len(seen) == 2:
            raise OSError("disk full (the second part)")
        return real(batch)

    monkeypatch.setattr(load_module, "_for_dlt", failing_second)
    with pytest.raises(LoadFailed, match="nothing moved"):
        load(filled)
    table = filled.schema(FORM).name
    db = here / "formsync.duckdb"
    assert _duck(db, "SELECT count(*) FROM formsync_data._dlt_loads") == [(1,)], "the first part was loaded"
    monkeypatch.setattr(load_module, "_for_dlt", real)
    assert load(filled).rows == {table: 8, "answers": 10, "requests": 1}, "the cursors had not moved"
    assert _duck(db, f"SELECT count(*), count(DISTINCT submission_id) FROM formsync_data.{table}") == [(8, 8)]
    assert _duck(db, "SELECT count(*) FROM formsync_data.answers") == [(10,)]


def test_every_table_reaches_duckdb_as_parquet(filled: Store, here: Path) -> None:
    """dlt's fastest loader file format on DuckDB for every table the load sends: no
    table's rows go as INSERT statements (only dlt's own state does)."""
    import dlt

    load(filled)
    # The packages are gone once loaded (no copy of the rows stays): dlt's trace names their files.
    pipeline = dlt.attach(pipeline_name("duckdb", "formsync_data"),
                          pipelines_dir=str(here / "data" / "formsync-dlt" / "pipelines"))
    done = [Path(job.file_path) for package in pipeline.last_trace.last_load_info.load_packages
            for job in package.jobs["completed_jobs"]]
    tables = {p.name.split(".")[0]: p.name.split(".")[-1] for p in done if not p.name.startswith("_dlt")
              and not p.name.endswith(".sql")}
    assert tables == {filled.schema(FORM).name: "parquet", "answers": "parquet", "requests": "parquet"}


def test_the_notices_dlt_gives_on_every_large_load_are_kept_out_of_the_log() -> None:
    """The expected notices (a later part extracted with the older schema, hints beating the
    batches' types) are filtered; any other dlt warning reaches the log."""
    from pipelines.export.load import ExpectedNotices

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("dlt", logging.WARNING, "normalize.py", 324, message, None, None)

    keep = ExpectedNotices().filter
    assert not keep(record("When normalizing package 1 with schema formsync: the storage schema hash A= is "
                           "different from extract package schema hash B=. Storage schema was used."))
    assert not keep(record("In resource: answers, when merging arrow schema with dlt schema, several column "
                           "hints were different."))
    assert keep(record("Destination refused the load: permission denied"))
