"""The connector's SQL store: what the receiver, the poller and the sync job bring from
the service, persisted in the user's own database (SQLite by default, PostgreSQL by URL).

Modules, one concern each: ``tables`` (the schema), ``mapping`` (events and reads to
rows, pure), ``merge`` (newest wins), ``writer`` (the protocol of a database's writer and
what writers share), ``sqlite`` and ``postgresql`` (one writer per database),
``database`` (the engine and its sessions, below everything else), ``facade`` (the
``Store``), and the repositories the ``Store`` offers, each a module: ``runs``
(``store.runs``), ``lease`` (``store.leader_lock()``), ``requests``, ``events``,
``submissions``, ``progress`` (``store.outreach_progress``), ``jobstore``
(``store.scheduled_jobs``) and ``exports``."""

from .exports import ExportFilter, json_value
from .facade import WRITERS, Store, alembic_config
from .lease import LOCK_NAME, LeaderLock, LeaseLock
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
from .postgresql import AdvisoryLock
from .requests import PendingRequest
from .runs import SUMMARY_MAX
from .sqlite import SQLITE_BUSY_TIMEOUT_MS
from .tables import (
    METADATA,
    NAMING_CONVENTION,
    OUTREACH_STATES,
    VERSION_TABLE,
    JobRun,
    OutreachJob,
    OutreachRow,
    RawEvent,
    RequestRow,
    SchedulerLease,
    StoreModel,
    SubmissionRow,
    SyncCursor,
    request_answers,
)

__all__ = [
    "LOCK_NAME", "SUMMARY_MAX", "AdvisoryLock", "ExportFilter", "LeaderLock", "LeaseLock", "PendingRequest",
    "json_value",
    "ANSWER_COLUMNS", "METADATA", "NAMING_CONVENTION", "OUTREACH_STATES", "SOURCES", "SQLITE_BUSY_TIMEOUT_MS",
    "TERMINAL_STATUSES", "VERSION_TABLE", "WRITERS", "EventRows", "Incoming", "JobRun", "OutreachJob",
    "OutreachRow", "RawEvent", "RequestRow", "SchedulerLease", "Source", "Store", "StoreModel", "StoreOutcome",
    "SubmissionRow", "SyncCursor", "SyncMark", "alembic_config", "answer_rows", "answer_tuples", "compress_body", "display_text",
    "epoch_ms", "event_integer_problem", "event_to_rows", "integer_problem", "is_matrix", "list_ts_ms", "request_answers", "request_rank", "submission_rank", "value_text",
]
