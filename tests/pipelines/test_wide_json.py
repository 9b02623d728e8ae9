"""The wide table's field arrays: Arrow's JSON reader, given the schema's types, makes
exactly the arrays the Python rules (``coerce``, one decoded document at a time) make,
for every logical type; a value of another type than its field's is an empty cell
either way, and a batch the reader refuses is shaped in Python."""

from __future__ import annotations

import json
from datetime import date, time
from typing import Any

import pyarrow as pa
import pytest

from connector.store import StoredField
from connector.store._schema import form_schema
from pipelines.export import wide_json
from pipelines.export.wide_json import field_arrays

FIELDS = [StoredField("name", "text"), StoredField("age", "number"), StoredField("stars", "rating"),
          StoredField("ok", "switch"), StoredField("day", "date"), StoredField("at", "time"),
          StoredField("tags", "checkbox"), StoredField("grid", "matrix", shape=({"key": "a"}, {"key": "b"})),
          StoredField("people", "group", shape=({"key": "first", "type": "text"}, {"key": "n", "type": "number"})),
          StoredField("files", "file"), StoredField("pay", "payment")]
COLUMNS = [c for c in form_schema("form_x", FIELDS).fields() if c.source not in ("label", "archived")]  # read from answers

BATCHES: list[list[dict[str, Any] | None]] = [
    [  # every type as its field takes it, some answers missing
        {"name": 'say "hi" \\ é 日本', "age": 3, "stars": 4, "ok": True, "day": "2026-01-31", "at": "09:30",
         "tags": ["a,b", 'q"uote'], "grid": {"a": "x", "b": "y"}, "people": [{"first": "Ann", "n": 1}],
         "files": [{"name": "f.pdf", "size": 10, "type": "application/pdf", "url": "http://x"}],
         "pay": {"status": "paid", "amount": 40}},
        {"age": 2.5, "ok": False, "day": "2026-02-01", "at": "23:59:58", "tags": [], "grid": {"b": "z"},
         "people": [], "files": [{"name": "g", "size": 2.5}], "extra": "not a field"},
        {"name": "", "tags": None, "people": [{"first": "Bo"}, {"n": 2}]},
        None,
    ],
]
WRONG: list[dict[str, Any]] = [  # each value of another type than its field's
    {"name": 5}, {"age": "five"}, {"age": True}, {"stars": 4.5}, {"ok": "yes"}, {"day": "31/01/2026"},
    {"day": "2026-13-01"}, {"at": "9:30"}, {"tags": ["a", 1]}, {"tags": "a"}, {"grid": "x"}, {"grid": {"a": 1}},
    {"people": {"first": "Ann"}}, {"people": [{"first": 1}]}, {"files": [{"name": "f", "size": "big"}]},
]


def _texts(docs: list[dict[str, Any] | None]) -> list[str | None]:
    return [None if d is None else json.dumps(d, ensure_ascii=False) for d in docs]


def _python(docs: list[dict[str, Any] | None]) -> list[pa.Array]:
    """The arrays of the Python rules alone (the documents given decoded: the reader is not used)."""
    return field_arrays([d or {} for d in docs], COLUMNS)


@pytest.mark.parametrize("docs", BATCHES)
def test_the_reader_makes_the_python_arrays(docs: list[dict[str, Any] | None], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = wide_json._python_arrays
    monkeypatch.setattr(wide_json, "_python_arrays", lambda d, c: calls.append(len(c)) or real(d, c))
    got = field_arrays(_texts(docs), COLUMNS)
    assert calls == [1]  # only the JSON column (a payment) is made in Python
    want = _python(docs)
    assert [a.type for a in got] == [a.type for a in want]
    assert [a.to_pylist() for a in got] == [a.to_pylist() for a in want]
    row = {c.name: a[0].as_py() for c, a in zip(COLUMNS, got, strict=True)}
    assert (row["age"], row["day"], row["at"], row["grid_a"]) == (3.0, date(2026, 1, 31), time(9, 30), "x")
    assert row["files"] == [{"name": "f.pdf", "type": "application/pdf", "size": 10.0, "url": "http://x"}]
    assert row["pay"] == '{"status": "paid", "amount": 40}'


@pytest.mark.parametrize("doc", WRONG, ids=lambda d: json.dumps(d))
def test_a_value_of_another_type_is_an_empty_cell(doc: dict[str, Any]) -> None:
    good = BATCHES[0][0]
    assert good is not None
    docs = [good, doc]
    got = field_arrays(_texts(docs), COLUMNS)
    assert [a.to_pylist() for a in got] == [a.to_pylist() for a in _python(docs)]
    key = next(iter(doc))
    for c, a in zip(COLUMNS, got, strict=True):
        if c.field_key == key:
            cell = a[1].as_py()
            assert cell is None or (key in ("people", "files", "grid") and cell != doc[key]), (c.name, cell)
        else:
            assert a[0].as_py() is not None or good.get(c.field_key) is None


def test_a_document_that_is_not_an_object_is_shaped_in_python() -> None:
    got = field_arrays(["null", '{"age": 1}', "[1]"], COLUMNS)
    assert got[COLUMNS.index(next(c for c in COLUMNS if c.name == "age"))].to_pylist() == [None, 1.0, None]
