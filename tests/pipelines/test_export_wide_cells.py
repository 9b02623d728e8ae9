"""The wide export's cells taken out of the stored answers by the database: lists as the
JSON text ``json.dumps(..., ensure_ascii=False)`` writes, text with escapes decoded, on
SQLite, PostgreSQL and MariaDB, whatever the separators and quotes inside the values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from connector.store import Store
from pipelines.export import export
from tests.connector.conftest import db_url, mysql_database, pg_database  # noqa: F401  (fixtures)
from tests.connector.test_store import T0, events, sub_event

VALUES: list[dict[str, Any]] = [
    {"tags": ["a,b", "c:d", 'q"uote', "back\\slash", "line\nbreak"], "text": 'say "hi", ok: \\ é'},
    {"tags": ["é", "日本", "tab\there"], "text": "plain"},
    {"tags": [], "text": "", "files": [{"name": "x,y:z.pdf", "size": 10, "n": None, "ok": True}]},
    {"tags": ["same"], "text": "same", "files": [{"name": "a.pdf", "size": 2.5}]},
    {"tags": None, "text": None},
]


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:  # noqa: F811
    s = Store(db_url)
    s.migrate()
    s.store_events(events(*[sub_event(f"evt_{i}", f"sub_{i}", submitted=T0 + i, answers=a, display={})
                            for i, a in enumerate(VALUES)]))
    yield s
    s.close()


def test_list_and_text_cells_read_back_as_python_writes_them(store: Store, tmp_path: Path) -> None:
    export(store, "parquet", tmp_path / "w.parquet")
    rows = pq.read_table(tmp_path / "w.parquet").to_pylist()
    for row, answers in zip(rows, VALUES, strict=True):
        for key in ("tags", "text", "files"):
            value = answers.get(key)
            want = value if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            assert row.get(key) == want, (key, row.get(key), want)
