"""The wide cells Arrow's JSON reader makes from a batch of answers documents are the
cells decoding each document makes (``row_cells``): same columns, values, kinds and
first places; a batch the reader cannot type exactly is declined (None)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from pipelines.wide_json import doc_cells, row_cells

KEYS = ["name", "age", "score", "ok", "when", "tags", "grid", "people", "files", "pay", "never"]

READ_AT_ONCE: list[list[dict[str, Any]]] = [
    [  # every kind the reader writes itself, one answer missing here and there
        {"name": 'say "hi" \\ é 日本', "age": 3, "score": 1, "ok": True, "when": "2026-01-31",
         "tags": ["a,b", 'q"uote', "é"], "grid": {"speed": "good", "price": "bad"},
         "people": [{"first": "Ann", "n": 1, "ok": False}], "files": [], "pay": {"amount": 5, "currency": "usd"}},
        {"age": 4, "score": 2.5, "ok": False, "when": "2026-02-01", "tags": [],
         "grid": {"speed": "ok", "price": "good"}, "people": [], "files": [{"name": "x:y,z.pdf", "size": 10}],
         "extra": "not a field"},
        {"name": "", "tags": ["only"], "unlisted": [1, 2]},
    ],
    [{"age": -12, "tags": [["nested", "list"], []], "grid": {"b": "x", "a": "y"}}, {"grid": {"b": "z", "a": "w"}}],
    [{"tags": ["line\nbreak", "tab\there\r\b\f"]}, {"tags": ['q"uote \\']}],  # the named escapes
    [{"tags": [""], "people": [{"first": 'a"b\\c', "n": 2}, None], "pay": {"ok": True, "to": {"name": "é"}}},
     {"tags": ["x", None]}, {"tags": None}, {"tags": []}],
]

DECLINED: list[list[dict[str, Any]]] = [
    [{"age": 1}, {"age": "one"}],  # one key, two kinds
    [{"files": [{"name": "a", "size": 2.5}]}],  # a float inside a list: Python writes it its own way
    [{"people": [{"first": "Ann"}, {"first": "Bo", "last": "Ng"}]}],  # absent or null, unknown inside an object
    [{"tags": ["bell\x07"]}],  # a control character json escapes as \u0007
    [{"age": 12345678901234567890}],  # past 64 bits
    [{"grid": {"a": "x"}}, {"grid": {"b": "y"}}],  # a matrix row missing from a row
]


def _texts(docs: list[dict[str, Any]]) -> tuple[str, ...]:
    return tuple(json.dumps(d) for d in docs)


def _plain(cells: dict[str, Any]) -> dict[str, tuple[str, list[Any]]]:
    out = {}
    for c, v in cells.items():
        arr = v if isinstance(v, pa.Array) else pa.array(v)
        out[c] = (str(arr.type), arr.to_pylist())
    return out


@pytest.mark.parametrize("docs", READ_AT_ONCE)
def test_cells_read_at_once_are_the_decoded_cells(docs: list[dict[str, Any]]) -> None:
    got = doc_cells(_texts(docs), KEYS)
    assert got is not None
    want = row_cells(_texts(docs), KEYS)
    assert _plain(got[0]) == _plain(want[0])
    assert got[1] == want[1]
    assert "never" not in got[0] and "extra" not in got[0] and "unlisted" not in got[0]


def test_a_date_answer_stays_its_text() -> None:
    got = doc_cells(_texts(READ_AT_ONCE[0]), KEYS)
    assert got is not None
    assert pa.array(got[0]["when"]).to_pylist() == ["2026-01-31", "2026-02-01", None]


@pytest.mark.parametrize("docs", DECLINED)
def test_a_batch_the_reader_cannot_type_exactly_is_declined(docs: list[dict[str, Any]]) -> None:
    assert doc_cells(_texts(docs), KEYS) is None


def test_json_null_answers_keep_where_a_column_first_appears() -> None:
    docs = [{"name": None, "age": None}, {"age": 1, "name": "x"}]
    got = doc_cells(_texts(docs), KEYS)
    want = row_cells(_texts(docs), KEYS)
    assert got is None or got[1] == want[1]
    assert want[1]["name"] == (0, 0, 0)


def test_a_document_that_is_not_an_object_is_declined_not_read() -> None:
    assert doc_cells(("null", '{"age": 1}'), KEYS) is None  # Arrow's reader may crash on a bare null
    assert doc_cells(('{"age": 1}', "[1]"), KEYS) is None
