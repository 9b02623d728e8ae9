"""The long export's cells are the rows ``long_rows`` derives from the plain read of the
submissions (the value without JSON quotes, NULL for no instance, row or member), on SQLite (where Arrow's JSON reader shapes the stored text, submissions it
cannot reproduce exactly being decoded in their place), PostgreSQL and MariaDB (whose
drivers give decoded documents): every kind of answer and display, the field filter,
the CSV cells neutralised, across several read batches."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy import insert, select

import pipelines.export.write as export_module
from connector.store import Store
from connector.store._exports import long_rows
from connector.store._tables import SUBMISSIONS, SubmissionRow
from pipelines.export import long_json
from pipelines.export.write import export, neutralise
from tests.connector.conftest import db_url, migrated_db_url, mysql_database, pg_database  # noqa: F401  (fixtures)
from tests.connector.test_long_answers import CASES

T0 = 1_780_000_000_000
PLAIN = ({"name": "Ann", "age": 41, "grid": {"speed": "good", "price": "bad"}, "note": "=1+2",
          "people": [{"first": "Ann", "last": "Lee"}], "colors": ["red", "blue"], "q4": 1.5, "agree": True},
         {"name": "Ann", "age": "41", "grid": "Speed: Good, Price: Bad", "people": "Ann / Lee",
          "colors": "Red, Blue", "q4": "1.5", "agree": "Yes"})


def _filled(url: str, docs: list[tuple[dict[str, Any], dict[str, Any]]]) -> Store:
    """A store on the migrated database at ``url`` holding ``docs`` (answers, display)."""
    s = Store(url)
    rows = [{"id": f"sub_{i:03d}", "form_id": "form_a" if i % 3 else "form_b", "form_name": "F",
             "submitted_at": T0 + i, "updated_at": None, "edit_count": 0, "is_completed": True, "answers": a,
             "display": d, "source": "sync", "observed_at": T0, "stored_at": T0} for i, (a, d) in enumerate(docs)]
    rows.append({**rows[0], "id": "sub_null", "submitted_at": T0 + 2, "answers": None, "display": None})
    with s.database.engine.begin() as conn:
        conn.execute(insert(SubmissionRow.__table__), rows)  # type: ignore[attr-defined]
    return s


@pytest.fixture
def store(migrated_db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:  # noqa: F811
    monkeypatch.setattr(export_module, "CHUNK_ROWS", 32)  # batches of 4 submissions: several reads, odd ones among plain
    s = _filled(migrated_db_url, [PLAIN] * 5 + [c for case in CASES for c in (case, PLAIN)] + [PLAIN] * 3)
    yield s
    s.close()


def _derived(store: Store, fields: list[str] | None) -> list[tuple[Any, ...]]:
    t = SUBMISSIONS.c
    with store.database.engine.connect() as conn:
        sources = [tuple(r) for r in conn.execute(select(t.id, t.form_id, t.answers, t.display)
                                                  .order_by(t.submitted_at, t.id))]
    return long_rows(sources, None if fields is None else frozenset(fields))


@pytest.mark.parametrize("fields", [None, ["grid", "people", "name", "ctl", "uni", "groupmatrix"]])
def test_long_parquet_cells_are_the_derived_rows(store: Store, tmp_path: Path, fields: list[str] | None) -> None:
    report = export(store, "parquet", tmp_path / "l.parquet", table="long", fields=fields)
    read = pq.read_table(tmp_path / "l.parquet").to_pylist()
    got = [tuple(r.values())[:8] for r in read]
    want = _derived(store, fields)
    assert len(want) > 80
    assert got == want
    assert {r["archived"] for r in read} == {None}, "no file field in the field list: no row holds files"
    assert report.rows == {"long": len(want)}


def test_long_csv_cells_are_the_derived_rows_neutralised(store: Store, tmp_path: Path) -> None:
    export(store, "csv", tmp_path / "l.csv", table="long")
    with open(tmp_path / "l.csv", newline="", encoding="utf-8") as f:
        got = [row[:8] for row in list(csv.reader(f))[1:]]  # archived (empty here) last
    want = [["" if v is None else str(neutralise(v)) for v in row] for row in _derived(store, None)]
    assert any(row[7].startswith("'=") for row in want)
    assert got == want


def test_plain_documents_are_shaped_by_arrow_on_every_database(migrated_db_url: str, tmp_path: Path,  # noqa: F811
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The stored text of each database (PostgreSQL's json column cast to text) is what
    the reader shapes: no submission as the store writes it is decoded one by one."""
    other = ({"name": "Bo é 日本", "grid": {"speed": "ok", "price": "good"}, "people": [], "q4": 2.25},
             {"name": "Bo", "grid": "Speed: Ok, Price: Good"})
    s = _filled(migrated_db_url, [PLAIN, other] * 20)
    try:
        want = _derived(s, None)

        def decoded(*_: Any) -> None:
            raise AssertionError("a submission was decoded")

        monkeypatch.setattr(long_json, "long_rows", decoded)
        export(s, "parquet", tmp_path / "l.parquet", table="long")
    finally:
        s.close()
    got = [tuple(r.values())[:8] for r in pq.read_table(tmp_path / "l.parquet").to_pylist()]
    assert got == want
