"""The outreach plan: from a sheet's rows and the form's fields to the rows to send (with
their params, identity and idempotency key) and the rows rejected (with every problem),
computed without any I/O."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from connector.models import FieldDescriptor

from .columns import ColumnMapping, RowParams, validate_row
from .values import Problem

FIRST_ROW = 2  # sheet rows are numbered as the user sees them: the header is row 1

# The problems of a row's documents (none when every file can be sent): a file check,
# given by the caller so the plan itself touches no file.
DocumentCheck = Callable[[RowParams], list[Problem]]


@dataclass(frozen=True)
class PlannedRow:
    """A valid row: its sheet row number, params, identity, content hash and key."""

    number: int
    params: RowParams
    identity: str
    content_hash: str
    key: str


@dataclass
class Plan:
    """What a sheet asks for: ``valid`` rows in sheet order, ``rejected`` (row number,
    problem) lines, the count of rows read, and the valid rows the contact rule refused
    (``refused``: each with why; their lines are in ``rejected`` too; see ``contact``)."""

    rows: int = 0
    valid: list[PlannedRow] = field(default_factory=list)
    rejected: list[tuple[int, Problem]] = field(default_factory=list)
    refused: list[tuple[PlannedRow, str]] = field(default_factory=list)

    @property
    def suppressed(self) -> int:
        return len(self.refused)

    @property
    def invalid(self) -> int:
        return self.rows - len(self.valid) - self.suppressed


def content_hash(params: RowParams) -> str:
    """A hash of the row's normalised params (sorted keys, compact JSON)."""
    values = params.model_dump()
    if not values["documents"]:  # rows without documents keep the hash they always had
        del values["documents"]
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def row_identity(params: RowParams) -> str:
    """The row's identity: its externalId, else the hash of its content."""
    return f"ext:{params.externalId}" if params.externalId else f"hash:{content_hash(params)}"


def idempotency_key(job: str, form_id: str, identity: str) -> str:
    """The deterministic idempotency key of a row: a pure function of job, form and row identity."""
    digest = hashlib.sha256(json.dumps([job, form_id, identity]).encode()).hexdigest()
    return f"outreach-{digest[:48]}"


def plan_rows(rows: Sequence[Mapping[str, str]], fields: Sequence[FieldDescriptor], *, job: str, form_id: str,
              mapping: ColumnMapping | None = None, delivery: str = "none",
              check_documents: DocumentCheck | None = None, numbers: Sequence[int] | None = None,
              readings: Mapping[str, str] | None = None) -> Plan:
    """The plan of a sheet: each row validated against the form's fields (and, for rows
    with documents, by ``check_documents``); a later row repeating an earlier valid row's
    identity is rejected, since both would share one idempotency key. ``numbers`` are the
    rows' numbers in the sheet (default: from 2, under a header on row 1); ``readings``
    how each date and number column is read (see ``validate_row``)."""
    plan = Plan(rows=len(rows))
    seen: dict[str, int] = {}
    numbered = zip(numbers, rows, strict=True) if numbers is not None else enumerate(rows, start=FIRST_ROW)
    for number, row in numbered:
        params, problems = validate_row(fields, row, mapping=mapping, delivery=delivery, readings=readings)
        if params is not None and params.documents and check_documents is not None:
            problems = check_documents(params)
        if params is None or problems:
            plan.rejected.extend((number, p) for p in problems)
            continue
        identity = row_identity(params)
        if identity in seen:
            plan.rejected.append((number, Problem(
                column="externalId" if params.externalId else "", problem=f"same row identity as row {seen[identity]}",
                accepted="one row per externalId (or no identical rows)")))
            continue
        seen[identity] = number
        plan.valid.append(PlannedRow(number, params, identity, content_hash(params),
                                     idempotency_key(job, form_id, identity)))
    return plan
