"""The wide export's cells taken out of the stored answers by the database: lists as the
JSON text ``json.dumps(..., ensure_ascii=False)`` writes, text with escapes decoded, on
SQLite, PostgreSQL and MariaDB, whatever the separators and quotes inside the values."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from connector.store import Store
from pipelines.export.write import export
from tests.connector.conftest import db_url, migrated_db_url, mysql_database, pg_database  # noqa: F401  (fixtures)
from tests.connector.test_store import T0, events, sub_event

VALUES: list[dict[str, Any]] = [
    {"tags": ["a,b", "c:d", 'q"uote', "back\\slash", "line\nbreak"], "text": 'say "hi", ok: \\ é'},
    {"tags": ["é", "日本", "tab\there"], "text": "plain"},
    {"tags": [], "text": "", "files": [{"name": "x,y:z.pdf", "size": 10, "n": None, "ok": True}]},
    {"tags": ["same"], "text": "same", "files": [{"name": "a.pdf", "size": 2.5}]},
    {"tags": None, "text": None},
]


@pytest.fixture
def store(migrated_db_url: str) -> Iterator[Store]:  # noqa: F811
    s = Store(migrated_db_url)
    s.store_events(events(*[sub_event(f"evt_{i}", f"sub_{i}", submitted=T0 + i, answers=a, display={})
                            for i, a in enumerate(VALUES)]))
    yield s
    s.close()


def test_list_and_text_cells_read_back_as_python_writes_them(store: Store, tmp_path: Path) -> None:
    # a type this distribution does not know: the answer as its JSON text
    store.record_fields("form_contact", [{"key": "tags", "type": "payment"}, {"key": "text", "type": "text"},
                                         {"key": "files", "type": "payment"}])
    export(store, "parquet", tmp_path / "w.parquet")
    rows = pq.read_table(tmp_path / "w.parquet").to_pylist()
    for row, answers in zip(rows, VALUES, strict=True):
        for key in ("tags", "text", "files"):
            value = answers.get(key)
            want = value if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            assert row.get(key) == want, (key, row.get(key), want)


def test_typed_list_cells_on_each_database(store: Store, tmp_path: Path) -> None:
    """With the field list: lists of keys and file lists are typed in Parquet, and their
    CSV cells are the JSON text Python writes (a whole number without a fraction)."""
    store.record_fields("form_contact", [{"key": "tags", "type": "checkbox", "title": "Tags"},
                                         {"key": "text", "type": "text", "title": "Text"},
                                         {"key": "files", "type": "file", "title": "Files"}])
    export(store, "parquet", tmp_path / "w.parquet")
    rows = pq.read_table(tmp_path / "w.parquet").to_pylist()
    assert [r["tags"] for r in rows] == [v.get("tags") for v in VALUES]
    assert [r["text"] for r in rows] == [v.get("text") for v in VALUES]
    assert rows[2]["files"] == [{"name": "x,y:z.pdf", "type": None, "size": 10.0, "url": None}]
    assert rows[3]["files"] == [{"name": "a.pdf", "type": None, "size": 2.5, "url": None}]
    export(store, "csv", tmp_path / "w.csv")
    with open(tmp_path / "w.csv", newline="", encoding="utf-8") as f:
        cells = list(csv.DictReader(f))
    for cell, answers in zip(cells, VALUES, strict=True):
        tags = answers.get("tags")
        assert cell["tags"] == ("" if tags is None else json.dumps(tags, ensure_ascii=False))
    assert [c["files"] for c in cells[2:4]] == ['[{"name": "x,y:z.pdf", "size": 10}]',
                                                '[{"name": "a.pdf", "size": 2.5}]']
