"""The long table's rows of a batch of submissions whose answers and display documents
come as their stored JSON text (``store.exports.answer_documents``): Arrow's JSON
reader parses the batch's documents at once and the rows are made column by column, so
no answer goes through Python.

The rows are exactly those ``connector.store._exports.long_rows`` makes: each value as plain
text (a text answer as it is, anything else as its JSON text), no instance, row key or
member key (null) where the answer is not in a group, a matrix row or a group member.
A submission's rows are made here only when its answers document is the very text its
parsed columns write back (compact as the store writes it, or as ``json.dumps`` does;
keys in the reader's order, null members left out), which settles what the columns alone cannot tell: key order (a matrix row's
or a group member's display segment is found by its place), JSON nulls against absent
keys, a number's kind. Any other submission (and one with a display that is not text)
gets its rows from ``long_rows``; they are merged in submission order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.store._exports import long_rows
from connector.store._schema import LONG

from .columns import arrow_schema
from .json_text import (
    Piece,
    document_lines,
    joined,
    json_texts,
    list_items,
    object_pieces,
    pieces,
    read_documents,
)

Batch = Sequence[tuple[Any, ...]]
LONG_COLUMNS = [c.name for c in LONG]  # the data contract's long table (``connector.store._schema.LONG``)
LONG_SCHEMA = arrow_schema(LONG)
# The rows made here: the long table's columns but ``archived``, which needs the archive
# (``pipelines.lifecycle.archive.columns.long_archived``).
ROWS_SCHEMA = pa.schema([f for f in LONG_SCHEMA if f.name != "archived"])
_MARK = "\x01"  # never raw in JSON text: control characters are escaped
_ORDER_TRIES = 4  # key orders tried on documents that did not match the reader's order
_ORDER_PROBES = 32  # documents whose own key order may be tried


def long_batch(part: Batch, wanted: frozenset[str] | None) -> pa.RecordBatch | None:
    """The long rows of submission rows ``(id, form_id, answers, display)`` (documents
    as JSON text) as a record batch of ``ROWS_SCHEMA``, as ``long_rows`` makes them;
    None when the reader cannot parse the batch (then ``long_rows`` must)."""
    if not part:
        return None
    ids, forms, answers, display = zip(*part, strict=True)
    try:
        texts, shown_texts = pa.array(answers, pa.string()), pa.array(display, pa.string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return None  # documents already decoded (not SQLite)
    # No document (NULL) makes no rows, as one that is not an object: left to ``long_rows``.
    odd = np.asarray(pc.or_(pc.invert(pc.starts_with(texts, "{")), pc.invert(pc.starts_with(shown_texts, "{")))
                     .fill_null(False))
    if odd.any():
        texts, shown_texts = (pc.if_else(pa.array(odd), "{}", t) for t in (texts, shown_texts))
    texts, shown_texts = texts.fill_null("{}"), shown_texts.fill_null("{}")
    lines = document_lines(texts)
    docs, shown = _columns(read_documents(texts, lines)), _columns(read_documents(shown_texts))
    if docs is None or shown is None:
        return None
    plain = not (np.frombuffer(lines, dtype=np.uint8) == ord("\\")).any()  # no text to escape
    own = {k: pieces(col, plain) for k, col in docs.items()}
    exact = _matching(docs, own, texts, plain) & ~odd & _text_display(shown, len(part))
    clean = np.flatnonzero(exact)
    rows = _Rows(plain)
    if len(clean) < len(part):
        index = pa.array(clean)
        docs, shown = {k: c.take(index) for k, c in docs.items()}, {k: c.take(index) for k, c in shown.items()}
    else:  # the whole values' texts are made already
        rows.whole = {k: joined(p, len(part)) for k, p in own.items() if not _scalar(docs[k].type)}
    for key, col in docs.items():
        if wanted is None or key in wanted:
            _key_rows(rows, key, col, _shown(shown, key, len(clean)))
    made, columns = rows.ordered()
    made = clean[made]
    if len(clean) < len(part):
        made, columns = _with_others(made, columns, np.flatnonzero(~exact), part, wanted)
    at = pa.array(made)
    one_form = len(set(forms)) == 1 and isinstance(forms[0], str)  # the common case: no take
    form_ids = pa.repeat(pa.scalar(forms[0], pa.string()), len(made)) if one_form \
        else pa.array(forms, pa.string()).take(at)
    return pa.RecordBatch.from_arrays([pa.array(ids, pa.string()).take(at), form_ids, *columns], schema=ROWS_SCHEMA)


Columns = dict[str, pa.Array]


def _columns(table: pa.Table | None) -> Columns | None:
    """The table's columns each in one array (None if Arrow cannot join one's chunks)."""
    if table is None:
        return None
    try:
        return {name: col.combine_chunks() for name, col in zip(table.column_names, table.columns, strict=True)}
    except pa.ArrowException:
        return None  # seen with a list of numbers holding a null


def _shown(shown: Columns, key: str, n: int) -> pa.Array:
    col = shown.get(key)
    if col is None or not pa.types.is_string(col.type):
        return pa.nulls(n, pa.string())  # absent (a display that is not text is not read here)
    return col


def _text_display(shown: Columns, n: int) -> np.ndarray:
    """Where every display value is text or null (absent and null show alike)."""
    ok = np.ones(n, dtype=bool)
    for col in shown.values():
        if not pa.types.is_string(col.type) and not pa.types.is_null(col.type):
            ok &= np.asarray(pc.is_null(col))
    return ok


def _scalar(t: pa.DataType) -> bool:
    return not pa.types.is_list(t) and not pa.types.is_struct(t)


def _matching(docs: Columns, own: dict[str, list[Piece]], texts: pa.Array, plain: bool) -> np.ndarray:
    """Where the columns write each document back as its text, in the style the first
    document seems written in (the store's compact text, or ``json.dumps``'s), then,
    for the documents left, in the other (a store holding rows of both)."""
    first = _compact(texts[0].as_py()) if len(texts) else False
    ok = np.zeros(len(texts), dtype=bool)
    for compact in (first, not first):
        # A list's or a record's text differs: made again without spaces.
        styled = {k: v if _scalar(docs[k].type) else pieces(docs[k], plain, True) for k, v in own.items()} \
            if compact else own
        ok |= _matching_in(docs, styled, texts, compact, ok)
        left = np.flatnonzero(~ok)[:_ORDER_PROBES]
        if not any(_compact(texts[int(i)].as_py()) != first for i in left):
            break  # none left seems written the other way (an odd one is decoded instead)
    return ok


def _compact(text: str) -> bool:
    """Whether a document's text seems compact: its first member's name not followed by ``": "``."""
    name_end = text.find('":')
    return name_end >= 0 and not text.startswith(" ", name_end + 2)


def _matching_in(docs: Columns, own: dict[str, list[Piece]], texts: pa.Array, compact: bool,
                 done: np.ndarray) -> np.ndarray:
    """Where the columns write each document back as its text in one style: first with
    the keys in the reader's order, then in the orders of the first documents (not
    ``done``) that did not match."""
    order = list(docs)
    ok = _rebuilt_equal(docs, own, order, texts, compact)
    tried: set[tuple[str, ...]] = {tuple(order)}
    for i in np.flatnonzero(~(ok | done))[:_ORDER_PROBES]:
        if len(tried) > _ORDER_TRIES:
            break
        keys = None if ok[i] else _keys_of(texts[int(i)].as_py(), own)
        if keys is not None and tuple(keys) not in tried:
            tried.add(tuple(keys))
            ok |= _rebuilt_equal(docs, own, keys + [k for k in order if k not in keys], texts, compact)
    return ok


def _keys_of(text: str, own: dict[str, list[Piece]]) -> list[str] | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return list(doc) if isinstance(doc, dict) and all(k in own for k in doc) else None


def _rebuilt_equal(docs: Columns, own: dict[str, list[Piece]], order: list[str], texts: pa.Array,
                   compact: bool) -> np.ndarray:
    rebuilt = joined(object_pieces([(k, docs[k]) for k in order], True, own, compact=compact), len(texts))
    ok = np.asarray(pc.equal(rebuilt, texts).fill_null(False))
    left = np.flatnonzero(~ok)
    if len(left):  # the store escapes text past ASCII (\\uXXXX), the columns hold it decoded
        index = pa.array(left)
        ok[left] = np.asarray(pc.equal(_masked_text(rebuilt.take(index), False),
                                       _masked_text(texts.take(index), True)).fill_null(False))
    return ok


def _masked_text(texts: pa.Array, stored: bool) -> pa.Array:
    """JSON text with each character past ASCII, escaped (``\\uXXXX``) or not, as one
    mark (two for one past the BMP, which JSON escapes as a surrogate pair): the
    escapes and characters only stand inside strings, so the structure is kept."""
    if stored:
        texts = pc.replace_substring_regex(texts, "\\\\u[0-9a-fA-F]{4}", _MARK)
    texts = pc.replace_substring_regex(texts, "[\\x{10000}-\\x{10FFFF}]", _MARK * 2)
    return pc.replace_substring_regex(texts, "[^\\x00-\\x7e]", _MARK)  # DEL too: json escapes it


class _Rows:
    """Rows made so far, in pieces: each row's document, instance, slot (field key, row
    key, member key: an index into ``slots``), value and display text."""

    def __init__(self, plain: bool) -> None:
        self.plain = plain  # no answer text holds a character JSON escapes
        self.whole: dict[str, pa.Array] = {}  # a key's whole values as JSON text, when made already
        self.slots: dict[tuple[str, str, str], int] = {}
        self.docs: list[np.ndarray] = []
        self.instances: list[np.ndarray] = []
        self.slot_ids: list[np.ndarray] = []
        self.values: list[pa.Array] = []
        self.shown: list[pa.Array] = []

    def add(self, mask: np.ndarray, docs: np.ndarray, instances: np.ndarray | int, slot: tuple[str, str, str],
            value: pa.Array, shown: pa.Array) -> None:
        """Rows where ``mask``, of the aligned ``docs``, ``instances``, ``value`` and ``shown``."""
        where = np.flatnonzero(mask)
        if not len(where):
            return
        slot_id = self.slots.setdefault(slot, len(self.slots))
        self.docs.append(docs[where])
        self.instances.append(np.full(len(where), instances) if isinstance(instances, int) else instances[where])
        self.slot_ids.append(np.full(len(where), slot_id))
        if len(where) < len(mask):
            index = pa.array(where)
            value, shown = value.take(index), shown.take(index)
        self.values.append(value)
        self.shown.append(shown)

    def ordered(self) -> tuple[np.ndarray, list[pa.Array]]:
        """Each row's document and the columns from ``field_key`` on, each document's
        rows in ``long_rows`` order (field key, instance, row key, member key)."""
        if not self.docs:
            return np.zeros(0, dtype=np.int64), [pa.array([], f.type) for f in ROWS_SCHEMA][2:]
        slots = list(self.slots)
        field_rank = _ranks([s[0] for s in slots])
        inner_rank = _ranks([(s[1], s[2]) for s in slots])
        docs, inst, ids = (np.concatenate(a) for a in (self.docs, self.instances, self.slot_ids))
        perm = _sort_order(docs, field_rank[ids], inst, inner_rank[ids])
        order, slot_order, inst = pa.array(perm), pa.array(ids[perm]), inst[perm]
        # no row key or member key ("" in a slot) and no instance (-1) are nulls
        field, row, member = (pa.array([s[j] if j == 0 else s[j] or None for s in slots], pa.string())
                              .take(slot_order) for j in range(3))
        return docs[perm], [field, pa.array(inst, pa.int64(), mask=inst < 0), row, member,
                            pa.concat_arrays(self.values).take(order), pa.concat_arrays(self.shown).take(order)]


def _ranks(items: list[Any]) -> np.ndarray:
    ranked = {v: i for i, v in enumerate(sorted(set(items)))}
    return np.array([ranked[v] for v in items], dtype=np.int64)


def _sort_order(docs: np.ndarray, fields: np.ndarray, inst: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """The row order by (document, field rank, instance, row and member rank): one
    number per row where the ranges allow it (the pieces come as sorted runs)."""
    spans = [int(a.max()) + 1 for a in (fields, inst + 1, inner)]
    if len(docs) * spans[0] * spans[1] * spans[2] < 2 ** 62:
        key = ((docs * spans[0] + fields) * spans[1] + inst + 1) * spans[2] + inner
        return np.argsort(key, kind="stable")
    return np.lexsort((inner, inst, fields, docs))


def _key_rows(rows: _Rows, key: str, col: pa.Array, shown: pa.Array) -> None:
    """The rows of one answer key over the batch's documents."""
    n = len(col)
    docs = np.arange(n)
    t = col.type
    if pa.types.is_null(t):
        return
    if pa.types.is_struct(t):
        matrix = _matrix_rows(rows, key, docs, -1 * np.ones(n, dtype=np.int64), "", col, shown)
        _one_rows(rows, key, col, shown, np.asarray(pc.is_valid(col)) & ~matrix)
    elif pa.types.is_list(t) and pa.types.is_struct(t.value_type):
        _group_rows(rows, key, col, shown)
    else:
        _one_rows(rows, key, col, shown, np.asarray(pc.is_valid(col)))


def _one_rows(rows: _Rows, key: str, col: pa.Array, shown: pa.Array, mask: np.ndarray) -> None:
    """One row per document where ``mask``: the whole value, its display text."""
    if not mask.any():
        return
    text = rows.whole.get(key) or plain_values(col, rows.plain)
    rows.add(mask, np.arange(len(col)), -1, (key, "", ""), text, pc.coalesce(shown, value_text(col, text)))


def plain_values(col: pa.Array, plain: bool) -> pa.Array:
    """The long table's value of each value: text as it is, anything else its JSON text
    (``json_texts``)."""
    return col if pa.types.is_string(col.type) else json_texts(col, plain)


def value_text(col: pa.Array, text: pa.Array) -> pa.Array:
    """``value_text`` of each value (``text``: its ``plain_values``): text as it is,
    booleans as Yes/No, a list of text or numbers joined by ``", "``, an empty list as
    ``""``, anything else as its JSON text."""
    t = col.type
    if pa.types.is_string(t):
        return col
    if pa.types.is_boolean(t):
        return pc.if_else(col, "Yes", "No")
    if not pa.types.is_list(t):
        return text
    items = t.value_type
    if pa.types.is_string(items) or pa.types.is_int64(items) or pa.types.is_float64(items):
        texts = list_items(col) if pa.types.is_string(items) else json_texts(list_items(col))
        offsets = pc.subtract(col.offsets, col.offsets[0])
        return pc.binary_join(pa.ListArray.from_arrays(offsets, texts, mask=col.is_null()), ", ")
    return pc.if_else(pc.equal(pc.list_value_length(col), 0), "", text)


def _present(col: pa.StructArray) -> tuple[list[tuple[str, pa.Array, np.ndarray]], np.ndarray]:
    """Each member (name, values, where present) and where a non-text member is present."""
    members, other = [], np.zeros(len(col), dtype=bool)
    for j, f in enumerate(col.type):
        child = col.field(j)
        here = np.asarray(pc.is_valid(child)) & np.asarray(pc.is_valid(col))
        if pa.types.is_string(f.type):
            members.append((f.name, child, here))
        else:
            other |= here
    return members, other


def _matrix_rows(rows: _Rows, key: str, docs: np.ndarray, inst: np.ndarray, member: str, col: pa.StructArray,
                 shown: pa.Array) -> np.ndarray:
    """The rows of the matrices in ``col`` (objects of text values, one row per row
    key), each shown by its ``", "`` segment of ``shown``; returns where ``col`` is one."""
    members, other = _present(col)
    count = np.sum([here for _, _, here in members], axis=0) if members else np.zeros(len(col), dtype=np.int64)
    matrix = (count > 0) & ~other
    parts = pc.split_pattern(shown, ", ")
    place = np.zeros(len(col), dtype=np.int64)
    for row_key, child, here in members:
        cell = _segment(shown, parts, count, place)
        if (matrix & here).any():
            rows.add(matrix & here, docs, inst, (key, row_key, member), child, pc.coalesce(cell, child))
        place += here
    return matrix


def _segment(whole: pa.Array, parts: pa.ListArray, n: np.ndarray, k: np.ndarray) -> pa.Array:
    """``_segments(whole, sep, n)[k]`` element by element (``parts``: ``whole`` split on
    the separator): the k-th part when there are exactly n, ``whole`` when n is 1, else null."""
    lengths = np.asarray(pc.list_value_length(parts).fill_null(0))
    valid = np.asarray(pc.is_valid(whole))
    single = valid & (n == 1)
    split = valid & (n > 1) & (lengths == n) & (k < n)
    starts = np.asarray(parts.offsets)[:-1] - parts.offsets[0].as_py()
    index = np.where(split, starts + k, 0)
    items = list_items(parts)
    picked = items.take(pa.array(index)) if len(items) else pa.nulls(len(whole), pa.string())
    out = pc.if_else(pa.array(split), picked, pa.scalar(None, pa.string()))
    return pc.if_else(pa.array(single), whole, out)


def _group_rows(rows: _Rows, key: str, col: pa.ListArray, shown: pa.Array) -> None:
    """The rows of a list-of-objects key: a repeating group gives one row per instance
    and member (a matrix member, one per row); files and empty lists one row."""
    n = len(col)
    lengths = np.asarray(pc.list_value_length(col).fill_null(0))
    owner = np.asarray(pc.list_parent_indices(col))
    items = list_items(col)
    position = np.arange(len(items)) - (np.asarray(col.offsets)[:-1] - col.offsets[0].as_py())[owner]
    not_file = ~_files(items)
    group = (lengths > 0) & (np.bincount(owner, weights=not_file, minlength=n) > 0)
    in_group = group[owner]
    instance_shown = _segment(shown.take(pa.array(owner)), pc.split_pattern(shown, ", ").take(pa.array(owner)),
                              lengths[owner], position)
    members = [(f.name, items.field(j), np.asarray(pc.is_valid(items.field(j))) & in_group)
               for j, f in enumerate(items.type)]
    count = np.sum([here for _, _, here in members], axis=0) if members else np.zeros(len(items), dtype=np.int64)
    member_parts = pc.split_pattern(instance_shown, " / ")
    made = np.zeros(n, dtype=np.int64)
    place = np.zeros(len(items), dtype=np.int64)
    for member, child, here in members:
        member_shown = _segment(instance_shown, member_parts, count, place)
        matrix = np.zeros(len(items), dtype=bool)
        if pa.types.is_struct(child.type):
            matrix = _matrix_rows(rows, key, owner, position, member, _masked(child, here), member_shown)
        plain = here & ~matrix
        if plain.any():
            text = plain_values(child, rows.plain)
            rows.add(plain, owner, position, (key, "", member), text,
                     pc.coalesce(member_shown, value_text(child, text)))
        made += np.bincount(owner[here], minlength=n)
        place += here
    _one_rows(rows, key, col, shown, np.asarray(pc.is_valid(col)) & (made == 0))


def _masked(col: pa.StructArray, here: np.ndarray) -> pa.StructArray:
    """``col`` with the values outside ``here`` made null (instances not of a group)."""
    if here.all():
        return col
    return pc.if_else(pa.array(here), col, pa.scalar(None, col.type))


def _files(items: pa.StructArray) -> np.ndarray:
    """Where an object is a file: it has ``name``, ``url``, and ``size`` or ``type``."""
    names = {f.name for f in items.type}
    if not {"name", "url"} <= names or not names & {"size", "type"}:
        return np.zeros(len(items), dtype=bool)

    def has(name: str) -> np.ndarray:
        return np.asarray(pc.is_valid(items.field(name))) if name in names else np.zeros(len(items), dtype=bool)

    return has("name") & has("url") & (has("size") | has("type"))


def _with_others(docs: np.ndarray, columns: list[pa.Array], others: np.ndarray, part: Batch,
                 wanted: frozenset[str] | None) -> tuple[np.ndarray, list[pa.Array]]:
    """The rows (``docs``: each row's submission) with the rows ``long_rows`` makes of
    the submissions ``others``, in submission order."""
    made = [long_rows([part[i]], wanted) for i in others]
    rest = [r for rows in made for r in rows]
    if not rest:
        return docs, columns
    rest_docs = np.repeat(others, [len(rows) for rows in made])
    extra = [pa.array(c, f.type) for c, f in zip(list(zip(*rest, strict=True))[2:], list(ROWS_SCHEMA)[2:], strict=True)]
    every = np.concatenate([docs, rest_docs])
    perm = pa.array(np.argsort(every, kind="stable"))
    merged = [pa.concat_arrays([a, b]).take(perm) for a, b in zip(columns, extra, strict=True)]
    return every[np.asarray(perm)], merged
