"""The wide table's field cells of a batch of answers documents read as their JSON text
(SQLite gives the stored text): Arrow's C++ JSON reader parses the batch's documents at
once, so the database reads each document once and no cell goes through Python.

The cells are exactly those the export makes from the decoded answers: a scalar as it
is (a key holding integers and reals in the batch as reals), a matrix (an object of
text values) as one column per row (``key.row``), any other list or object as its JSON
text as ``json.dumps(value, ensure_ascii=False)`` writes it. ``doc_cells`` returns
None for a batch the reader cannot type that way (a key holding mixed kinds, text the
reader would take for a time, numbers past 64 bits, floats or ambiguous nulls inside
lists and objects); the caller then shapes that batch cell by cell (``row_cells``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connector.store import is_matrix

from .json_text import document_lines, escaped, read_documents

Cells = dict[str, list[Any] | pa.Array]
First = dict[str, tuple[int, int, int]]  # column -> (first row, key rank, matrix row rank)

_to_json = json.JSONEncoder(ensure_ascii=False).encode
_SCALARS = (pa.types.is_string, pa.types.is_int64, pa.types.is_float64, pa.types.is_boolean, pa.types.is_null)


def doc_cells(texts: Sequence[str | None], keys: Sequence[str]) -> tuple[Cells, First] | None:
    """The cells of ``keys`` in documents ``texts`` (None: no answers), by column key,
    with where each column first appears; None when the batch needs ``row_cells``."""
    if None in texts:
        return None
    try:
        documents = pa.array(texts, pa.string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return None  # documents already decoded
    lines = document_lines(documents)
    table = read_documents(documents, lines)
    if table is None:
        return None
    nulls = b": null" in lines.to_pybytes()  # then a missing cell may be a JSON null or an absent key
    data: Cells = {}
    first: First = {}
    for rank, key in enumerate(keys):
        i = table.schema.get_field_index(key)
        if i < 0:
            continue  # no answer in this batch
        if not _key_cells(key, rank, table.column(i).combine_chunks(), nulls, data, first):
            return None
    return data, first


def _key_cells(key: str, rank: int, col: pa.Array, nulls: bool, data: Cells, first: First) -> bool:
    valid = pc.is_valid(col)
    at = pc.index(valid, True).as_py()
    if nulls and at != 0 and col.null_count:
        return False  # where the key first appears (a JSON null or an answer) is unknown
    if at < 0:
        at = 0
    if pa.types.is_float64(col.type) and (pc.max(pc.abs(col)).as_py() or 0) >= 2.0 ** 63:
        return False  # perhaps an integer past 64 bits, which Python keeps whole
    if any(is_type(col.type) for is_type in _SCALARS):
        data[key], first[key] = col, (at, rank, 0)
        return True
    if _matrix(col):
        if col.null_count and nulls:
            return False
        for pos, f in enumerate(col.type, start=1):
            c = f"{key}.{f.name}"
            data[c], first[c] = col.field(pos - 1), (at, rank, pos)
        return True
    texts = _json_texts(col)
    if texts is None:
        return False
    data[key], first[key] = texts, (at, rank, 0)
    return True


def _matrix(col: pa.Array) -> bool:
    """A column of matrices: objects of text values, each holding every row key."""
    t = col.type
    if not pa.types.is_struct(t) or t.num_fields == 0 or not all(pa.types.is_string(f.type) for f in t):
        return False
    return all(not pc.any(pc.and_(pc.is_valid(col), pc.is_null(col.field(j)))).as_py()
               for j in range(t.num_fields))


def _json_texts(col: pa.Array) -> pa.Array | None:
    """The JSON text of each value as ``_to_json`` writes it (null stays null); None
    for a type it cannot write exactly (floats, times, a null inside an object)."""
    t = col.type
    if pa.types.is_string(t):
        inner = _escaped(col)
        return None if inner is None else pc.binary_join_element_wise('"', inner, '"', "")
    if pa.types.is_int64(t):
        return col.cast(pa.string())
    if pa.types.is_boolean(t):
        return pc.if_else(col, "true", "false")
    if pa.types.is_null(t):
        return pa.nulls(len(col), pa.string())
    if pa.types.is_list(t):
        return _list_texts(col)
    if pa.types.is_struct(t) and t.num_fields:
        return _object_texts(col)
    return None


def _escaped(col: pa.Array) -> pa.Array | None:
    """Text as it stands between a JSON string's quotes; None with a control character
    json escapes as ``\\u00XX``."""
    out = escaped(col)
    return None if out.null_count > col.null_count else out


def _list_texts(col: pa.ListArray) -> pa.Array | None:
    items = col.flatten()
    text = pa.types.is_string(items.type) and not items.null_count
    items = _escaped(items) if text else _json_texts(items)  # text items: quoted as the list is joined
    if items is None:
        return None
    offsets = pc.subtract(col.offsets, col.offsets[0])
    joined = pc.binary_join(pa.ListArray.from_arrays(offsets, pc.fill_null(items, "null"), mask=col.is_null()),
                            '", "' if text else ", ")
    if not text:
        return pc.binary_join_element_wise("[", joined, "]", "")
    quoted = pc.binary_join_element_wise('["', joined, '"]', "")
    return pc.if_else(pc.equal(pc.list_value_length(col), 0), "[]", quoted)


def _object_texts(col: pa.StructArray) -> pa.Array | None:
    valid = pc.is_valid(col)
    parts: list[Any] = []
    literal = "{"  # the text between two value columns: keys, separators, a text value's quotes
    for j, f in enumerate(col.type):
        child = col.field(j)
        if pc.any(pc.and_(valid, pc.is_null(child))).as_py():
            return None  # absent or JSON null: the reader does not say which
        literal += (", " if j else "") + _to_json(f.name) + ": "
        text = pa.types.is_string(child.type)
        value = _escaped(child) if text else _json_texts(child)
        if value is None:
            return None
        parts += [literal + '"', value] if text else [literal, value]
        literal = '"' if text else ""
    texts = pc.binary_join_element_wise(*parts, literal + "}", "")
    return pc.if_else(valid, texts, pa.scalar(None, pa.string())) if col.null_count else texts


def row_cells(texts: Sequence[Any], keys: Sequence[str]) -> tuple[Cells, First]:
    """``doc_cells`` for any batch, one decoded document at a time (a text is decoded,
    an object is taken as it is)."""
    rank = {k: i for i, k in enumerate(keys)}
    n = len(texts)
    data: dict[str, list[Any]] = {}
    first: First = {}

    def put(c: str, i: int, r: int, pos: int, value: Any) -> None:
        cells = data.get(c)
        if cells is None:
            cells = data[c] = [None] * n
            first[c] = (i, r, pos)
        cells[i] = value

    for i, text in enumerate(texts):
        answers = (json.loads(text) if isinstance(text, str | bytes) else text) or {}
        for key, value in answers.items():
            r = rank.get(key)
            if r is None:
                continue
            if value is None or isinstance(value, str | int | float):
                put(key, i, r, 0, value)
            elif is_matrix(value):
                for pos, (row_key, v) in enumerate(value.items(), start=1):
                    put(f"{key}.{row_key}", i, r, pos, v)
            else:
                put(key, i, r, 0, _to_json(value))
    return dict(data), first
