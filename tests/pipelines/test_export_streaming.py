"""The export streams in batches: batches crossing changes of the answers' keys and kinds
give the same file as one batch (SQLite, PostgreSQL, MariaDB), the wide columns and types
are the form's field list's in every batch, formula text is neutralised column-wise,
memory stays bounded by a batch, and a failed export leaves nothing behind."""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openpyxl
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import insert
from typer.testing import CliRunner

from connector.store import Store
from connector.store._mapping import answer_rows, answer_tuples
from connector.store._schema import OWN
from connector.store._tables import SubmissionRow
from pipelines.cli import app
from pipelines.export import write as export_mod
from pipelines.export.columns import json_cells
from pipelines.export.json_text import json_texts
from pipelines.export.write import export, neutralise, neutralise_array
from tests.connector.conftest import db_url, migrated_db_url, mysql_database, pg_database  # noqa: F401  (fixtures)
from tests.pipelines.test_export import T0, read_csv, read_sheet, sub_event


def varied(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Answers whose keys and kinds change from one submission to the next, so batches of
    a few rows each see different columns and types."""
    answers: dict[str, Any] = {"name": f"=evil{i}" if i % 3 == 0 else f"Person {i}",
                               "score": i if i < 10 else i + 0.5,
                               "grid": {"a": "x"} if i < 12 else {"a": "y", "b": "z"}}
    if i < 5:
        answers["code"] = i
    elif i >= 15:
        answers["code"] = f"c{i}"
    if i >= 20:
        answers["late"] = True
    if i % 4 == 0:
        answers["tags"] = ["red", "blue"]
    return answers, {k: str(v) for k, v in answers.items() if k != "grid"} | {
        "grid": ", ".join(f"{r.upper()}: {c.upper()}" for r, c in answers["grid"].items())}


VARIED_FIELDS = [
    {"key": "name", "type": "text", "title": "Name"}, {"key": "score", "type": "number", "title": "Score"},
    {"key": "grid", "type": "matrix", "title": "Grid", "rows": [{"key": "a", "label": "A"}, {"key": "b", "label": "B"}],
     "columns": [{"key": "x", "label": "X"}, {"key": "y", "label": "Y"}, {"key": "z", "label": "Z"}]},
    {"key": "code", "type": "text", "title": "Code"},
    {"key": "tags", "type": "checkbox", "title": "Tags",
     "options": [{"key": "red", "label": "Red"}, {"key": "blue", "label": "Blue"}]},
    {"key": "late", "type": "switch", "title": "Late"},
]


@pytest.fixture
def varied_store(migrated_db_url: str) -> Iterator[Store]:  # noqa: F811
    s = Store(migrated_db_url)
    s.record_fields("form_v", VARIED_FIELDS)
    s.store_events([sub_event(f"evt_{i}", f"sub_{i:03d}", "form_v", T0 + i * 1000, *varied(i)) for i in range(23)])
    try:
        yield s
    finally:
        s.close()


@pytest.mark.parametrize("table", ["wide", "long", "requests"])
def test_batches_across_boundaries_equal_one_batch(varied_store: Store, tmp_path: Path, table: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    one = export(varied_store, "parquet", tmp_path / "one.parquet", table=table)  # type: ignore[arg-type]
    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 5)  # 23 submissions: five batches
    many = export(varied_store, "parquet", tmp_path / "many.parquet", table=table)  # type: ignore[arg-type]
    assert many == one.model_copy(update={"path": str(tmp_path / "many.parquet"),
                                          "files": {k: str(tmp_path / "many.parquet") for k in one.files}})
    assert pq.read_table(tmp_path / "many.parquet").equals(pq.read_table(tmp_path / "one.parquet"))
    for fmt in ("csv", "xlsx"):
        export(varied_store, fmt, tmp_path / f"many.{fmt}", table=table)  # type: ignore[arg-type]
    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 50_000)
    for fmt in ("csv", "xlsx"):
        export(varied_store, fmt, tmp_path / f"one.{fmt}", table=table)  # type: ignore[arg-type]
    assert (tmp_path / "many.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()
    assert read_sheet(tmp_path / "many.xlsx", table) == read_sheet(tmp_path / "one.xlsx", table)


def test_the_wide_tables_shaped_pieces_are_its_batches_before_regrouping(varied_store: Store,  # noqa: F811
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 10)  # parts of 2 submissions, regrouped 10 at a time
    [wide] = export_mod.table_streams(varied_store, "wide")
    pieces, batches = list(wide.pieces()), list(wide.batches())
    assert [b.num_rows for b in pieces] == [2] * 11 + [1]
    assert [b.num_rows for b in batches] == [10, 10, 3]
    assert pa.Table.from_batches(pieces).equals(pa.Table.from_batches(batches))
    [long] = export_mod.table_streams(varied_store, "long")  # nothing regrouped: its batches
    assert pa.Table.from_batches(list(long.pieces())).equals(pa.Table.from_batches(list(long.batches())))


def test_wide_columns_and_types_are_the_field_lists_in_every_batch(varied_store: Store, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 5)
    report = export(varied_store, "parquet", tmp_path / "w.parquet")
    # the field list's order, though "tags", "late" and "grid" row b are first answered in later batches
    assert report.columns["wide"][len(OWN):] == ["name", "score", "grid_a", "grid_b", "code", "tags", "tags_label",
                                                 "late"]
    t = pq.read_table(tmp_path / "w.parquet")
    assert t.schema.field("score").type == pa.float64()  # a number field: always double
    assert t.schema.field("code").type == pa.string()  # a text field: text, whatever was stored
    assert t.schema.field("late").type == pa.bool_()
    assert t.schema.field("tags").type == pa.list_(pa.string())
    rows = t.to_pylist()
    # integers stored in a text field are of another type than the field's: empty cells, as in the view
    assert [r["code"] for r in rows[:6]] == [None] * 6
    assert rows[15]["code"] == "c15" and rows[0]["score"] == 0.0 and rows[10]["score"] == 10.5
    assert [r["late"] for r in rows[19:]] == [None, True, True, True]
    assert rows[11]["grid_b"] is None and rows[12]["grid_b"] == "z"
    assert rows[0]["tags"] == ["red", "blue"] and rows[1]["tags"] is None
    assert rows[0]["name"] == "=evil0"  # Parquet keeps the text as stored
    export(varied_store, "csv", tmp_path / "w.csv")
    csv_rows = read_csv(tmp_path / "w.csv")
    assert [r["name"] for r in csv_rows[:4]] == ["'=evil0", "Person 1", "Person 2", "'=evil3"]
    assert [r["late"] for r in csv_rows[19:]] == ["", "true", "true", "true"]
    assert csv_rows[10]["score"] == "10.5" and csv_rows[0]["score"] == "0.0" and csv_rows[0]["tags"] == '["red", "blue"]'


NASTY = ["=1+2", "+33 6", "-5", "@SUM(A1)", "\tx", "\rx", "a=b", "", " =x", "'=x", "==", "=", "é=",
         "=é ünïcode", "line\n=two", "-", None]


def test_neutralise_array_matches_neutralise() -> None:
    got = neutralise_array(pa.array(NASTY, pa.string())).to_pylist()
    assert got == [neutralise(v) for v in NASTY]
    assert got[0] == "'=1+2" and got[6] == "a=b" and got[-1] is None
    assert neutralise_array(pa.array([-5, 3])).to_pylist() == [-5, 3]  # numbers are not formulas
    chunked = pa.chunked_array([NASTY[:5], NASTY[5:]], pa.string())
    assert neutralise_array(chunked).to_pylist() == [neutralise(v) for v in NASTY]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | st.text(alphabet=st.sampled_from(list("=+-@\t\r'a é日\n")), max_size=4), max_size=12),
       st.integers(0, 3), st.integers(0, 3), st.booleans())
def test_neutralise_array_matches_neutralise_on_any_text(values: list[str | None], start: int, cut: int,
                                                         large: bool) -> None:
    """Slices, large text and chunks alike (the first bytes are read off the buffers)."""
    column = pa.array(values, pa.large_string() if large else pa.string()).slice(start)
    want = [neutralise(v) for v in values[start:]]
    got = neutralise_array(column)
    got.validate(full=True)  # the quoted column is built from its buffers
    assert got.to_pylist() == want
    chunked = pa.chunked_array([column.slice(0, cut), column.slice(cut)], column.type)
    assert neutralise_array(chunked).to_pylist() == want


_CELL = st.none() | st.integers(-5, 5) | st.sampled_from([2.0, 2.5, -0.5])
_RECORD = st.none() | st.fixed_dictionaries({"size": _CELL, "name": st.none() | st.sampled_from(["a", "é"])})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | st.lists(_CELL, max_size=3), min_size=1, max_size=8) |
       st.lists(st.none() | st.lists(_RECORD, max_size=2), min_size=1, max_size=8) | st.lists(_RECORD, min_size=1,
                                                                                             max_size=8),
       st.integers(0, 4), st.integers(0, 4))
def test_json_cells_of_a_slice_are_the_slice_of_the_cells(values: list[Any], start: int, length: int) -> None:
    """A batch is written to XLSX a slice at a time: a slice's cells are the whole column's."""
    column = pa.array(values)
    assert json_cells(column.slice(start, length)).to_pylist() == json_cells(column).to_pylist()[start:start + length]


_ITEM = st.none() | st.sampled_from(["a", "é", 'q"'])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | st.lists(_ITEM, max_size=3), min_size=1, max_size=8) |
       st.lists(st.none() | st.lists(st.none() | st.fixed_dictionaries({"name": _ITEM}), max_size=2), min_size=1,
                max_size=8), st.integers(0, 4))
def test_lists_with_null_items_are_written_in_arrow_as_json_dumps_writes_them(values: list[Any], start: int) -> None:
    """A null item is ``null`` in the text, written in Arrow (the archived locations beside
    a file answer are lists of null until archived): none is left to Python."""
    column = pa.array(values).slice(start)
    want = [None if v is None else json.dumps([x if not isinstance(x, dict) else {k: y for k, y in x.items()
                                                                                  if y is not None} for x in v],
                                              ensure_ascii=False) for v in values[start:]]
    assert json_texts(column).to_pylist() == want


def test_formula_text_neutralised_in_csv_and_xlsx_over_batches(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    s = Store(f"sqlite:///{tmp_path / 'n.db'}")
    s.migrate()
    s.store_events([sub_event(f"evt_{i}", f"sub_{i:03d}", "form_n", T0 + i, {"v": v}, {"v": v})
                    for i, v in enumerate(v for v in NASTY if v is not None)])
    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 4)
    export(s, "csv", tmp_path / "n.csv", table="long")
    export(s, "xlsx", tmp_path / "n.xlsx", table="long")
    want = [neutralise(v) for v in NASTY if v is not None]
    assert [r["display_text"] for r in pd.read_csv(tmp_path / "n.csv", dtype=str, keep_default_na=False)
            .to_dict("records")] == want
    ws = openpyxl.load_workbook(tmp_path / "n.xlsx")["long"]
    cells = [c for row in ws.iter_rows(min_row=2) for c in row]
    assert all(c.data_type != "f" for c in cells)
    # openpyxl shows a carriage return in a cell as Excel's escape _x000D_ (Excel reads it back as \r)
    assert [(r[7] or "").replace("_x000D_", "\r") for r in ws.iter_rows(min_row=2, values_only=True)] == want
    s.close()


async def test_cli_wide_columns_follow_the_stored_field_list_with_no_service_call(sandbox: Any,
                                                                                   tmp_path: Path) -> None:
    from connector.client.rpc import FormClient

    form = sandbox.pro.forms["Contact"]
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        items = (await fc.list_fields(form)).items
    keys = [f.key for f in items]
    assert len(keys) >= 3
    db = tmp_path / "o.db"
    s = Store(f"sqlite:///{db}")
    s.migrate()
    s.record_fields(form, items)
    backwards = {k: f"v-{k}" for k in reversed(keys)} | {"extra": "kept"}  # stored in reverse field order
    s.store_events([sub_event("evt_o", "sub_o", form, T0, backwards, backwards)])
    s.close()
    out = tmp_path / "o.csv"
    # the service out of reach: the export reads the store only
    env = {"FORMSYNC_STORE__URL": f"sqlite:///{db}", "FORMSYNC_SERVICE__BASE_URL": "http://127.0.0.1:9",
           "FORMSYNC_SERVICE__TOKEN": sandbox.pro.token, "FORMSYNC_SERVICE__MAX_RETRIES": "0"}
    result = await asyncio.to_thread(
        lambda: CliRunner().invoke(app, ["export", "--format", "csv", "--out", str(out), "--form", form], env=env))
    assert result.exit_code == 0, result.output
    # one line names the key left out: no field list read named it (and none is read now)
    assert result.stderr.count("\n") == 1 and "held back" in result.stderr and ": extra;" in result.stderr
    fields = [c for c in list(read_csv(out)[0])[len(OWN):] if not c.endswith("_label")]
    assert fields == keys  # the field list's order; "extra", no field of the list, is held back


def bulk_store(path: Path, submissions: int) -> int:
    """A store of ``submissions`` submissions of 17 answer rows each, inserted in bulk;
    returns the answer rows."""
    s = Store(f"sqlite:///{path}")
    s.migrate()
    total = 0
    with s.database.engine.begin() as conn:
        subs, rows = [], []
        for i in range(submissions):
            answers = {"name": f"Person {i}", "age": i % 90, "note": f"=note {i}", "colors": ["red", "blue"],
                       "grid": {"speed": "good", "price": "bad", "support": "ok"},
                       "people": [{"first": "Ann", "last": "Lee"}, {"first": "Bo", "last": "Ng"}],
                       "q1": "a", "q2": "b", "q3": "c", "q4": 1.5, "agree": True, "more": "x" * 40}
            sid = f"sub_{i:08d}"
            subs.append({"id": sid, "form_id": "form_m", "submitted_at": T0 + i, "edit_count": 0,
                         "is_completed": True, "answers": answers, "display": {}, "source": "sync",
                         "observed_at": T0, "stored_at": T0})
            rows += answer_rows(sid, answers, {})
        conn.execute(insert(SubmissionRow.__table__), subs)  # type: ignore[attr-defined]
        total = len(rows)
    s.close()
    return total


def test_memory_is_bounded_by_a_batch_not_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = bulk_store(tmp_path / "m.db", 3000)
    assert rows == 51_000
    s = Store(f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 1000)
    # The Python objects of the whole long table, derived at once, as a yardstick.
    tracemalloc.start()
    try:
        with s.database.engine.connect() as conn:
            whole = [a for r in conn.exec_driver_sql("SELECT id, answers, display FROM formsync_submissions")
                     for a in answer_tuples(r[0], json.loads(r[1]), json.loads(r[2]))]
        _, whole_peak = tracemalloc.get_traced_memory()
        del whole
        peaks = {}
        for fmt in ("parquet", "csv"):
            tracemalloc.reset_peak()
            report = export(s, fmt, tmp_path / f"m.{fmt}", table="long")  # type: ignore[arg-type]
            assert report.rows == {"long": rows}
            peaks[f"long {fmt}"] = tracemalloc.get_traced_memory()[1]
        for fmt in ("parquet", "xlsx"):  # XLSX of the wide table: xlsxwriter's cost per cell is slow when traced
            tracemalloc.reset_peak()
            assert export(s, fmt, tmp_path / f"w.{fmt}").rows == {"wide": 3000}  # type: ignore[arg-type]
            peaks[f"wide {fmt}"] = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        s.close()
    assert whole_peak > 10 * 2**20, whole_peak  # the yardstick is big enough to tell
    for fmt, peak in peaks.items():
        assert peak < whole_peak / 4, (fmt, peak, whole_peak)
    assert pq.read_metadata(tmp_path / "m.parquet").num_rows == rows


def test_a_failed_export_leaves_no_file(varied_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.csv").write_text("old\n")
    calls = 0
    real = export_mod._csv_batch

    def failing(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise OSError("disk full")
        return real(batch, schema)

    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 5)
    monkeypatch.setattr(export_mod, "_csv_batch", failing)
    with pytest.raises(OSError, match="disk full"):
        export(varied_store, "csv", out / "keep.csv")
    assert sorted(p.name for p in out.iterdir()) == ["keep.csv"]  # no partial file, no spill left
    assert (out / "keep.csv").read_text() == "old\n"  # what was there is untouched


def test_filters_bind_on_each_database(varied_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled selects carry their parameters (an IN list, a time, a form) on SQLite
    and PostgreSQL alike."""
    from datetime import UTC, datetime

    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 5)
    since = datetime.fromtimestamp((T0 + 20_000) / 1000, tz=UTC)
    export(varied_store, "parquet", tmp_path / "l.parquet", table="long", fields=["late", "grid"], since=since,
           form_id="form_v")
    got = pq.read_table(tmp_path / "l.parquet").to_pylist()
    assert sorted({(r["submission_id"], r["field_key"]) for r in got}) == [
        (f"sub_{i:03d}", k) for i in (20, 21, 22) for k in ("grid", "late")]
    assert len(got) == 9  # grid has rows a and b, late one row, in each of three submissions
    report = export(varied_store, "csv", tmp_path / "none.csv", table="long", form_id="form_other")
    assert report.rows == {"long": 0}


def test_xlsx_rows_stored_after_the_count_are_refused_not_dropped(varied_store: Store, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # A sync storing rows between the count and the write is played by a count that says fewer.
    monkeypatch.setattr(export_mod, "XLSX_MAX_ROWS", 21)  # 20 rows under the header; the store has 23
    monkeypatch.setattr(export_mod, "_count", lambda store, f: 5)
    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 5)
    out = tmp_path / "l.xlsx"
    with pytest.raises(ValueError, match=r"table 'long' has 2\d rows; an XLSX sheet holds at most 20 rows"):
        export(varied_store, "xlsx", out, table="long")  # the batch that passes the limit
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("store.db")] == []


def test_the_cycle_collector_is_paused_while_writing_and_left_as_it_was(varied_store: Store, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The reads make a tuple per row: the collector is paused while the file is written,
    and afterwards is as it was, the export failed or not."""
    seen: list[bool] = []
    write = export_mod._write_parquet

    def spy(table: Any, out: Path) -> int:
        seen.append(gc.isenabled())
        return write(table, out)

    monkeypatch.setattr(export_mod, "_write_parquet", spy)
    export(varied_store, "parquet", tmp_path / "a.parquet", table="long")
    assert seen == [False] and gc.isenabled()

    def broken(table: Any, out: Path) -> int:
        raise OSError("No space left on device")

    monkeypatch.setattr(export_mod, "_write_parquet", broken)
    with pytest.raises(OSError):
        export(varied_store, "parquet", tmp_path / "b.parquet", table="long")
    assert gc.isenabled() and not (tmp_path / "b.parquet").exists()
    monkeypatch.setattr(export_mod, "_write_parquet", spy)
    gc.disable()
    try:
        export(varied_store, "parquet", tmp_path / "c.parquet", table="long")
        assert not gc.isenabled()  # paused by its owner: not turned on by the export
    finally:
        gc.enable()
