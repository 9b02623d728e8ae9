"""Export the store to CSV, XLSX or Parquet: submissions wide (one row per submission:
a form's table, its columns and types from its field list, ``connector.store._schema``;
one table per form), answers long (one row per answer, or per part of a repeating group
or matrix: see ``answer_rows``; values as plain text) and requests. Nothing here calls
the service or infers a type from the values.

The export streams: rows are read from the store in batches of ``CHUNK_ROWS`` (the
store's ``exports`` reads), each batch is shaped column by column into an
Arrow record batch, and the batch is written at once (``pyarrow.parquet.ParquetWriter``,
``pyarrow.csv.CSVWriter``, xlsxwriter in ``constant_memory`` mode), so memory stays
bounded by one batch whatever the size of the store. The file is written under a
temporary name beside ``out`` and renamed when complete: a failed export leaves no file.

Text cells a spreadsheet would run as a formula are neutralised in CSV and XLSX (see
``neutralise``); Parquet keeps every value as stored."""

from __future__ import annotations

import gc
import itertools
import json
import os
import re
import string
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import xlsxwriter
from pydantic import BaseModel

from connector.store import Column, ExportFilter, Store
from connector.store._archive import FileFields
from connector.store._cursors import ALL_FORMS, CursorMark
from connector.store._exports import REMOVALS, json_value, long_rows
from connector.store._mapping import epoch_ms
from connector.store._schema import GONE_AT, OWN, REQUEST_COLUMNS, display_schema

from ..lifecycle.archive.columns import Located, archived_fields, long_archived, with_archived
from .columns import TIMESTAMP, arrow_schema, csv_schema, own_batch, text_cells
from .long_json import LONG_SCHEMA, ROWS_SCHEMA, long_batch
from .nightly import check_format, check_since_last, cursor_lock, last_run
from .wide_json import wide_batch

Format = Literal["csv", "xlsx", "parquet"]
Table = Literal["wide", "long", "requests"]
FORMATS: tuple[str, ...] = ("csv", "xlsx", "parquet")
TABLES: tuple[str, ...] = ("wide", "long", "requests")
REQUEST_STATUSES: tuple[str, ...] = ("pending", "completed", "expired", "canceled")
XLSX_MAX_ROWS = 1_048_576  # rows in one worksheet, the header row included
CHUNK_ROWS = 50_000  # rows per batch read from the store and written
XLSX_CELL_ROWS = 10_000  # rows made Python cells at once for xlsxwriter (a cell is an object)
LONG_SHAPERS = 2  # long batches shaped at once (Arrow's kernels free the interpreter lock)
WIDTH_SAMPLE_ROWS = 1000  # XLSX column widths are fitted to the header and the first rows
_to_json = json.JSONEncoder(ensure_ascii=False).encode  # built once: json.dumps builds one per call
# A text cell starting with one of these is run as a formula (or starts one) by spreadsheets.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

_EXCEL_EPOCH_DAYS = 25_569  # days from Excel's day 0 (1899-12-30) to 1970-01-01
_DAY_MS = 86_400_000


class ExportReport(BaseModel):
    """What ``export`` wrote: the file, its format, and the rows, columns and file of each
    table (each a sheet in XLSX; with several forms, one wide table each, named by form id)."""

    path: str
    format: Format
    rows: dict[str, int]
    columns: dict[str, list[str]]
    files: dict[str, str] = {}  # table -> the file it was written to
    # ``since_last``: where each table's cursor goes once every file is complete
    cursors: list[CursorMark] = []
    # ``since_last``: the deletions file (the removals since the last run) and its rows
    deletions: str | None = None
    removed: int = 0
    # ``since_last``: no changed row and no removal, so no file was written
    nothing_new: bool = False

    def outcome(self) -> str:
        """The run in words, for a log or a scheduled job's record: ``nothing new``, or
        what was written."""
        if self.nothing_new:
            return "nothing new"
        said = [f"wrote {self.path} ({', '.join(f'{k} {v}' for k, v in self.rows.items())} rows)"] if self.files else []
        if self.deletions is not None:
            said.append(f"wrote {self.deletions} ({self.removed} removed)")
        return "; ".join(said)


class ExportRun(BaseModel):
    """What one export run wrote: one report per file."""

    files: list[ExportReport] = []
    held_back: str | None = None  # the answered keys the form tables leave out, in words (``held_back_line``)

    @property
    def rows(self) -> int:
        return sum(sum(f.rows.values()) for f in self.files)


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
    if isinstance(values, pa.ChunkedArray):
        return pa.chunked_array([neutralise_array(c) for c in values.chunks], values.type)
    formula = _formula_starts(values)
    return _quoted(values, formula) if formula.any() else values  # copied only when a value starts one


def _quoted(texts: pa.Array, where: np.ndarray) -> pa.Array:
    """``texts`` with a ``'`` put before each value ``where`` is true: one pass over
    the text buffer."""
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    offsets = np.frombuffer(texts.buffers()[1], dtype=width)[texts.offset:texts.offset + len(texts) + 1]
    data = np.frombuffer(texts.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    shift = np.zeros(len(texts) + 1, dtype=width)
    np.cumsum(where, out=shift[1:])
    valid = pc.is_valid(texts).buffers()[1] if texts.null_count else None
    return pa.Array.from_buffers(texts.type, len(texts), [
        valid, pa.py_buffer(offsets - offsets[0] + shift),
        pa.py_buffer(np.insert(data, offsets[:-1][where] - offsets[0], np.uint8(ord("'"))))], texts.null_count)


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
# Tables: a schema known before the first row is read, then record batches
# ---------------------------------------------------------------------------------------


@dataclass
class TableStream:
    """One table to write: its name, its Arrow schema (field names are the headers), its
    columns (the data contract's, None for the long table), a function
    giving its record batches, a function counting its rows, and with ``since_last``
    where its cursor goes. ``shaped`` gives the same rows as shaped, before ``batches``
    regroups them for a file (row groups, frames): for readers with batching of their own."""

    name: str
    schema: pa.Schema
    batches: Callable[[], Iterator[pa.RecordBatch]]
    count: Callable[[], int]
    columns: tuple[Column, ...] | None = None
    mark: CursorMark | None = None  # an incremental export's cursor after this table
    form: str = "all"  # ``{form}`` in the file's name: its form's name slug
    shaped: Callable[[], Iterator[pa.RecordBatch]] | None = None
    fresh: bool = True  # an incremental export: whether any row is new since its cursor

    def pieces(self) -> Iterator[pa.RecordBatch]:
        """The rows as shaped (``shaped``), else as ``batches``."""
        return (self.shaped or self.batches)()


def _incremental(store: Store, since_last: str | None, table: str, f: ExportFilter,
                 ) -> tuple[ExportFilter, CursorMark | None, bool]:
    """``f`` narrowed to the rows placed after ``since_last``'s cursor of this table and
    form, the cursor once they are written (the last place they hold; unchanged when
    there is none) and whether there is any. Read inside the export's snapshot."""
    if since_last is None:
        return f, None, True
    old, last = store.exports.since_cursor(since_last, table, f)
    f = replace(f, after=None if old is None else old.arrival)
    arrival = last if last is not None else -1 if old is None else old.arrival
    run = 1 if old is None else old.run + 1
    return f, CursorMark(since_last, table, f.form_id or ALL_FORMS, arrival, 0, run), last is not None


def _headers(columns: Sequence[Column], titles: bool) -> list[str]:
    """Column headers: the columns' names; with ``titles``, the field columns' question
    titles, a title used twice (or named like another column) keeping its name in
    brackets, so every header is unique."""
    if not titles:
        return [c.name for c in columns]
    heads = [c.title or c.name if c.field_key is not None else c.name for c in columns]
    seen: dict[str, int] = {}
    for h in heads:
        seen[h] = seen.get(h, 0) + 1
    return [f"{h} [{c.name}]" if seen[h] > 1 and h != c.name else h for h, c in zip(heads, columns, strict=True)]


def wide_schema(store: Store, form_id: str, *, display: bool = False) -> tuple[tuple[Column, ...], pa.Schema]:
    """The columns of ``form_id``'s wide table and their Arrow schema: the form's table
    (``store.schema``), or with ``display`` its human-readable variant (question titles
    as headers, display text for choices, lists, matrices, groups and files)."""
    table = store.schema(form_id)
    columns = (display_schema(table) if display else table).columns
    return columns, arrow_schema(columns, _headers(columns, display))


def _wide_stream(store: Store, name: str, form_id: str, *, since: datetime | date | None,
                 display: bool, since_last: str | None, include_gone: bool, batch_rows: int) -> TableStream:
    columns, schema = wide_schema(store, form_id, display=display)
    if include_gone:
        columns, schema = (*columns, GONE_AT), _with_gone_at(schema)
    f, mark, fresh = _incremental(store, since_last, "wide", ExportFilter(
        form_id=form_id, since_ms=_since_ms(since), include_gone=include_gone))
    labels = any(c.source == "label" for c in columns)
    files = archived_fields(columns)

    def shaped() -> Iterator[pa.RecordBatch]:
        # The next batch is read from the database while this one is shaped (Arrow's
        # reader and kernels free the interpreter lock). A submission's documents hold
        # about 16 answers: a fifth of ``batch_rows`` at a time keeps two batches small.
        read = bool(files) and store.exports.any_archived(form_id)  # nothing archived: no read per batch
        with ThreadPoolExecutor(1) as pool:
            ahead: Future[pa.RecordBatch] | None = None
            for part in store.exports.wide_rows(f, display=labels, batch_rows=max(1, batch_rows // 5)):
                kept = store.exports.archived([r[0] for r in part], files) if read else {} if files else None
                job = pool.submit(_wide_shaped, part, columns, schema, kept, include_gone)
                del part
                if ahead is not None:
                    yield ahead.result()
                ahead = job
            if ahead is not None:
                yield ahead.result()

    return TableStream(name, schema, lambda: _regrouped(shaped(), schema, batch_rows),
                       lambda: store.exports.count_submissions(f), columns, mark, form_slug(store, form_id), shaped,
                       fresh=fresh)


def _wide_shaped(part: Sequence[tuple[Any, ...]], columns: Sequence[Column], schema: pa.Schema,
                 located: Located | None, gone: bool = False) -> pa.RecordBatch:
    """A wide batch, its file fields' archived locations filled in when any file is
    archived; ``gone``: the rows end with ``gone_at``, the batch's last column."""
    if gone:
        gone_at = _times([r[-1] for r in part])
        part, columns, schema = [r[:-1] for r in part], columns[:-1], schema.remove(len(schema) - 1)
    batch = wide_batch(part, columns, schema)
    batch = batch if located is None else with_archived(batch, columns, located)
    return batch.append_column(GONE_AT.name, gone_at) if gone else batch


def _with_gone_at(schema: pa.Schema) -> pa.Schema:
    """``schema`` with the ``gone_at`` column last (gone rows asked for)."""
    return schema.append(pa.field(GONE_AT.name, TIMESTAMP))


def _regrouped(batches: Iterator[pa.RecordBatch], schema: pa.Schema, rows: int) -> Iterator[pa.RecordBatch]:
    """Consecutive ``batches`` as batches of ``rows`` rows (the last one may be shorter):
    the shaped batches written ``CHUNK_ROWS`` at a time (a Parquet row group, a frame)."""
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


def _wide_streams(store: Store, *, form_id: str | None, since: datetime | date | None,
                  display: bool, since_last: str | None, include_gone: bool, batch_rows: int) -> list[TableStream]:
    """One wide table per form (``form_id``, or each form with stored submissions),
    named ``wide`` when there is one, by form id when there are several. With no form
    at all, one empty table of the submission's own columns."""
    forms = [form_id] if form_id is not None else store.answered_forms()
    if not forms:
        schema = arrow_schema(OWN)
        return [TableStream("wide", schema, lambda: iter(()), lambda: 0, OWN)]
    # A sheet name holds 31 characters at most (form ids have 27).
    return [_wide_stream(store, "wide" if len(forms) == 1 else f[:31], f, since=since, display=display,
                         since_last=since_last, include_gone=include_gone, batch_rows=batch_rows) for f in forms]


def _long_stream(store: Store, *, form_id: str | None, since: datetime | date | None,
                 fields: list[str] | None, since_last: str | None, include_gone: bool, batch_rows: int) -> TableStream:
    f, mark, fresh = _incremental(store, since_last, "long", ExportFilter(
        form_id=form_id, since_ms=_since_ms(since), fields=None if fields is None else tuple(fields),
        include_gone=include_gone))
    schema = _with_gone_at(LONG_SCHEMA) if include_gone else LONG_SCHEMA
    return TableStream("long", schema, lambda: _long_batches(store, f, schema, batch_rows),
                       lambda: _count(store, f), None, mark, _slug_of(store, form_id), fresh=fresh)


def _long_batches(store: Store, f: ExportFilter, schema: pa.Schema, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The long table's rows (``store.exports.answers``) as record batches of ``schema``
    (``LONG_SCHEMA``, with ``gone_at`` when ``f`` includes gone rows), about twice
    ``batch_rows`` rows each."""
    # The documents are read as their stored text: Arrow's JSON reader parses a batch's
    # documents at once (``long_json``), and the next batch is read from the database
    # while this one is shaped. Submissions make about 16 rows each: a batch of batch_rows // 8
    # makes about twice batch_rows rows, as fast per row as any larger one (Arrow's calls' own
    # cost is paid half as often as at batch_rows).
    wanted = None if f.fields is None else frozenset(f.fields)
    files = store.archive.file_fields(None if f.form_id is None else [f.form_id])
    keys = list(dict.fromkeys(k for w in files.values() for k in (*w.top, *w.groups)))
    read = bool(keys) and store.exports.any_archived(f.form_id)  # nothing archived: no read per batch
    with ThreadPoolExecutor(LONG_SHAPERS) as pool:
        ahead: deque[Future[pa.RecordBatch]] = deque()
        for part in store.exports.answer_documents(f, batch_rows=max(1, batch_rows // 8)):
            kept = store.exports.archived([r[0] for r in part], keys) if read else {}
            ahead.append(pool.submit(_long_shaped, part, wanted, schema, files, kept))
            del part
            if len(ahead) > LONG_SHAPERS and (batch := ahead.popleft().result()).num_rows:
                yield batch
        while ahead:
            if (batch := ahead.popleft().result()).num_rows:
                yield batch


def _long_shaped(part: Sequence[tuple[Any, ...]], wanted: frozenset[str] | None, schema: pa.Schema,
                 files: dict[str, FileFields], located: Located) -> pa.RecordBatch:
    """The long rows of submission rows ``(id, form_id, answers, display[, gone_at])``
    as a batch of ``schema``: the rows, the archived locations beside each file list,
    and, when the schema has it, each row's submission's ``gone_at``."""
    gone = schema.names[-1] == GONE_AT.name
    docs = [r[:4] for r in part] if gone else part
    rows = long_batch(docs, wanted)
    if rows is None:
        rows = _long_arrays(long_rows(docs, wanted))
    arrays = [*rows.columns, long_archived(rows, files, located)]
    if gone:  # each row's submission's place in the part: its gone_at
        at = pc.index_in(rows.column(0), pa.array([r[0] for r in part], pa.string()))
        arrays.append(_times([r[4] for r in part]).take(at))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _long_arrays(rows: Sequence[tuple[Any, ...]]) -> pa.RecordBatch:
    columns = list(zip(*rows, strict=True)) or [()] * len(ROWS_SCHEMA)
    return pa.RecordBatch.from_arrays([pa.array(v, f.type) for v, f in zip(columns, ROWS_SCHEMA, strict=True)],
                                      schema=ROWS_SCHEMA)


def _requests_stream(store: Store, *, form_id: str | None, since: datetime | date | None,
                     status: str | None, since_last: str | None, batch_rows: int) -> TableStream:
    """The requests (the data contract's ``REQUEST_COLUMNS``), their metadata as one JSON
    text column (the caller's own data, kept as sent: its keys are not the form's)."""
    plain = [c.name for c in REQUEST_COLUMNS[1:-1]]  # the store reads the id first and the metadata last
    f, mark, fresh = _incremental(store, since_last, "requests",
                           ExportFilter(form_id=form_id, since_ms=_since_ms(since), status=status))
    schema = arrow_schema(REQUEST_COLUMNS)

    def batches() -> Iterator[pa.RecordBatch]:
        for part in store.exports.requests(f, plain, batch_rows=batch_rows):
            columns = list(zip(*part, strict=True))
            columns[-1] = tuple(_to_json(v) if (v := json_value(m)) else None for m in columns[-1])
            yield own_batch(columns, REQUEST_COLUMNS, schema)

    return TableStream("requests", schema, batches, lambda: store.exports.count_requests(f), REQUEST_COLUMNS,
                       mark, _slug_of(store, form_id), fresh=fresh)


# ---------------------------------------------------------------------------------------
# Writers: each takes the tables and writes batch by batch, returning the rows written
# ---------------------------------------------------------------------------------------


def _csv_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A batch as CSV cells (``columns.text_cells``: lists and records as JSON text,
    numbers with a decimal point), formula text neutralised (a number is none)."""
    return pa.RecordBatch.from_arrays([text_cells(col) if pa.types.is_floating(col.type)
                                       else neutralise_array(text_cells(col)) for col in batch.columns], schema=schema)


def csv_table(table: pa.Table) -> pa.Table:
    """``table`` as the CSV export writes its cells (``_csv_batch``): lists and records
    as JSON text, numbers with a decimal point, formula text neutralised, headers too."""
    schema = _csv_schema(table.schema)
    return pa.Table.from_batches([_csv_batch(b, schema) for b in table.to_batches()], schema)


def _csv_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([(neutralise(f.name), pa.string() if _as_text(f.type) else f.type) for f in schema])


def _as_text(t: pa.DataType) -> bool:
    return pa.types.is_floating(t) or pa.types.is_list(t) or pa.types.is_struct(t)


def schema_file(csv: Path) -> Path:
    """The schema file written beside a CSV export: ``<stem>.schema.json``."""
    return csv.with_suffix(".schema.json")


def _write_schema_file(table: TableStream, out: Path) -> None:
    doc = csv_schema(_csv_schema(table.schema).names, table.schema)
    path = schema_file(out)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _write_csv(table: TableStream, out: Path) -> int:
    schema = _csv_schema(table.schema)
    rows = 0
    with pacsv.CSVWriter(out, schema) as w:
        for batch in table.batches():
            w.write_batch(_csv_batch(batch, schema))
            rows += batch.num_rows
    return rows


def _write_parquet(table: TableStream, out: Path) -> int:
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
            if _dated(f.type):
                width = max(width, 19 if col.null_count < len(col) else 0)  # YYYY-MM-DD HH:MM:SS
            else:
                longest = pc.max(pc.utf8_length(text_cells(col).cast(pa.string()))).as_py()
                width = max(width, longest or 0)
        widths.append(min(max(width + 2, 8), 60))
    return widths


def _dated(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t)


def _serial(col: pa.Array) -> list[Any]:
    """A time, date or time-of-day column as Excel serial numbers (days since Excel's
    day 0; a time of day as a fraction of a day; UTC: Excel has no time zones)."""
    if pa.types.is_timestamp(col.type):
        days = pc.divide(col.cast(pa.int64()).cast(pa.float64()), float(_DAY_MS))
    elif pa.types.is_date(col.type):
        days = col.cast(pa.int32()).cast(pa.float64())
    else:
        return pc.divide(col.cast(pa.int32()).cast(pa.float64()), 86_400.0).to_pylist()
    return pc.add(days, float(_EXCEL_EPOCH_DAYS)).to_pylist()


def xlsx_columns(batch: pa.RecordBatch) -> list[list[Any]]:
    """A batch as Python columns ready for xlsxwriter, the cells the XLSX export writes:
    formula text neutralised, times, dates and times of day as Excel serial numbers,
    lists and records as JSON text."""
    out = []
    for col in batch.columns:
        if _dated(col.type):
            out.append(_serial(col))
        elif pa.types.is_list(col.type) or pa.types.is_struct(col.type):
            out.append(neutralise_array(text_cells(col)).to_pylist())
        else:
            out.append(neutralise_array(col).to_pylist())
    return out


# The Excel number format of each dated kind of column (see ``dated_kind``).
XLSX_FORMATS = {"timestamp": "yyyy-mm-dd hh:mm:ss", "date": "yyyy-mm-dd", "time": "hh:mm:ss"}


def dated_kind(t: pa.DataType) -> str | None:
    """``timestamp``, ``date`` or ``time`` for a column XLSX writes as serials, else None."""
    if not _dated(t):
        return None
    return "timestamp" if pa.types.is_timestamp(t) else "date" if pa.types.is_date(t) else "time"


def _write_sheet(book: Any, table: TableStream, bold: Any, formats: dict[str, Any]) -> int:
    ws = book.add_worksheet(table.name)
    batches = table.batches()
    first = next(batches, None)
    ncols = len(table.schema)
    for i, width in enumerate(_xlsx_widths(table.schema, first)):
        ws.set_column(i, i, width)
    for i, f in enumerate(table.schema):
        ws.write_string(0, i, str(neutralise(f.name)), bold)
    ws.freeze_panes(1, 0)
    times = [(i, formats[kind]) for i, f in enumerate(table.schema) if (kind := dated_kind(f.type)) is not None]
    row = 1
    for whole in itertools.chain([] if first is None else [first], batches):
        if row + whole.num_rows > XLSX_MAX_ROWS:  # rows stored since the count: refuse, never drop
            raise ValueError(_too_long(table.name, row - 1 + whole.num_rows))
        for start in range(0, whole.num_rows, XLSX_CELL_ROWS):
            row = _write_rows(ws, row, whole.slice(start, XLSX_CELL_ROWS), times)
    ws.autofilter(0, 0, row - 1, max(ncols - 1, 0))
    return row - 1


def _write_rows(ws: Any, row: int, batch: pa.RecordBatch, times: list[tuple[int, Any]]) -> int:
    """Write the batch's rows from sheet row ``row`` on; the next row's number."""
    write_row, write_number = ws.write_row, ws.write_number
    columns = xlsx_columns(batch)
    time_cols = [(i, columns[i], fmt) for i, fmt in times]
    for i, _ in times:  # written with their format below; None leaves the cell out here
        columns[i] = [None] * batch.num_rows
    for j, cells in enumerate(zip(*columns, strict=True)):
        write_row(row + j, 0, cells)
        for i, col, fmt in time_cols:
            if col[j] is not None:
                write_number(row + j, i, col[j], fmt)
    return row + batch.num_rows


def _too_long(name: str, rows: int) -> str:
    return (f"table {name!r} has {rows:,} rows; an XLSX sheet holds at most {XLSX_MAX_ROWS - 1:,} rows under its "
            f"header: export it as csv or parquet, or narrow it with --form / --since")


def _write_xlsx(tables: list[TableStream], out: Path) -> dict[str, int]:
    options = {"constant_memory": True, "strings_to_formulas": False, "strings_to_urls": False,
               "strings_to_numbers": False}
    book = xlsxwriter.Workbook(str(out), options)
    try:
        bold = book.add_format({"bold": True})
        formats = {k: book.add_format({"num_format": v}) for k, v in XLSX_FORMATS.items()}
        return {t.name: _write_sheet(book, t, bold, formats) for t in tables}
    finally:
        book.close()


def _check(fmt: str, table: str, status: str | None) -> None:
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


def export(store: Store, fmt: Format, out: Path, *, table: Table | Literal["all"] = "wide",
           form_id: str | None = None, since: datetime | date | None = None, status: str | None = None,
           display: bool = False, fields: list[str] | None = None, since_last: str | None = None,
           advance: bool = True, at: datetime | None = None, include_gone: bool = False) -> ExportReport:
    """Write one table of the store (``table``: ``wide``, ``long`` or ``requests``; ``all``
    writes the three as sheets of one XLSX workbook) to ``out`` as ``fmt``, streaming:
    memory is bounded by one batch of ``CHUNK_ROWS`` rows, not by the table.

    The wide table is the form's table (``connector.store._schema``): its columns and
    types come from the stored field list, never from the answers, and no service is
    called. One table holds one form: without ``form_id`` and with several forms, each
    form's wide table is written to its own file, ``<stem>.<form id><suffix>`` beside
    ``out`` (or ``out`` with ``{form}`` filled in; in XLSX, its own sheet named by the
    form id); ``files`` in the report names them. ``out`` may hold ``{date}``, ``{time}``
    (of ``at``, default now, UTC), ``{form}`` and ``{run}`` (see ``out_path``).

    Filters: ``form_id``; ``since`` (submissions submitted, requests created, at or after
    it; a naive datetime or a date is UTC); ``status`` (requests only); ``fields`` (the
    long table's answers of these field keys only); ``include_gone`` (the submissions
    the service no longer has, ``formsync sync --reconcile``, left out unless given;
    requests have none). ``display`` writes the wide table's
    human-readable variant (``schema.display_schema``: question titles as headers,
    display text for choices and composite answers, numbers kept numbers).

    ``since_last`` NAME writes exactly the rows stored since the last export under NAME
    (per table and form: the store's arrival order, see ``store.export_cursors``), a log
    of changes: an edited submission is stored again, so it comes again, and the
    removals since (purged, reconciled, erased) go to a deletions file beside them
    (``deletions_path``). NAME is a slug, not a load's, written in one format, and one
    run at a time holds it (``pipelines.export.nightly``); the run refuses (``ValueError``)
    before anything is written or moved when a file it would write exists. A run with
    nothing new writes no file (the report's ``nothing_new``). Its cursors move once
    every file is complete (``advance``; else the report's ``cursors`` say where they would go).

    A bad argument, or a table too long for one worksheet, is a ``ValueError`` and no
    file is written; a failure while writing leaves no file either."""
    _check(fmt, table, status)
    if since_last is not None and since is not None:
        raise ValueError("since and since_last exclude each other: since_last already picks the rows new since then")
    at = at or datetime.now(UTC)
    check_out_template(out, incremental=since_last is not None)
    names = list(TABLES) if table == "all" else [table]
    if since_last is None:
        tables = [t for name in names for t in table_streams(
            store, name, form_id=form_id, since=since, status=status,  # type: ignore[arg-type]
            display=display, fields=fields, include_gone=include_gone)]
        return _write_all(_planned(tables, fmt, Path(out), at), fmt, out)
    check_since_last(store, since_last)
    with cursor_lock(store, since_last):
        with store.exports.snapshot():
            stored = store.exports.cursors(since_last)
            check_format(stored, since_last, fmt)
            before = last_run(stored)
            tables = [t for name in names for t in table_streams(
                store, name, form_id=form_id, status=status, display=display,  # type: ignore[arg-type]
                fields=fields, since_last=since_last, include_gone=include_gone)]
            removed = _removals_stream(store, since_last, form_id, stored)
            report = _write_changes(tables, removed, fmt, Path(out), at, _slug_of(store, form_id), before + 1)
        if advance and report.cursors:
            store.export_cursors.advance(report.cursors)
    return report


Planned = list[tuple[list[TableStream], Path]]  # the files of an export and the tables each holds


def _planned(tables: list[TableStream], fmt: Format, out: Path, at: datetime) -> Planned:
    """The files the tables go to (one workbook, else one file each), ``out``'s placeholders filled in."""
    if fmt == "xlsx" and tables:
        forms = {t.form for t in tables}
        runs = [t.mark.run for t in tables if t.mark is not None]
        return [(tables, out_path(out, at=at, form=forms.pop() if len(forms) == 1 else "all",
                                  run=max(runs) if runs else None))]
    several = len(tables) > 1 and "{form}" not in str(out)
    planned = []
    for t in tables:
        path = out_path(out, at=at, form=t.form, run=None if t.mark is None else t.mark.run)
        planned.append(([t], _form_file(path, t.name) if several else path))
    return planned


def _write_all(planned: Planned, fmt: Format, out: str | Path) -> ExportReport:
    """Write each planned file; one report of them all."""
    reports = [_write(tables, fmt, path) for tables, path in planned]
    if not reports:
        return ExportReport(path="", format=fmt, rows={}, columns={})
    return ExportReport(path=reports[0].path if len(reports) == 1 else str(out), format=fmt,
                        rows={k: v for r in reports for k, v in r.rows.items()},
                        columns={k: v for r in reports for k, v in r.columns.items()},
                        files={k: v for r in reports for k, v in r.files.items()},
                        cursors=[m for r in reports for m in r.cursors])


def _write_changes(tables: list[TableStream], removed: TableStream, fmt: Format, out: Path, at: datetime,
                   form: str, run: int) -> ExportReport:
    """An incremental export's files: the tables with new rows (all of an XLSX workbook's
    when one has) and, when there are removals, the deletions file; none when nothing is
    new. Refused before any is written when one exists. Every file of a run has its
    ``run`` (one more than the name's last, over its every cursor) as ``{run}``."""
    for t in [*tables, removed]:
        t.mark = None if t.mark is None else replace(t.mark, run=run)
    fresh = [t for t in tables if t.fresh and t.mark is not None]  # no form stored: no mark, nothing new
    fresh = tables if fmt == "xlsx" and fresh else fresh
    planned = _planned(fresh, fmt, out, at)
    gone = deletions_path(out_path(out, at=at, form=form, run=run)) if removed.fresh else None
    _refuse_existing([p for _, p in planned] + ([gone] if gone else []), fmt, str(out))
    report = _write_all(planned, fmt, out)
    if gone is not None:
        written = _write([removed], fmt, gone)
        report.deletions, report.removed = str(gone), written.rows[removed.name]
        report.cursors += written.cursors
    elif removed.mark is not None:
        report.cursors.append(replace(removed.mark, format=fmt))
    report.nothing_new = not planned and gone is None
    report.rows = {t.name: report.rows.get(t.name, 0) for t in tables}  # a table with nothing new: 0
    return report


def _refuse_existing(paths: list[Path], fmt: Format, template: str) -> None:
    """A ``ValueError`` (one line) when a file an incremental export would write exists:
    a file is never replaced by a later run."""
    named = "{run}" in template or "{time}" in template
    for path in paths:
        for p in (path, schema_file(path)) if fmt == "csv" else (path,):
            if not p.exists():
                continue
            if named:  # written by a run before a --reset (it restarts {run}), or one stopped before its cursor moved
                raise ValueError(f"{p} exists and an incremental export never replaces a file: move it away and run "
                                 f"again; nothing was written and no cursor moved")
            raise ValueError(f"{p} exists and an incremental export never replaces a file: put {{run}} or {{time}} in "
                             f"--out's file name, e.g. '{Path(template).parent / '{form}-{date}-{run}'}"
                             f"{Path(template).suffix}'; nothing was written and no cursor moved")


def deletions_path(path: Path) -> Path:
    """The deletions file of an incremental export's ``path``: ``.deletions`` before its
    extension (``nightly-3.parquet`` -> ``nightly-3.deletions.parquet``)."""
    return path.with_name(f"{path.stem}.deletions{path.suffix}")


REMOVALS_SCHEMA = pa.schema([("id", pa.string()), ("kind", pa.string()), ("form_id", pa.string()),
                             ("removed_at", TIMESTAMP)])


def _removals_stream(store: Store, name: str, form_id: str | None, stored: Sequence[CursorMark]) -> TableStream:
    """The removals since ``name``'s last run (the deletion log past its cursor among
    ``stored``, read in the snapshot), as the ``deletions`` table. A new name's first run
    carries every row as it is now, so it hands on no removal made before (its cursor
    starts at the end)."""
    old = next((m for m in stored if m.table == REMOVALS and m.form_id == (form_id or ALL_FORMS)), None)
    after = -1 if old is None else old.arrival
    last = store.exports.last_removal(after, form_id)
    first = last_run(stored) == 0
    run = 1 if old is None else old.run + 1
    mark = None if last is None else CursorMark(name, REMOVALS, form_id or ALL_FORMS, last, 0, run)

    def batches() -> Iterator[pa.RecordBatch]:
        for part in store.exports.removals(after, form_id, batch_rows=CHUNK_ROWS):
            ids, kinds, forms, at = zip(*part, strict=True)
            yield pa.RecordBatch.from_arrays([pa.array(ids, pa.string()), pa.array(kinds, pa.string()),
                                              pa.array(forms, pa.string()), _times(at)], schema=REMOVALS_SCHEMA)

    return TableStream("deletions", REMOVALS_SCHEMA, batches, lambda: sum(b.num_rows for b in batches()),
                       None, mark, fresh=mark is not None and not first)


PLACEHOLDERS = ("date", "time", "form", "run")


def out_path(template: str | Path, *, at: datetime, form: str | None = None, run: int | None = None) -> Path:
    """``template`` with its placeholders filled in: ``{date}`` (``YYYY-MM-DD``) and
    ``{time}`` (``HHMMSS``) of ``at`` in UTC, ``{form}`` (the form's name slug, ``all``
    for a table of every form), ``{run}`` (the incremental export's run number under its
    name). Placeholders belong to the file's name, not its directory. A ``ValueError``
    names what is wrong: an unknown placeholder, one in the directory, ``{run}`` without
    ``run``."""
    text = str(template)
    check_out_template(text, incremental=run is not None)
    utc = at.astimezone(UTC)
    values = {"date": utc.strftime("%Y-%m-%d"), "time": utc.strftime("%H%M%S"), "form": form or "all",
              "run": str(run)}
    return Path(text.format_map(values))


def check_out_template(template: str | Path, *, incremental: bool) -> None:
    """Refuse (``ValueError``, one line) what ``out_path`` cannot fill in: see there."""
    text = str(template)
    accepted = "the placeholders are {date}, {time}, {form} and {run} (with since_last)"
    try:
        names = [n for _, n, _, _ in string.Formatter().parse(text) if n is not None]
        in_directory = [n for _, n, _, _ in string.Formatter().parse(str(Path(text).parent)) if n is not None]
    except ValueError as e:
        raise ValueError(f"{text}: {e}; {accepted}") from None
    if unknown := [n for n in names if n not in PLACEHOLDERS]:
        raise ValueError(f"{text}: unknown placeholder {{{unknown[0]}}}; {accepted}")
    shaped = [(n, conv, spec) for _, n, spec, conv in string.Formatter().parse(text) if n and (spec or conv)]
    for n, conv, spec in shaped[:1]:
        given = "{" + n + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
        raise ValueError(f"{text}: {given} takes no format: write {{{n}}}; {accepted}")
    if "run" in names and not incremental:
        raise ValueError(f"{text}: {{run}} numbers the runs of an incremental export: use it with since_last")
    if in_directory:
        raise ValueError(f"{text}: placeholders go in the file's name, not in its directory")


def slug(text: str) -> str:
    """``text`` as a file-name slug: lower case, runs of anything but letters and digits
    as one ``-`` (``Customer Survey 2026`` -> ``customer-survey-2026``); ``form`` when nothing is left."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "form"


def form_slug(store: Store, form_id: str) -> str:
    """``{form}`` of ``form_id``: its name's slug (the name stored with its submissions),
    else its id's."""
    return slug(store.exports.form_name(form_id) or form_id)


def export_files(store: Store, targets: Sequence[tuple[Format, Path]], *, since_last: str | None = None,
                 **options: Any) -> list[ExportReport]:
    """``export`` of each ``(format, file)`` of ``targets`` (same ``options``), from one
    snapshot: every file holds the same rows. With ``since_last``, one target only (a
    name's cursor is written in one format: a ``ValueError`` names the formats)."""
    at = datetime.now(UTC)
    if since_last is not None:
        if len(targets) != 1:
            raise ValueError(f"--since-last {since_last!r} writes one format, got {', '.join(f for f, _ in targets)}: "
                             f"give --format (or --out), and another name for each other format")
        return [export(store, targets[0][0], targets[0][1], since_last=since_last, at=at, **options)]
    with store.exports.snapshot():
        return [export(store, fmt, path, at=at, **options) for fmt, path in targets]


def _slug_of(store: Store, form_id: str | None) -> str:
    return "all" if form_id is None else form_slug(store, form_id)


def _form_file(out: Path, form_id: str) -> Path:
    """The file of one form's wide table when an export writes several: ``<stem>.<form id><suffix>``."""
    return out.with_name(f"{out.stem}.{form_id}{out.suffix}")


def table_streams(store: Store, name: Table, *, form_id: str | None = None, since: datetime | date | None = None,
                  status: str | None = None, display: bool = False, fields: list[str] | None = None,
                  since_last: str | None = None, include_gone: bool = False,
                  batch_rows: int | None = None) -> list[TableStream]:
    """The streams ``export`` writes for one table (same arguments): one per form for the
    wide table (none stored: one empty table of the submission's own columns). Their
    batches hold about ``batch_rows`` rows (the long table's twice that; default
    ``CHUNK_ROWS``)."""
    batch_rows = CHUNK_ROWS if batch_rows is None else batch_rows
    if name == "wide":
        return _wide_streams(store, form_id=form_id, since=since, display=display, since_last=since_last,
                             include_gone=include_gone, batch_rows=batch_rows)
    if name == "long":
        return [_long_stream(store, form_id=form_id, since=since, fields=fields, since_last=since_last,
                             include_gone=include_gone, batch_rows=batch_rows)]
    return [_requests_stream(store, form_id=form_id, since=since, status=status, since_last=since_last,
                             batch_rows=batch_rows)]


@contextmanager
def table_batches(store: Store, table: Table, *, form_id: str | None = None, since: datetime | date | None = None,
                  status: str | None = None, display: bool = False, fields: list[str] | None = None,
                  include_gone: bool = False,
                  ) -> Iterator[tuple[pa.Schema, tuple[Column, ...] | None, Iterator[pa.RecordBatch]]]:
    """The Arrow schema, the columns (the data contract's, for the wide table) and the
    record batches of one table, exactly as ``export`` writes them (same arguments), for
    readers other than the file writers (``pipelines.export.frames``). The wide table is one
    form's: without ``form_id``, the store must hold one form only (else a
    ``ValueError`` naming them)."""
    if table not in TABLES:
        raise ValueError(f"table must be one of {', '.join(TABLES)}, got {table!r}")
    if status is not None and status not in REQUEST_STATUSES:
        raise ValueError(f"status must be one of {', '.join(REQUEST_STATUSES)}, got {status!r}")
    streams = table_streams(store, table, form_id=form_id, since=since, status=status, display=display, fields=fields,
                            include_gone=include_gone)
    if len(streams) > 1:
        raise ValueError(f"the store holds {len(streams)} forms ({', '.join(s.name for s in streams)}); a wide "
                         f"table holds one form's columns: give form")
    yield streams[0].schema, streams[0].columns, streams[0].batches()


def _write(tables: list[TableStream], fmt: Format, out: Path) -> ExportReport:
    if not out.parent.is_dir():
        raise ValueError(f"cannot write {out}: directory {out.parent} does not exist")
    if fmt == "xlsx":
        for t in tables:  # counted first: a sheet is refused before anything is written
            if (n := t.count()) + 1 > XLSX_MAX_ROWS:
                raise ValueError(_too_long(t.name, n))
    tmp = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        with _collector_paused():
            rows = _write_tables(tables, fmt, tmp)
        # An incremental export's cursor moves once this returns: the file must outlive a
        # power cut first, or the rows it holds would be skipped by the next run.
        _replace(tmp, out, durable=any(t.mark is not None for t in tables))
    except OSError as e:  # said of the file asked for: the temporary one beside it is ours
        raise OSError(e.errno, f"cannot write it: {os.strerror(e.errno) if e.errno else e}", str(out)) from None
    finally:
        tmp.unlink(missing_ok=True)
    if fmt == "csv":
        _write_schema_file(tables[0], out)
    return ExportReport(path=str(out), format=fmt, rows=rows,
                        columns={t.name: [str(n) for n in t.schema.names] for t in tables},
                        files={t.name: str(out) for t in tables},
                        cursors=[replace(t.mark, rows=rows[t.name], format=fmt) for t in tables if t.mark is not None])


def _replace(tmp: Path, out: Path, *, durable: bool) -> None:
    """Rename the complete ``tmp`` to ``out``; ``durable``: its bytes and the rename on disk first."""
    if durable:
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    os.replace(tmp, out)
    if durable:
        fd = os.open(out.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_tables(tables: list[TableStream], fmt: Format, out: Path) -> dict[str, int]:
    if fmt == "xlsx":
        return _write_xlsx(tables, out)
    write = _write_csv if fmt == "csv" else _write_parquet
    return {tables[0].name: write(tables[0], out)}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while an export streams (when it was running):
    the database reads make a tuple per row, and the collections those set off walk
    every object of the process to find no garbage (rows are freed by their count)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
