"""Load the store into a warehouse through dlt (the ``warehouse`` extra): one table per
form (its wide table, the data contract's columns and types given to dlt as column
hints: ``dlt_columns``), the long answers table, the requests and the campaign rows (their
columns declared in the data contract too: ``REQUEST_COLUMNS``, ``CAMPAIGN_COLUMNS``), so
every table has its declared columns and types from the first load, a time a timestamp
with its time zone, whatever the rows hold.

Every load is incremental on the store's arrival order (the same cursors as
``formsync export --since-last``, named ``load:<destination>/<dataset>``): it sends the
rows stored since the last load that completed, so a row stored late is never missed.
A form's rows merge on ``submission_id`` (an edit replaces its row); the long table is
replaced per submission (delete-insert on ``submission_id``: answers an edit removed
disappear); requests merge on ``request_id``; the campaign rows are replaced whole. A
field added to a form arrives as a new nullable column (dlt's schema evolution).

Deletions reach the warehouse too: the submissions and requests that ``formsync purge``,
``formsync erase`` and ``formsync sync --reconcile`` removed (``store.deletions``, read
past its own cursor, ``deletions``) are sent as rows flagged ``_formsync_deleted`` (dlt's
``hard_delete`` hint), so the destination drops their rows from the form's table, the
long table and the requests.

A load's memory does not grow with what it sends: the store is read in batches, handed
to dlt a part of ``PART_BYTES`` of Arrow data at a time (a load package each, loaded
before the next part is read, so dlt's files and the destination's staging and merge
hold one part: a part counts bytes, not rows, as a form of many fields has wide rows),
and Arrow's buffers come from malloc, which gives freed batches back
(``_malloc_for_arrow``).

On dlt's filesystem destination, ``table_format="delta"`` writes Delta tables
(``delta_target``: dlt's ``bucket_url``, else ``formsync-delta/`` beside the store): the
form tables and requests merge by Delta's upsert (flagged rows deleted), and since Delta
has no delete-insert, each part's answers are replaced per submission by a delete of the
part's and the removed submissions' rows (``delete_answers``) before the part is
appended; the cursors move after every part, so a load stopped between the two is
repeated whole by the next. A table the destination does not hold yet is appended part
after part, nothing merged or deleted (``_as_new``). Times are text ``HH:MM:SS`` there
(``_delta_cells``).

dlt is configured here, never from the home directory: its pipeline state and working
files live in ``formsync-dlt/`` beside a SQLite store (in the working directory for a
server database), its telemetry is off, its log lines have formsync's format and its
naming convention (``direct``) keeps the contract's column names as they are."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from connector.store import Column, Store
from connector.store._campaign import CampaignRow
from connector.store._cursors import ALL_FORMS, CursorMark
from connector.store._database import in_lists
from connector.store._schema import CAMPAIGN_COLUMNS, LONG, REQUEST_COLUMNS

from .columns import arrow_schema, json_cells, own_batch
from .write import TableStream, table_streams, wide_schema

if TYPE_CHECKING:
    from dlt.extract.source import DltSource

DUCKDB_FILE = "formsync.duckdb"  # the default destination: an embedded DuckDB in the working directory
# The embedded DuckDB's memory_limit: with parts of PART_BYTES, a merge's working memory fits
# (it did not for 4,000,000 answer rows of 17 fields, 330 MiB of Arrow data, in one part).
DUCKDB_MEMORY = "256MB"
# dlt's loader file format on DuckDB: the Arrow batches are written straight to Parquet
# files, which DuckDB reads in bulk, and the campaign rows too (else INSERT statements).
LOADER_FORMAT: Literal["parquet"] = "parquet"
# Rows per batch read from the store (the long table's: about twice that): each batch becomes
# a row group of dlt's Parquet files, and DuckDB inserts fewer, larger ones faster (a load
# of 1,000,000 answer rows: a tenth faster than at the exports' CHUNK_ROWS).
BATCH_ROWS = 100_000
PART_BYTES = 128 << 20  # Arrow bytes per load package: what a load holds is bounded by a part, not by all it sends
DEFAULT_DATASET = "formsync_data"  # not "formsync": DuckDB names the file's catalog after it
WORK_DIR = "formsync-dlt"
DELTA_DIR = "formsync-delta"  # the Delta tables' folder when dlt's configuration names no bucket
TableFormat = Literal["delta"]
# Ids per Delta delete of answer rows: each delete is one commit that rewrites the files
# holding any of them, so fewer, longer lists are cheaper (the predicate is parsed once).
DELTA_IN_LIST = 2000
EXTRA_MISSING = "formsync load needs the warehouse extra: pip install 'formsync[warehouse]'"
# The data contract's logical types as dlt's (``pipelines.export.columns`` holds the Arrow and
# pandas ones, ``connector.store._views`` the SQL ones).
DLT_TYPES: dict[str, str] = {"text": "text", "number": "double", "integer": "bigint", "boolean": "bool",
                             "date": "date", "time": "time", "timestamp": "timestamp", "keys": "json",
                             "records": "json", "json": "json"}
DELETED = "_formsync_deleted"  # true on a row that removes its key's rows from the destination
_DELETED_HINT: dict[str, Any] = {"data_type": "bool", "nullable": True, "hard_delete": True}
DELETIONS = "deletions"  # the deletion log's cursor, beside the tables' (``export_cursors``)
_LOG_PAGE = 10_000
CAMPAIGN = "campaign_rows"  # the campaign rows' table, replaced whole by each load
_FORCED = {"LOAD__DELETE_COMPLETED_JOBS": "true"}  # dlt's settings a load sets whatever the environment says
LOG_FORMAT = "{asctime} {levelname} {name}: {message}"  # formsync's (pipelines.cli.context), in "{" style
# dlt's notices that the Arrow batches' types differ from the hints (the hints win, as
# meant), that DuckDB keeps the time zone over the millisecond precision, and that a part
# extracted before the one ahead of it was normalised carries the older schema (the newer,
# stored one is used, as meant: the parts are of the same tables), and that the deletion
# flag's hint is ignored where a table the destination does not hold yet is appended
# (``_as_new``: nothing to delete, and its next load merges): expected.
_EXPECTED = ("several column hints were different", "does not support both timezone and precision",
             "is different from extract package schema hash",
             f'"hard_delete" column hint for column "{DELETED}"')


class LoadSettingError(ValueError):
    """The destination cannot be used as configured (an unknown name, missing
    credentials): fix the setting and run again; nothing was loaded."""


class LoadFailed(RuntimeError):
    """dlt could not load (the destination refused, unreachable...): the cursors did not
    move, so the next load sends the same rows again."""


def load_failure(exc: BaseException, destination: str) -> Exception:
    """dlt's exception ``exc`` as ``LoadSettingError`` or ``LoadFailed``, in one line that
    starts with the real cause (dlt wraps it in a generic advice about credentials and the
    internet connection) and says how to fix it."""
    from dlt.common.configuration.exceptions import ConfigFieldMissingException
    from dlt.common.destination.exceptions import UnknownDestinationModule

    cause = getattr(exc, "exception", exc)  # a PipelineStepFailed holds the step's own error
    if isinstance(cause, UnknownDestinationModule):
        return LoadSettingError(f"{destination!r} is not a dlt destination: give duckdb, postgres, bigquery, "
                                f"snowflake, filesystem or another of dlt's destinations")
    if isinstance(cause, ConfigFieldMissingException):
        missing = ", ".join(f"{f}" for f in cause.fields)
        variables = " or ".join(f"DESTINATION__{destination.upper()}__{f.upper()}" for f in cause.fields)
        return LoadSettingError(f"the {destination} destination misses {missing} in dlt's configuration: set "
                                f"{variables or f'DESTINATION__{destination.upper()}__CREDENTIALS'} or "
                                f".dlt/secrets.toml (see docs/warehouse.md)")
    step = getattr(exc, "step", None)
    where = f" at its {step} step" if step else ""
    return LoadFailed(f"{failure_cause(root_cause(cause))} (dlt could not load into {destination}{where}); "
                      f"nothing moved: the next load sends the same rows again")


def root_cause(exc: BaseException) -> BaseException:
    """The innermost error ``exc`` was raised from or while handling (the driver's own,
    under dlt's wrappers)."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    return exc


_LOCKED = re.compile(r'Could not set lock on file "(?P<file>[^"]+)"')
_PID = re.compile(r"\(PID (\d+)\)")
_NOT_DUCKDB = re.compile(r'The file "(?P<file>[^"]+)" exists, but it is not a valid DuckDB database file')


def failure_cause(exc: BaseException) -> str:
    """What went wrong, said first: a DuckDB file another process holds, a file that is
    not DuckDB's, else the error's own first line."""
    text = str(exc).strip()
    if m := _LOCKED.search(text):
        pid = _PID.search(text)
        who = f" (PID {pid.group(1)})" if pid else ""
        return (f"another process{who} holds {m['file']}: let it finish or stop it (a DuckDB file takes one "
                f"writer), then load again")
    if m := _NOT_DUCKDB.search(text):
        return (f"{m['file']} is not a DuckDB database file: move it away (a load makes a new one) or set "
                f"DESTINATION__DUCKDB__CREDENTIALS to another path")
    return (text.splitlines() or [type(exc).__name__])[0]


def destination_problem(name: str) -> LoadSettingError | None:
    """What the real load would say of a destination ``name`` that is no dlt destination
    (checked without loading: a dry run refuses it too); None for a known one."""
    from dlt.common.destination import Destination

    try:
        Destination.from_reference(name)
    except Exception as e:  # dlt refuses an unknown name with several exception types
        made = load_failure(e, name)
        return made if isinstance(made, LoadSettingError) else None
    return None


class LoadReport(BaseModel):
    """What ``load`` sent: rows per table (of the destination), the destination, the
    dataset, whether it was a dry run, the seconds it took, and the rows it deleted per
    table (the submissions or requests named, whether the destination still held them),
    and the answered keys it left out of the form tables."""

    destination: str
    dataset: str
    rows: dict[str, int]
    deleted: dict[str, int] = {}
    dry_run: bool = False
    seconds: float = 0.0
    held_back: str | None = None  # the answered keys the form tables leave out, in words (``held_back_line``)


def dlt_column(col: Column, key: str | None = "submission_id") -> dict[str, Any]:
    """One column's dlt hint: its type from the data contract (a timestamp with its time
    zone), nullable except the table's ``key``."""
    hint: dict[str, Any] = {"data_type": DLT_TYPES[col.type], "nullable": col.name != key}
    if col.type == "timestamp":
        hint["timezone"] = True
    return hint


def dlt_columns(columns: Sequence[Column], key: str | None = "submission_id") -> dict[str, dict[str, Any]]:
    """The column hints of a table (a form's, keyed on ``submission_id``), in its order
    (``dlt_column``)."""
    return {c.name: dlt_column(c, key) for c in columns}


# The campaign rows are replaced whole by each load, their columns as declared.
_CAMPAIGN_WRITE: dict[str, Any] = {"write_disposition": "replace", "columns": dlt_columns(CAMPAIGN_COLUMNS, None)}
_CAMPAIGN_SCHEMA = arrow_schema(CAMPAIGN_COLUMNS)


def _campaign_batch(job: str, rows: Sequence[CampaignRow]) -> pa.RecordBatch:
    """``job``'s ledger rows (``store.campaign.rows``) as a batch of the campaign rows'
    table (``CAMPAIGN_COLUMNS``; times in epoch ms become UTC timestamps)."""
    records = [{"job": job, **asdict(r)} for r in rows]
    return own_batch([[r[c.name] for r in records] for c in CAMPAIGN_COLUMNS], CAMPAIGN_COLUMNS, _CAMPAIGN_SCHEMA)


def cursor_name(destination: str, dataset: str) -> str:
    """The arrival cursors of the loads into ``dataset`` of ``destination``."""
    return f"load:{destination}/{dataset}"


def pipeline_name(destination: str, dataset: str) -> str:
    """dlt's pipeline of the loads into ``dataset`` of ``destination``: one each, so their
    states never meet (``formsync_load_duckdb_formsync_data``)."""
    return "formsync_load_" + re.sub(r"[^a-z0-9_]+", "_", f"{destination}_{dataset}".lower())


def work_dir(store: Store) -> Path:
    """Where dlt keeps its state and working files: ``formsync-dlt/`` beside a SQLite
    store's file, in the working directory for a server database."""
    return (store_folder(store) or Path.cwd()) / WORK_DIR


def store_folder(store: Store) -> Path | None:
    """The folder of a SQLite store's file (None for a server database)."""
    return None if store.file is None else store.file.parent


@dataclass(frozen=True)
class Deletions:
    """The removals logged since the last load under a cursor: submission ids per form,
    request ids, and where the deletion log's cursor goes once they are passed on."""

    submissions: dict[str, list[str]]
    requests: list[str]
    mark: CursorMark | None


def read_deletions(store: Store, name: str) -> Deletions:
    """The deletion log's submissions and requests placed past the cursor ``name`` in the
    store's arrival order, less the submissions a reconcile marked and then found again
    (their form restored). The first load under ``name`` only moves past the log: it
    deletes (and reports) nothing the destination never had."""
    old = store.export_cursors.get(name, DELETIONS, None)
    after, after_id = (0 if old is None else old.arrival), None
    logged = []
    while page := store.deletions.since(after, kinds=("submission", "request"), limit=_LOG_PAGE, after_id=after_id):
        logged += page
        after, after_id = page[-1].arrival, page[-1].id
        if len(page) < _LOG_PAGE:
            break
    back = store.deletions.restored([d.item_id for d in logged if d.kind == "submission"])
    submissions: dict[str, dict[str, None]] = {}
    for d in logged:
        if d.kind == "submission" and d.form_id and d.item_id not in back:
            submissions.setdefault(d.form_id, {})[d.item_id] = None
    requests = list(dict.fromkeys(d.item_id for d in logged if d.kind == "request"))
    mark = None if not logged else CursorMark(name, DELETIONS, ALL_FORMS, after, len(logged),
                                              1 if old is None else old.run + 1)
    if old is None and not store.export_cursors.list(name):
        return Deletions({}, [], mark)  # the first load: the destination never had these rows
    return Deletions({f: list(ids) for f, ids in submissions.items()}, requests, mark)


@dataclass(frozen=True)
class _Table:
    """One destination table: its name, the store's rows as a stream, how dlt writes it,
    its key and the keys whose rows are to be deleted."""

    name: str
    stream: TableStream
    write: dict[str, Any]
    key: str = "submission_id"
    deleted: Sequence[str] = ()
    # Delta's answers: the rows of the keys sent (and of ``deleted``) are deleted by the
    # load before the part is appended (``delete_answers``), not by flagged rows.
    replaced_first: bool = False
    # Delta: the destination held no such table when the load began (``_as_new``).
    new: bool = False


def _merged(columns: dict[str, Any], key: str) -> dict[str, Any]:
    return {"write_disposition": "merge", "primary_key": key, "columns": {**columns, DELETED: _DELETED_HINT}}


def _form_tables(store: Store, name: str, deleted: dict[str, list[str]]) -> list[_Table]:
    """A table per form with rows stored, and per form with deletions only (all its rows
    removed from the store: its deletions still go to its table)."""
    tables, seen = [], set()
    for stream in table_streams(store, "wide", since_last=name, batch_rows=BATCH_ROWS):
        if stream.mark is None or stream.mark.form_id == ALL_FORMS:  # no form at all: nothing to load
            continue
        form = stream.mark.form_id
        seen.add(form)
        tables.append(_Table(store.schema(form).name, stream, _merged(dlt_columns(stream.columns or ()),
                                                                       "submission_id"), deleted=deleted.get(form, ())))
    for form, ids in deleted.items():
        if form not in seen:
            columns, schema = wide_schema(store, form)
            stream = TableStream(store.schema(form).name, schema, lambda: iter(()), lambda: 0, columns)
            tables.append(_Table(stream.name, stream, _merged(dlt_columns(columns), "submission_id"), deleted=ids))
    return tables


def _tables(store: Store, name: str, deletions: Deletions) -> list[_Table]:
    [long] = table_streams(store, "long", since_last=name, batch_rows=BATCH_ROWS)
    [requests] = table_streams(store, "requests", since_last=name, batch_rows=BATCH_ROWS)
    every = [sid for ids in deletions.submissions.values() for sid in ids]
    answers = {"write_disposition": {"disposition": "merge", "strategy": "delete-insert"},
               "merge_key": "submission_id",
               "columns": {**dlt_columns([c for c in LONG if c.source == "archived"]), DELETED: _DELETED_HINT}}
    return [*_form_tables(store, name, deletions.submissions), _Table("answers", long, answers, deleted=every),
            _Table("requests", requests, _merged(dlt_columns(REQUEST_COLUMNS, "request_id"), "request_id"),
                   "request_id", deletions.requests)]


class _Feed:
    """The tables' batches (``batches_of`` each), handed out as one dlt source or as
    successive parts of a bounded size (whole batches of all tables, their Arrow bytes
    counted), each part taking up where the last one stopped."""

    def __init__(self, tables: list[_Table], batches_of: Callable[[_Table], Iterator[pa.RecordBatch]],
                 make: Callable[[list[Any]], DltSource], campaign: Callable[[], Iterator[pa.RecordBatch]]) -> None:
        self._tables, self._make, self._campaign = tables, make, campaign
        self._left = {t.name: batches_of(t) for t in tables}  # generators: nothing is read before a part asks
        self._held: dict[str, pa.RecordBatch] = {}  # a table's next batch, read to learn there is one
        self._done: set[str] = set()
        self._budget: float = 0

    def _next(self, name: str) -> pa.RecordBatch | None:
        batch = self._held.pop(name, None)
        if batch is None and name not in self._done:
            batch = next(self._left[name], None)
            if batch is None:
                self._done.add(name)
        return batch

    def _take(self, name: str) -> Iterator[pa.RecordBatch]:
        while self._budget > 0 and (batch := self._next(name)) is not None:
            self._budget -= batch.nbytes
            yield batch

    def source(self, size: float, first: bool) -> DltSource:
        """A source of the next ``size`` bytes or so of the tables' batches (the campaign
        rows, replaced whole, with the ``first``)."""
        import dlt

        self._budget = size
        resources = [dlt.resource(self._take(t.name), name=t.name, **t.write) for t in self._tables
                     if t.name not in self._done]
        if first:
            resources.append(dlt.resource(self._campaign(), name=CAMPAIGN, **_CAMPAIGN_WRITE))
        return self._make(resources)

    def finished(self) -> bool:
        """Whether every batch was handed out: each table's next batch is read (and held
        for the next part), so no part is made of nothing."""
        for name in self._left:
            if name not in self._held and (batch := self._next(name)) is not None:
                self._held[name] = batch
        return len(self._done) == len(self._tables)


@dataclass
class WarehouseSource:
    """A dlt source of the store (``source``), the rows read from it so far per table
    (``rows``) and the cursors' marks once it has been read (``marks()``). ``parts(size)``
    gives the same rows as successive sources instead, for runs of bounded size."""

    rows: dict[str, int]
    _tables: list[_Table]
    _feed: _Feed
    _deletion_mark: CursorMark | None = None  # the deletion log's cursor once passed on
    _whole: DltSource | None = None
    _replaced: list[str] = field(default_factory=list)  # Delta's answers: keys read since replaced_keys()

    @property
    def source(self) -> DltSource:
        """Every row in one source (made once)."""
        if self._whole is None:
            self._whole = self._feed.source(float("inf"), True)
        return self._whole

    def parts(self, size: float) -> Iterator[DltSource]:
        """The rows as successive sources of about ``size`` bytes of Arrow data each: run
        each one before taking the next (a part is read while it is extracted), so what a
        load package holds (dlt's batches and files, the destination's staging and merge)
        is bounded by ``size``."""
        first = True
        while first or not self._feed.finished():
            yield self._feed.source(size, first)
            first = False

    def marks(self) -> list[CursorMark]:
        """Where the cursors go once the load completed (``store.export_cursors.advance``)."""
        marks = [replace(t.stream.mark, rows=self.rows.get(t.name, 0)) for t in self._tables
                 if t.stream.mark is not None]
        return marks if self._deletion_mark is None else [*marks, self._deletion_mark]

    @property
    def hints(self) -> dict[str, dict[str, Any]]:
        """How dlt writes each table (its write disposition, keys and column hints), the
        campaign rows' included: what a pipeline fed the same rows would give dlt."""
        return {**{t.name: t.write for t in self._tables}, CAMPAIGN: _CAMPAIGN_WRITE}

    def replaced_keys(self) -> list[str]:
        """On Delta, the submissions whose answers the part just extracted replaces (its
        own and the removed ones): delete their answer rows before loading it. Each
        submission is in one part only (a batch holds whole submissions)."""
        keys, self._replaced[:] = list(self._replaced), []
        return keys

    @property
    def deleted(self) -> dict[str, int]:
        """The keys sent as deletions per table (none: left out)."""
        return {t.name: len(t.deleted) for t in self._tables if t.deleted}


def nested_as_json(batch: pa.RecordBatch) -> pa.RecordBatch:
    """List and record columns as their JSON text (``columns.json_cells``), which every
    destination takes into its JSON type (the hint says json); the rest as they are."""
    nested = [i for i, f in enumerate(batch.schema) if pa.types.is_list(f.type) or pa.types.is_struct(f.type)]
    if not nested:
        return batch
    arrays = [json_cells(c) if i in nested else c for i, c in enumerate(batch.columns)]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _flagged(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` (``nested_as_json``'s) with the deletion flag, unset: rows to keep."""
    return batch.append_column(pa.field(DELETED, pa.bool_()), pa.nulls(batch.num_rows, pa.bool_()))


def _for_dlt(batch: pa.RecordBatch) -> pa.RecordBatch:
    return _flagged(nested_as_json(batch))


def _delta_cells(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``nested_as_json``'s batch with its times as text ``HH:MM:SS`` (Delta has no time type)."""
    batch = nested_as_json(batch)
    times = [i for i, f in enumerate(batch.schema) if pa.types.is_time(f.type)]
    if not times:
        return batch
    arrays = [c.cast(pa.time32("s")).cast(pa.string()) if i in times else c for i, c in enumerate(batch.columns)]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _for_delta(batch: pa.RecordBatch) -> pa.RecordBatch:
    return _flagged(_delta_cells(batch))


def _as_delta(t: _Table) -> _Table:
    """``t`` as a Delta table: its time columns text; a table replaced per key
    (delete-insert, which Delta lacks: the answers) appended once its keys' rows are
    deleted (``replaced_first``), without the deletion flag."""
    columns = {k: {**h, "data_type": "text"} if h.get("data_type") == "time" else h
               for k, h in t.write.get("columns", {}).items()}
    disposition = t.write.get("write_disposition")
    if isinstance(disposition, dict) and disposition.get("strategy") == "delete-insert":
        columns.pop(DELETED, None)
        return replace(t, write={"write_disposition": "append", "columns": columns}, replaced_first=True)
    if disposition == "merge":  # on its key, flagged rows deleted: Delta's upsert
        return replace(t, write={**t.write, "write_disposition": {"disposition": "merge", "strategy": "upsert"},
                                 "columns": columns})
    return replace(t, write={**t.write, "columns": columns})


def _as_new(t: _Table) -> _Table:
    """``t`` (``_as_delta``'s) when the destination holds no such table yet: appended, not
    merged, and nothing deleted. A load sends each key once (a form's row per submission,
    a request's per request, a submission's answers in one part), so nothing it appends
    replaces a row of its own; a merge of its second and later parts scanned (and held)
    the rows of the first ones, so its time and memory grew with the rows, and so did the
    deletes of the answers of the parts' submissions, which cannot be there."""
    write = {**t.write, "write_disposition": "append"}
    return replace(t, write=write, deleted=(), new=True)


def _ahead(convert: Callable[[pa.RecordBatch], pa.RecordBatch],
           batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``convert`` of each batch, made in a thread while the next batch is read and dlt
    writes the last one (Arrow's kernels free the interpreter lock)."""
    with ThreadPoolExecutor(1) as pool:
        ahead: Future[pa.RecordBatch] | None = None
        for batch in batches:
            job = pool.submit(convert, batch)
            if ahead is not None:
                yield ahead.result()
            ahead = job
        if ahead is not None:
            yield ahead.result()


def _deletion_batch(schema: pa.Schema, key: str, ids: Sequence[str]) -> pa.RecordBatch:
    """Rows of ``schema`` (``_flagged``'s) that delete ``ids``: the key and the flag set."""
    n = len(ids)
    return pa.RecordBatch.from_arrays([pa.array(ids, f.type) if f.name == key else pa.array([True] * n, f.type)
                                       if f.name == DELETED else pa.nulls(n, f.type) for f in schema], schema=schema)


def warehouse_source(store: Store, name: str, *, on_rows: Callable[[str, int], None] | None = None,
                     deletions: Deletions | None = None, table_format: TableFormat | None = None,
                     is_new: Callable[[str], bool] | None = None) -> WarehouseSource:
    """The dlt source of the store's rows stored since the last load under the cursor
    ``name``: for teams that run their own dlt pipeline. Make and run it inside ``with
    store.exports.snapshot():`` (one consistent read), then pass ``marks()`` to
    ``store.export_cursors.advance``. Rows are counted into ``on_rows(table, rows)`` as
    they are read. The deletion log's removals past the cursor are sent as hard deletes:
    ``deletions``, best read with ``read_deletions`` before the snapshot begins (read
    here when not given, a removal committed meanwhile may meet its row's last edit).
    ``table_format="delta"`` (dlt's filesystem destination): Delta tables (``_as_delta``),
    whose answers the caller replaces per submission: delete ``replaced_keys()`` from the
    answers table before each part is loaded (``delete_answers``); with ``is_new``, which
    says of a table name that the destination does not hold it yet, such tables are
    appended and nothing is deleted from them (``_as_new``)."""
    import dlt
    from dlt.common.schema import Schema

    deletions = deletions if deletions is not None else read_deletions(store, name)
    delta = table_format == "delta"
    tables = [_as_delta(t) if delta else t for t in _tables(store, name, deletions)]
    if delta and is_new is not None:
        tables = [_as_new(t) if is_new(t.name) else t for t in tables]
    rows: dict[str, int] = {}
    replaced: list[str] = []

    def rows_of(t: _Table) -> Iterator[pa.RecordBatch]:
        rows.setdefault(t.name, 0)
        convert = (_delta_cells if t.replaced_first else _for_delta) if delta else _for_dlt
        if t.replaced_first:
            replaced.extend(t.deleted)
        # As shaped: dlt makes its own files and a part is bounded by PART_BYTES, so the
        # wide table is not regrouped (a regrouped batch held a copy of several shaped ones).
        for batch in _ahead(convert, t.stream.pieces()):
            rows[t.name] += batch.num_rows
            if on_rows is not None:
                on_rows(t.name, batch.num_rows)
            if t.replaced_first and not t.new:
                replaced.extend(pc.unique(batch.column(t.key)).to_pylist())
            yield batch
        if t.deleted and not t.replaced_first:
            empty = pa.RecordBatch.from_pylist([], schema=t.stream.schema)
            yield _deletion_batch(convert(empty).schema, t.key, t.deleted)

    def campaign_rows() -> Iterator[pa.RecordBatch]:
        for job in store.campaign.jobs():
            yield _campaign_batch(job, store.campaign.rows(job))

    def make(resources: list[Any]) -> DltSource:
        @dlt.source(schema=Schema("formsync", normalizers={"names": "direct"}))
        def formsync() -> list[Any]:
            if delta:
                for resource in resources:
                    resource.apply_hints(table_format="delta")
            return resources

        return formsync()

    return WarehouseSource(rows, tables, _Feed(tables, rows_of, make, campaign_rows), deletions.mark, _replaced=replaced)


@contextmanager
def _malloc_for_arrow() -> Iterator[None]:
    """Arrow's buffers from the C library's malloc while a load runs: mimalloc (Arrow's
    default pool) keeps the pages of the batches freed for reuse, so a load's resident
    memory grew with the rows it sent; malloc hands a large buffer back once it is freed."""
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(before)


@contextmanager
def dlt_settings(where: Path) -> Iterator[None]:
    """dlt's settings while formsync runs it (see the module's docstring), as dlt reads
    them from the environment; a setting the user gave there wins. Restored afterwards."""
    ours = {"RUNTIME__DLTHUB_TELEMETRY": "false", "DLT_DATA_DIR": str(where), "RUNTIME__LOG_FORMAT": LOG_FORMAT,
            "RUNTIME__LOG_LEVEL": "WARNING"}
    added = [k for k in ours if k not in os.environ]
    os.environ.update({k: ours[k] for k in added})
    # Not the user's to choose: a loaded package's files hold the answers in plain bytes.
    before = {k: os.environ.get(k) for k in _FORCED}
    os.environ.update(_FORCED)
    dlt_log = logging.getLogger("dlt")
    expected = ExpectedNotices()
    dlt_log.addFilter(expected)
    try:
        yield
    finally:
        dlt_log.removeFilter(expected)
        for k in added:
            os.environ.pop(k, None)
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# Where dlt keeps a pipeline's packages: extracted, normalised (not yet loaded), loaded.
_PACKAGE_FOLDERS = ("normalize/extracted", "load/new", "load/normalized", "load/loaded")


def dlt_packages(where: Path, *, pipeline: str = "*", loaded_only: bool = False) -> list[Path]:
    """The folders of the load packages dlt keeps under ``where`` (``work_dir``), of every
    pipeline or of ``pipeline``: each holds the rows it carries in plain bytes.
    ``loaded_only``: those of loads that completed."""
    folders = _PACKAGE_FOLDERS[-1:] if loaded_only else _PACKAGE_FOLDERS
    return sorted(p for f in folders for p in (where / "pipelines").glob(f"{pipeline}/{f}/*") if p.is_dir())


def remove_packages(packages: Sequence[Path]) -> list[Path]:
    """Remove ``packages`` (``dlt_packages``'); returns those removed (one already gone is fine)."""
    removed = []
    for p in packages:
        shutil.rmtree(p, ignore_errors=True)
        if not p.exists():
            removed.append(p)
    return removed


class ExpectedNotices(logging.Filter):
    """Keeps dlt's expected notices (``_EXPECTED``) out of the log; lets any other through."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(text in record.getMessage() for text in _EXPECTED)


def destination_of(name: str | None) -> Any:
    """The dlt destination ``name`` names (any of dlt's: ``postgres``, ``bigquery``, ...,
    credentials from dlt's own configuration); None or ``duckdb``: ``formsync.duckdb``
    in the working directory (its memory capped at ``DUCKDB_MEMORY``) unless dlt's
    configuration gives credentials."""
    import dlt

    if name in (None, "duckdb") and not os.environ.get("DESTINATION__DUCKDB__CREDENTIALS"):
        from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

        # DuckDB keeps the blocks it writes cached up to 80 % of the machine's memory, so a
        # load's memory grew with the table it wrote; capped, it writes them out instead.
        return dlt.destinations.duckdb(DuckDbCredentials(str(Path.cwd() / DUCKDB_FILE),
                                                         global_config={"memory_limit": DUCKDB_MEMORY}))
    return name


def _drop_retyped(pipeline: Any) -> None:
    """Drop the campaign rows' table from ``pipeline``'s schema and destination when an
    earlier load typed a column of it otherwise than declared (before the data contract
    declared it, its times were epoch ms): dlt never changes a column's type, and the
    table is replaced whole by each load, so nothing is lost."""
    if not pipeline.default_schema_name:
        return
    table = pipeline.default_schema.tables.get(CAMPAIGN)
    stored = {} if table is None else {n: c.get("data_type") for n, c in table["columns"].items()}
    if any(stored.get(n) not in (None, hint["data_type"]) for n, hint in _CAMPAIGN_WRITE["columns"].items()):
        from dlt.pipeline.helpers import pipeline_drop

        pipeline_drop(pipeline, resources=[CAMPAIGN])()


@dataclass(frozen=True)
class DeltaTarget:
    """Where a load of Delta tables goes: the folder or bucket's URL, the destination's
    name in the cursor's (``filesystem+delta:<url>``), dlt's pipeline's and its dlt
    destination."""

    url: str
    name: str
    pipeline: str
    destination: Any


def delta_folder(store: Store) -> Path:
    """The Delta tables' default folder: ``formsync-delta/`` beside a SQLite store's file,
    in the working directory for a server database."""
    return work_dir(store).parent / DELTA_DIR


def delta_target(store: Store, destination: str) -> DeltaTarget:
    """The Delta tables' folder or bucket: dlt's ``destination.filesystem.bucket_url``
    when its configuration gives one (``.dlt/secrets.toml``, the environment), else
    ``delta_folder``. Run inside ``dlt_settings``. A destination other than
    ``filesystem``: a ``LoadSettingError``."""
    import dlt

    if destination != "filesystem":
        raise LoadSettingError(f"the delta table format is written by the filesystem destination, not "
                               f"{destination}: give --destination filesystem (or load.destination = \"filesystem\")")
    given: object = dlt.secrets.get("destination.filesystem.bucket_url")
    url = str(given) if given else delta_folder(store).as_uri()
    shown = re.sub(r"//[^/@]*@", "//", url)  # a URL's user and password, if any, stay out of the cursor's name
    digest = hashlib.sha256(url.encode()).hexdigest()[:10]
    # dlt warns that `direct` naming allows "/" in a table's name, which its file layout
    # separates with: formsync's table names never hold one (form slugs and fixed names).
    return DeltaTarget(url, f"filesystem+delta:{shown}", f"filesystem_delta_{digest}",
                       dlt.destinations.filesystem(bucket_url=url, warn_unsafe_layout_separators=False))


def delta_new_tables(pipeline: Any) -> Callable[[str], bool]:
    """Whether the Delta destination of ``pipeline`` (its state restored from the
    destination) holds no table of a name yet: none when the pipeline has no schema."""
    from dlt.common.destination.exceptions import DestinationUndefinedEntity

    def is_new(table: str) -> bool:
        if not pipeline.default_schema_name:
            return True
        with pipeline.destination_client() as client:
            try:
                client.load_open_table("delta", table)
            except DestinationUndefinedEntity:
                return True
        return False

    return is_new


def delete_answers(pipeline: Any, keys: Sequence[str]) -> None:
    """Delete the rows of the submissions ``keys`` from the Delta answers table of
    ``pipeline``'s destination (none yet: nothing to do), in IN lists of at most
    ``DELTA_IN_LIST`` ids, a Delta commit each."""
    from dlt.common.destination.exceptions import DestinationUndefinedEntity

    if not keys:
        return
    with pipeline.destination_client() as client:
        try:
            table = client.load_open_table("delta", "answers")
        except DestinationUndefinedEntity:
            return
    for ids in in_lists(keys, DELTA_IN_LIST):
        quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
        table.delete(f"submission_id IN ({quoted})")


def loader_format(pipeline: Any) -> Literal["parquet"] | None:
    """``LOADER_FORMAT`` on DuckDB; None elsewhere: dlt's own choice per destination
    (Parquet for Arrow tables where it is fast, e.g. PostgreSQL with its ADBC driver)."""
    return LOADER_FORMAT if pipeline.destination.destination_type.endswith(".duckdb") else None


def load(store: Store, *, destination: str | None = None, dataset: str | None = None, dry_run: bool = False,
         on_rows: Callable[[str, int], None] | None = None, table_format: TableFormat | None = None) -> LoadReport:
    """Load the rows stored since the last load into ``dataset`` (default
    ``formsync_data``) of ``destination`` (default: DuckDB, ``formsync.duckdb`` in the
    working directory). Its cursors move only once dlt has loaded everything: a failed
    load sends the same rows and more next time. ``dry_run`` counts what would be sent
    and sends nothing. ``table_format="delta"`` (with ``destination="filesystem"``)
    writes Delta tables (``delta_target``). A missing extra is a ``ModuleNotFoundError``
    naming it; a destination that cannot be used as configured a ``LoadSettingError``; a
    load that failed a ``LoadFailed``."""
    try:
        import dlt
    except ModuleNotFoundError:
        raise ModuleNotFoundError(EXTRA_MISSING, name="dlt") from None
    where = work_dir(store)
    dest_name, dataset = destination or "duckdb", dataset or DEFAULT_DATASET
    with dlt_settings(where):
        target = None if table_format is None else delta_target(store, dest_name)
    name = cursor_name(dest_name if target is None else target.name, dataset)
    started = datetime.now(UTC)
    # Read before the snapshot: a removal committed after it is left for the next load,
    # so no row of this load's snapshot is deleted by it.
    deletions = read_deletions(store, name)
    with dlt_settings(where), _malloc_for_arrow(), store.exports.snapshot():
        if dry_run:
            tables = _tables(store, name, deletions)
            return LoadReport(destination=dest_name, dataset=dataset, rows={t.name: t.stream.count() for t in tables},
                              deleted={t.name: len(t.deleted) for t in tables if t.deleted}, dry_run=True)
        try:
            pipeline = dlt.pipeline(pipeline_name=pipeline_name(dest_name if target is None else target.pipeline, dataset),
                                    pipelines_dir=str(where / "pipelines"), dataset_name=dataset,
                                    destination=destination_of(destination) if target is None else target.destination)
            if pipeline.config.restore_from_destination:  # as dlt's run does first
                pipeline.sync_destination()
            if pipeline.has_pending_data:  # a failed load's: its rows come again, the cursors did not move
                pipeline.abort_packages()
            _drop_retyped(pipeline)
            made = warehouse_source(store, name, on_rows=on_rows, deletions=deletions, table_format=table_format,
                                    is_new=None if target is None else delta_new_tables(pipeline))
            # A load package per part, loaded before the next part is read: what the
            # working folder and the destination's staging and merge hold is one part.
            file_format = loader_format(pipeline)
            for part in made.parts(PART_BYTES):
                pipeline.extract(part, loader_file_format=file_format)
                if target is not None:  # Delta's answers: the part's submissions' rows go first
                    delete_answers(pipeline, made.replaced_keys())
                pipeline.normalize()
                pipeline.load()
        except Exception as e:  # dlt's errors are many classes; each becomes one line of ours
            raise load_failure(e, dest_name) from e
    store.export_cursors.advance(made.marks())
    # Only now: had the cursors not moved, the next load would send these rows again anyway.
    remove_packages(dlt_packages(where, pipeline=pipeline.pipeline_name, loaded_only=True))
    return LoadReport(destination=dest_name, dataset=dataset, rows=made.rows, deleted=made.deleted,
                      seconds=round((datetime.now(UTC) - started).total_seconds(), 3))
