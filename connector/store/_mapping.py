"""The pure mapping from what the service sends to the store's rows: events (as the
receiver gets them) and reads (``submissions.list`` items, request records), with the
timestamp conversions, the long-form answer rows and the display-text rule, and the
version order ("newest wins") of submission and request rows. Nothing here touches a
database."""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .._times import to_ms, utc
from ..models import Event, EventRequest, RequestRecord, Submission, WireModel

Source = Literal["callback", "webhook", "poll", "sync"]
SOURCES: tuple[str, ...] = ("callback", "webhook", "poll", "sync")
TERMINAL_STATUSES = frozenset({"completed", "expired", "canceled"})


@dataclass(frozen=True)
class Incoming:
    """An event as the receiver got it. ``body`` is the exact raw body (kept verbatim,
    compressed, in ``RawEvent.body_zlib``); without it the parsed event is re-serialised, which drops the
    fields the model does not know. ``received_at`` defaults to the time of storing."""

    event: Event
    source: Source = "webhook"
    body: str | bytes | None = None
    received_at: int | None = None


@dataclass(frozen=True)
class StoreOutcome:
    """What ``store_events`` did with one event: ``stored`` the first time its id was
    seen, ``duplicate`` every later time (nothing was changed then); what ``set_aside``
    did: ``set_aside`` (kept in the dead letters, or kept already), with ``reason``."""

    event_id: str
    type: str
    status: Literal["stored", "duplicate", "set_aside"]
    reason: str | None = None


@dataclass(frozen=True)
class Unstorable:
    """A correctly signed event that no database can store as an event: its body as
    received and why (``code``, ``reason``, the ``field`` at fault when one is named)."""

    event_id: str
    type: str
    source: Source
    body: bytes
    received_at: int
    code: str
    reason: str
    field: str | None = None

    def row(self, now: int) -> dict[str, Any]:
        """Its ``formsync_dead_letters`` row, set aside at ``now``."""
        return {"id": hashlib.sha256(self.body).hexdigest(), "event_id": self.event_id, "type": self.type,
                "source": self.source, "code": self.code, "reason": self.reason, "field": self.field,
                "received_at": self.received_at, "set_aside_at": now, "body_zlib": compress_body(self.body)}


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

    @property
    def answers(self) -> list[dict[str, Any]]:
        """The submission's long-form answer rows (none without a submission)."""
        s = self.submission
        return answer_rows(s["id"], s["answers"], s["display"]) if s else []


# ======================================================================================
# Pure mapping: timestamps, long-form answers, events and reads to rows
# ======================================================================================

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # the widest integer column of every supported database


def integer_problem(row: Mapping[str, Any], where: str) -> str | None:
    """Why an integer column of ``row`` cannot be stored (beyond 64 bits, the widest
    integer column any supported database has), naming ``where``, or None."""
    for col, value in row.items():
        if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
            return f"{where}.{col} is {value}, beyond the 64-bit integers a database column holds"
    return None


def event_integer_problem(event: Event) -> str | None:
    """Why an integer the event maps to a column cannot be stored (see
    ``integer_problem``), naming the field, or None. Only ``editCount`` is an integer in
    a mapped event (its times are datetimes, always within range)."""
    sub = event.data.submission
    if sub is not None and not INT64_MIN <= sub.edit_count <= INT64_MAX:
        return f"data.submission.editCount is {sub.edit_count}, beyond the 64-bit integers a database column holds"
    return None


def epoch_ms(dt: datetime) -> int:
    """A datetime as epoch milliseconds; a naive datetime is taken as UTC."""
    return to_ms(dt)


def list_ts_ms(value: str | None, where: str = "timestamp") -> int | None:
    """A ``submissions.list`` timestamp (``YYYY-MM-DD HH:MM:SS``, UTC) as epoch ms. ISO
    8601 is accepted too; anything else is a ``ValueError`` naming ``where``."""
    if value is None:
        return None
    problem = f"{where}: expected a 'YYYY-MM-DD HH:MM:SS' string, got {value!r}"
    if not isinstance(value, str):
        raise ValueError(problem)
    try:
        return to_ms(utc(value))
    except ValueError:
        raise ValueError(problem) from None


def _is_file(value: Any) -> bool:
    return isinstance(value, dict) and "name" in value and "url" in value and ("size" in value or "type" in value)


def _is_group(value: Any) -> bool:
    # A repeating group is a list of instance objects; a file list is a list of objects too,
    # told apart by the file members (name, url, and size or type).
    return (isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
            and not all(_is_file(v) for v in value))


def is_matrix(value: Any) -> bool:
    """Whether an answer value is a matrix answer (an object of row key to column key)."""
    # A matrix maps row keys to column keys. Payment and booking answers are objects too,
    # but always hold numbers, nulls or nested objects.
    return isinstance(value, dict) and bool(value) and all(isinstance(v, str) for v in value.values())


def value_text(value: Any) -> str | None:
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
    """Flatten one submission's answers into long-form rows (dicts of ``ANSWER_COLUMNS``
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
_encode_any = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(v, ensure_ascii=False), built once
_encode_str: Callable[[str], str] = json.encoder.encode_basestring  # that encoder's way with a str, unchecked
_SCALARS: dict[Any, str] = {True: "true", False: "false", None: "null"}


def _encode_value(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)``, faster for the common scalars (export
    derives every long row through here)."""
    kind = type(value)
    if kind is str:
        return _encode_str(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool or value is None:
        return _SCALARS[value]
    return _encode_any(value)


def answer_tuples(submission_id: str, answers: Mapping[str, Any] | None,
                  display: Mapping[str, Any] | None) -> list[tuple[Any, ...]]:
    """``answer_rows`` as tuples in ``ANSWER_COLUMNS`` order (what export derives)."""
    rows: list[tuple[Any, ...]] = []
    add = rows.append
    shown_all = display or {}
    for key, value in (answers or {}).items():
        shown = shown_all.get(key)
        if isinstance(value, str):  # the common case, first: one row, nothing to split
            add((submission_id, key, -1, "", "", _encode_str(value), display_text(value, shown)))
            continue
        before = len(rows)
        if _is_group(value):
            instances = _segments(shown, ", ", len(value))
            for i, inst in enumerate(value):
                members = _segments(instances[i] if instances else None, " / ", len(inst))
                for j, (member, member_value) in enumerate(inst.items()):
                    member_shown = members[j] if members else None
                    if is_matrix(member_value):
                        cells = _segments(member_shown, ", ", len(member_value))
                        for k, (row_key, col) in enumerate(member_value.items()):
                            add(_answer(submission_id, key, i, row_key, member, col, cells[k] if cells else None))
                    else:
                        add(_answer(submission_id, key, i, "", member, member_value, member_shown))
        elif is_matrix(value):
            cells = _segments(shown, ", ", len(value))
            for k, (row_key, col) in enumerate(value.items()):
                add(_answer(submission_id, key, -1, row_key, "", col, cells[k] if cells else None))
        if len(rows) == before:
            add(_answer(submission_id, key, -1, "", "", value, shown))
    return rows


def answer_count(answers: Mapping[str, Any] | None, wanted: frozenset[str] | None = None) -> int:
    """How many rows ``answer_tuples`` makes of ``answers`` (of the ``wanted`` fields
    only, when given), without making them."""
    n = 0
    for key, value in (answers or {}).items():
        if wanted is not None and key not in wanted:
            continue
        if isinstance(value, str):
            n += 1
        elif _is_group(value):
            parts = sum(len(v) if is_matrix(v) else 1 for inst in value for v in inst.values())
            n += parts or 1
        else:
            n += len(value) if is_matrix(value) else 1
    return n


def _answer(submission_id: str, key: str, instance: int, row_key: str, member_key: str, value: Any,
            shown: Any) -> tuple[Any, ...]:
    return (submission_id, key, instance, row_key, member_key, _encode_value(value), display_text(value, shown))


def display_text(value: Any, shown: Any) -> str | None:
    """The display text of one answer row: the service's display text when it is text,
    else readable text of the raw value (or of a non-text display)."""
    return shown if isinstance(shown, str) else value_text(value if shown is None else shown)


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
    "answers": "answers", "display": "display", "openedAt": "opened_at", "startedAt": "started_at",
    "lastActivityAt": "last_activity_at", "remindersSent": "reminders_sent", "dataPurgedAt": "data_purged_at",
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
    * ``request.completed``: a request row (status, outcome, submission id) plus the
      submission row with the answers and display, linked by ``request_id`` (they are
      stored once, there: see ``request_answers``);
    * ``request.expired`` / ``request.canceled``: a request row with the status, its time
      and the identity fields the event carries;
    * ``submission.abandoned``: the raw row only.

    ``now`` (epoch ms, default the current time) fills ``received_at`` and ``stored_at``."""
    inc = event if isinstance(event, Incoming) else Incoming(event)
    ev, now = inc.event, now_ms() if now is None else now
    if inc.body is None:
        body = json.dumps(ev.model_dump(mode="json", exclude_unset=True), ensure_ascii=False).encode()
    else:
        body = inc.body.encode("utf-8", "surrogateescape") if isinstance(inc.body, str) else inc.body
    created = to_ms(ev.created_at)
    out = EventRows(raw={
        "id": ev.id, "type": ev.type, "source": inc.source, "created_at": created,
        "api_version": ev.api_version, "test": ev.test,
        "received_at": inc.received_at if inc.received_at is not None else now,
        "body_zlib": compress_body(body),
    })
    out.submission = _event_submission(inc, now, created)
    out.request = _event_request(inc, now, created)
    return out


def compress_body(body: bytes) -> bytes:
    """An event body as ``RawEvent.body_zlib`` stores it (zlib's fastest level: bodies
    are repetitive JSON, which it already shrinks several times over)."""
    return zlib.compress(body, 1)


def _event_submission(inc: Incoming, now: int, created: int) -> dict[str, Any] | None:
    """The submission row of a submission or ``request.completed`` event, else None."""
    ev, data = inc.event, inc.event.data
    if ev.type not in ("submission.completed", "submission.updated", "request.completed"):
        return None
    if not data.form or not data.submission:
        return None
    s = data.submission
    row = {
        "id": s.id, "form_id": data.form.id, "form_name": data.form.name, "snapshot_id": data.form.snapshot_id,
        "respondent_email": s.respondent_email, "submitted_at": to_ms(s.submitted_at),
        "updated_at": to_ms(s.updated_at), "edit_count": s.edit_count, "is_completed": True,
        "language": s.language, "answers": data.answers or {}, "display": data.display or {},
        "pdf_url": s.pdf_url, "source": inc.source, "last_event_id": ev.id, "observed_at": created,
        "stored_at": now,
    }
    if ev.type == "request.completed" and data.request:
        row["request_id"] = data.request.id
    return row


def _event_request(inc: Incoming, now: int, created: int) -> dict[str, Any] | None:
    """The request row of a ``request.*`` event carrying its request, else None."""
    ev, data = inc.event, inc.event.data
    if ev.type not in ("request.completed", "request.expired", "request.canceled") or not data.request:
        return None
    r = data.request
    row = _event_request_columns(r)
    row["status"] = r.status or ev.type.split(".", 1)[1]
    row["is_test"] = ev.test
    if ev.type == "request.completed":
        if data.form:
            row["form_id"] = data.form.id
        if data.submission:
            row["submission_id"] = data.submission.id
    # Events carry no updatedAt: the moment of the event's own transition stands for it.
    row["updated_at"] = row.get(_TERMINAL_TIME.get(row["status"], "")) or created
    row.update(source=inc.source, last_event_id=ev.id, stored_at=now)
    return row


# The request record's fields an event's ``data.request`` carries (all but ``recipient``).
# (attribute, column) pairs, read off the model's snake_case attributes.
_EVENT_REQUEST_FIELDS = tuple((name, _REQUEST_FIELDS[f.alias]) for name, f in EventRequest.model_fields.items()
                              if f.alias in _REQUEST_FIELDS)


def _event_request_columns(r: EventRequest) -> dict[str, Any]:
    """``_request_columns`` of an event's request, read off the model (times as epoch
    ms): only the fields the event carried are set; a ``recipient`` sets both parts."""
    present = r.model_fields_set
    row: dict[str, Any] = {"id": r.id}
    for name, col in _EVENT_REQUEST_FIELDS:
        if name in present:
            value = getattr(r, name)
            row[col] = to_ms(value) if isinstance(value, datetime) else value
    if "recipient" in present:
        recipient = r.recipient
        row["recipient_email"] = recipient.email if recipient is not None else None
        row["recipient_name"] = recipient.name if recipient is not None else None
    return row


def submission_rows(items: Iterable[Mapping[str, Any] | BaseModel], form_id: str, form_name: str | None,
                    source: str, now: int) -> list[dict[str, Any]]:
    """The submission rows of ``submissions.list`` items (wire shape ``Submission``) of
    one form. A malformed item is a ``ValueError`` naming it; then nothing is stored."""
    if not isinstance(form_id, str) or not form_id:
        raise ValueError(f"form_id must be a non-empty string, got {form_id!r}")
    parsed: list[Submission] = _validated(Submission, items, "items")
    try:
        return [_item_row(it, f"items[{i}] ({it.id})", form_id, form_name, source, now)
                for i, it in enumerate(parsed)]
    except ValueError as e:
        raise ValueError(f"{e}; nothing was stored") from None


def request_rows(records: Iterable[Mapping[str, Any] | BaseModel], source: str, now: int) -> list[dict[str, Any]]:
    """The request rows of request records (wire shape ``RequestRecord``, from
    ``requests.get`` / ``requests.list`` / ``requests.create``, epoch ms): only the keys
    a record carries are set. A malformed record is a ``ValueError`` naming it."""
    recs: list[RequestRecord] = _validated(RequestRecord, records, "records")
    return [_record_row(r, source, now) for r in recs]


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


def _item_row(it: Submission, where: str, form_id: str, form_name: str | None, source: str,
              now: int) -> dict[str, Any]:
    present = it.model_fields_set
    row: dict[str, Any] = {
        "id": it.id, "form_id": form_id, "is_completed": it.is_completed,
        "submitted_at": to_ms(it.submitted_at),
        "answers": it.answers or {}, "display": it.display or {}, "source": source, "last_event_id": None,
        "observed_at": now, "stored_at": now,
    }
    if form_name is not None:
        row["form_name"] = form_name
    for col in ("created_at", "updated_at", "edit_count", "respondent_email", "request_id"):
        if col in present:  # the column's name is the model's attribute
            value = getattr(it, col)
            row[col] = to_ms(value) if isinstance(value, datetime) else value
    if row.get("edit_count", 0) is None:
        row["edit_count"] = 0
    if problem := integer_problem(row, where):
        raise ValueError(problem)
    return row


def _record_row(rec: RequestRecord, source: str, now: int) -> dict[str, Any]:
    # exclude_unset, also inside ``recipient``: a key the record lacks is not written.
    row = _request_columns(rec.model_dump(exclude_unset=True))
    if row.get("is_test") is None:
        row.pop("is_test", None)
    if row.get("updated_at") is None:
        row["updated_at"] = _default_updated_at(row)
    row.update(source=source, last_event_id=None, stored_at=now)
    if problem := integer_problem(row, f"record {rec.id}"):
        raise ValueError(f"{problem}; nothing was stored")
    return row


def now_ms() -> int:
    """The current time in epoch milliseconds."""
    return time.time_ns() // 1_000_000
