"""``formsync load --destination filesystem --table-format delta``: Delta tables in a
local folder (``formsync-delta/`` beside the store) that equal the store's own tables,
row for row and value for value, after submissions, an edit, a purge, an erase and a
field added; a load killed with SIGKILL between deleting a part's answers and appending
them, or a first load killed between its parts, leaves, after the next load, no row lost
or twice; the campaign rows typed and replaced whole; the guide's DuckDB query where
DuckDB's delta extension loads."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from typer.testing import CliRunner

from connector.store import Store
from connector.store._erasure import Person
from pipelines.cli import app
from pipelines.export.load import (
    DELETED,
    DELTA_DIR,
    cursor_name,
    delta_target,
    dlt_packages,
    dlt_settings,
    load,
    work_dir,
)
from pipelines.export.write import table_streams
from pipelines.lifecycle.erase import erase_person
from tests.conftest import Sandbox
from tests.items import list_item
from tests.stores import migrated_store

ROOT = Path(__file__).resolve().parents[2]
FORM = "form_lake"
FIELDS = [{"key": "score", "type": "number", "title": "Score"}, {"key": "at", "type": "time", "title": "At"},
          {"key": "tags", "type": "checkbox", "title": "Tags", "options": [{"key": "a", "label": "A"}]},
          {"key": "note", "type": "text", "title": "Note"}]
ADA = "ada@example.com"
DELTA = ["load", "--destination", "filesystem", "--table-format", "delta"]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def store(here: Path) -> Store:
    """Six submissions (one by Ada) and two requests (one to Ada)."""
    (here / "data").mkdir()
    s = migrated_store(f"sqlite:///{here / 'data' / 'formsync.db'}", key_file=here / "data" / "formsync.key")
    s.record_fields(FORM, FIELDS)
    subs = [list_item(f"sub_{i}", {"score": i, "at": f"0{i}:30:00", "tags": ["a"] if i % 2 else [], "note": f"n{i}"})
            for i in range(1, 7)]
    subs[1]["respondentEmail"] = ADA
    s.upsert_submissions(subs, FORM, "Lake Test")
    s.upsert_requests([{"id": "req_ada", "status": "pending", "formId": FORM, "createdAt": 1_780_000_000_000,
                        "recipient": {"email": ADA}},
                       {"id": "req_bo", "status": "pending", "formId": FORM, "createdAt": 1_780_000_000_000,
                        "recipient": {"email": "bo@example.com"}}])
    s.refresh_views([FORM])  # the view takes its name from the form's, now that a submission names it
    return s


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, default=str, sort_keys=True)


def _store_rows(store: Store, table: str) -> dict[str, list[dict[str, Any]]]:
    """The store's own tables (what ``formsync export`` writes), by their destination
    names, rows sorted, cells as Delta holds them: times as text ``HH:MM:SS``, lists
    and records as JSON text (parsed on both sides)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind, name in (("wide", table), ("long", "answers"), ("requests", "requests")):
        [stream] = table_streams(store, kind)  # type: ignore[arg-type]  # one form
        rows = pa.Table.from_batches(list(stream.batches()), schema=stream.schema).to_pylist()
        out[name] = sorted(({k: v.strftime("%H:%M:%S") if isinstance(v, time) else v for k, v in r.items()}
                            for r in rows), key=_key)
    return out


def _delta_rows(folder: Path, store_rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The Delta tables of ``store_rows``' names read back with deltalake, the deletion
    flag left out (NULL on every kept row), the JSON text of the store's list and record
    cells parsed; no column of null type."""
    out = {}
    for name, expected in store_rows.items():
        arrow = DeltaTable(str(folder / name)).to_pyarrow_table()
        assert not [f.name for f in arrow.schema if pa.types.is_null(f.type)], f"{name}: a column of null type"
        if DELETED in arrow.column_names:
            assert arrow.column(DELETED).null_count == arrow.num_rows, "kept rows hold NULL in the flag"
            arrow = arrow.drop_columns([DELETED])
        nested = {k for r in expected for k, v in r.items() if isinstance(v, list | dict)}
        out[name] = sorted(({k: json.loads(v) if k in nested and v is not None else v for k, v in r.items()}
                            for r in arrow.to_pylist()), key=_key)
    return out


def _folder(here: Path) -> Path:
    return here / "data" / DELTA_DIR / "formsync_data"


def _cli_load(store: Store, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, [*DELTA, *extra], env={"FORMSYNC_STORE__URL": store.url})
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_delta_tables_equal_the_store_after_an_edit_a_purge_an_erase_and_a_field_added(store: Store,
                                                                                         here: Path) -> None:
    table = store.schema(FORM).name
    first = _cli_load(store)
    assert first["destination"] == "filesystem" and first["rows"] == {table: 6, "answers": 24, "requests": 2}
    assert _delta_rows(_folder(here), _store_rows(store, table)) == _store_rows(store, table)
    at = DeltaTable(str(_folder(here) / table)).to_pyarrow_table().column("at")
    assert at.type == pa.string() and "01:30:00" in at.to_pylist(), "a time is text HH:MM:SS"

    store.upsert_submissions([list_item("sub_1", {"score": 10, "note": "edited"}, edits=1)], FORM)  # tags, at removed
    store.remove_submissions({"sub_3": FORM}, reason="purge")
    assert erase_person(store, Person(email=ADA)).matched  # sub_2 and req_ada
    store.record_fields(FORM, [*FIELDS, {"key": "mood", "type": "rating", "title": "Mood"}])
    store.upsert_submissions([list_item("sub_7", {"score": 7, "mood": 3})], FORM)
    second = _cli_load(store)
    assert second["deleted"] == {table: 2, "answers": 2, "requests": 1}
    expected = _store_rows(store, table)
    assert sorted(r["submission_id"] for r in expected[table]) == ["sub_1", "sub_4", "sub_5", "sub_6", "sub_7"]
    assert _delta_rows(_folder(here), expected) == expected
    wide = DeltaTable(str(_folder(here) / table)).to_pyarrow_table()
    assert wide.schema.field("mood").type == pa.int64(), "the field added: a new column of its type"
    frame = DeltaTable(str(_folder(here) / "answers")).to_pandas()  # pandas reads it too
    assert sorted(frame.loc[frame.submission_id == "sub_1", "field_key"]) == ["note", "score"]

    again = _cli_load(store)
    assert again["rows"] == {table: 0, "answers": 0, "requests": 0} and again["deleted"] == {}
    assert _delta_rows(_folder(here), expected) == expected


def test_the_delta_folder_and_cursor_name(store: Store, here: Path) -> None:
    """Without a bucket, ``formsync-delta/`` beside the SQLite store; the cursor's name
    holds the folder, so a load into another folder starts over; another destination is
    refused in one line."""
    with dlt_settings(work_dir(store)):
        target = delta_target(store, "filesystem")
    assert target.url == _folder(here).parent.as_uri()
    load(store, destination="filesystem", table_format="delta")
    assert store.export_cursors.get(cursor_name(target.name, "formsync_data"), "long", "") is not None
    result = CliRunner().invoke(app, [*DELTA[:1], "--table-format", "delta"], env={"FORMSYNC_STORE__URL": store.url})
    assert result.exit_code == 2 and "--destination filesystem" in result.output and "Traceback" not in result.output


def test_a_bucket_url_in_dlts_configuration_holds_the_tables_and_names_the_cursor(
        store: Store, here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dlt's ``bucket_url`` (here a local file:// URL: no object store is reachable) is
    where the tables go and is in the cursor's name: a load there starts from the first row."""
    load(store, destination="filesystem", table_format="delta")
    lake = (here / "lake").as_uri()
    monkeypatch.setenv("DESTINATION__FILESYSTEM__BUCKET_URL", lake)
    report = load(store, destination="filesystem", table_format="delta")
    assert report.rows[store.schema(FORM).name] == 6, "another bucket: every row again"
    assert DeltaTable(str(here / "lake" / "formsync_data" / "answers")).to_pyarrow_table().num_rows == 24
    assert store.export_cursors.get(cursor_name(f"filesystem+delta:{lake}", "formsync_data"), "long", "") is not None


def _operations(folder: Path, table: str) -> list[str]:
    """The Delta log's operations on ``table``, oldest first."""
    return [str(h["operation"]) for h in reversed(DeltaTable(str(folder / table)).history())]


def test_a_first_load_in_parts_appends_and_the_next_one_merges(
        store: Store, here: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A first load (no table yet) in several parts appends each part: no merge scans the
    rows of the parts before it and no answer is deleted (each submission is sent once),
    and dlt's notice that the deletion flag is ignored on an append is not shown; the
    next load merges the form's table and requests and replaces the answers of the
    submissions it sends. Equal to the store after each."""
    import pipelines.export.load as load_module

    table = store.schema(FORM).name
    monkeypatch.setattr(load_module, "BATCH_ROWS", 8)  # batches of one submission's rows
    monkeypatch.setattr(load_module, "PART_BYTES", 1)  # a part per batch
    assert load(store, destination="filesystem", table_format="delta").rows == {table: 6, "answers": 24, "requests": 2}
    assert _delta_rows(_folder(here), _store_rows(store, table)) == _store_rows(store, table)
    first = {t: _operations(_folder(here), t) for t in (table, "answers", "requests")}
    assert first[table].count("WRITE") > 1 and first["answers"].count("WRITE") > 1, "several parts"
    assert {op for ops in first.values() for op in ops} == {"WRITE"}, first
    assert "hard_delete" not in capfd.readouterr().err

    store.upsert_submissions([list_item("sub_1", {"score": 10, "note": "edited"}, edits=1)], FORM)
    store.remove_submissions({"sub_3": FORM}, reason="purge")
    assert load(store, destination="filesystem", table_format="delta").deleted == {table: 1, "answers": 1}
    expected = _store_rows(store, table)
    assert _delta_rows(_folder(here), expected) == expected
    assert "MERGE" in _operations(_folder(here), table) and "DELETE" in _operations(_folder(here), "answers")
    assert dlt_packages(work_dir(store)) == [], "no load package left once loaded"


KILLED = """
import os, sys, time
import pipelines.export.load as m
from connector.store import Store
m.PART_BYTES, m.BATCH_ROWS = 1, 8  # a part per batch of one submission: parts loaded, then one deleted only
calls, delete = [0], m.delete_answers
def stop_after(pipeline, keys):
    delete(pipeline, keys)
    calls[0] += bool(keys)
    if keys and calls[0] == int(sys.argv[2]):
        print("deleted", flush=True)
        time.sleep(60)
m.delete_answers = stop_after
m.load(Store(sys.argv[1]), destination="filesystem", table_format="delta")
"""


@pytest.mark.parametrize("kill_at", [1, 2])
def test_a_delta_load_killed_after_deleting_a_parts_answers_loses_and_doubles_nothing(
        store: Store, here: Path, monkeypatch: pytest.MonkeyPatch, kill_at: int) -> None:
    """SIGKILL after a part's answer rows were deleted and before they were appended (the
    first part, or the second with the first loaded): the cursors did not move, so the
    next load deletes and appends them again: equal to the store."""
    import pipelines.export.load as load_module

    table = store.schema(FORM).name
    monkeypatch.setattr(load_module, "BATCH_ROWS", 8)  # answer batches of one submission: parts of one each
    load(store, destination="filesystem", table_format="delta")
    store.upsert_submissions([list_item(f"sub_{i}", {"score": -i, "note": "again"}, edits=1) for i in range(1, 7)], FORM)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", KILLED,
                              store.url, str(kill_at)], cwd=here, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "deleted"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    half = DeltaTable(str(_folder(here) / "answers")).to_pyarrow_table()
    assert half.num_rows < 24, "the kill left answers deleted and not appended"
    report = load(store, destination="filesystem", table_format="delta")
    assert report.rows[table] == 6
    expected = _store_rows(store, table)
    assert _delta_rows(_folder(here), expected) == expected


FIRST_KILLED = """
import sys, time
import pipelines.export.load as m
from connector.store import Store
m.PART_BYTES, m.BATCH_ROWS = 1, 8  # a part per batch of one submission
parts, delete = [0], m.delete_answers
def stop_at(pipeline, keys):  # called once a part is extracted, before it is loaded
    parts[0] += 1
    if parts[0] == int(sys.argv[2]):
        print("extracted", flush=True)
        time.sleep(60)
    delete(pipeline, keys)
m.delete_answers = stop_at
m.load(Store(sys.argv[1]), destination="filesystem", table_format="delta")
"""


@pytest.mark.parametrize("kill_at", [2, 8])
def test_a_first_delta_load_killed_between_its_parts_loses_and_doubles_nothing(
        store: Store, here: Path, kill_at: int) -> None:
    """SIGKILL of a first load (no table yet: its parts appended) with the next part
    extracted and not loaded: after the first part (one form row written), or with the
    form's table whole and the answers begun. The cursors did not move, and the next load
    sends every row again into the tables it finds there (merged, the answers of its
    submissions deleted first) or makes the ones still missing: every row once."""
    table = store.schema(FORM).name
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", FIRST_KILLED, store.url, str(kill_at)],
                             cwd=here, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "extracted"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    held = {t: DeltaTable(str(_folder(here) / t)).to_pyarrow_table().num_rows if (_folder(here) / t).is_dir() else 0
            for t in (table, "answers", "requests")}
    assert held[table] > 0 and sum(held.values()) < 6 + 24 + 2, f"stopped between its parts: {held}"
    assert store.export_cursors.list() == [], "no cursor moved"
    report = load(store, destination="filesystem", table_format="delta")
    assert report.rows == {table: 6, "answers": 24, "requests": 2}
    expected = _store_rows(store, table)
    assert _delta_rows(_folder(here), expected) == expected


def test_the_guides_delta_query_where_duckdb_loads_its_delta_extension(store: Store, here: Path) -> None:
    """The query of docs/warehouse.md's Delta section, run on a loaded folder when DuckDB
    has its delta extension (it cannot be downloaded here: then the test says so)."""
    load(store, destination="filesystem", table_format="delta")
    con = duckdb.connect()
    try:
        con.sql("SET autoinstall_known_extensions = false")
        con.sql("LOAD delta")
    except duckdb.Error as e:
        pytest.skip(f"DuckDB's delta extension does not load here ({str(e).splitlines()[0]}): the guide's "
                    f"delta_scan query is not run")
    guide = (ROOT / "docs" / "warehouse.md").read_text()
    [block] = re.findall(r"```python\n(import duckdb\n[^`]*delta_scan[^`]*)```", guide)
    os.chdir(here / "data")
    exec(compile(block, "docs/warehouse.md", "exec"), {})


def test_a_load_job_takes_the_delta_table_format() -> None:
    from connector.config.settings import JobSettings
    from pipelines.jobs.params import LoadParams
    from pipelines.operate.jobs import ConfigError, parse_params

    job = JobSettings(id="lake", kind="load", after="sync", params={"destination": "filesystem", "table_format": "delta"})
    params = parse_params(job)
    assert isinstance(params, LoadParams) and params.table_format == "delta"
    with pytest.raises(ConfigError, match="table_format"):
        parse_params(JobSettings(id="lake", kind="load", after="sync", params={"table_format": "iceberg"}))


async def test_campaign_rows_on_delta_are_typed_and_replaced_whole(sandbox: Sandbox, here: Path) -> None:
    """The campaign rows' Delta table has every declared column with its type from the
    first load (none of null type), and is replaced whole by each load: a second job's
    row joins, the first job's rows are not written twice."""
    from connector.store._schema import CAMPAIGN_COLUMNS
    from pipelines.outreach import run_outreach
    from tests.pipelines.test_load_contract import _client, _sheet, _store_with_a_campaign

    async with await _client(sandbox) as fc:
        store = await _store_with_a_campaign(fc, sandbox, here)
        load(store, destination="filesystem", table_format="delta")
        folder = here / "data" / DELTA_DIR / "formsync_data" / "campaign_rows"
        first = DeltaTable(str(folder)).to_pyarrow_table()
        assert first.num_rows == 2 and {c.name for c in CAMPAIGN_COLUMNS} <= set(first.column_names)
        assert not [f.name for f in first.schema if pa.types.is_null(f.type)]
        assert pa.types.is_timestamp(first.schema.field("created_at").type)
        again = await run_outreach(fc, store, _sheet(here / "autumn.csv", ["c@example.test"]),
                                   sandbox.pro.forms["Contact"], job="autumn", report_path=here / "r2.csv")
        assert again.sent == 1
    load(store, destination="filesystem", table_format="delta")
    rows = DeltaTable(str(folder)).to_pyarrow_table()
    assert sorted(rows.column("job").to_pylist()) == ["autumn", "spring", "spring"]
