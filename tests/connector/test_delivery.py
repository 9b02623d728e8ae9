"""Reading a verified body (``connector.receiver._delivery``): the check on a body's bytes that
spares the walk over its value never passes a value the walk would refuse."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.receiver._delivery import (
    MAX_JSON_DEPTH,
    RefusalError,
    _parse_json,
    _unstorable,
    parse_event,
    surely_storable,
)

from .test_receiver import encode, envelope


def _number_token(digits: int, fraction: bool, exponent: str) -> str:
    return "1" + "0" * (digits - 1) + (".5" if fraction else "") + exponent


# Number tokens as a sender may write them, near and beyond the double range.
_numbers = st.builds(_number_token, st.integers(1, 420), st.booleans(),
                     st.sampled_from(["", "e5", "e99", "e+99", "e-99", "e300", "e308", "e309", "E400", "e-400"]))
_strings = st.text(st.characters(codec=None, exclude_categories=[]), max_size=6)
_leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _strings


def _dump(value: object) -> str:
    if isinstance(value, _Raw):
        return value.text
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_dump(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


class _Raw:
    """A number token written into the JSON text as it is."""

    def __init__(self, text: str) -> None:
        self.text = text


def _nested(depth: int, inner: object) -> object:
    for _ in range(depth):
        inner = [inner]
    return inner


_values = st.recursive(
    _leaves | _numbers.map(_Raw),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_strings, inner, max_size=4)
    | st.builds(_nested, st.integers(55, 70), inner),
    max_leaves=12)


def _no_constant(name: str) -> object:
    raise ValueError(name)  # as the receiver's parser: NaN and Infinity are not JSON


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_values, ascii_only=st.booleans())
def test_a_body_surely_storable_by_its_bytes_holds_nothing_the_walk_refuses(value, ascii_only):
    text = _dump(value)
    if not ascii_only:  # the same text with its \u escapes written as the characters themselves
        try:
            text = json.dumps(json.loads(text), ensure_ascii=False)
        except (RecursionError, ValueError):
            return
    try:
        raw = text.encode("utf-8")
        parsed = json.loads(raw, parse_constant=_no_constant)
    except (UnicodeEncodeError, RecursionError, ValueError):
        return  # no UTF-8 (a lone surrogate), NaN or Infinity: refused before any check
    if surely_storable(raw):
        assert _unstorable(parsed) is None


# Decimal numbers as a sender may write them: more digits than a double holds, exponents.
_decimals = st.from_regex(r"\A-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,3})?\Z").map(_Raw)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.recursive(_leaves | _decimals | _numbers.map(_Raw),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_strings, inner, max_size=4),
                          max_leaves=12), ascii_only=st.booleans())
def test_a_body_is_read_as_json_loads_reads_it(value, ascii_only):
    """The fast parser and json.loads agree on every value (floats to the bit, integers
    of any size, duplicate keys), and a body one refuses the other refuses too."""
    text = _dump(value)
    if not ascii_only:
        text = json.dumps(json.loads(text), ensure_ascii=False)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        return
    try:
        expected = json.loads(raw, parse_constant=_no_constant)
    except (RecursionError, ValueError):
        with pytest.raises(RefusalError):
            _parse_json(raw)
        return
    got = _parse_json(raw)
    assert json.dumps(got) == json.dumps(expected)  # NaN-free, so equal text means equal values and types


def test_duplicate_keys_keep_the_last_as_json_loads_does():
    assert _parse_json(b'{"a": 1, "a": 123456789012345678901234567890}') == {"a": 123456789012345678901234567890}


@pytest.mark.parametrize("raw", [
    rb'["a\u0000b"]', rb'{"\ud800": 1}', rb'["\uDFFF"]', rb'[1e400]', rb'[1E+308]',
    b"[" + b"1" * 250 + b"e99]", b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH,
])
def test_the_bytes_of_what_may_be_unstorable_are_walked(raw):
    assert not surely_storable(raw)


def test_an_ordinary_event_is_not_walked():
    assert surely_storable(encode(envelope("evt_plain")))


@pytest.mark.parametrize(("note", "says"), [
    (rb'"a\u0000b"', r"U\+0000"), (rb'"\ud800"', "lone UTF-16 surrogate"), (b"1e400", "out of the double range"),
    (b"[" * 70 + b"]" * 70, "nests deeper than 64 levels"),
])
def test_an_unstorable_value_is_refused_by_parse_event(note, says):
    body = encode(envelope("evt_bad"))[:-1] + b', "note": ' + note + b"}"
    with pytest.raises(RefusalError, match=says) as refused:
        parse_event(body)
    assert (refused.value.refusal.status, refused.value.refusal.code) == (400, "UNSTORABLE_EVENT")
