"""The wide table's record batches: a batch of submission rows (``store.exports.wide_rows``:
the submission's own columns, then its answers and display documents as JSON text)
shaped column by column as the form's schema (``connector.store._schema``) says.

The schema is known before the first row, so Arrow's C++ JSON reader parses a batch's
documents at once with the schema's own types (``explicit_schema``): no type is
inferred, and a value of another type than its field's is an error there. A batch the
reader refuses (a value of the wrong type, a document that is not an object, a date
that is not ``YYYY-MM-DD``) and the columns it cannot read (JSON text) are shaped from
the decoded documents in Python, by the same rules (``coerce``): a value of the wrong
type is an empty cell, as in the view."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import date, time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connector.store import Column
from connector.store._schema import OWN

from .columns import arrow_type, own_array
from .json_text import read_typed

Rows = Sequence[tuple[Any, ...]]
_to_json = json.JSONEncoder(ensure_ascii=False).encode
_DATE_RE, _TIME_RE = r"^\d{4}-\d{2}-\d{2}$", r"^\d{2}:\d{2}(:\d{2})?$"


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def coerce(column: Column, v: Any) -> Any:
    """One answer value as ``column`` holds it (its logical type), None when the value
    is of another type (an integer column takes whole numbers only)."""
    kind = column.type
    if v is None:
        return None
    if kind in ("text", "number", "integer", "boolean", "keys"):
        ok = {"text": isinstance(v, str), "number": _number(v), "integer": _number(v) and float(v).is_integer(),
              "boolean": isinstance(v, bool),
              "keys": isinstance(v, list) and all(isinstance(x, str) for x in v)}[kind]
        if not ok:
            return None
        return float(v) if kind == "number" else int(v) if kind == "integer" else v
    if kind == "date":
        return date.fromisoformat(v) if isinstance(v, str) and re.match(_DATE_RE, v) and _valid(date, v) else None
    if kind == "time":
        return time.fromisoformat(v) if isinstance(v, str) and re.match(_TIME_RE, v) and _valid(time, v) else None
    if kind == "records":
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            return None
        return [{m.name: coerce(m, x.get(m.name)) for m in column.members} for x in v]
    return _to_json(v)  # json


def _valid(kind: type[date] | type[time], text: str) -> bool:
    try:
        kind.fromisoformat(text)
    except ValueError:
        return False
    return True


def _read_type(column: Column) -> pa.DataType | None:
    """The type Arrow's reader reads a column's values as (dates and times as text,
    converted after); None for a column it cannot read (JSON text)."""
    if column.type == "json":
        return None
    if column.type in ("date", "time"):
        return pa.string()
    if column.type == "records":
        members = [(m.name, _read_type(m)) for m in column.members]
        if any(t is None for _, t in members):
            return None
        return pa.list_(pa.struct(members))
    return arrow_type(column)


def _converted(column: Column, values: pa.Array) -> pa.Array:
    """Values as read (``_read_type``) as the column's type; ``ArrowInvalid`` when a date
    or time is not one."""
    if column.type not in ("date", "time"):
        return values
    present = values.drop_null()
    if len(present) and not pc.all(pc.match_substring_regex(present, _DATE_RE if column.type == "date"
                                                            else _TIME_RE)).as_py():
        raise pa.ArrowInvalid("not a date or time")
    if column.type == "date":
        return values.cast(pa.date32())
    full = pc.if_else(pc.equal(pc.utf8_length(values), 5), pc.binary_join_element_wise(values, ":00", ""), values)
    stamps = pc.strptime(pc.binary_join_element_wise("1970-01-01 ", full, ""), "%Y-%m-%d %H:%M:%S", "s")
    return stamps.cast(pa.time32("s"))


def field_arrays(documents: Sequence[Any], columns: Sequence[Column]) -> list[pa.Array]:
    """The arrays of ``columns`` (all read from one document per row: the answers, or
    the display for ``label`` columns) over ``documents`` (JSON text, None for none)."""
    n = len(documents)
    out: list[pa.Array | None] = [None] * len(columns)
    fields: dict[str, pa.DataType] = {}
    for c in columns:
        assert c.field_key is not None
        if c.source == "row":
            rows = fields.get(c.field_key)
            have = list(rows) if isinstance(rows, pa.StructType) else []
            fields[c.field_key] = pa.struct([*have, (c.row_key, pa.string())])
        elif (t := _read_type(c)) is not None:
            fields[c.field_key] = t
    table = read_typed(documents, pa.schema(list(fields.items()))) if fields else None
    if table is not None:
        for i, c in enumerate(columns):
            if c.field_key not in fields:
                continue
            values = table.column(c.field_key).combine_chunks()
            try:
                out[i] = _converted(c, values.field(c.row_key) if c.source == "row" else values)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                pass
    slow = [i for i, a in enumerate(out) if a is None]
    if slow:
        for i, a in zip(slow, _python_arrays(documents, [columns[i] for i in slow]), strict=True):
            out[i] = a
    return [a if a is not None else pa.nulls(n, arrow_type(columns[i])) for i, a in enumerate(out)]


def _decoded(doc: Any) -> dict[str, Any]:
    value = json.loads(doc) if isinstance(doc, str | bytes) else doc
    return value if isinstance(value, dict) else {}


def _python_arrays(documents: Sequence[Any], columns: Sequence[Column]) -> list[pa.Array]:
    """The arrays of ``columns`` made from each decoded document in turn (``coerce``);
    one document is held decoded at a time."""
    cells: list[list[Any]] = [[] for _ in columns]
    for doc in documents:
        answers = _decoded(doc)
        for c, out in zip(columns, cells, strict=True):
            v = answers.get(c.field_key)  # type: ignore[arg-type]
            if c.source == "row":
                v = v.get(c.row_key) if isinstance(v, dict) else None
                out.append(v if isinstance(v, str) else None)
            else:
                out.append(coerce(c, v))
    return [pa.array(v, arrow_type(c)) for v, c in zip(cells, columns, strict=True)]


def wide_batch(rows: Rows, columns: Sequence[Column], schema: pa.Schema) -> pa.RecordBatch:
    """The record batch of submission ``rows`` (``wide_rows``'s shape: ``OWN``'s columns,
    the answers document, then the display document when ``columns`` hold labels) with
    ``columns`` (the schema's, or its display variant's) as ``schema``."""
    n = len(rows)
    cols: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [()] * (len(OWN) + 2)
    own = {c.name: i for i, c in enumerate(OWN)}
    arrays: list[pa.Array | None] = [own_array(c, cols[own[c.name]]) if c.source == "own" else None for c in columns]
    for source, at in (("answer", len(OWN)), ("label", len(OWN) + 1)):
        picked = [i for i, c in enumerate(columns) if (c.source == "row" if source == "answer" else False)
                  or c.source == source]
        if picked:
            made = field_arrays(cols[at], [columns[i] for i in picked])
            for i, a in zip(picked, made, strict=True):
                arrays[i] = a
    return pa.RecordBatch.from_arrays([a if a is not None else pa.nulls(n, f.type) for a, f in zip(arrays, schema,
                                                                                                 strict=True)],
                                      schema=schema)
