"""JSON documents as Arrow columns and back: a batch of documents (JSON text, one
object each) read at once by Arrow's C++ JSON reader, and Arrow values written as the
JSON text ``json.dumps(value, ensure_ascii=False)`` writes (what the long table's
``value_json`` holds), value by value, with null where a value cannot be written
exactly that way; or ``compact``, without the space after each ``,`` and ``:`` (the
text the store writes, ``connector.store._writer.json_text``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

_OPTIONS = pajson.ParseOptions(newlines_in_values=False)
_READ = pajson.ReadOptions(block_size=1 << 20)  # blocks of 1 MiB: parsed on every core
_to_json = json.JSONEncoder(ensure_ascii=False).encode
# A float's text where Arrow and Python's repr agree: plain decimals with a fraction, in the
# range repr writes without an exponent (integral floats are refused: Arrow drops ".0").
_PLAIN_FLOAT_RE = "^-?[0-9]+\\.[0-9]+$"
_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b"), ("\f", "\\f"))


def document_lines(texts: pa.Array) -> pa.Buffer:
    """The documents ``texts`` (no nulls) one a line, as the reader takes them."""
    lines = pc.binary_join_element_wise(texts, "\n", "")  # a new array: its text starts its buffer
    return lines.buffers()[2].slice(0, _text_bytes(lines)) if len(lines) else pa.py_buffer(b"")


def read_documents(texts: pa.Array, lines: pa.Buffer | None = None) -> pa.Table | None:
    """The documents ``texts`` (JSON objects without a newline; ``lines``, their
    ``document_lines`` when made already) as one table, a column per key (first seen
    first); text the reader would take for a time stays text. None when the reader
    cannot type the batch (a key of mixed kinds, a duplicate key, ...) or a document is
    not an object or holds a newline."""
    joined = _objects(texts, lines)
    if joined is None:
        return None
    table = _read(joined, None)
    times = [f.name for f in table.schema if pa.types.is_timestamp(f.type)] if table is not None else []
    if times:  # the reader takes ISO dates for times: read those keys again as text
        table = _read(joined, pa.schema([(k, pa.string()) for k in times]))
    if table is None or table.num_rows != len(texts):
        return None
    return table


def read_typed(documents: Sequence[Any], schema: pa.Schema) -> pa.Table | None:
    """The documents (JSON text, one object each; None for none) as one table of
    ``schema``'s columns with its types, other keys ignored; None when a document is
    not such text or a value is not of its column's type."""
    try:
        texts = pa.array(documents, pa.string()).fill_null("{}")
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return None  # documents already decoded
    joined = _objects(texts, None) if len(texts) else None
    if joined is None:
        return None
    options = pajson.ParseOptions(newlines_in_values=False, explicit_schema=schema,
                                  unexpected_field_behavior="ignore")
    try:
        table = pajson.read_json(pa.BufferReader(joined), read_options=_READ, parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table if table.num_rows == len(texts) else None


def _objects(texts: pa.Array, lines: pa.Buffer | None) -> pa.Buffer | None:
    """The documents one a line (``lines`` when made already), or None when one is null,
    not an object, or holds a newline (not as the store writes it; PostgreSQL keeps a
    json column's text as it was sent)."""
    if texts.null_count or not pc.all(pc.starts_with(texts, "{")).as_py():
        return None  # not an object: the reader may even crash on one
    joined = document_lines(texts) if lines is None else lines
    if np.count_nonzero(np.frombuffer(joined, dtype=np.uint8) == 10) != len(texts):
        return None
    return joined


def _text_bytes(lines: pa.Array) -> int:
    """How many bytes of text a string array (offset 0) holds."""
    offsets = lines.buffers()[1]
    return int(np.frombuffer(offsets, dtype=np.int32)[len(lines)]) if len(lines) else 0


def _read(joined: pa.Buffer, text_keys: pa.Schema | None) -> pa.Table | None:
    options = _OPTIONS if text_keys is None else pajson.ParseOptions(
        newlines_in_values=False, explicit_schema=text_keys, unexpected_field_behavior="infer")
    try:
        return pajson.read_json(pa.BufferReader(joined), read_options=_READ, parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


Piece: TypeAlias = "str | pa.Array"  # literal text, or a column of text


def json_texts(col: pa.Array, plain: bool = False) -> pa.Array:
    """Each value's JSON text as ``json.dumps(value, ensure_ascii=False)`` writes it; null
    for a null value and for one it cannot write exactly (a control character other than
    the named escapes, a float repr would write otherwise, a time). An
    object's null member counts as absent: it is left out. ``plain``: no text holds a
    character JSON escapes (the documents hold no backslash), so none is looked for."""
    return joined(pieces(col, plain), len(col))


def joined(parts: list[Piece], n: int) -> pa.Array:
    """The pieces one after the other, element by element (null where any is null)."""
    merged: list[Piece] = []
    for p in parts:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    if len(merged) == 1:
        only = merged[0]
        return pa.array([only] * n, pa.string()) if isinstance(only, str) else only
    out = pc.binary_join_element_wise(*merged, "")
    return out if isinstance(out, pa.Array) else pa.array([out.as_py()] * n, pa.string())


def _separators(compact: bool) -> tuple[str, str]:
    """Between items or members, and between a member's name and its value."""
    return (",", ":") if compact else (", ", ": ")


def pieces(col: pa.Array, plain: bool, compact: bool = False) -> list[Piece]:
    """``json_texts`` of ``col`` as pieces to be joined (``compact``: no space after a separator)."""
    t = col.type
    if pa.types.is_string(t):
        return ['"', col if plain else escaped(col), '"']
    if pa.types.is_int64(t):
        return [col.cast(pa.string())]
    if pa.types.is_boolean(t):
        return [pc.if_else(col, "true", "false")]
    if pa.types.is_float64(t):
        return [float_texts(col)]
    if pa.types.is_list(t):
        values = list_items(col)
        items = joined(pieces(values, plain, compact), len(values))
        if values.null_count:  # a null item is written ``null`` (a null text is one not written exactly)
            items = pc.if_else(values.is_null(), "null", items)
        listed = pa.ListArray.from_arrays(_offsets(col), items, mask=col.is_null())
        return ["[", pc.binary_join(listed, _separators(compact)[0]), "]"]
    if pa.types.is_struct(t):
        parts = object_pieces([(f.name, col.field(j)) for j, f in enumerate(t)], plain, compact=compact)
        return [_valid_only(joined(parts, len(col)), col)] if col.null_count else parts
    return [pa.nulls(len(col), pa.string())]


def _valid_only(texts: pa.Array, col: pa.Array) -> pa.Array:
    return pc.if_else(pc.is_valid(col), texts, pa.scalar(None, pa.string()))


def object_pieces(members: list[tuple[str, pa.Array]], plain: bool,
                  known: dict[str, list[Piece]] | None = None, *, compact: bool = False) -> list[Piece]:
    """The pieces of objects with ``members`` (name, values) in that order, a null value
    left out; ``known`` holds pieces of members already made (in the same style)."""
    parts: list[Piece] = []
    comma, colon = _separators(compact)
    leading = bool(members) and members[0][1].null_count > 0  # then an object may start with a comma
    for i, (name, value) in enumerate(members):
        own = (known or {}).get(name) or pieces(value, plain, compact)
        head = (comma if i or leading else "") + _to_json(name) + colon
        if value.null_count:
            text = joined([head, *own], len(value))
            parts.append(pc.if_else(pc.is_valid(value), text, ""))
        else:
            parts += [head, *own]
    if not leading:
        return ["{", *parts, "}"]
    return ["{", pc.utf8_slice_codeunits(joined(parts, len(members[0][1])), len(comma)), "}"]


def _offsets(col: pa.ListArray) -> pa.Array:
    return pc.subtract(col.offsets, col.offsets[0])


def list_items(col: pa.ListArray) -> pa.Array:
    """The items of a list column in the order its offsets (less the first) point into."""
    first = col.offsets[0].as_py()
    return col.values.slice(first, col.offsets[-1].as_py() - first)


def escaped(col: pa.Array) -> pa.Array:
    """Text as it stands between a JSON string's quotes (``json.dumps``, ensure_ascii
    off); null with a control character json escapes as ``\\u00XX``."""
    if not pc.any(pc.match_substring_regex(col, '["\\\\\\x00-\\x1f]')).as_py():
        return col
    bad = pc.match_substring_regex(col, "[\\x00-\\x07\\x0b\\x0e-\\x1f]")
    for char, escape in _ESCAPES:
        col = pc.replace_substring(col, char, escape)
    return pc.if_else(bad, pa.scalar(None, pa.string()), col)


def float_texts(col: pa.Array) -> pa.Array:
    """Floats as ``repr`` writes them, null where Arrow's shortest text might differ."""
    text = col.cast(pa.string())
    size = pc.abs(col)
    ok = pc.and_(pc.and_(pc.greater_equal(size, 1e-4), pc.less(size, 1e16)),
                 pc.match_substring_regex(text, _PLAIN_FLOAT_RE))
    return pc.if_else(ok, text, pa.scalar(None, pa.string()))
