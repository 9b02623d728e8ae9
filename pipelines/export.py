"""Export the store to CSV, XLSX or Parquet: submissions wide (one row per submission,
one column per field), answers long (one row per answer, or per part of a
repeating group or matrix: see ``answer_rows``) and requests.

The export streams: rows are read from the store in batches of ``CHUNK_ROWS`` (the
store's ``exports`` reads), each batch is shaped column by column into an
Arrow record batch, and the batch is written at once (``pyarrow.parquet.ParquetWriter``,
``pyarrow.csv.CSVWriter``, xlsxwriter in ``constant_memory`` mode), so memory stays
bounded by one batch whatever the size of the store. The file is written under a
temporary name beside ``out`` and renamed when complete: a failed export leaves no file.

Text cells a spreadsheet would run as a formula are neutralised in CSV and XLSX (see
``neutralise``); Parquet keeps every value as stored."""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import xlsxwriter
from pydantic import BaseModel

from connector.store import (
    ExportFilter,
    Store,
    answer_rows,
    display_text,
    epoch_ms,
    is_matrix,
    json_value,
)
from connector.store.exports import long_rows

from .long_json import LONG_COLUMNS, LONG_SCHEMA, long_batch
from .wide_json import Cells, First, doc_cells, row_cells

Format = Literal["csv", "xlsx", "parquet"]
Table = Literal["wide", "long", "requests"]
FORMATS: tuple[str, ...] = ("csv", "xlsx", "parquet")
TABLES: tuple[str, ...] = ("wide", "long", "requests")
REQUEST_STATUSES: tuple[str, ...] = ("pending", "completed", "expired", "canceled")
XLSX_MAX_ROWS = 1_048_576  # rows in one worksheet, the header row included
CHUNK_ROWS = 50_000  # rows per batch read from the store and written
LONG_SHAPERS = 2  # long batches shaped at once (Arrow's kernels free the interpreter lock)
WIDTH_SAMPLE_ROWS = 1000  # XLSX column widths are fitted to the header and the first rows
# A text cell starting with one of these is run as a formula (or starts one) by spreadsheets.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

WIDE_FIXED = ["submission_id", "form_id", "request_id", "submitted_at", "updated_at", "edit_count"]
REQUEST_COLUMNS = ["request_id", "form_id", "status", "outcome", "delivery_status", "external_id",
                   "recipient_email", "recipient_name", "url", "submission_id", "created_at", "expires_at",
                   "completed_at", "expired_at", "canceled_at", "cancel_reason", "updated_at"]
_REQUEST_TIMES = ("created_at", "expires_at", "completed_at", "expired_at", "canceled_at", "updated_at")
TIMESTAMP = pa.timestamp("ms", tz="UTC")
_EXCEL_EPOCH_DAYS = 25_569  # days from Excel's day 0 (1899-12-30) to 1970-01-01
_DAY_MS = 86_400_000


class ExportReport(BaseModel):
    """What ``export`` wrote: the file, its format, and the rows and columns of each table
    (each a sheet in XLSX)."""

    path: str
    format: Format
    rows: dict[str, int]
    columns: dict[str, list[str]]


def neutralise(value: Any) -> Any:
    """``value`` made safe for a spreadsheet: a string starting with ``=``, ``+``, ``-``,
    ``@``, a tab or a carriage return gets a leading ``'`` so it is shown as text and
    never run as a formula. Anything else is returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def neutralise_array(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``neutralise`` over a whole Arrow column: every string value starting a formula
    gets a leading ``'``; nulls and other values are unchanged. Non-string columns are
    returned as they are."""
    if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
        return values
    # The first bytes against the prefixes (each one ASCII byte, so a UTF-8 text starts
    # one exactly when its first byte is one): many times faster than a regular
    # expression over every value, and the column is copied only when a value starts one.
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    formula = [_formula_starts(c) for c in chunks]
    if not any(f.any() for f in formula):
        return values
    quoted = pc.binary_join_element_wise(pa.scalar("'", values.type), values, pa.scalar("", values.type))
    mask = pa.array(np.concatenate(formula)) if formula else pa.array([], pa.bool_())
    return pc.if_else(mask, quoted, values)


_FORMULA_BYTE = np.zeros(256, dtype=bool)  # by byte value: whether a text starting with it starts a formula
_FORMULA_BYTE[[ord(p) for p in FORMULA_PREFIXES]] = True


def _formula_starts(texts: pa.Array) -> np.ndarray:
    """Where a text (not null, not empty) starts with a formula prefix."""
    if not len(texts):
        return np.zeros(0, dtype=bool)
    wide = pa.types.is_large_string(texts.type)
    offsets: np.ndarray = np.frombuffer(texts.buffers()[1], dtype=np.int64 if wide else np.int32)[
        texts.offset:texts.offset + len(texts) + 1].astype(np.int64)
    data = texts.buffers()[2]
    if data is None or not data.size:
        return np.zeros(len(texts), dtype=bool)
    first = np.frombuffer(data, dtype=np.uint8)[np.minimum(offsets[:-1], data.size - 1)]
    starts = _FORMULA_BYTE[first] & (np.diff(offsets) > 0)
    return starts & np.asarray(pc.is_valid(texts)) if texts.null_count else starts


def _since_ms(since: datetime | date | None) -> int | None:
    if since is None:
        return None
    if not isinstance(since, datetime):
        since = datetime(since.year, since.month, since.day)
    return epoch_ms(since)  # a naive datetime is taken as UTC


def _count(store: Store, f: ExportFilter) -> int:
    return store.exports.count_answers(f)


def _times(ms: Sequence[int | None]) -> pa.Array:
    return pa.array(ms, type=pa.int64()).cast(TIMESTAMP)


# ---------------------------------------------------------------------------------------
# Tables: a schema known before the first row is written, then record batches
# ---------------------------------------------------------------------------------------


@dataclass
class _TableStream:
    """One table to write: its name, its Arrow schema (field names are the headers), a
    function giving its record batches, and a function counting its rows."""

    name: str
    schema: pa.Schema
    batches: Callable[[], Iterator[pa.RecordBatch]]
    count: Callable[[], int]


_to_json = json.JSONEncoder(ensure_ascii=False).encode  # one encoder: json.dumps(..., ensure_ascii=False) builds one per call


def _as_text(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _infer_array(values: list[Any]) -> pa.Array:
    """The values of one data-driven column in one batch as an Arrow array of the type
    they share (text, integers, numbers, booleans; null when all are missing). Values
    of different kinds (text and numbers, say, when one key holds different fields
    across forms) become text, numbers and booleans as their JSON text."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([_as_text(v) for v in values], pa.string())


def _unify(types: set[pa.DataType]) -> pa.DataType:
    """The one type of a column whose batches have ``types`` (``_infer_array`` rules):
    integers and floats are numbers; any other mix is text."""
    types = {t for t in types if not pa.types.is_null(t)}
    if not types:
        return pa.string()
    if len(types) == 1:
        return types.pop()
    if types <= {pa.int64(), pa.float64()}:
        return pa.float64()
    return pa.string()


def _conform(col: pa.Array, to: pa.DataType) -> pa.Array:
    if col.type == to:
        return col
    if pa.types.is_null(col.type):
        return pa.nulls(len(col), to)
    if pa.types.is_string(to) and pa.types.is_floating(col.type):  # 4.0 as "4.0", as JSON writes it
        return pa.array([_as_text(v) for v in col.to_pylist()], pa.string())
    return col.cast(to)  # int to float; int or bool to text ("42", "true": their JSON text)


class _Spill:
    """Batches whose data-driven columns are known only once every row is read (wide
    field columns, request metadata): each shaped batch is kept in an Arrow IPC file in
    ``tmpdir`` (memory holds one batch), then read back conformed to the final schema.
    The store is read once, so the columns and the rows come from the same read."""

    def __init__(self, tmpdir: Path, name: str) -> None:
        self.tmpdir, self.name = tmpdir, name
        self.files: list[Path] = []
        self.types: dict[str, set[pa.DataType]] = {}  # data-driven column -> its batches' types
        self.rows = 0

    def add(self, fixed: list[tuple[str, pa.Array]], data: Mapping[str, list[Any] | pa.Array]) -> None:
        arrays = [a for _, a in fixed] + [_infer_array(v) if isinstance(v, list) else v for v in data.values()]
        batch = pa.RecordBatch.from_arrays(arrays, names=[n for n, _ in fixed] + [f"\0{k}" for k in data])
        for k, a in zip(data, arrays[len(fixed):], strict=True):
            self.types.setdefault(k, set()).add(a.type)
        path = self.tmpdir / f"{self.name}-{len(self.files):06d}.arrow"
        with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, batch.schema) as w:
            w.write_batch(batch)
        self.files.append(path)
        self.rows += batch.num_rows

    def stream(self, fixed: pa.Schema, columns: list[tuple[str, str]]) -> _TableStream:
        """The spilled table with the ``fixed`` columns, then ``columns`` (data key,
        header) in that order; a key absent from a batch is a null column there."""
        types = {k: _unify(self.types.get(k, set())) for k, _ in columns}
        schema = pa.schema(list(fixed) + [(h, types[k]) for k, h in columns])

        def spilled() -> Iterator[pa.RecordBatch]:
            for path in self.files:
                with pa.memory_map(str(path)) as src:
                    batch = pa.ipc.open_file(src).get_batch(0)
                    n = batch.num_rows
                    arrays = [batch.column(f.name) for f in fixed]
                    for k, _ in columns:
                        i = batch.schema.get_field_index(f"\0{k}")
                        arrays.append(pa.nulls(n, types[k]) if i < 0 else _conform(batch.column(i), types[k]))
                    yield pa.RecordBatch.from_arrays(arrays, schema=schema)

        return _TableStream(self.name, schema, lambda: _regrouped(spilled(), schema, CHUNK_ROWS),
                            lambda: self.rows)


def _regrouped(batches: Iterator[pa.RecordBatch], schema: pa.Schema, rows: int) -> Iterator[pa.RecordBatch]:
    """Consecutive ``batches`` as batches of ``rows`` rows (the last one may be shorter)."""
    held: list[pa.RecordBatch] = []
    n = 0
    for batch in batches:
        held.append(batch)
        n += batch.num_rows
        while n >= rows:
            table = pa.Table.from_batches(held, schema)
            yield table.slice(0, rows).combine_chunks().to_batches()[0]
            held, n = table.slice(rows).to_batches(), n - rows
    if n:
        yield pa.Table.from_batches(held, schema).combine_chunks().to_batches()[0]


def _wide_cells(answers: dict[str, Any], shown: dict[str, Any], sid: str, display: bool) -> dict[str, Any]:
    """The field cells of one submission, keyed by column key (``key`` or ``key.row``):
    scalars as they are, a matrix as one cell per row, anything else (multi-choice lists,
    files, groups, payment objects) as JSON text; with ``display``, display text."""
    cells: dict[str, Any] = {}
    if not display:
        for key, value in answers.items():
            if value is None or isinstance(value, str | int | float):  # bool is an int
                cells[key] = value
            elif is_matrix(value):
                for row_key, col in value.items():
                    cells[f"{key}.{row_key}"] = col
            else:
                cells[key] = _to_json(value)
        return cells
    matrix_parts: dict[tuple[str, str], Any] = {}
    if any(is_matrix(v) for v in answers.values()):  # the per-row display segments
        for a in answer_rows(sid, answers, shown):
            if a["instance"] == -1 and a["row_key"]:
                matrix_parts[(a["field_key"], a["row_key"])] = a["display_text"]
    for key, value in answers.items():
        if is_matrix(value):
            for row_key in value:
                cells[f"{key}.{row_key}"] = matrix_parts[(key, row_key)]
        else:
            text = shown.get(key)
            cells[key] = display_text(value, text)
    return cells


def _field_of(column: str, answers: dict[str, Any]) -> tuple[str, str | None]:
    """The (field key, matrix row) of a wide column key: ``key``, or ``key.row`` of a
    matrix (a field key may hold a dot itself, so it is looked up, not split)."""
    if column in answers and not is_matrix(answers[column]):
        return column, None
    for key, value in answers.items():
        if is_matrix(value) and column.startswith(f"{key}.") and column[len(key) + 1:] in value:
            return key, column[len(key) + 1:]
    raise AssertionError(f"column {column!r} comes from no answer")  # _wide_cells made it from one


def _headers(field_cols: dict[str, tuple[str, str | None]], labels: dict[str, str] | None) -> list[str]:
    """Column headers: question titles in place of field keys when ``labels`` are given
    (``Title.row`` for a matrix row); a header used twice (a title shared by two fields,
    or a field named like a fixed column) keeps its key in brackets, so every header
    is unique."""
    fields: list[str] = []
    for c, (key, row_key) in field_cols.items():
        if not labels:
            fields.append(c)
            continue
        title = labels.get(key, key)
        fields.append(title if row_key is None else f"{title}.{row_key}")
    seen: dict[str, int] = {}
    for h in WIDE_FIXED + fields:
        seen[h] = seen.get(h, 0) + 1
    return WIDE_FIXED + [f"{h} [{c}]" if seen[h] > 1 else h for h, c in zip(fields, field_cols, strict=True)]


def _order_columns(field_cols: dict[str, tuple[str, str | None]], fields: list[str] | None,
                   order: list[str] | None) -> dict[str, tuple[str, str | None]]:
    """The field columns in export order: only ``fields``, in its order (a requested field
    no submission answered is still a column); else the keys of ``order`` first, in its
    order, then any other key in first-seen order; else first-seen order."""
    if fields is not None:
        wanted = set(fields)
        field_cols = {c: fk for c, fk in field_cols.items() if fk[0] in wanted}
        for k in fields:
            if not any(fk == k for fk, _ in field_cols.values()):
                field_cols[k] = (k, None)
        rank = {k: i for i, k in enumerate(fields)}
        return dict(sorted(field_cols.items(), key=lambda kv: rank[kv[1][0]]))
    if order:
        rank = {k: i for i, k in enumerate(order)}
        return dict(sorted(field_cols.items(), key=lambda kv: rank.get(kv[1][0], len(rank))))
    return field_cols


WIDE_SCHEMA = pa.schema([("submission_id", pa.string()), ("form_id", pa.string()), ("request_id", pa.string()),
                         ("submitted_at", TIMESTAMP), ("updated_at", TIMESTAMP), ("edit_count", pa.int64())])


def _wide_stream(store: Store, tmpdir: Path, *, form_id: str | None, since: datetime | date | None,
                 display: bool, labels: dict[str, str] | None, fields: list[str] | None,
                 order: list[str] | None) -> _TableStream:
    f = ExportFilter(form_id=form_id, since_ms=_since_ms(since))
    field_cols: dict[str, tuple[str, str | None]] = {}  # column key -> (field key, matrix row), first seen first
    spill = _Spill(tmpdir, "wide")
    for fixed, values in _field_batches(store, f, display, field_cols):
        spill.add([("submission_id", pa.array(fixed[0], pa.string())), ("form_id", pa.array(fixed[1], pa.string())),
                   ("request_id", pa.array(fixed[2], pa.string())), ("submitted_at", _times(fixed[3])),
                   ("updated_at", _times(fixed[4])), ("edit_count", pa.array(fixed[5], pa.int64()))], values)
        del fixed, values  # one batch in memory while the next is read
    field_cols = _order_columns(field_cols, fields, order)
    headers = _headers(field_cols, labels)[len(WIDE_FIXED):]
    return spill.stream(WIDE_SCHEMA, list(zip(field_cols, headers, strict=True)))


FieldBatch = tuple[list[tuple[Any, ...]], Mapping[str, list[Any] | pa.Array]]


def _field_batches(store: Store, f: ExportFilter, display: bool, field_cols: dict[str, tuple[str, str | None]]
                   ) -> Iterator[FieldBatch]:
    """Each batch of submissions as its columns (the fixed ones first) and its field
    cells by column key; new columns are added to ``field_cols`` as they appear."""
    if display:
        for part in store.exports.submissions(f, display=True, batch_rows=CHUNK_ROWS):
            yield list(zip(*part, strict=True)), _display_cells(part, field_cols)
        return
    keys = store.field_keys(f.form_id)
    if store.backend != "sqlite":
        probe = _Probe(store.backend, keys)
        for part in store.exports.submission_fields(f, keys, batch_rows=CHUNK_ROWS):
            fixed = list(zip(*part, strict=True))
            yield fixed, probe.cells(fixed[6:], len(part), field_cols)
        return
    # SQLite gives each answers document as its text: Arrow's JSON reader parses a batch's
    # documents at once (``wide_json``), so each is read once rather than once per field;
    # the next batch is read from the database while the reader parses this one (batches
    # of a fifth of CHUNK_ROWS, so the two overlap; the spill writes them CHUNK_ROWS at a time).
    with ThreadPoolExecutor(1) as pool:
        ahead: tuple[list[tuple[Any, ...]], Future[tuple[Cells, First]]] | None = None
        for part in store.exports.submissions(f, display=False, batch_rows=max(1, CHUNK_ROWS // 5)):
            fixed = list(zip(*part, strict=True))
            job = fixed, pool.submit(_doc_cells, fixed[6], keys)
            del part
            if ahead is not None:
                yield _with_columns(*ahead, keys, field_cols)
            ahead = job
        if ahead is not None:
            yield _with_columns(*ahead, keys, field_cols)


def _doc_cells(texts: Sequence[str], keys: list[str]) -> tuple[Cells, First]:
    return doc_cells(texts, keys) or row_cells(texts, keys)


def _with_columns(fixed: list[tuple[Any, ...]], cells: Future[tuple[Cells, First]], keys: list[str],
                  field_cols: dict[str, tuple[str, str | None]]) -> FieldBatch:
    values, first = cells.result()
    _add_columns(first, keys, field_cols)
    return fixed, values


def _display_cells(part: Sequence[tuple[Any, ...]], field_cols: dict[str, tuple[str, str | None]]
                   ) -> dict[str, list[Any]]:
    """The display-text cells of a batch (``_wide_cells``), new columns added to ``field_cols``."""
    n = len(part)
    values: dict[str, list[Any]] = {}
    for i, row in enumerate(part):
        answers = json_value(row[6]) or {}
        for c, v in _wide_cells(answers, json_value(row[7]) or {}, row[0], True).items():
            col = values.get(c)
            if col is None:
                col = values[c] = [None] * n
                if c not in field_cols:
                    field_cols[c] = _field_of(c, answers)
            col[i] = v
    return values


# One separator outside a JSON string (with all that precedes it), or the end of the text.
_SEPARATOR_RE = r'((?:"(?:[^"\\]|\\.)*"|[^",:])*)([,:]|$)'


def _per_distinct(texts: pa.Array, shape: Callable[[pa.Array], pa.Array]) -> pa.Array:
    """``shape`` applied to each distinct text once where texts repeat (choice lists,
    option keys), judged on the first rows; else to the column as it is."""
    sample = texts.slice(0, 1000)
    if pc.count_distinct(sample).as_py() * 10 > len(sample):
        return shape(texts)
    encoded = texts.dictionary_encode()
    return pc.take(shape(encoded.dictionary), encoded.indices)


def _json_strings(texts: pa.Array) -> pa.Array:
    """JSON string texts as their values: the quotes off; one with an escape decoded."""
    column = pc.utf8_slice_codeunits(texts, 1, -1)
    escaped = pc.fill_null(pc.match_substring(texts, "\\"), False)
    if not pc.any(escaped).as_py():
        return column
    cells = column.to_pylist()
    for i in pc.indices_nonzero(escaped).to_pylist():
        cells[i] = json.loads(texts[i].as_py())
    return pa.array(cells, pa.string())


def _json_arrays(texts: pa.Array) -> pa.Array:
    """SQLite's compact JSON texts of lists as ``_to_json`` writes them (``", "`` and
    ``": "`` between items, text unescaped), in one pass over the column; a text with a
    ``\\u`` escape is decoded and re-encoded on its own."""
    spaced = pc.utf8_rtrim(pc.replace_substring_regex(texts, pattern=_SEPARATOR_RE, replacement="\\1\\2 "),
                           characters=" ")
    escaped = pc.match_substring(texts, "\\u")
    if not pc.any(escaped).as_py():
        return spaced
    cells = spaced.to_pylist()
    for i in pc.indices_nonzero(pc.fill_null(escaped, False)).to_pylist():
        cells[i] = _to_json(json.loads(texts[i].as_py()))
    return pa.array(cells, pa.string())


_MEMO_MAX = 1_000  # JSON texts of lists and objects kept shaped (choice lists repeat a lot)


_INTEGER_RE = "^-?[0-9]+$"  # a JSON number that json.loads reads as an int


class _Probe:
    """Shapes the raw answer cells of a batch from each key's JSON text, as the database
    took it out of the document (``answer_json``): a key holding one kind of scalar in
    the batch (or lists, on SQLite) becomes an Arrow column in a few vector operations;
    a key holding objects or mixed kinds is shaped cell by cell. Columns and kinds come
    out exactly as ``_wide_cells`` makes them (a matrix as one column per row, any other
    list or object as JSON text)."""

    def __init__(self, dialect: str, keys: list[str]) -> None:
        self.keys = keys
        self.sqlite = dialect == "sqlite"  # its JSON text is compact: lists are re-spaced in Arrow
        self.memo: dict[str, Any] = {}

    def cells(self, columns: list[tuple[Any, ...]], n: int, field_cols: dict[str, tuple[str, str | None]]
              ) -> dict[str, list[Any] | pa.Array]:
        data: dict[str, list[Any] | pa.Array] = {}
        first: dict[str, tuple[int, int, int]] = {}  # new column -> (row, key rank, matrix row rank)
        for j, key in enumerate(self.keys):
            texts = pa.array(columns[j], pa.string())
            if texts.null_count == n:
                continue  # no answer in this batch
            column = self._at_once(texts, *_kinds(texts))
            if column is None:
                self._by_cell(key, j, columns[j], n, data, first)
                continue
            data[key] = column
            first[key] = (pc.index(pc.is_valid(texts), True).as_py(), j, 0)
        _add_columns(first, self.keys, field_cols)
        return data

    def _at_once(self, texts: pa.Array, present: set[str], null: pa.Array | None) -> pa.Array | None:
        """The column of a key holding one kind of scalar (or only nulls); None otherwise."""
        try:
            if not present:
                return pa.nulls(len(texts))
            if present == {"text"}:
                column = _per_distinct(texts, _json_strings)
            elif present <= {"integer", "real"}:
                column = texts.cast(pa.int64() if present == {"integer"} else pa.float64())
            elif present == {"boolean"}:
                column = pc.equal(texts, "true")
            elif present == {"array"} and self.sqlite:
                column = _per_distinct(texts, _json_arrays)
            else:
                return None
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            return None
        if null is not None:  # JSON null: an empty cell
            column = pc.if_else(null, pa.scalar(None, column.type), column)
        return column

    def _by_cell(self, key: str, rank: int, texts: tuple[str | None, ...], n: int,
                 data: dict[str, list[Any] | pa.Array], first: dict[str, tuple[int, int, int]]) -> None:
        own: list[Any] | None = None
        for i, text in enumerate(texts):
            if text is None:
                continue
            matrix, cell = self._shaped(text)
            if matrix:
                for pos, (row_key, col) in enumerate(cell, start=1):
                    c = f"{key}.{row_key}"
                    cells = data.get(c)
                    if cells is None:
                        cells = data[c] = [None] * n
                        first[c] = (i, rank, pos)
                    cells[i] = col
                continue
            if own is None:
                own = [None] * n
                data[key] = own
                first[key] = (i, rank, 0)
            own[i] = cell

    def _shaped(self, text: str) -> tuple[bool, Any]:
        """(is a matrix, its (row, column) pairs) or (False, the cell ``_wide_cells`` makes)."""
        hit = self.memo.get(text)
        if hit is None:
            if len(self.memo) >= _MEMO_MAX:
                self.memo.clear()
            value = json.loads(text)
            if is_matrix(value):
                hit = (True, list(value.items()))
            elif value is None or isinstance(value, str | int | float):
                hit = (False, value)
            else:
                hit = (False, _to_json(value))
            self.memo[text] = hit
        return hit


def _add_columns(first: Mapping[str, tuple[int, int, int]], keys: Sequence[str],
                 field_cols: dict[str, tuple[str, str | None]]) -> None:
    """Add a batch's new columns to ``field_cols`` in the order they first appear (row,
    then key rank, then matrix row rank); ``first`` maps each to that place."""
    for c, (_, rank, _) in sorted(first.items(), key=lambda kv: kv[1]):
        if c not in field_cols:
            key = keys[rank]
            field_cols[c] = (key, None if c == key else c[len(key) + 1:])


_HEADS = {'"': "text", "t": "boolean", "f": "boolean", "n": "null", "[": "array", "{": "object"}


def _kinds(texts: pa.Array) -> tuple[set[str], pa.Array | None]:
    """The kinds of JSON texts present (text, integer, real, boolean, array, object; not
    null), and where the JSON nulls are (None when there are none)."""
    head = pc.utf8_slice_codeunits(texts, 0, 1)
    heads = set(pc.unique(head.drop_null()).to_pylist())
    kinds = {_HEADS.get(h, "number") for h in heads}
    if "number" in kinds:
        kinds.discard("number")
        numbers = pc.fill_null(pc.match_substring_regex(head, "^[-0-9]$"), False)
        whole = pc.fill_null(pc.match_substring_regex(texts, _INTEGER_RE), False)
        # integers alone stay integers; with any fraction or exponent they are all reals
        kinds.add("integer" if pc.all(pc.or_(pc.invert(numbers), whole)).as_py() else "real")
    null = pc.equal(head, "n") if "n" in heads else None
    kinds.discard("null")
    return kinds, null


def _long_stream(store: Store, *, form_id: str | None, since: datetime | date | None,
                 labels: dict[str, str] | None, fields: list[str] | None) -> _TableStream:
    f = ExportFilter(form_id=form_id, since_ms=_since_ms(since), fields=None if fields is None else tuple(fields))
    types = {c: pa.int64() if c == "instance" else pa.string() for c in LONG_COLUMNS}
    names = list(LONG_COLUMNS)
    if labels:
        names.insert(3, "field_label")
    schema = pa.schema([(c, types.get(c, pa.string())) for c in names])
    label_keys = pa.array(list(labels), pa.string()) if labels else None
    label_titles = pa.array(list(labels.values()), pa.string()) if labels else None

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in _long_batches(store, f):
            arrays = batch.columns
            if label_keys is not None:
                titles = pc.take(label_titles, pc.index_in(arrays[2], value_set=label_keys))
                arrays.insert(3, pc.coalesce(titles, arrays[2]))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    return _TableStream("long", schema, batches, lambda: _count(store, f))


def _long_batches(store: Store, f: ExportFilter) -> Iterator[pa.RecordBatch]:
    """The long table's rows (``store.exports.answers``) as record batches of ``LONG_SCHEMA``."""
    # The documents are read as their stored text: Arrow's JSON reader parses a batch's
    # documents at once (``long_json``), and the next batch is read from the database
    # while this one is shaped. Submissions make about 16 rows each.
    wanted = None if f.fields is None else frozenset(f.fields)
    with ThreadPoolExecutor(LONG_SHAPERS) as pool:
        ahead: deque[Future[pa.RecordBatch]] = deque()
        for part in store.exports.answer_documents(f, batch_rows=max(1, CHUNK_ROWS // 16)):
            ahead.append(pool.submit(_long_shaped, part, wanted))
            del part
            if len(ahead) > LONG_SHAPERS and (batch := ahead.popleft().result()).num_rows:
                yield batch
        while ahead:
            if (batch := ahead.popleft().result()).num_rows:
                yield batch


def _long_shaped(part: Sequence[tuple[Any, ...]], wanted: frozenset[str] | None) -> pa.RecordBatch:
    batch = long_batch(part, wanted)
    return batch if batch is not None else _long_arrays(long_rows(part, wanted))


def _long_arrays(rows: Sequence[tuple[Any, ...]]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True)) or [()] * len(LONG_SCHEMA)
    return pa.RecordBatch.from_arrays([pa.array(v, f.type) for v, f in zip(columns, LONG_SCHEMA, strict=True)],
                                      schema=LONG_SCHEMA)


def _requests_stream(store: Store, tmpdir: Path, *, form_id: str | None, since: datetime | date | None,
                     status: str | None) -> _TableStream:
    plain = [c for c in REQUEST_COLUMNS if c != "request_id"]
    f = ExportFilter(form_id=form_id, since_ms=_since_ms(since), status=status)
    fixed = pa.schema([(c, TIMESTAMP if c in _REQUEST_TIMES else pa.string()) for c in REQUEST_COLUMNS])
    spill = _Spill(tmpdir, "requests")
    keys: dict[str, None] = {}  # metadata keys, first seen first
    for part in store.exports.requests(f, plain, batch_rows=CHUNK_ROWS):
        columns = list(zip(*part, strict=True))
        values: dict[str, list[Any]] = {}
        for i, meta in enumerate(columns[-1]):
            for k, v in (json_value(meta) or {}).items():
                keys.setdefault(k)
                values.setdefault(k, [None] * len(part))[i] = v if v is None or isinstance(v, str | int | float) \
                    else json.dumps(v, ensure_ascii=False)
        spill.add([(c, _times(v) if c in _REQUEST_TIMES else pa.array(v, pa.string()))
                   for c, v in zip(REQUEST_COLUMNS, columns, strict=False)], values)
    return spill.stream(fixed, [(k, f"metadata.{k}") for k in keys])


# ---------------------------------------------------------------------------------------
# Writers: each takes the tables and writes batch by batch, returning the rows written
# ---------------------------------------------------------------------------------------


def _csv_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A batch as CSV cells: formula text neutralised, booleans as ``True``/``False``."""
    arrays = []
    for col in batch.columns:
        if pa.types.is_boolean(col.type):
            col = pc.if_else(col, "True", "False")
        arrays.append(neutralise_array(col))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _csv_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([(neutralise(f.name), pa.string() if pa.types.is_boolean(f.type) else f.type)
                      for f in schema])


def _write_csv(table: _TableStream, out: Path) -> int:
    schema = _csv_schema(table.schema)
    rows = 0
    with pacsv.CSVWriter(out, schema) as w:
        for batch in table.batches():
            w.write_batch(_csv_batch(batch, schema))
            rows += batch.num_rows
    return rows


def _write_parquet(table: _TableStream, out: Path) -> int:
    rows = 0
    with pq.ParquetWriter(out, table.schema) as w:
        for batch in table.batches():
            w.write_batch(batch)
            rows += batch.num_rows
    return rows


def _xlsx_widths(schema: pa.Schema, first: pa.RecordBatch | None) -> list[int]:
    """Column widths in characters: the longest of the header and the first
    ``WIDTH_SAMPLE_ROWS`` cells, plus 2, between 8 and 60."""
    widths = []
    for i, f in enumerate(schema):
        width = len(str(f.name))
        if first is not None and first.num_rows:
            col = first.column(i).slice(0, WIDTH_SAMPLE_ROWS)
            if pa.types.is_timestamp(f.type):
                width = max(width, 19 if col.null_count < len(col) else 0)  # YYYY-MM-DD HH:MM:SS
            else:
                longest = pc.max(pc.utf8_length(col.cast(pa.string()))).as_py()
                width = max(width, longest or 0)
        widths.append(min(max(width + 2, 8), 60))
    return widths


def xlsx_columns(batch: pa.RecordBatch) -> list[list[Any]]:
    """A batch as Python columns ready for xlsxwriter, the cells the XLSX export writes:
    formula text neutralised, times as Excel serial day numbers (UTC: Excel has no time
    zones)."""
    out = []
    for col in batch.columns:
        if pa.types.is_timestamp(col.type):
            days = pc.divide(col.cast(pa.int64()).cast(pa.float64()), float(_DAY_MS))
            out.append(pc.add(days, float(_EXCEL_EPOCH_DAYS)).to_pylist())
        else:
            out.append(neutralise_array(col).to_pylist())
    return out


def _write_sheet(book: Any, table: _TableStream, bold: Any, date_fmt: Any) -> int:
    ws = book.add_worksheet(table.name)
    batches = table.batches()
    first = next(batches, None)
    ncols = len(table.schema)
    for i, width in enumerate(_xlsx_widths(table.schema, first)):
        ws.set_column(i, i, width)
    for i, f in enumerate(table.schema):
        ws.write_string(0, i, str(neutralise(f.name)), bold)
    ws.freeze_panes(1, 0)
    times = [i for i, f in enumerate(table.schema) if pa.types.is_timestamp(f.type)]
    row = 1
    write_row, write_number = ws.write_row, ws.write_number
    for batch in itertools.chain([] if first is None else [first], batches):
        if row + batch.num_rows > XLSX_MAX_ROWS:  # rows stored since the count: refuse, never drop
            raise ValueError(_too_long(table.name, row - 1 + batch.num_rows))
        columns = xlsx_columns(batch)
        time_cols = [(i, columns[i]) for i in times]
        for i in times:  # written with the date format below; None leaves the cell out here
            columns[i] = [None] * batch.num_rows
        for j, cells in enumerate(zip(*columns, strict=True)):
            write_row(row + j, 0, cells)
            for i, col in time_cols:
                if col[j] is not None:
                    write_number(row + j, i, col[j], date_fmt)
        row += batch.num_rows
    ws.autofilter(0, 0, row - 1, max(ncols - 1, 0))
    return row - 1


def _too_long(name: str, rows: int) -> str:
    return (f"table {name!r} has {rows:,} rows; an XLSX sheet holds at most {XLSX_MAX_ROWS - 1:,} rows under its "
            f"header: export it as csv or parquet, or narrow it with --form / --since")


def _write_xlsx(tables: list[_TableStream], out: Path) -> dict[str, int]:
    options = {"constant_memory": True, "strings_to_formulas": False, "strings_to_urls": False,
               "strings_to_numbers": False}
    book = xlsxwriter.Workbook(str(out), options)
    try:
        bold = book.add_format({"bold": True})
        date_fmt = book.add_format({"num_format": "yyyy-mm-dd hh:mm:ss"})
        return {t.name: _write_sheet(book, t, bold, date_fmt) for t in tables}
    finally:
        book.close()


def export(store: Store, fmt: Format, out: Path, *, table: Table | Literal["all"] = "wide",
           form_id: str | None = None, since: datetime | date | None = None, status: str | None = None,
           display: bool = False, labels: dict[str, str] | None = None,
           fields: list[str] | None = None, order: list[str] | None = None) -> ExportReport:
    """Write one table of the store (``table``: ``wide``, ``long`` or ``requests``; ``all``
    writes the three as sheets of one XLSX workbook) to ``out`` as ``fmt``, streaming:
    memory is bounded by one batch of ``CHUNK_ROWS`` rows, not by the table.

    Filters: ``form_id``; ``since`` (submissions submitted, requests created, at or after
    it; a naive datetime or a date is UTC); ``status`` (requests only). ``display`` puts
    display text in the wide table instead of raw answers; ``labels`` (field key ->
    question title) become its headers; ``fields`` picks and orders its field columns;
    ``order`` (the form's field keys in ``fields.list`` order) orders them without
    dropping any: keys it does not name follow, in first-seen order.

    A bad argument, or a table too long for one worksheet, is a ``ValueError`` and no
    file is written; a failure while writing leaves no file either."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if table not in (*TABLES, "all"):
        raise ValueError(f"table must be one of {', '.join(TABLES)} or all, got {table!r}")
    if table == "all" and fmt != "xlsx":
        raise ValueError(f"table 'all' writes one sheet per table and needs format xlsx, got {fmt!r}")
    if status is not None and status not in REQUEST_STATUSES:
        raise ValueError(f"status must be one of {', '.join(REQUEST_STATUSES)}, got {status!r}")
    if status is not None and table not in ("requests", "all"):
        raise ValueError(f"status filters requests: use it with table requests or all, not {table!r}")
    out = Path(out)
    if not out.parent.is_dir():
        raise ValueError(f"cannot write {out}: directory {out.parent} does not exist")
    names = list(TABLES) if table == "all" else [table]
    # Spilled batches go beside the output: the space the export needs is there anyway.
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmpdir:
        tables = [_stream(store, name, Path(tmpdir), form_id=form_id, since=since, status=status,  # type: ignore[arg-type]
                          display=display, labels=labels, fields=fields, order=order) for name in names]
        return _write(tables, fmt, out)


def _stream(store: Store, name: Table, tmpdir: Path, *, form_id: str | None, since: datetime | date | None,
            status: str | None, display: bool, labels: dict[str, str] | None, fields: list[str] | None,
            order: list[str] | None) -> _TableStream:
    if name == "wide":
        return _wide_stream(store, tmpdir, form_id=form_id, since=since, display=display, labels=labels,
                            fields=fields, order=order)
    if name == "long":
        return _long_stream(store, form_id=form_id, since=since, labels=labels, fields=fields)
    return _requests_stream(store, tmpdir, form_id=form_id, since=since, status=status)


@contextmanager
def table_batches(store: Store, table: Table, *, form_id: str | None = None, since: datetime | date | None = None,
                  status: str | None = None, display: bool = False, labels: dict[str, str] | None = None,
                  fields: list[str] | None = None, order: list[str] | None = None,
                  ) -> Iterator[tuple[pa.Schema, Iterator[pa.RecordBatch]]]:
    """The Arrow schema and record batches of one table, exactly as ``export`` writes
    them (same arguments), for readers other than the file writers (``pipelines.frames``).
    The batches are valid inside the ``with`` block (a wide table spills its batches to a
    temporary directory, removed at its end)."""
    if table not in TABLES:
        raise ValueError(f"table must be one of {', '.join(TABLES)}, got {table!r}")
    if status is not None and status not in REQUEST_STATUSES:
        raise ValueError(f"status must be one of {', '.join(REQUEST_STATUSES)}, got {status!r}")
    with tempfile.TemporaryDirectory(prefix="formsync-batches-") as tmpdir:
        stream = _stream(store, table, Path(tmpdir), form_id=form_id, since=since, status=status, display=display,
                         labels=labels, fields=fields, order=order)
        yield stream.schema, stream.batches()


def _write(tables: list[_TableStream], fmt: Format, out: Path) -> ExportReport:
    if fmt == "xlsx":
        for t in tables:  # counted first: a sheet is refused before anything is written
            if (n := t.count()) + 1 > XLSX_MAX_ROWS:
                raise ValueError(_too_long(t.name, n))
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        if fmt == "xlsx":
            rows = _write_xlsx(tables, tmp)
        elif fmt == "csv":
            rows = {tables[0].name: _write_csv(tables[0], tmp)}
        else:
            rows = {tables[0].name: _write_parquet(tables[0], tmp)}
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return ExportReport(path=str(out), format=fmt, rows=rows,
                        columns={t.name: [str(n) for n in t.schema.names] for t in tables})
