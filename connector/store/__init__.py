"""The connector's SQL store: what the receiver, the poller and the sync job bring from
the service, persisted in the user's own database (SQLite by default, PostgreSQL or MySQL/MariaDB by URL).

Modules, one concern each: ``tables`` (the schema), ``mapping`` (events and reads to
rows, pure), ``merge`` (newest wins), ``responses`` (one response, one submission row,
whichever route brought it), ``writer`` (the protocol of a database's writer and
what writers share), ``sqlite``, ``postgresql`` and ``mysql`` (one writer per database),
``views`` and ``keeper`` (each form's field list and typed view),
``database`` (the engine and its sessions, below everything else), ``facade`` (the
``Store``), and the repositories the ``Store`` offers, each a module: ``runs``
(``store.runs``), ``lease`` (``store.leader_lock()``, whose protocol ``leader`` holds), ``requests``, ``events``,
``submissions``, ``deadletters`` (``store.dead_letters``), ``progress`` (``store.outreach_progress``), ``campaign``,
``jobstore``
(``store.scheduled_jobs``), ``exports`` and ``cursors`` (``store.export_cursors``)."""

from .cursors import ALL_FORMS, CursorMark, ExportCursors
from .exports import ExportFilter, json_value
from .facade import WRITERS, Store, alembic_config, url_problem
from .leader import LOCK_NAME, LeaderLock
from .lease import LeaseLock
from .mapping import (
    ANSWER_COLUMNS,
    SOURCES,
    TERMINAL_STATUSES,
    EventRows,
    Incoming,
    Source,
    StoreOutcome,
    SyncMark,
    Unstorable,
    answer_rows,
    answer_tuples,
    compress_body,
    display_text,
    epoch_ms,
    event_integer_problem,
    event_to_rows,
    integer_problem,
    is_matrix,
    list_ts_ms,
    request_rank,
    submission_rank,
    value_text,
)
from .mysql import NamedLock, compare_column_type
from .postgresql import AdvisoryLock
from .requests import PendingRequest
from .runs import SUMMARY_MAX
from .schema import (
    LOGICAL_TYPES,
    OWN,
    VIEW_PREFIX,
    Column,
    FormSchema,
    LogicalType,
    StoredField,
    form_schema,
    view_name,
)
from .sqlite import SQLITE_BUSY_TIMEOUT_MS
from .tables import (
    METADATA,
    NAMING_CONVENTION,
    OUTREACH_STATES,
    VERSION_TABLE,
    DeadLetter,
    FormField,
    JobRun,
    OutreachJob,
    OutreachRow,
    RawEvent,
    RequestRow,
    SchedulerLease,
    StoreModel,
    SubmissionRow,
    Suppression,
    SyncCursor,
    request_answers,
)
from .views import SQL_TYPES, FormView, ViewColumn, select_sql

__all__ = [
    "ALL_FORMS", "ANSWER_COLUMNS", "AdvisoryLock", "Column", "CursorMark", "DeadLetter", "EventRows",
    "ExportCursors", "ExportFilter", "FormField", "FormSchema", "FormView", "Incoming", "JobRun", "LOCK_NAME", "LOGICAL_TYPES", "LeaderLock", "LeaseLock",
    "LogicalType", "METADATA", "NAMING_CONVENTION", "NamedLock", "OUTREACH_STATES", "OWN", "OutreachJob",
    "OutreachRow", "PendingRequest", "RawEvent", "RequestRow", "SOURCES", "SQLITE_BUSY_TIMEOUT_MS", "SQL_TYPES",
    "SUMMARY_MAX", "SchedulerLease", "Source", "Store", "StoreModel", "StoreOutcome", "StoredField",
    "SubmissionRow", "Suppression", "SyncCursor", "SyncMark", "TERMINAL_STATUSES", "Unstorable", "VERSION_TABLE",
    "VIEW_PREFIX", "ViewColumn", "WRITERS", "alembic_config", "answer_rows", "answer_tuples",
    "compare_column_type", "compress_body", "display_text", "epoch_ms", "event_integer_problem", "event_to_rows",
    "form_schema", "integer_problem", "is_matrix", "json_value", "list_ts_ms", "request_answers", "request_rank",
    "select_sql", "submission_rank", "url_problem", "value_text", "view_name",
]
