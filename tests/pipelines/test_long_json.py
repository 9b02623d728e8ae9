"""The long rows Arrow makes of a batch of answers and display documents as JSON text
(``long_batch``) are exactly the rows ``long_rows`` makes of the decoded documents: the
same rows, in the same order, with the same cells, for any documents (generated ones
included); a batch the reader cannot parse is declined (None), never shaped otherwise."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.store._exports import long_rows
from connector.store._writer import json_text
from pipelines.export import long_json
from pipelines.export.long_json import long_batch

FILE = {"name": "cv.pdf", "url": "http://files.example/cv.pdf", "size": 100, "type": "application/pdf"}
KEYS = ["name", "age", "q", "grid", "people", "cv", "colors", "pay", "a.b", 'q"x', "é", "", "z"]
TEXT = st.lists(st.sampled_from(list('ab ,/:"\\é日😀\n\t\x01\x7f\u2028') + [", ", " / ", ": "]),
                max_size=6).map("".join)
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([1.5, 0.1, 2.0, -0.0, 1e-5, 1e16, 0.25])
INTS = st.integers(-(2**70), 2**70) | st.integers(-5, 100)
SCALAR = TEXT | INTS | FLOATS | st.booleans() | st.none()
MATRIX = st.dictionaries(st.sampled_from(["speed", "price", "a", "b", ""]), TEXT, min_size=1, max_size=3)
INSTANCE = st.dictionaries(st.sampled_from(["first", "last", "m", "n"]), SCALAR | MATRIX, max_size=3)

KINDS: dict[str, st.SearchStrategy[Any]] = {
    "text": TEXT, "int": st.integers(-5, 10**12), "float": st.sampled_from([1.5, 0.1, 2.25, -3.75, 1e-3]),
    "bool": st.booleans(), "scalar": SCALAR, "matrix": MATRIX,
    "group": st.lists(INSTANCE, min_size=0, max_size=3),
    "files": st.lists(st.just(FILE) | st.fixed_dictionaries({"name": TEXT, "url": TEXT, "size": INTS}), max_size=2),
    "list": st.lists(TEXT, max_size=3) | st.lists(st.integers(0, 9), max_size=3) | st.lists(SCALAR, max_size=3),
    "object": st.fixed_dictionaries({"amount": INTS | FLOATS, "currency": TEXT}) | st.just({}),
}


def _shown(value: Any, draw: Any) -> Any:
    """A display value for ``value``: what the service writes (segments joined), any
    text, none, null or something that is not text."""
    choice = draw(st.integers(0, 6))
    if choice == 0:
        return draw(TEXT)
    if choice == 1:
        return None
    if choice == 2:
        return draw(SCALAR | st.lists(TEXT, max_size=2))
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items() if isinstance(v, str))
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return ", ".join(" / ".join(str(m) if not isinstance(m, dict) else ", ".join(map(str, m.values()))
                                    for m in inst.values()) for inst in value)
    return str(value)


@st.composite
def batches(draw: Any) -> list[tuple[Any, ...]]:
    """A batch of submission rows (id, form, answers text, display text): each key holds
    one kind of value in most batches (so the reader types it), any value in others."""
    kinds = {k: draw(st.sampled_from(list(KINDS))) for k in KEYS}
    rows = []
    for i in range(draw(st.integers(1, 6))):
        keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=6))
        answers = {k: draw(KINDS[kinds[k]]) for k in keys}
        display = {k: _shown(v, draw) for k, v in answers.items() if draw(st.integers(0, 5))}
        if draw(st.integers(0, 9)) == 0:
            display = dict(reversed(display.items()))
        # as the store writes them (compact), or as json.dumps does (rows stored by older versions)
        text = json_text(answers) if draw(st.booleans()) else json.dumps(answers, ensure_ascii=draw(st.booleans()))
        shown = json_text(display) if draw(st.booleans()) else json.dumps(display)
        rows.append((f"sub_{i}", "form_a", None if not answers and draw(st.booleans()) else text,
                     shown if display or draw(st.booleans()) else None))
    return rows


def _rows(batch: Any) -> list[tuple[Any, ...]]:
    return list(zip(*[c.to_pylist() for c in batch.columns], strict=True))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(), st.sampled_from([None, frozenset({"grid", "people", "name"}), frozenset({"nothing"})]))
def test_arrow_rows_are_the_decoded_rows(part: list[tuple[Any, ...]], wanted: frozenset[str] | None) -> None:
    got = long_batch(part, wanted)
    if got is not None:
        assert _rows(got) == long_rows(part, wanted)


def _part(docs: list[tuple[dict[str, Any], dict[str, Any]]], dumps: Any = json.dumps) -> list[tuple[Any, ...]]:
    return [(f"sub_{i}", "form_a", dumps(a), dumps(d)) for i, (a, d) in enumerate(docs)]


BENCH_LIKE = [({"name": f"P{i}", "age": i, "grid": {"speed": "good", "price": "bad"},
                "people": [{"first": "Ann", "last": "Lee"}, {"first": "Bo", "last": "Ng"}], "cv": [FILE],
                "colors": ["red", "blue"], "q4": 1.5, "agree": True},
               {"name": f"P{i}", "age": str(i), "grid": "Speed: Good, Price: Bad", "people": "Ann / Lee, Bo / Ng",
                "cv": "cv.pdf", "colors": "Red, Blue", "q4": "1.5", "agree": "Yes"}) for i in range(5)]

# Each case beside the plain documents: a submission only the decoded path can shape
# (its rows are merged in their place), or a display that must split its own way.
ODD_ONES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"name": None, "age": 3}, {"name": "—"}),  # a JSON null
    ({"grid": {"price": "bad", "speed": "good"}}, {"grid": "Price: Bad, Speed: Good"}),  # keys in another order
    ({"age": 2**70, "q4": 2.0}, {}),  # past 64 bits, a whole float
    ({"name": "line\nbreak \u0001 é", "extra": "x"}, {"extra": 5}),  # escapes, a display that is not text
    ({"people": [{"first": "A, B", "last": "C / D"}]}, {"people": "A, B / C / D"}),  # segments that do not split
    ({"people": [{}], "cv": [FILE, {"other": "x"}]}, {}),  # an empty group, a file list with a non-file
    ({"grid": {}, "colors": []}, {"grid": None}),  # an empty matrix and list
]


@pytest.mark.parametrize("odd", ODD_ONES)
def test_odd_submissions_keep_their_place(odd: tuple[dict[str, Any], dict[str, Any]]) -> None:
    part = _part(BENCH_LIKE[:2] + [odd] + BENCH_LIKE[2:])
    got = long_batch(part, None)
    assert got is not None
    assert _rows(got) == long_rows(part, None)


@pytest.mark.parametrize("dumps", [json_text, json.dumps], ids=["store", "json.dumps"])
def test_documents_of_the_store_are_shaped_by_arrow(monkeypatch: pytest.MonkeyPatch, dumps: Any) -> None:
    """Documents as the store writes them (compact text, keys in one order, no nulls), or as
    older versions wrote them (``json.dumps``), need no decoding."""
    def decoded(*_: Any) -> None:
        raise AssertionError("a submission was decoded")

    part = _part(BENCH_LIKE, dumps) + [(f"sub_x{i}", "form_a", dumps(a), dumps(d)) for i, (a, d) in enumerate([
        ({"name": "é \"q\" \\ 日本 😀 tab\tnl\n", "age": 2**40}, {"name": "x", "age": None}),
        ({"grid": {"speed": "a, b"}, "colors": []}, {"grid": "Speed: A, B"}),
    ])]
    monkeypatch.setattr(long_json, "long_rows", decoded)
    got = long_batch(part, None)
    assert got is not None and got.num_rows == 5 * 12 + 4
    assert _rows(got) == long_rows(part, None)


def test_a_batch_of_both_texts_is_shaped_by_arrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store holding rows written compact and rows written by json.dumps: neither is decoded."""
    def decoded(*_: Any) -> None:
        raise AssertionError("a submission was decoded")

    part = [row for i, pair in enumerate(zip(_part(BENCH_LIKE), _part(BENCH_LIKE, json_text), strict=True))
            for row in (pair if i % 2 else pair[::-1])]
    assert '": ' not in part[0][2] and '": ' in part[1][2]
    monkeypatch.setattr(long_json, "long_rows", decoded)
    got = long_batch(part, None)
    assert got is not None and got.num_rows == 10 * 12
    assert _rows(got) == long_rows(part, None)


@pytest.mark.parametrize("texts", [
    ('{"a": 1}', '{"a": "one"}'),  # one key, two kinds
    ('{"a": 1, "a": 2}',),  # a duplicate key
    ('{"a": "\\ud800"}',),  # a lone surrogate
])
def test_a_batch_the_reader_cannot_type_is_declined(texts: tuple[str, ...]) -> None:
    part = [(f"s{i}", "f", t, "{}") for i, t in enumerate(texts)]
    assert long_batch(part, None) is None


def test_documents_that_are_not_objects_are_decoded_in_their_place() -> None:
    part = _part(BENCH_LIKE[:2]) + [("s_null", "form_a", "null", "null"), ("s_none", "form_a", None, None),
                                    ("s_list", "form_a", "{}", "[]")] + _part(BENCH_LIKE[2:3])
    got = long_batch(part, None)
    assert got is not None
    assert _rows(got) == long_rows(part, None)


def test_documents_in_several_key_orders_are_shaped_by_arrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forms answered in other key orders, and a first misfit holding a null, still need no decoding
    but for that misfit."""
    orders = [["name", "age", "grid"], ["grid", "name"], ["age", "grid", "name"], ["grid", "age"]]
    docs = [({k: BENCH_LIKE[0][0][k] for k in keys}, {"grid": "Speed: Good, Price: Bad"}) for keys in orders * 3]
    part = _part([({"name": None, "grid": {"speed": "a", "price": "b"}}, {}), *docs])
    decoded: list[str] = []

    def count(rows: Any, wanted: Any) -> list[tuple[Any, ...]]:
        decoded.extend(r[0] for r in rows)
        return long_rows(rows, wanted)

    monkeypatch.setattr(long_json, "long_rows", count)
    got = long_batch(part, None)
    assert got is not None
    assert _rows(got) == long_rows(part, None)
    assert decoded == ["sub_0"]
