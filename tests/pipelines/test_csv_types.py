"""CSV exports read back with the same types every night: a ``number`` field always has
a decimal point (``5000.0``), an ``integer`` one never; booleans are ``true``/``false``,
dates ISO; and the schema file beside each file gives DuckDB's ``read_csv`` and pandas
the same types night after night."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

from connector.store import Store
from pipelines.export.columns import decimal_cells
from pipelines.export.write import export, schema_file
from tests.pipelines.test_export import DAY, T0, sub_event
from tests.stores import migrated_store

FORM = "form_nightly"
FIELDS = [{"key": "amount", "type": "number"}, {"key": "stars", "type": "rating"},
          {"key": "agree", "type": "switch"}, {"key": "visit", "type": "date"}, {"key": "note", "type": "text"}]
NIGHTS = [
    [{"amount": 5000, "stars": 4, "agree": True, "visit": "2026-06-01", "note": "123"}],  # a number that looks whole
    [{"amount": 1234.5, "stars": 5, "agree": False, "visit": "2026-06-02", "note": "fine"},
     {"amount": -3, "stars": 1, "agree": True, "visit": "2026-06-03", "note": "=1+1"}],
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = migrated_store(tmp_path / "store.db")
    s.record_fields(FORM, FIELDS)
    yield s
    s.close()


def nights(store: Store, tmp_path: Path) -> list[Path]:
    """Each night's new rows exported to their own CSV file."""
    files = []
    for n, answers in enumerate(NIGHTS):
        at = T0 + n * DAY
        store.store_events([sub_event(f"evt_{n}_{i}", f"sub_{n}_{i}", FORM, at + i, a, {})
                            for i, a in enumerate(answers)])
        out = tmp_path / f"night{n}.csv"
        export(store, "csv", out, form_id=FORM, since=pd.Timestamp(at, unit="ms").to_pydatetime())
        files.append(out)
    return files


def duck_types(path: Path, typed: bool) -> dict[str, str]:
    """The column types DuckDB reads: detected, or given by the schema file."""
    if typed:
        cols = json.loads(schema_file(path).read_text())["columns"]
        rel = duckdb.read_csv(str(path), dtype={c["name"]: c["duckdb"] for c in cols})
    else:
        rel = duckdb.read_csv(str(path))
    return dict(zip(rel.columns, [str(t) for t in rel.types], strict=True))


def pandas_frame(path: Path) -> pd.DataFrame:
    cols = json.loads(schema_file(path).read_text())["columns"]
    return pd.read_csv(path, dtype={c["name"]: c["pandas"] for c in cols},
                       parse_dates=[c["name"] for c in cols if c["type"] in ("date", "timestamp")], date_format="ISO8601")


def test_number_cells_always_have_a_decimal_point() -> None:
    got = decimal_cells(pa.array([5000.0, 1234.5, -3.0, None, 1e20, -0.0])).to_pylist()
    assert got == ["5000.0", "1234.5", "-3.0", None, "1e+20", "-0.0"]


def test_two_nights_read_back_with_the_same_types_in_duckdb_and_pandas(store: Store, tmp_path: Path) -> None:
    first, second = nights(store, tmp_path)
    lines = first.read_text().splitlines()
    assert lines[1].count('"5000.0"') == 1 and ",4," in lines[1] and ",true," in lines[1]
    assert ",2026-06-01," in lines[1]
    for typed in (False, True):
        one, two = duck_types(first, typed), duck_types(second, typed)
        assert one == two if typed else {k: one[k] for k in ("amount", "agree", "visit")} == {
            k: two[k] for k in ("amount", "agree", "visit")}
        assert (one["amount"], one["stars"], one["agree"], one["visit"]) == ("DOUBLE", "BIGINT", "BOOLEAN", "DATE")
    assert duck_types(first, True)["note"] == "VARCHAR"  # "123" is text: the schema file says so
    frames = [pandas_frame(first), pandas_frame(second)]
    assert dict(frames[0].dtypes) == dict(frames[1].dtypes)
    assert [str(frames[0].dtypes[k]) for k in ("amount", "stars", "agree", "note")] == [
        "Float64", "Int64", "boolean", "string"]
    assert frames[0]["amount"].tolist() == [5000.0] and frames[1]["amount"].tolist() == [1234.5, -3.0]
    assert frames[1]["note"].tolist() == ["fine", "'=1+1"]  # formula text still neutralised
    both = pd.concat(frames)
    assert str(both.dtypes["visit"]).startswith("datetime64")
    assert [d.date() for d in both["visit"]] == [date(2026, 6, 1), date(2026, 6, 2), date(2026, 6, 3)]


def test_the_schema_file_names_each_column_with_its_type(store: Store, tmp_path: Path) -> None:
    first, _ = nights(store, tmp_path)
    doc: dict[str, Any] = json.loads(schema_file(first).read_text())
    by_name = {c["name"]: c for c in doc["columns"]}
    assert [c["name"] for c in doc["columns"]] == first.read_text().splitlines()[0].replace('"', "").split(",")
    assert by_name["submitted_at"]["type"] == "timestamp" and by_name["amount"]["type"] == "number"
    assert by_name["stars"]["type"] == "integer" and by_name["agree"]["type"] == "boolean"
