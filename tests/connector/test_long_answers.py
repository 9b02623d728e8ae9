"""The long-form answer rows an export reads (``store.exports.answers``, in batches) are
the rows ``long_rows`` derives from the plain read of the submissions: same rows, order
and cell values, for every kind of answer and display, on each database; and
``count_answers``, which counts them without making them, counts exactly those."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import insert, select

from connector.store import ExportFilter, Store
from connector.store._exports import long_rows
from connector.store._mapping import answer_count, answer_tuples
from connector.store._tables import SUBMISSIONS, SubmissionRow

T0 = 1_780_000_000_000
FILE = {"name": "cv.pdf", "url": "http://files.example/cv.pdf", "size": 100, "type": "application/pdf"}

# (answers, display) of one submission each: every kind of value, with a display that
# fits it, is missing, is null, or is not text.
CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"name": "Ann", "age": 41, "agree": True, "no": False, "none": None, "q4": 1.5, "whole": 2.0},
     {"name": "Ann", "age": "41 years", "agree": "Yes!", "none": "—", "q4": 1.5}),
    ({"uni": "é ü 日本 😀 \u2028 \x7f", "ctl": "a\nb\tc\r\x01\x1f\b\f \"q\" \\ /", "nul": "a\x00b", "empty": "",
      "formula": "=1+2", "neg": -7, "big": 2**70, "tiny": 1e-7, "huge": 1e20, "sum": 0.1 + 0.2, "zero": 0.0,
      "negzero": -0.0, "third": 1 / 3, "large": 123456789012.25},
     {"uni": None, "ctl": "x, y / z", "nul": "n\x00l", "tiny": "tiny", "sum": None}),
    ({"colors": ["red", "blue"], "nums": [1, 2, 30], "mixed": ["a", True, 1.5, None], "nothing": [],
      "one": ["only"], "listshown": ["a", "b"]},
     {"colors": "Red, Blue", "mixed": None, "listshown": ["A", "B"]}),
    ({"grid": {"speed": "good", "price": "bad", "support": "ok"}, "odd": {"a": "x", "b": "y"},
     "single": {"row": "col"}, "grid2": {"z": "1", "a": "2"}, "emptyobj": {}, "pay": {"amount": 10, "currency": "EUR"},
      "gridnum": {"r": "c"}},
     {"grid": "Speed: Good, Price: Bad, Support: Ok", "odd": "A: X, with comma, B: Y", "single": "Row: Col",
      "grid2": {"not": "text"}, "pay": "10 EUR"}),
    ({"people": [{"first": "Ann", "last": "Lee"}, {"first": "Bo", "last": "Ng", "age": 3}],
      "people2": [{"first": "Cy"}], "groupmatrix": [{"m": {"r1": "c1", "r2": "c2"}, "t": "x"}],
      "withempty": [{}, {"a": "b"}], "allempty": [{}], "files": [FILE, FILE], "file1": [FILE],
      "filemix": [FILE, {"other": "x"}]},
     {"people": "Ann / Lee, Bo / Ng / 3", "people2": "Cy", "groupmatrix": "R1: C1, R2: C2 / X",
      "files": "cv.pdf, cv.pdf"}),
    ({"a.b": "dot", 'q"x': "quote", "ключ": "key", "Z": "upper", "a": "lower", "é": "accent", "😀": "emoji",
      "": "blank key", "$": "dollar", "[0]": "brackets"},
     {"a.b": "Dot", 'q"x': "Quote", "😀": "Emoji", "": "Blank"}),
    ({}, {}),
]


def _fill(store: Store) -> None:
    rows = []
    for i, (answers, display) in enumerate(CASES * 3):
        at = T0 + (i % len(CASES)) * 1000  # equal times: the id breaks the tie
        rows.append({"id": f"sub_{i:03d}", "form_id": "form_a" if i % 2 else "form_b", "form_name": "F",
                     "submitted_at": at, "updated_at": None, "edit_count": 0, "is_completed": True,
                     "answers": answers, "display": display, "source": "sync", "observed_at": at, "stored_at": at})
    rows.append({**rows[0], "id": "sub_null", "answers": None, "display": None})
    with store.database.engine.begin() as conn:
        conn.execute(insert(SubmissionRow.__table__), rows)  # type: ignore[attr-defined]


def _python_rows(store: Store, f: ExportFilter) -> list[tuple[Any, ...]]:
    t = SUBMISSIONS.c
    stmt = select(t.id, t.form_id, t.answers, t.display).order_by(t.submitted_at, t.id)
    if f.form_id is not None:
        stmt = stmt.where(t.form_id == f.form_id)
    if f.since_ms is not None:
        stmt = stmt.where(t.submitted_at >= f.since_ms)
    with store.database.engine.connect() as conn:
        sources = [tuple(r) for r in conn.execute(stmt)]
    return long_rows(sources, None if f.fields is None else frozenset(f.fields))


@pytest.mark.parametrize("f", [
    ExportFilter(),
    ExportFilter(form_id="form_a"),
    ExportFilter(since_ms=T0 + 3000),
    ExportFilter(fields=("grid", "people", "name", "ключ", "nul", "q4")),
    ExportFilter(form_id="form_b", since_ms=T0 + 1000, fields=("colors", "uni", "files")),
], ids=["all", "form", "since", "fields", "all-filters"])
def test_export_rows_are_the_derivation_and_the_count_counts_them(store: Store, f: ExportFilter) -> None:
    _fill(store)
    got = [tuple(r) for batch in store.exports.answers(f, batch_rows=7) for r in batch]
    want = _python_rows(store, f)
    assert len(want) >= 5
    assert got == want
    assert store.exports.count_answers(f) == len(want)


def test_the_cases_hold_every_kind(store: Store) -> None:
    _fill(store)
    rows = _python_rows(store, ExportFilter())
    keys = {(r[2], r[3] is not None, r[4] is not None, r[5] is not None) for r in rows}
    assert ("people", True, False, True) in keys  # group members
    assert ("groupmatrix", True, True, True) in keys  # a matrix inside a group
    assert ("grid", False, True, False) in keys  # matrix rows
    assert any(r[2] == "files" and r[3] is None for r in rows)  # a file list is one row


@pytest.mark.parametrize("case", range(len(CASES)))
def test_answer_count_is_the_number_of_rows_made(case: int) -> None:
    answers, display = CASES[case]
    assert answer_count(answers) == len(answer_tuples("s", answers, display))
    for key in answers:
        assert answer_count(answers, frozenset({key})) == len([r for r in answer_tuples("s", answers, display)
                                                              if r[1] == key])
