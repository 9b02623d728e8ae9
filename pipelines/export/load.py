"""Load the store into a warehouse through dlt (the ``warehouse`` extra): one table per
form (its wide table, the data contract's columns and types given to dlt as column
hints: ``dlt_columns``), the long answers table, the requests and the campaign rows.

Every load is incremental on the store's arrival order (the same cursors as
``formsync export --since-last``, named ``load:<destination>/<dataset>``): it sends the
rows stored since the last load that completed, so a row stored late is never missed.
A form's rows merge on ``submission_id`` (an edit replaces its row); the long table is
replaced per submission (delete-insert on ``submission_id``: answers an edit removed
disappear); requests merge on ``request_id``; the campaign rows are replaced whole. A
field added to a form arrives as a new nullable column (dlt's schema evolution).

dlt is configured here, never from the home directory: its pipeline state and working
files live in ``formsync-dlt/`` beside a SQLite store (in the working directory for a
server database), its telemetry is off, its log lines have formsync's format and its
naming convention (``direct``) keeps the contract's column names as they are."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pydantic import BaseModel
from sqlalchemy.engine import make_url

from connector.store import ALL_FORMS, Column, CursorMark, Store

from .columns import json_cells
from .write import TableStream, table_streams

if TYPE_CHECKING:
    from dlt.extract.source import DltSource

DUCKDB_FILE = "formsync.duckdb"  # the default destination: an embedded DuckDB in the working directory
DEFAULT_DATASET = "formsync_data"  # not "formsync": DuckDB names the file's catalog after it
WORK_DIR = "formsync-dlt"
EXTRA_MISSING = "formsync load needs the warehouse extra: pip install 'formsync[warehouse]'"
# The data contract's logical types as dlt's (``pipelines.export.columns`` holds the Arrow and
# pandas ones, ``connector.store.views`` the SQL ones).
DLT_TYPES: dict[str, str] = {"text": "text", "number": "double", "integer": "bigint", "boolean": "bool",
                             "date": "date", "time": "time", "timestamp": "timestamp", "keys": "json",
                             "records": "json", "json": "json"}
LOG_FORMAT = "{asctime} {levelname} {name}: {message}"  # formsync's (pipelines.cli.context), in "{" style
# dlt's notices that the Arrow batches' types differ from the hints (the hints win, as
# meant) and that DuckDB keeps the time zone over the millisecond precision: expected.
_EXPECTED = ("several column hints were different", "does not support both timezone and precision")


class LoadSettingError(ValueError):
    """The destination cannot be used as configured (an unknown name, missing
    credentials): fix the setting and run again; nothing was loaded."""


class LoadFailed(RuntimeError):
    """dlt could not load (the destination refused, unreachable...): the cursors did not
    move, so the next load sends the same rows again."""


def load_failure(exc: BaseException, destination: str) -> Exception:
    """dlt's exception ``exc`` as ``LoadSettingError`` or ``LoadFailed``, in one line that
    says what is wrong and how to fix it."""
    from dlt.common.configuration.exceptions import ConfigFieldMissingException
    from dlt.common.destination.exceptions import UnknownDestinationModule

    cause = getattr(exc, "exception", exc)  # a PipelineStepFailed holds the step's own error
    if isinstance(cause, UnknownDestinationModule):
        return LoadSettingError(f"{destination!r} is not a dlt destination: give duckdb, postgres, bigquery, "
                                f"snowflake, filesystem or another of dlt's destinations")
    if isinstance(cause, ConfigFieldMissingException):
        missing = ", ".join(f"{f}" for f in cause.fields)
        return LoadSettingError(f"the {destination} destination misses {missing} in dlt's configuration: set "
                                f"DESTINATION__{destination.upper()}__CREDENTIALS or .dlt/secrets.toml "
                                f"(see docs/warehouse.md)")
    step = getattr(exc, "step", None)
    first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    where = f" at its {step} step" if step else ""
    return LoadFailed(f"dlt could not load into {destination}{where}: {first}; nothing moved: the next load "
                      f"sends the same rows again")


class LoadReport(BaseModel):
    """What ``load`` sent: rows per table (of the destination), the destination, the
    dataset, whether it was a dry run, and the seconds it took."""

    destination: str
    dataset: str
    rows: dict[str, int]
    dry_run: bool = False
    seconds: float = 0.0


def dlt_column(col: Column) -> dict[str, Any]:
    """One column's dlt hint: its type from the data contract (a timestamp with its time
    zone), nullable except the submission id."""
    hint: dict[str, Any] = {"data_type": DLT_TYPES[col.type], "nullable": col.name != "submission_id"}
    if col.type == "timestamp":
        hint["timezone"] = True
    return hint


def dlt_columns(columns: Sequence[Column]) -> dict[str, dict[str, Any]]:
    """The column hints of a form's table, in its order (``dlt_column``)."""
    return {c.name: dlt_column(c) for c in columns}


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
    url = make_url(store.url)
    if store.backend == "sqlite" and url.database not in (None, "", ":memory:"):
        return Path(str(url.database)).resolve().parent / WORK_DIR
    return Path.cwd() / WORK_DIR


@dataclass(frozen=True)
class _Table:
    """One destination table: its name, the store's rows as a stream, how dlt writes it."""

    name: str
    stream: TableStream
    write: dict[str, Any]


def _tables(store: Store, name: str) -> list[_Table]:
    tables = []
    for stream in table_streams(store, "wide", since_last=name):
        if stream.mark is None or stream.mark.form_id == ALL_FORMS:  # no form at all: nothing to load
            continue
        tables.append(_Table(store.schema(stream.mark.form_id).name, stream, {
            "write_disposition": "merge", "primary_key": "submission_id",
            "columns": dlt_columns(stream.columns or ())}))
    [long] = table_streams(store, "long", since_last=name)
    [requests] = table_streams(store, "requests", since_last=name)
    return [*tables, _Table("answers", long, {"write_disposition": {"disposition": "merge", "strategy": "delete-insert"},
                                              "merge_key": "submission_id"}),
            _Table("requests", requests, {"write_disposition": "merge", "primary_key": "request_id"})]


@dataclass
class WarehouseSource:
    """A dlt source of the store (``source``), the rows read from it so far per table
    (``rows``) and the cursors' marks once it has been read (``marks()``)."""

    source: DltSource
    rows: dict[str, int]
    _tables: list[_Table]

    def marks(self) -> list[CursorMark]:
        """Where the cursors go once the load completed (``store.export_cursors.advance``)."""
        return [replace(t.stream.mark, rows=self.rows.get(t.name, 0)) for t in self._tables
                if t.stream.mark is not None]


def nested_as_json(batch: pa.RecordBatch) -> pa.RecordBatch:
    """List and record columns as their JSON text (``columns.json_cells``), which every
    destination takes into its JSON type (the hint says json); the rest as they are."""
    nested = [i for i, f in enumerate(batch.schema) if pa.types.is_list(f.type) or pa.types.is_struct(f.type)]
    if not nested:
        return batch
    arrays = [json_cells(c) if i in nested else c for i, c in enumerate(batch.columns)]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def warehouse_source(store: Store, name: str, *, on_rows: Callable[[str, int], None] | None = None,
                     ) -> WarehouseSource:
    """The dlt source of the store's rows stored since the last load under the cursor
    ``name``: for teams that run their own dlt pipeline. Make and run it inside ``with
    store.exports.snapshot():`` (one consistent read), then pass ``marks()`` to
    ``store.export_cursors.advance``. Rows are counted into ``on_rows(table, rows)`` as
    they are read."""
    import dlt
    from dlt.common.schema import Schema

    tables = _tables(store, name)
    rows: dict[str, int] = {}

    def rows_of(t: _Table) -> Iterator[pa.RecordBatch]:
        rows.setdefault(t.name, 0)
        for batch in t.stream.batches():
            rows[t.name] += batch.num_rows
            if on_rows is not None:
                on_rows(t.name, batch.num_rows)
            yield nested_as_json(batch)

    def campaign_rows() -> Iterator[dict[str, Any]]:
        for job in store.campaign.jobs():
            for row in store.campaign.rows(job):
                yield {"job": job, **asdict(row)}

    @dlt.source(schema=Schema("formsync", normalizers={"names": "direct"}))
    def formsync() -> list[Any]:
        resources = [dlt.resource(rows_of(t), name=t.name, **t.write) for t in tables]
        return [*resources, dlt.resource(campaign_rows(), name="campaign_rows", write_disposition="replace")]

    return WarehouseSource(formsync(), rows, tables)


@contextmanager
def dlt_settings(where: Path) -> Iterator[None]:
    """dlt's settings while formsync runs it (see the module's docstring), as dlt reads
    them from the environment; a setting the user gave there wins. Restored afterwards."""
    ours = {"RUNTIME__DLTHUB_TELEMETRY": "false", "DLT_DATA_DIR": str(where), "RUNTIME__LOG_FORMAT": LOG_FORMAT,
            "RUNTIME__LOG_LEVEL": "WARNING"}
    added = [k for k in ours if k not in os.environ]
    os.environ.update({k: ours[k] for k in added})
    dlt_log = logging.getLogger("dlt")
    expected = _Expected()
    dlt_log.addFilter(expected)
    try:
        yield
    finally:
        dlt_log.removeFilter(expected)
        for k in added:
            os.environ.pop(k, None)


class _Expected(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not any(text in record.getMessage() for text in _EXPECTED)


def destination_of(name: str | None) -> Any:
    """The dlt destination ``name`` names (any of dlt's: ``postgres``, ``bigquery``, ...,
    credentials from dlt's own configuration); None or ``duckdb``: ``formsync.duckdb``
    in the working directory unless dlt's configuration gives credentials."""
    import dlt

    if name in (None, "duckdb") and not os.environ.get("DESTINATION__DUCKDB__CREDENTIALS"):
        return dlt.destinations.duckdb(str(Path.cwd() / DUCKDB_FILE))
    return name


def load(store: Store, *, destination: str | None = None, dataset: str | None = None, dry_run: bool = False,
         on_rows: Callable[[str, int], None] | None = None) -> LoadReport:
    """Load the rows stored since the last load into ``dataset`` (default
    ``formsync_data``) of ``destination`` (default: DuckDB, ``formsync.duckdb`` in the
    working directory). Its cursors move only once dlt has loaded everything: a failed
    load sends the same rows and more next time. ``dry_run`` counts what would be sent
    and sends nothing. A missing extra is a ``ModuleNotFoundError`` naming it; a
    destination that cannot be used as configured a ``LoadSettingError``; a load that
    failed a ``LoadFailed``."""
    try:
        import dlt
    except ModuleNotFoundError:
        raise ModuleNotFoundError(EXTRA_MISSING, name="dlt") from None
    where = work_dir(store)
    dest_name, dataset = destination or "duckdb", dataset or DEFAULT_DATASET
    name = cursor_name(dest_name, dataset)
    started = datetime.now(UTC)
    with dlt_settings(where), store.exports.snapshot():
        if dry_run:
            counts = {t.name: t.stream.count() for t in _tables(store, name)}
            return LoadReport(destination=dest_name, dataset=dataset, rows=counts, dry_run=True)
        made = warehouse_source(store, name, on_rows=on_rows)
        try:
            pipeline = dlt.pipeline(pipeline_name=pipeline_name(dest_name, dataset), pipelines_dir=str(where / "pipelines"),
                                    destination=destination_of(destination), dataset_name=dataset)
            if pipeline.has_pending_data:  # a failed load's: its rows come again, the cursors did not move
                pipeline.drop_pending_packages()
            pipeline.run(made.source)
        except Exception as e:  # dlt's errors are many classes; each becomes one line of ours
            raise load_failure(e, dest_name) from e
    store.export_cursors.advance(made.marks())
    return LoadReport(destination=dest_name, dataset=dataset, rows=made.rows,
                      seconds=round((datetime.now(UTC) - started).total_seconds(), 3))
