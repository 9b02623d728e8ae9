"""The connector's SQL store: what the receiver, the poller and the sync job bring from
the service, persisted in the user's own database (SQLite by default, PostgreSQL by URL).

Conventions of every table here:

* Every timestamp column (``*_at``) is an integer in epoch milliseconds, UTC. Event
  timestamps (ISO 8601) and ``submissions.list`` timestamps (``YYYY-MM-DD HH:MM:SS``,
  UTC) are converted on the way in; request reads already carry epoch ms. The one
  exception is ``SyncCursor.last_created_at``, which keeps the service's own string.
* Writes are idempotent and out-of-order safe. An event id is stored once. A submission
  or request row is only replaced by a newer version of it ("newest wins", see
  ``submission_rank`` and ``request_rank``); a write that loses changes nothing, except
  that it may fill in a column still unknown (NULL) whose value never changes.
* A write only sets the columns its source carries: a ``requests.list`` record has no
  answers, so it never erases the answers a completion event stored.
* Every public method runs in its own transaction on its own connection, so the store
  may be shared by threads (the async receiver calls it from a worker thread).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    delete,
    event,
    text,
    tuple_,
)
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import registry
from sqlmodel import Field, Session, SQLModel, create_engine

from .models import Event, WireModel

Source = Literal["callback", "webhook", "poll", "sync"]
SOURCES: tuple[str, ...] = ("callback", "webhook", "poll", "sync")
TERMINAL_STATUSES = frozenset({"completed", "expired", "canceled"})
OUTREACH_STATES: tuple[str, ...] = ("pending", "sending", "sent", "invalid", "failed", "changed")
# Alembic's bookkeeping table, named so it never meets the user's own Alembic history.
VERSION_TABLE = "formsync_alembic_version"
SQLITE_BUSY_TIMEOUT_MS = 30_000
_RETRIES = 5  # PostgreSQL deadlock or serialization failure: the whole transaction is run again

T = TypeVar("T")


# ======================================================================================
# Tables
# ======================================================================================


# Every index and constraint gets a stable name, the same on SQLite and PostgreSQL, so the
# migrations can name what they create and later ones can drop it.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class StoreModel(SQLModel, registry=registry(metadata=MetaData(naming_convention=NAMING_CONVENTION))):
    """Base of the connector's tables. It has its own ``MetaData``, so the store's schema
    (and its migrations) never includes other SQLModel tables living in the same process."""


def _json_col() -> Any:
    # none_as_null: Python None is SQL NULL (not the JSON text 'null'), so IS NULL and
    # COALESCE treat a missing object as missing.
    return Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))


class RawEvent(StoreModel, table=True):
    """Every event received, exactly once per event id, as it came."""

    __tablename__ = "formsync_events"

    id: str = Field(primary_key=True)  # evt_…
    type: str = Field(index=True)
    source: str  # callback | webhook | poll | sync
    created_at: int = Field(sa_type=BigInteger)  # the envelope's createdAt
    api_version: str | None = None
    test: bool = False
    received_at: int = Field(sa_type=BigInteger)
    body: str = Field(sa_type=Text)  # the raw body as received (or as re-serialised when not given)
    payload: dict[str, Any] | None = _json_col()  # the body parsed as JSON


class SubmissionRow(StoreModel, table=True):
    """One row per submission id: its newest known version."""

    __tablename__ = "formsync_submissions"

    id: str = Field(primary_key=True)  # sub_…
    form_id: str = Field(index=True)
    form_name: str | None = None
    snapshot_id: str | None = None
    request_id: str | None = Field(default=None, index=True)
    respondent_email: str | None = None
    created_at: int | None = Field(default=None, sa_type=BigInteger)  # known from submissions.list only
    submitted_at: int | None = Field(default=None, sa_type=BigInteger)
    updated_at: int | None = Field(default=None, sa_type=BigInteger)
    edit_count: int = 0
    is_completed: bool = False
    language: str | None = None
    answers: dict[str, Any] | None = _json_col()
    display: dict[str, Any] | None = _json_col()
    pdf_url: str | None = None
    source: str  # what brought the stored version: callback | webhook | poll | sync
    last_event_id: str | None = None  # the event behind the stored version; null when it came from a read
    observed_at: int = Field(sa_type=BigInteger)  # when the service showed this version (event createdAt or read time)
    stored_at: int = Field(sa_type=BigInteger)


class AnswerRow(StoreModel, table=True):
    """Answers in long form (see ``answer_rows``). The key never holds NULL, so it works
    alike on SQLite and PostgreSQL: ``instance`` is -1 outside a repeating group, and
    ``row_key`` / ``member_key`` are '' where they do not apply."""

    __tablename__ = "formsync_answers"

    submission_id: str = Field(primary_key=True)
    field_key: str = Field(primary_key=True)
    instance: int = Field(default=-1, primary_key=True, sa_column_kwargs={"autoincrement": False})
    row_key: str = Field(default="", primary_key=True)
    member_key: str = Field(default="", primary_key=True)
    value_json: str = Field(sa_type=Text)  # the raw answer value as JSON text
    display_text: str | None = Field(default=None, sa_type=Text)


class RequestRow(StoreModel, table=True):
    """One row per request id: its newest known state."""

    __tablename__ = "formsync_requests"

    id: str = Field(primary_key=True)  # req_…
    form_id: str | None = Field(default=None, index=True)  # unknown when only an expiry/cancel event was seen
    workspace_id: str | None = None
    status: str = Field(index=True)  # pending | completed | expired | canceled
    delivery_status: str | None = None
    outcome: str | None = None
    external_id: str | None = Field(default=None, index=True)
    metadata_: dict[str, Any] | None = Field(
        default=None, sa_column=Column("metadata", JSON(none_as_null=True), nullable=True))
    context: dict[str, Any] | None = _json_col()
    recipient_email: str | None = None
    recipient_name: str | None = None
    language: str | None = None
    url: str | None = None
    is_test: bool = False
    created_at: int | None = Field(default=None, sa_type=BigInteger)
    expires_at: int | None = Field(default=None, sa_type=BigInteger)
    completed_at: int | None = Field(default=None, sa_type=BigInteger)
    expired_at: int | None = Field(default=None, sa_type=BigInteger)
    canceled_at: int | None = Field(default=None, sa_type=BigInteger)
    cancel_reason: str | None = None
    updated_at: int = Field(sa_type=BigInteger)
    submission_id: str | None = None
    answers: dict[str, Any] | None = _json_col()
    display: dict[str, Any] | None = _json_col()
    source: str
    last_event_id: str | None = None
    stored_at: int = Field(sa_type=BigInteger)


class OutreachJob(StoreModel, table=True):
    """A named bulk-outreach job: one sheet sent to one form."""

    __tablename__ = "formsync_outreach_jobs"

    name: str = Field(primary_key=True)
    form_id: str
    source_path: str
    settings: dict[str, Any] | None = _json_col()
    created_at: int = Field(sa_type=BigInteger)
    updated_at: int = Field(sa_type=BigInteger)


class OutreachRow(StoreModel, table=True):
    """One sheet row of an outreach job and where it stands."""

    __tablename__ = "formsync_outreach_rows"
    __table_args__ = (
        UniqueConstraint("job_name", "row_key", name="uq_formsync_outreach_rows_job_row"),
        CheckConstraint("state IN ('pending', 'sending', 'sent', 'invalid', 'failed', 'changed')",
                        name="ck_formsync_outreach_rows_state"),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_name: str = Field(sa_column=Column(ForeignKey("formsync_outreach_jobs.name"), nullable=False))
    row_key: str  # the row's identity in the sheet (an id column, or one derived by the job)
    row_number: int
    content_hash: str
    idempotency_key: str = Field(unique=True)
    state: str = "pending"
    request_id: str | None = None
    error: str | None = Field(default=None, sa_type=Text)
    attempts: int = 0
    updated_at: int = Field(sa_type=BigInteger)


class SyncCursor(StoreModel, table=True):
    """The high-water mark of an incremental ``submissions.list`` sync: the newest
    submission seen, as the service's ``createdAt`` string and its id."""

    __tablename__ = "formsync_sync_cursors"

    form_id: str = Field(primary_key=True)
    stream: str = Field(default="submissions", primary_key=True)
    last_created_at: str  # ``YYYY-MM-DD HH:MM:SS`` (UTC), as submissions.list gives it
    last_id: str
    updated_at: int = Field(sa_type=BigInteger)


class JobRun(StoreModel, table=True):
    """One run of a scheduled job (``formsync run``): when it started and finished, how
    it ended (``running`` until then; ``ok``, ``error``, or ``stopped`` when a shutdown
    stopped it between rows), its error and a short summary, and the process that ran it."""

    __tablename__ = "formsync_job_runs"
    __table_args__ = (
        CheckConstraint("outcome IN ('running', 'ok', 'error', 'stopped')", name="ck_formsync_job_runs_outcome"),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    kind: str
    scheduled_at: int | None = Field(default=None, sa_type=BigInteger)  # the fire time the scheduler planned
    started_at: int = Field(sa_type=BigInteger)
    finished_at: int | None = Field(default=None, sa_type=BigInteger)
    outcome: str = "running"
    error: str | None = Field(default=None, sa_type=Text)
    summary: str | None = Field(default=None, sa_type=Text)
    pid: int
    host: str


class SchedulerLease(StoreModel, table=True):
    """Who may run the scheduler (SQLite; PostgreSQL uses an advisory lock instead): the
    holder renews ``expires_at``; once it has passed, another process may take over."""

    __tablename__ = "formsync_scheduler_lease"

    name: str = Field(primary_key=True)
    holder: str
    acquired_at: int = Field(sa_type=BigInteger)
    expires_at: int = Field(sa_type=BigInteger)


_EVENTS: Table = RawEvent.__table__  # type: ignore[assignment]
_SUBMISSIONS: Table = SubmissionRow.__table__  # type: ignore[assignment]
_ANSWERS: Table = AnswerRow.__table__  # type: ignore[assignment]
_REQUESTS: Table = RequestRow.__table__  # type: ignore[assignment]
_CURSORS: Table = SyncCursor.__table__  # type: ignore[assignment]
METADATA = StoreModel.metadata  # what the migrations build


# ======================================================================================
# Values passed in and out
# ======================================================================================


@dataclass(frozen=True)
class Incoming:
    """An event as the receiver got it. ``body`` is the exact raw text (kept verbatim in
    ``RawEvent.body``); without it the parsed event is re-serialised, which drops the
    fields the model does not know. ``received_at`` defaults to the time of storing."""

    event: Event
    source: Source = "webhook"
    body: str | bytes | None = None
    received_at: int | None = None


@dataclass(frozen=True)
class StoreOutcome:
    """What ``store_events`` did with one event: ``stored`` the first time its id was
    seen, ``duplicate`` every later time (nothing was changed then)."""

    event_id: str
    type: str
    status: Literal["stored", "duplicate"]


@dataclass(frozen=True)
class SyncMark:
    """A position in a form's submission list (newest first): the ``createdAt`` string of
    a submission and its id."""

    created_at: str
    submission_id: str

    def __post_init__(self) -> None:
        for name in ("created_at", "submission_id"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"SyncMark.{name} must be a non-empty string, got {getattr(self, name)!r}")


@dataclass
class EventRows:
    """The rows one event maps to (see ``event_to_rows``)."""

    raw: dict[str, Any]
    submission: dict[str, Any] | None = None
    request: dict[str, Any] | None = None
    payload_text: str | None = None  # the JSON text of ``raw["payload"]`` when it is the body verbatim

    @property
    def answers(self) -> list[dict[str, Any]]:
        """The submission's long-form answer rows (none without a submission)."""
        s = self.submission
        return answer_rows(s["id"], s["answers"], s["display"]) if s else []


# ======================================================================================
# Pure mapping: timestamps, long-form answers, events and reads to rows
# ======================================================================================

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_ms(dt: datetime) -> int:
    """A datetime as epoch milliseconds; a naive datetime is taken as UTC."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def _opt_ms(dt: datetime | None) -> int | None:
    return None if dt is None else epoch_ms(dt)


def list_ts_ms(value: str | None, where: str = "timestamp") -> int | None:
    """A ``submissions.list`` timestamp (``YYYY-MM-DD HH:MM:SS``, UTC) as epoch ms. ISO
    8601 is accepted too; anything else is a ``ValueError`` naming ``where``."""
    if value is None:
        return None
    problem = f"{where}: expected a 'YYYY-MM-DD HH:MM:SS' string, got {value!r}"
    if not isinstance(value, str):
        raise ValueError(problem)
    try:
        return epoch_ms(datetime.strptime(value, "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        pass
    try:
        return epoch_ms(datetime.fromisoformat(value))
    except ValueError:
        raise ValueError(problem) from None


def _is_file(value: Any) -> bool:
    return isinstance(value, dict) and "name" in value and "url" in value and ("size" in value or "type" in value)


def _is_group(value: Any) -> bool:
    # A repeating group is a list of instance objects; a file list is a list of objects too,
    # told apart by the file members (name, url, and size or type).
    return (isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
            and not all(_is_file(v) for v in value))


def _is_matrix(value: Any) -> bool:
    # A matrix maps row keys to column keys. Payment and booking answers are objects too,
    # but always hold numbers, nulls or nested objects.
    return isinstance(value, dict) and bool(value) and all(isinstance(v, str) for v in value.values())


def _text(value: Any) -> str | None:
    """Readable text of a raw value, for rows whose display segment is unknown."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, int | float):
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False)


def _segments(text: Any, sep: str, n: int) -> list[str] | None:
    """``text`` split on ``sep`` when it makes exactly ``n`` parts, else None (a label
    holding the separator makes the split ambiguous)."""
    if not isinstance(text, str) or n == 0:
        return None
    parts = [text] if n == 1 else text.split(sep)
    return parts if len(parts) == n else None


def answer_rows(submission_id: str, answers: Mapping[str, Any] | None,
                display: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Flatten one submission's answers into long-form rows (dicts of ``AnswerRow``
    columns). Every answer key yields at least one row, and the key
    ``(field_key, instance, row_key, member_key)`` is unique:

    * a repeating group (a list of instance objects): one row per instance and member,
      ``instance`` 0..n-1 and ``member_key`` set (a matrix member adds ``row_key`` too);
    * a matrix (an object of row key to column key): one row per row, ``row_key`` set;
    * anything else (text, number, choice key, multi-choice list, file list, payment or
      booking object): one row, ``instance`` -1, ``row_key`` and ``member_key`` ''.
      An empty group or matrix is also one such row.

    ``value_json`` is the raw value as JSON text. ``display_text`` is the field's display
    text for a one-row answer; for the parts of a group or matrix it is that part's
    segment of the display text (``"Row: Column"`` for a matrix row, the member's text for
    a group member) when the joined text splits into exactly one segment per part, and
    the raw value as text otherwise."""
    return [dict(zip(ANSWER_COLUMNS, t, strict=True)) for t in answer_tuples(submission_id, answers, display)]


ANSWER_COLUMNS = ("submission_id", "field_key", "instance", "row_key", "member_key", "value_json", "display_text")
_encode_value = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(v, ensure_ascii=False), built once


def answer_tuples(submission_id: str, answers: Mapping[str, Any] | None,
                  display: Mapping[str, Any] | None) -> list[tuple[Any, ...]]:
    """``answer_rows`` as tuples in ``ANSWER_COLUMNS`` order (what the store inserts)."""
    rows: list[tuple[Any, ...]] = []
    add = rows.append
    shown_all = display or {}
    for key, value in (answers or {}).items():
        shown = shown_all.get(key)
        if isinstance(value, str):  # the common case, first: one row, nothing to split
            add((submission_id, key, -1, "", "", _encode_value(value),
                 shown if isinstance(shown, str) else _text(value if shown is None else shown)))
            continue
        before = len(rows)
        if _is_group(value):
            instances = _segments(shown, ", ", len(value))
            for i, inst in enumerate(value):
                members = _segments(instances[i] if instances else None, " / ", len(inst))
                for j, (member, member_value) in enumerate(inst.items()):
                    member_shown = members[j] if members else None
                    if _is_matrix(member_value):
                        cells = _segments(member_shown, ", ", len(member_value))
                        for k, (row_key, col) in enumerate(member_value.items()):
                            add(_answer(submission_id, key, i, row_key, member, col, cells[k] if cells else None))
                    else:
                        add(_answer(submission_id, key, i, "", member, member_value, member_shown))
        elif _is_matrix(value):
            cells = _segments(shown, ", ", len(value))
            for k, (row_key, col) in enumerate(value.items()):
                add(_answer(submission_id, key, -1, row_key, "", col, cells[k] if cells else None))
        if len(rows) == before:
            add(_answer(submission_id, key, -1, "", "", value, shown))
    return rows


def _answer(submission_id: str, key: str, instance: int, row_key: str, member_key: str, value: Any,
            shown: Any) -> tuple[Any, ...]:
    return (submission_id, key, instance, row_key, member_key, _encode_value(value),
            shown if isinstance(shown, str) else _text(value if shown is None else shown))


def submission_rank(row: Mapping[str, Any]) -> tuple[int, int, int]:
    """The version order of a submission row: ``(updated_at or submitted_at, edit_count,
    observed_at)``. The timestamp counts in whole seconds, the precision of
    ``submissions.list``, so an event (ms) and a list read of the same version compare
    equal on it; ``observed_at`` then lets the later observation win (a payment refund
    rewrites answers without an event). A draft (no timestamps) ranks below any
    completed version."""
    ts = row.get("updated_at") or row.get("submitted_at")
    return (ts // 1000 if ts is not None else -1, row.get("edit_count") or 0, row.get("observed_at") or 0)


def request_rank(row: Mapping[str, Any]) -> tuple[bool, int]:
    """The version order of a request row: a terminal status beats ``pending`` whatever
    the times; otherwise the newer ``updated_at`` wins."""
    return (row.get("status") in TERMINAL_STATUSES, row.get("updated_at") or 0)


# Request record (camelCase, epoch ms) -> RequestRow column. ``recipient`` is split apart.
_REQUEST_FIELDS = {
    "formId": "form_id", "workspaceId": "workspace_id", "status": "status", "deliveryStatus": "delivery_status",
    "outcome": "outcome", "externalId": "external_id", "metadata": "metadata", "context": "context",
    "language": "language", "url": "url", "isTest": "is_test", "createdAt": "created_at", "expiresAt": "expires_at",
    "completedAt": "completed_at", "expiredAt": "expired_at", "canceledAt": "canceled_at",
    "cancelReason": "cancel_reason", "updatedAt": "updated_at", "submissionId": "submission_id",
    "answers": "answers", "display": "display",
}
_TERMINAL_TIME = {"completed": "completed_at", "expired": "expired_at", "canceled": "canceled_at"}


def _request_columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """The columns a request record carries: only keys present in the record are set."""
    row: dict[str, Any] = {"id": record["id"]}
    for wire, col in _REQUEST_FIELDS.items():
        if wire in record:
            row[col] = record[wire]
    recipient = record.get("recipient")
    if isinstance(recipient, Mapping):
        for part in ("email", "name"):
            if part in recipient:
                row[f"recipient_{part}"] = recipient[part]
    elif "recipient" in record:  # recipient: null
        row["recipient_email"] = row["recipient_name"] = None
    return row


def _default_updated_at(row: Mapping[str, Any]) -> int:
    times = [row.get(c) for c in ("created_at", "completed_at", "expired_at", "canceled_at")]
    return max((t for t in times if t is not None), default=0)


def event_to_rows(event: Event | Incoming, *, now: int | None = None) -> EventRows:
    """The rows an event maps to, without touching a database:

    * every event: a ``RawEvent`` row (an unknown type is stored raw, and only raw);
    * ``submission.completed`` / ``submission.updated``: a submission row and its answers;
    * ``request.completed``: a request row (status, outcome, answers, display, submission
      id) plus the submission row and its answers, linked by ``request_id``;
    * ``request.expired`` / ``request.canceled``: a request row with the status, its time
      and the identity fields the event carries;
    * ``submission.abandoned``: the raw row only.

    ``now`` (epoch ms, default the current time) fills ``received_at`` and ``stored_at``."""
    inc = event if isinstance(event, Incoming) else Incoming(event)
    ev, now = inc.event, _now_ms() if now is None else now
    payload_text = None
    if inc.body is None:
        payload = ev.model_dump(mode="json", exclude_unset=True)
        body = json.dumps(payload, ensure_ascii=False)
    else:
        body = inc.body.decode("utf-8") if isinstance(inc.body, bytes) else inc.body
        try:
            payload = json.loads(body)
            payload_text = body  # the same JSON: stored as received, not serialised again
        except ValueError:
            payload = ev.model_dump(mode="json", exclude_unset=True)
    created = epoch_ms(ev.createdAt)
    out = EventRows(raw={
        "id": ev.id, "type": ev.type, "source": inc.source, "created_at": created, "api_version": ev.apiVersion,
        "test": ev.test, "received_at": inc.received_at if inc.received_at is not None else now, "body": body,
        "payload": payload,
    }, payload_text=payload_text)
    data = ev.data
    if ev.type in ("submission.completed", "submission.updated", "request.completed") and data.form and data.submission:
        s = data.submission
        out.submission = {
            "id": s.id, "form_id": data.form.id, "form_name": data.form.name, "snapshot_id": data.form.snapshotId,
            "respondent_email": s.respondentEmail, "submitted_at": _opt_ms(s.submittedAt),
            "updated_at": _opt_ms(s.updatedAt), "edit_count": s.editCount, "is_completed": True,
            "language": s.language, "answers": data.answers or {}, "display": data.display or {},
            "pdf_url": s.pdfUrl, "source": inc.source, "last_event_id": ev.id, "observed_at": created,
            "stored_at": now,
        }
        if ev.type == "request.completed" and data.request:
            out.submission["request_id"] = data.request.id
    if ev.type in ("request.completed", "request.expired", "request.canceled") and data.request:
        r = data.request
        record = r.model_dump(include=r.model_fields_set)
        for key, value in record.items():
            if isinstance(value, datetime):
                record[key] = epoch_ms(value)
        row = _request_columns(record)
        row["status"] = r.status or ev.type.split(".", 1)[1]
        row["is_test"] = ev.test
        if ev.type == "request.completed":
            if data.form:
                row["form_id"] = data.form.id
            if data.submission:
                row["submission_id"] = data.submission.id
            row["answers"] = data.answers or {}
            row["display"] = data.display or {}
        # Events carry no updatedAt: the moment of the event's own transition stands for it.
        row["updated_at"] = row.get(_TERMINAL_TIME.get(row["status"], "")) or created
        row.update(source=inc.source, last_event_id=ev.id, stored_at=now)
        out.request = row
    return out


class _ListItem(WireModel):
    """A ``submissions.list`` item, as far as the store reads it."""

    id: str
    submittedAt: str | None = None
    isCompleted: bool
    createdAt: str | None = None
    updatedAt: str | None = None
    editCount: int | None = None
    respondentEmail: str | None = None
    requestId: str | None = None
    answers: dict[str, Any] | None = None
    display: dict[str, Any] | None = None


class _RequestRecord(WireModel):
    """A request record from ``requests.get`` / ``requests.list`` / ``requests.create``
    (epoch ms), as far as the store reads it."""

    id: str
    status: str
    formId: str | None = None
    workspaceId: str | None = None
    deliveryStatus: str | None = None
    outcome: str | None = None
    externalId: str | None = None
    metadata: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    recipient: dict[str, Any] | None = None
    language: str | None = None
    url: str | None = None
    isTest: bool | None = None
    createdAt: int | None = None
    expiresAt: int | None = None
    completedAt: int | None = None
    expiredAt: int | None = None
    canceledAt: int | None = None
    cancelReason: str | None = None
    updatedAt: int | None = None
    submissionId: str | None = None
    answers: dict[str, Any] | None = None
    display: dict[str, Any] | None = None


def _as_dict(item: Mapping[str, Any] | BaseModel) -> Mapping[str, Any]:
    if isinstance(item, BaseModel):
        return item.model_dump(by_alias=True, exclude_unset=True)
    return item


def _validated(model: type[WireModel], items: Iterable[Mapping[str, Any] | BaseModel], what: str) -> list[Any]:
    out = []
    for i, item in enumerate(items):
        try:
            out.append(model.model_validate(_as_dict(item)))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(item)"
            raise ValueError(f"{what}[{i}].{where}: {first['msg']} (got {first.get('input')!r}); "
                             f"nothing was stored") from None
    return out


def _item_row(it: _ListItem, where: str, form_id: str, form_name: str | None, source: str,
              now: int) -> dict[str, Any]:
    present = it.model_fields_set
    row: dict[str, Any] = {
        "id": it.id, "form_id": form_id, "is_completed": it.isCompleted,
        "submitted_at": list_ts_ms(it.submittedAt, f"{where}.submittedAt"),
        "answers": it.answers or {}, "display": it.display or {}, "source": source, "last_event_id": None,
        "observed_at": now, "stored_at": now,
    }
    if form_name is not None:
        row["form_name"] = form_name
    optional = {"createdAt": "created_at", "updatedAt": "updated_at", "editCount": "edit_count",
                "respondentEmail": "respondent_email", "requestId": "request_id"}
    for wire, col in optional.items():
        if wire in present:
            value = getattr(it, wire)
            row[col] = list_ts_ms(value, f"{where}.{wire}") if wire.endswith("At") else value
    if row.get("edit_count", 0) is None:
        row["edit_count"] = 0
    return row


def _record_row(rec: _RequestRecord, source: str, now: int) -> dict[str, Any]:
    row = _request_columns(rec.model_dump(include=rec.model_fields_set))
    if row.get("is_test") is None:
        row.pop("is_test", None)
    if row.get("updated_at") is None:
        row["updated_at"] = _default_updated_at(row)
    row.update(source=source, last_event_id=None, stored_at=now)
    return row


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


# ======================================================================================
# Newest-wins merging
# ======================================================================================


@dataclass(frozen=True)
class _Merge:
    """How rows of one table are merged: ``rank`` orders versions (stored rows are read
    back with ``rank_cols``); ``keep`` columns are written once and never changed;
    ``fill`` columns are filled in by a losing write while still NULL (each is fixed
    once known, or NULL there only means "not seen yet")."""

    table: Table
    rank: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    rank_cols: tuple[str, ...]
    keep: frozenset[str]
    fill: frozenset[str]


_SUBMISSION_MERGE = _Merge(
    _SUBMISSIONS, submission_rank, ("updated_at", "submitted_at", "edit_count", "observed_at"),
    # submittedAt never changes; keeping the first keeps an event's ms over a list's seconds.
    keep=frozenset({"submitted_at", "created_at", "request_id"}),
    fill=frozenset({"submitted_at", "created_at", "request_id", "form_name", "snapshot_id", "respondent_email",
                    "language"}),
)
_REQUEST_MERGE = _Merge(
    _REQUESTS, request_rank, ("status", "updated_at"),
    keep=frozenset(),
    fill=frozenset({"form_id", "workspace_id", "external_id", "metadata", "context", "recipient_email",
                    "recipient_name", "language", "url", "created_at", "expires_at", "delivery_status"}),
)


def _insert_for(conn: Connection) -> Callable[[Table], Any]:
    return pg_dialect.insert if conn.dialect.name == "postgresql" else sqlite_dialect.insert


def _by_keys(rows: Sequence[dict[str, Any]]) -> Iterator[tuple[tuple[str, ...], list[dict[str, Any]]]]:
    """Rows grouped by their set of columns (one statement shape per set)."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(sorted(r)), []).append(r)
    yield from groups.items()


# The event, merge and answer writes run on the DB-API cursor of the SQLAlchemy
# transaction, with statements of a fixed text per table and column set: no SQL is
# compiled per call, sqlite3 reuses its prepared statements, psycopg prepares them after a
# few runs, and rows travel as plain tuples. These writes are the receiver's hot path.

_JSON_COLUMNS = {t.name: frozenset(c.name for c in t.c if isinstance(c.type, JSON))
                 for t in (_EVENTS, _SUBMISSIONS, _REQUESTS)}
# Python-side column defaults (SQLAlchemy applied them on insert): an insert that lacks
# one of these NOT NULL columns gets its default.
_DEFAULTS = {t.name: {c.name: c.default.arg for c in t.c if c.default is not None and not callable(c.default.arg)}
             for t in (_EVENTS, _SUBMISSIONS, _REQUESTS)}
_SQL_CACHE: dict[tuple[Any, ...], str] = {}


class _Tx:
    """The driver-level writes of one transaction (``conn``'s, so they commit with it).
    JSON columns are serialised here, once per distinct object in the transaction (the
    request and submission rows of an event share their answers and display)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.pg = conn.dialect.name == "postgresql"
        self.p = "%s" if self.pg else "?"
        self.cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        self._json: dict[int, tuple[Any, str]] = {}

    def sql(self, key: tuple[Any, ...], build: Callable[[], str]) -> str:
        """The statement text for ``key`` (which includes the dialect), built once."""
        key = (self.pg, *key)
        text_ = _SQL_CACHE.get(key)
        if text_ is None:
            text_ = _SQL_CACHE[key] = build()
        return text_

    def json(self, value: Any) -> str | None:
        if value is None:  # none_as_null: SQL NULL, not the JSON text 'null'
            return None
        hit = self._json.get(id(value))
        if hit is None or hit[0] is not value:
            hit = self._json[id(value)] = (value, json.dumps(value))
        return hit[1]

    def known_json(self, value: Any, text_: str) -> None:
        """``text_`` is already the JSON of ``value`` (an event's body): use it as is."""
        self._json[id(value)] = (value, text_)

    def params(self, table: str, cols: Sequence[str], row: Mapping[str, Any]) -> tuple[Any, ...]:
        js, defaults = _JSON_COLUMNS[table], _DEFAULTS[table]
        # A JSON column is in ``cols`` only when the row carries it; a default column may not be.
        return tuple([self.json(row[c]) if c in js else row[c] if c in row else defaults[c] for c in cols])

    def ids_param(self, ids: Sequence[str]) -> Any:
        """``ids`` as one parameter, for ``self.in_ids()``: fixed-shape on any count."""
        return list(ids) if self.pg else json.dumps(list(ids))

    def in_ids(self, col: str) -> str:
        return f"{col} = ANY({self.p})" if self.pg else f"{col} IN (SELECT value FROM json_each({self.p}))"

    def insert_new(self, table: str, rows: Sequence[Mapping[str, Any]]) -> set[str]:
        """Insert the rows (distinct ids) whose id is not stored yet; the ids inserted."""
        inserted: set[str] = set()
        for keys, group in _by_keys(rows):  # type: ignore[arg-type]
            cols = tuple(sorted({*keys, *(c for c in _DEFAULTS[table] if c not in keys)}))

            def build(cols: tuple[str, ...] = cols) -> str:
                return (f"INSERT INTO {table} ({', '.join(_q(c) for c in cols)}) "
                        f"VALUES ({', '.join([self.p] * len(cols))}) ON CONFLICT (id) DO NOTHING")

            sql = self.sql(("insert", table, cols), build)
            params = [self.params(table, cols, r) for r in group]
            if self.pg:
                # One round trip for the group (pipeline); one result set per row.
                self.cur.executemany(sql + " RETURNING id", params, returning=True)
                while True:
                    got = self.cur.fetchone()
                    if got is not None:
                        inserted.add(got[0])
                    if not self.cur.nextset():
                        break
            else:
                for r, p in zip(group, params, strict=True):
                    self.cur.execute(sql, p)
                    if self.cur.rowcount == 1:
                        inserted.add(r["id"])
        return inserted

    def ranks(self, m: _Merge, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The rank columns of the stored rows among ``ids``, locked for the transaction
        on PostgreSQL (in id order: one lock order for every writer)."""
        t = m.table.name
        cols = ("id", *m.rank_cols)

        def build() -> str:
            lock = " ORDER BY id FOR UPDATE" if self.pg else ""
            return f"SELECT {', '.join(cols)} FROM {t} WHERE {self.in_ids('id')}{lock}"

        self.cur.execute(self.sql(("ranks", t), build), (self.ids_param(ids),))
        return {r[0]: dict(zip(cols, r, strict=True)) for r in self.cur.fetchall()}

    def update(self, table: str, keys: Sequence[str], coalesce: frozenset[str],
               rows: Sequence[Mapping[str, Any]]) -> None:
        """Set ``keys`` (but ``id``) of each row; a ``coalesce`` column only while NULL."""
        cols = tuple(k for k in keys if k != "id")
        if not cols:
            return

        def build() -> str:
            sets = ", ".join(f"{_q(c)} = COALESCE({_q(c)}, {self.p})" if c in coalesce else f"{_q(c)} = {self.p}"
                             for c in cols)
            return f"UPDATE {table} SET {sets} WHERE id = {self.p}"

        sql = self.sql(("update", table, cols, coalesce & set(cols)), build)
        self.cur.executemany(sql, [(*self.params(table, cols, r), r["id"]) for r in rows])

    def replace_answers(self, latest: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace the long-form answers of the submissions in ``latest`` (id -> row)."""
        ids = sorted(latest)
        self.cur.execute(self.sql(("answers-delete",), lambda: (
            f"DELETE FROM formsync_answers WHERE {self.in_ids('submission_id')}")), (self.ids_param(ids),))
        cols = ANSWER_COLUMNS
        rows = [a for sid in ids for a in answer_tuples(sid, latest[sid]["answers"], latest[sid].get("display"))]
        if not rows:
            return
        if self.pg:
            # COPY: one stream for every answer row of the batch.
            with self.cur.copy(f"COPY formsync_answers ({', '.join(cols)}) FROM STDIN") as copy:
                for r in rows:
                    copy.write_row(r)
        else:
            self.cur.executemany(self.sql(("answers-insert",), lambda: (
                f"INSERT INTO formsync_answers ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})")), rows)


def _q(col: str) -> str:
    # "metadata" is a column name; quoting every column keeps the statements uniform.
    return f'"{col}"'


def _merge_once(tx: _Tx, m: _Merge, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Write rows with distinct ids, newest wins. Returns the rows that were written
    (inserted, or newer than the stored version)."""
    t = m.table.name
    rows = sorted(rows, key=lambda r: r["id"])  # one lock order for every writer
    inserted = tx.insert_new(t, rows)
    written = [r for r in rows if r["id"] in inserted]
    rest = [r for r in rows if r["id"] not in inserted]
    if not rest:
        return written
    stored = tx.ranks(m, [r["id"] for r in rest])
    winners = [r for r in rest if m.rank(r) > m.rank(stored[r["id"]])]
    losers = [r for r in rest if m.rank(r) <= m.rank(stored[r["id"]])]
    for keys, group in _by_keys(winners):
        tx.update(t, keys, m.keep, group)
    for keys, group in _by_keys(losers):
        tx.update(t, [k for k in keys if k in m.fill], m.fill, group)
    return written + winners


def _merge(tx: _Tx, m: _Merge, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Like ``_merge_once`` for rows that may repeat an id: they are applied in rounds,
    oldest version first, so each one is merged exactly as if it came alone."""
    if not rows:
        return []
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_id.setdefault(r["id"], []).append(r)
    if len(by_id) == len(rows):  # the usual case: every id once
        return _merge_once(tx, m, list(rows))
    for versions in by_id.values():
        versions.sort(key=m.rank)
    written: list[dict[str, Any]] = []
    depth = max(len(v) for v in by_id.values())
    for i in range(depth):
        written += _merge_once(tx, m, [v[i] for v in by_id.values() if len(v) > i])
    return written


def _write_submissions(tx: _Tx, rows: Sequence[dict[str, Any]]) -> list[str]:
    """Merge submission rows, then replace the long-form answers of every written row
    that carries answers, from its newest written version (a row that lost to a newer
    stored version leaves the answers alone)."""
    written = _merge(tx, _SUBMISSION_MERGE, rows)
    latest = {r["id"]: r for r in written if "answers" in r}  # rounds run oldest first: the last is the newest
    if latest:
        tx.replace_answers(latest)
    return sorted({r["id"] for r in written})


def _set_cursor(conn: Connection, form_id: str, mark: SyncMark, stream: str, now: int) -> None:
    """Move the cursor forward to ``mark``; a mark behind the stored one changes nothing."""
    ins = _insert_for(conn)(_CURSORS).values(form_id=form_id, stream=stream, last_created_at=mark.created_at,
                                              last_id=mark.submission_id, updated_at=now)
    conn.execute(ins.on_conflict_do_update(
        index_elements=["form_id", "stream"],
        set_={"last_created_at": ins.excluded.last_created_at, "last_id": ins.excluded.last_id,
              "updated_at": ins.excluded.updated_at},
        where=tuple_(_CURSORS.c.last_created_at, _CURSORS.c.last_id)
        < tuple_(ins.excluded.last_created_at, ins.excluded.last_id),
    ))


# ======================================================================================
# The store
# ======================================================================================


def _normalise_url(url: str | Path) -> str:
    if isinstance(url, Path):
        return f"sqlite:///{url}"
    for bare in ("postgresql://", "postgres://"):
        if url.startswith(bare):  # psycopg 3 is the driver this distribution installs
            return "postgresql+psycopg://" + url[len(bare):]
    return url


class Store:
    """The connector's database. ``url`` is a SQLAlchemy URL: ``sqlite:///path.db`` (the
    default kind; WAL journal, ``synchronous=FULL``, a busy timeout, and every write
    transaction taking the write lock at its start) or ``postgresql+psycopg://…``.
    ``clock`` returns the current time in epoch ms (injectable for tests).
    Call ``migrate()`` once before use."""

    def __init__(self, url: str | Path = "sqlite:///formsync.db", *, clock: Callable[[], int] = _now_ms,
                 echo: bool = False) -> None:
        self.url = _normalise_url(url)
        self.clock = clock
        backend = make_url(self.url).get_backend_name()
        if backend == "sqlite":
            self.engine: Engine = create_engine(
                self.url, echo=echo,
                connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
            event.listen(self.engine, "connect", _sqlite_on_connect)
            event.listen(self.engine, "begin", _sqlite_on_begin)
        elif backend == "postgresql":
            self.engine = create_engine(self.url, echo=echo, pool_pre_ping=True)
        else:
            raise ValueError(f"unsupported database URL {self.url!r}: use sqlite:///path.db or "
                             f"postgresql+psycopg://user@host/db")

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    # -- schema ---------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the schema to the newest migration (Alembic, configured in code: no
        ``alembic.ini`` needed). Safe to run from several processes at once."""
        from alembic import command

        cfg = alembic_config(self.url)
        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # Concurrent first starts would race to create the tables.
                conn.execute(text("SELECT pg_advisory_xact_lock(7410117)"))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    # -- sessions -------------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A SQLModel session for reads and ad-hoc writes; committed on success."""
        with Session(self.engine) as s:
            yield s
            s.commit()

    @contextmanager
    def reader(self) -> Iterator[Session]:
        """A read-only session. On SQLite it does not take the write lock, so long reads
        (exports) never hold up the receiver."""
        with Session(self.engine.execution_options(formsync_read=True)) as s:
            yield s

    def _write_tx(self, work: Callable[[_Tx], T]) -> T:
        """``_write`` with the transaction's driver-level writer."""
        def run(conn: Connection) -> T:
            tx = _Tx(conn)
            try:
                return work(tx)
            finally:
                tx.cur.close()

        return self._write(run)

    def _write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one transaction; on a PostgreSQL deadlock or serialization
        failure the whole transaction is run again."""
        driver_error = self.engine.dialect.loaded_dbapi.Error
        for attempt in range(_RETRIES):
            try:
                try:
                    with self.engine.begin() as conn:
                        return work(conn)
                except driver_error as e:
                    # Raised by the driver-level writes (_Tx): as SQLAlchemy's own class
                    # (IntegrityError, OperationalError, ...), as its execute would raise.
                    raise DBAPIError.instance(None, None, e, driver_error, dialect=self.engine.dialect) from e
            except OperationalError as e:
                if getattr(e.orig, "sqlstate", None) not in ("40P01", "40001") or attempt == _RETRIES - 1:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    # -- events ---------------------------------------------------------------------

    def store_events(self, events: Sequence[Event | Incoming], *, source: Source = "webhook") -> list[StoreOutcome]:
        """Store many events in ONE transaction (group commit). Returns one outcome per
        event, in order: ``stored`` the first time an event id is seen, ``duplicate``
        afterwards (also for a repeat within the batch); a duplicate changes nothing.
        Plain ``Event`` items are taken as coming from ``source``. See ``event_to_rows``
        for what each type writes. All or nothing: on an error nothing is stored."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
        now = self.clock()
        items = [e if isinstance(e, Incoming) else Incoming(e, source) for e in events]
        for i, inc in enumerate(items):
            if inc.source not in SOURCES:
                raise ValueError(f"events[{i}].source must be one of {', '.join(SOURCES)}, got {inc.source!r}")
        mapped = [event_to_rows(inc, now=now) for inc in items]
        firsts: dict[str, EventRows] = {}
        for m in mapped:
            firsts.setdefault(m.raw["id"], m)

        def work(tx: _Tx) -> set[str]:
            for m in firsts.values():
                if m.payload_text is not None:
                    tx.known_json(m.raw["payload"], m.payload_text)
            new = tx.insert_new(_EVENTS.name, [m.raw for m in firsts.values()])
            fresh = [m for m in firsts.values() if m.raw["id"] in new]
            _merge(tx, _REQUEST_MERGE, [m.request for m in fresh if m.request])
            _write_submissions(tx, [m.submission for m in fresh if m.submission])
            return new

        new = self._write_tx(work) if firsts else set()
        outcomes = []
        for m in mapped:
            eid = m.raw["id"]
            first = eid in new and firsts.get(eid) is m
            outcomes.append(StoreOutcome(eid, m.raw["type"], "stored" if first else "duplicate"))
        return outcomes

    # -- reads from the service ---------------------------------------------------------

    def upsert_requests(self, records: Sequence[Mapping[str, Any] | BaseModel], *,
                        source: Source = "poll") -> list[str]:
        """Store request records read from the service (``requests.get``, ``requests.list``
        or ``requests.create`` shapes, epoch ms), newest wins: a terminal status is never
        replaced by ``pending``, and otherwise the newer ``updatedAt`` is kept. Only the
        keys a record carries are written. Returns the ids whose row was inserted or
        replaced. A malformed record is a ``ValueError`` and nothing is stored."""
        recs = _validated(_RequestRecord, records, "records")
        now = self.clock()
        rows = [_record_row(r, source, now) for r in recs]
        written = self._write_tx(lambda tx: _merge(tx, _REQUEST_MERGE, rows))
        return sorted({r["id"] for r in written})

    def upsert_submissions(self, items: Sequence[Mapping[str, Any] | BaseModel], form_id: str,
                           form_name: str | None = None, *, source: Source = "sync") -> list[str]:
        """Store ``submissions.list`` items of one form, newest wins (see
        ``submission_rank``), with their long-form answers. Returns the ids whose row was
        inserted or replaced. A malformed item is a ``ValueError`` and nothing is stored."""
        return self.sync_page(form_id, items, None, form_name=form_name, source=source)

    def sync_page(self, form_id: str, items: Sequence[Mapping[str, Any] | BaseModel], cursor: SyncMark | None, *,
                  form_name: str | None = None, stream: str = "submissions", source: Source = "sync") -> list[str]:
        """Store one ``submissions.list`` page and, when ``cursor`` is given, move the
        form's sync cursor to it: both in the same transaction, so a failure leaves
        neither. The cursor only moves forward (see ``set_cursor``). Returns the ids whose
        row was inserted or replaced."""
        if not isinstance(form_id, str) or not form_id:
            raise ValueError(f"form_id must be a non-empty string, got {form_id!r}")
        parsed = _validated(_ListItem, items, "items")
        now = self.clock()
        try:
            rows = [_item_row(it, f"items[{i}] ({it.id})", form_id, form_name, source, now)
                    for i, it in enumerate(parsed)]
        except ValueError as e:
            raise ValueError(f"{e}; nothing was stored") from None

        def work(tx: _Tx) -> list[str]:
            written = _write_submissions(tx, rows)
            if cursor is not None:
                _set_cursor(tx.conn, form_id, cursor, stream, now)
            return written

        return self._write_tx(work)

    # -- sync cursors ---------------------------------------------------------------

    def set_cursor(self, form_id: str, mark: SyncMark, stream: str = "submissions") -> None:
        """Move a form's sync cursor forward to ``mark``. A mark older than the stored one
        (compared as ``(created_at, submission_id)``) changes nothing; use
        ``reset_cursor`` to start over."""
        now = self.clock()
        self._write(lambda conn: _set_cursor(conn, form_id, mark, stream, now))

    def get_cursor(self, form_id: str, stream: str = "submissions") -> SyncMark | None:
        """The stored high-water mark of a form's sync, or None before the first."""
        with self.reader() as s:
            c = s.get(SyncCursor, (form_id, stream))
            return SyncMark(c.last_created_at, c.last_id) if c else None

    def reset_cursor(self, form_id: str, stream: str = "submissions") -> None:
        """Forget a form's sync cursor: the next sync reads the whole list again."""
        self._write(lambda conn: conn.execute(
            delete(_CURSORS).where(_CURSORS.c.form_id == form_id, _CURSORS.c.stream == stream)))


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    # Take transaction control from the sqlite3 module so _sqlite_on_begin decides how each begins.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _sqlite_on_begin(conn: Connection) -> None:
    # A write transaction takes the write lock up front: a deferred one that reads first
    # could not upgrade to a writer while another writer holds the lock (SQLITE_BUSY at
    # once, without waiting), which would break concurrent group commits.
    conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("formsync_read") else "BEGIN IMMEDIATE")


def alembic_config(url: str) -> Any:
    """An Alembic ``Config`` for the store's migrations, built in code."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg
