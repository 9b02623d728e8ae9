"""The connector's SQL store: what the receiver, the poller and the sync job bring from
the service, persisted in the user's own database (SQLite by default, PostgreSQL or MySQL/MariaDB by URL).

Modules, one concern each: ``tables`` (the schema), ``mapping`` (events and reads to
rows, pure), ``merge`` (newest wins), ``writer`` (the protocol of a database's writer and
what writers share), ``sqlite``, ``postgresql`` and ``mysql`` (one writer per database), ``views`` (the typed
view of each form), and
``facade`` (the ``Store``)."""

from .facade import WRITERS, Store, alembic_config
from .mapping import (
    ANSWER_COLUMNS,
    SOURCES,
    TERMINAL_STATUSES,
    EventRows,
    Incoming,
    Source,
    StoreOutcome,
    SyncMark,
    answer_rows,
    answer_tuples,
    display_text,
    epoch_ms,
    event_to_rows,
    is_matrix,
    list_ts_ms,
    request_rank,
    submission_rank,
    value_text,
)
from .mysql import compare_column_type
from .sqlite import SQLITE_BUSY_TIMEOUT_MS
from .tables import (
    METADATA,
    NAMING_CONVENTION,
    OUTREACH_STATES,
    VERSION_TABLE,
    AnswerRow,
    FormField,
    JobRun,
    OutreachJob,
    OutreachRow,
    RawEvent,
    RequestRow,
    SchedulerLease,
    StoreModel,
    SubmissionRow,
    SyncCursor,
)
from .views import VIEW_PREFIX, FormView, ViewColumn, answer_json, select_sql, view_name

__all__ = [
    "VIEW_PREFIX", "FormView", "ViewColumn", "answer_json", "select_sql", "view_name",
    "ANSWER_COLUMNS", "METADATA", "NAMING_CONVENTION", "OUTREACH_STATES", "SOURCES", "SQLITE_BUSY_TIMEOUT_MS",
    "TERMINAL_STATUSES", "VERSION_TABLE", "WRITERS", "AnswerRow", "EventRows", "FormField", "Incoming", "JobRun", "OutreachJob",
    "OutreachRow", "RawEvent", "RequestRow", "SchedulerLease", "Source", "Store", "StoreModel", "StoreOutcome",
    "SubmissionRow", "SyncCursor", "SyncMark", "alembic_config", "answer_rows", "answer_tuples", "display_text",
    "compare_column_type", "epoch_ms", "event_to_rows", "is_matrix", "list_ts_ms", "request_rank", "submission_rank", "value_text",
]
