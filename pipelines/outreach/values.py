"""A sheet cell as the prefill value of a form field: one converter per field type, each
returning the value or the problem with the cell (what is wrong, what is accepted)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from connector.models import FieldDescriptor

from .formats import COMMA, DATES, NUMBERS, read_as

# What the service takes for an email, URL and time answer (checked here so a bad cell is
# reported before any call, beside the other problems of its row).
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
URL_RE = re.compile(r"^https?://[^\s/]+\S*$", re.IGNORECASE)
TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
TEXT_FORMATS = {
    "email": (EMAIL_RE, "is not an email address", "an email address, e.g. ada@example.com"),
    "url": (URL_RE, "is not an http(s) URL", "an http:// or https:// URL"),
    "time": (TIME_RE, "is not a time", "HH:MM, e.g. 09:30"),
}
TRUE_WORDS = {"true", "yes", "1"}
FALSE_WORDS = {"false", "no", "0"}


class Problem(BaseModel):
    """One thing wrong with a sheet row: the column, what is wrong, what is accepted."""

    column: str
    problem: str
    accepted: str = ""


Converted = tuple[Any, Problem | None]
# A converter gets the field, the cell and the column's reading (its day/month order or
# decimal mark, see ``formats``; None: the default).
Converter = Callable[[FieldDescriptor, str, str | None], Converted]


def _bad(f: FieldDescriptor, problem: str, accepted: str) -> Converted:
    return None, Problem(column=f.key, problem=problem, accepted=accepted)


def _labels(options: Sequence[Any]) -> str:
    return ", ".join(f"{o.label} ({o.key})" for o in options)


def _choice(f: FieldDescriptor, text: str) -> str | None:
    low = text.strip().lower()
    for o in f.options or []:
        if low in (o.key.lower(), o.label.lower()):
            return o.key
    return None


def _one_option(f: FieldDescriptor, text: str, _reading: str | None = None) -> Converted:
    if f.options is None:
        return text, None
    key = _choice(f, text)
    if key is None:
        return _bad(f, f"{text!r} is not an option of {f.key}", _labels(f.options))
    return key, None


def _options(f: FieldDescriptor, text: str, _reading: str | None = None) -> Converted:
    if f.options is None:
        return text, None
    keys = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key = _choice(f, part)
        if key is None:
            return _bad(f, f"{part!r} is not an option of {f.key}", "comma-separated options: " + _labels(f.options))
        keys.append(key)
    return keys, None


def _number(f: FieldDescriptor, text: str, reading: str | None = None) -> Converted:
    num = read_as(NUMBERS, text, reading)
    if num is None:
        return _bad(f, f"{text!r} is not a number", "a number, e.g. 42" + (", with a decimal comma" if reading == COMMA else ""))
    return (int(num) if float(num).is_integer() else num), None


def _switch(f: FieldDescriptor, text: str, _reading: str | None = None) -> Converted:
    low = text.strip().lower()
    if low in TRUE_WORDS or low in FALSE_WORDS:
        return low in TRUE_WORDS, None
    return _bad(f, f"{text!r} is not a boolean", "true/false/yes/no/1/0")


def _date(f: FieldDescriptor, text: str, reading: str | None = None) -> Converted:
    day = read_as(DATES, text, reading)
    if day is None:
        return _bad(f, f"{text!r} is not a date", DATES.accepted + (f" (this column: {reading})" if reading else ""))
    return day.isoformat(), None


def _formatted(f: FieldDescriptor, text: str, _reading: str | None = None) -> Converted:
    pattern, problem, accepted = TEXT_FORMATS[f.type]
    if not pattern.match(text.strip()):
        return _bad(f, f"{text!r} {problem}", accepted)
    return text.strip(), None


def _json(f: FieldDescriptor, text: str, want: type, shape: str) -> Converted:
    try:
        parsed = json.loads(text)
    except ValueError:
        return _bad(f, f"{text!r} is not valid JSON", shape)
    if not isinstance(parsed, want):
        return _bad(f, f"{text!r} has the wrong JSON shape", shape)
    return parsed, None


def _matrix(f: FieldDescriptor, text: str, _reading: str | None = None) -> Converted:
    parsed, problem = _json(f, text, dict, "a JSON object of row key to column key")
    if problem is not None:
        return None, problem
    rows = {r.key for r in f.rows or []}
    cols = {c.key for c in f.columns or []}
    bad = [k for k, v in parsed.items() if k not in rows or v not in cols]
    if bad:
        return _bad(f, f"unknown matrix row or column in {bad}", f"rows {sorted(rows)}, columns {sorted(cols)}")
    return parsed, None


def _group(f: FieldDescriptor, text: str, _reading: str | None = None) -> Converted:
    if not f.repeating:
        return text, None
    return _json(f, text, list, "a JSON array of objects")


# The field types whose cells are read per column (see ``formats``): the kind each is.
NUMBER_TYPES = ("number", "rating", "scale")


CONVERTERS: dict[str, Converter] = {
    **dict.fromkeys(("select", "radio", "decision"), _one_option),
    **dict.fromkeys(("checkbox", "ranking"), _options),
    **dict.fromkeys(NUMBER_TYPES, _number),
    **dict.fromkeys(TEXT_FORMATS, _formatted),
    "switch": _switch,
    "date": _date,
    "matrix": _matrix,
    "group": _group,
}


def prefill_value(f: FieldDescriptor, text: str, reading: str | None = None) -> Converted:
    """A cell converted to the field's prefill value, or the problem with it (its column
    named as the field); dates and numbers are read as ``reading`` says (the column's
    day/month order or decimal mark). A type without a converter takes the text as it is."""
    convert = CONVERTERS.get(f.type)
    return convert(f, text, reading) if convert is not None else (text, None)
