"""Comparing a wire value with a golden example by shape, not by value.

A golden example pins what both sides of the wire must agree on: which keys an object
has, the JSON type of each value, the pattern of ids and timestamps, and the values of
the few keys that are themselves part of the contract (an event's ``type``, an error's
``code`` and ``reason``). Everything else (names, messages, times, random ids) may
differ from run to run."""

from __future__ import annotations

import re
from typing import Any

# A prefix and 22 base62 characters: req_, form_, snap_, sub_, evt_, int_, doc_, ws_, ...
ID = re.compile(r"([a-z]+)_[0-9A-Za-z]{22}")
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
LIST_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
URL = re.compile(r"https?://[^/\s]+(/[^?#\s]*)?")
# Keys whose values are contract, compared exactly.
LITERAL_KEYS = frozenset({"type", "status", "code", "reason", "field", "apiVersion", "deliveryStatus", "delivery",
                          "outcome", "test", "isTest", "isCompleted", "hasMore", "canPaginate", "published",
                          "deduplicated", "ok", "validKeys"})


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _string_problem(golden: str, actual: str, path: str) -> str | None:
    """What is wrong with ``actual`` for a golden string: ids keep their prefix and
    length, timestamps their format, URLs their first path segment."""
    if m := ID.fullmatch(golden):
        if not ID.fullmatch(actual) or not actual.startswith(m.group(1) + "_"):
            return f"{path}: {actual!r} is not an id like {m.group(1)}_<22 base62 characters>"
        return None
    for pattern, what in ((ISO_TIME, "an ISO 8601 time"), (LIST_TIME, "a 'YYYY-MM-DD HH:MM:SS' time")):
        if pattern.fullmatch(golden):
            return None if pattern.fullmatch(actual) else f"{path}: {actual!r} is not {what}"
    if m := URL.fullmatch(golden):
        got = URL.fullmatch(actual)
        first = (m.group(1) or "/").split("/")[1:2]
        if not got or (got.group(1) or "/").split("/")[1:2] != first:
            return f"{path}: {actual!r} is not a URL under /{''.join(first)}"
    return None


def shape_problems(golden: Any, actual: Any, path: str = "$", key: str | None = None) -> list[str]:
    """Every way ``actual`` departs from the shape of ``golden`` (empty: same shape).

    Objects must have exactly the golden's keys; arrays are compared item by item when
    both have the same length, else every actual item against the golden's first; a
    golden ``number`` also accepts an integer."""
    if key in LITERAL_KEYS and golden != actual:
        return [f"{path}: {actual!r}, the contract says {golden!r}"]
    g, a = _kind(golden), _kind(actual)
    if g != a and not (g == "number" and a == "integer"):
        return [f"{path}: {a} {actual!r:.60}, the golden has {g}"]
    if g == "string":
        problem = _string_problem(golden, actual, path)
        return [problem] if problem else []
    if g == "object":
        problems = [f"{path}: missing key {k!r}" for k in golden if k not in actual]
        problems += [f"{path}: key {k!r} is not in the golden" for k in actual if k not in golden]
        for k in golden:
            if k in actual:
                problems += shape_problems(golden[k], actual[k], f"{path}.{k}", k)
        return problems
    if g == "array" and golden:
        if len(golden) == len(actual):
            pairs = list(zip(golden, actual, strict=True))
        else:
            pairs = [(golden[0], item) for item in actual]
        return [p for i, (gi, ai) in enumerate(pairs) for p in shape_problems(gi, ai, f"{path}[{i}]")]
    return []
