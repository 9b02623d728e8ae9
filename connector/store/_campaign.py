"""Reads of an outreach job's campaign (``store.campaign``): each sheet row the ledger
holds with its request as the store knows it, the requests' answers, and the addresses
outreach must not send to (the suppression list and every address that bounced)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, or_, update
from sqlmodel import col, select

from ._database import Database, in_lists
from ._erasure import erasure_hash
from ._tables import (
    REQUESTS,
    Erasure,
    OutreachJob,
    OutreachRow,
    RequestRow,
    SubmissionRow,
    Suppression,
    request_answers,
)

# Delivery statuses that keep an address out of every later job.
UNDELIVERABLE = ("bounced", "complained")


@dataclass(frozen=True)
class CampaignRow:
    """One ledger row of a job and its request (every request field None when the row
    has none, or the store has not seen it): times in epoch ms."""

    row_key: str
    row_number: int
    state: str
    request_id: str | None
    status: str | None = None
    delivery_status: str | None = None
    recipient_email: str | None = None
    recipient_name: str | None = None
    external_id: str | None = None
    url: str | None = None
    created_at: int | None = None
    opened_at: int | None = None
    started_at: int | None = None
    last_activity_at: int | None = None
    completed_at: int | None = None
    expired_at: int | None = None
    canceled_at: int | None = None
    reminders_sent: int | None = None
    is_test: bool = False
    last_reminded_at: int | None = None  # the service's time of formsync's last requests.remind
    cancel_reason: str | None = None


@dataclass(frozen=True, eq=False)  # compared as a mapping, by its listed addresses
class Suppressed(Mapping[str, str]):
    """The addresses outreach must skip, lower-cased, with why: those ``listed`` by
    address, and the erased ones, kept only as keyed hashes (``erasure_hash`` with
    ``key``): looking an erased address up answers ``erased``, iterating never shows it."""

    listed: Mapping[str, str]
    erased: frozenset[str] = frozenset()
    key: bytes = field(default=b"", repr=False)

    def __getitem__(self, email: str) -> str:
        if email in self.listed:
            return self.listed[email]
        if self.erased and erasure_hash(self.key, "email", email) in self.erased:
            return "erased"
        raise KeyError(email)

    def __iter__(self) -> Iterator[str]:
        return iter(self.listed)

    def __len__(self) -> int:
        return len(self.listed) + len(self.erased)

    def __contains__(self, email: object) -> bool:
        return isinstance(email, str) and self.get(email) is not None

    def was_erased(self, email: str) -> bool:
        """Whether ``email`` (lower-cased) belongs to a person erased, listed or not."""
        return bool(self.erased) and erasure_hash(self.key, "email", email) in self.erased


_REQUEST_COLUMNS = ("status", "delivery_status", "recipient_email", "recipient_name", "external_id", "url",
                    "created_at", "opened_at", "started_at", "last_activity_at", "completed_at", "expired_at",
                    "canceled_at", "reminders_sent", "is_test", "last_reminded_at", "cancel_reason")


class CampaignReads:
    """The campaign repository (``store.campaign``)."""

    def __init__(self, db: Database, clock: Callable[[], int], key: Callable[[], bytes]) -> None:
        self._db, self._clock, self._key = db, clock, key

    def job(self, name: str) -> OutreachJob | None:
        """The outreach job named ``name``, or None."""
        with self._db.reader() as s:
            return s.get(OutreachJob, name)

    def jobs(self) -> list[str]:
        """Every outreach job's name, sorted."""
        with self._db.reader() as s:
            return sorted(s.exec(select(OutreachJob.name)))

    def form_name(self, form_id: str) -> str | None:
        """The form's name as its newest stored submission carries it, or None."""
        stmt = (select(SubmissionRow.form_name).where(SubmissionRow.form_id == form_id,
                                                      col(SubmissionRow.form_name).is_not(None))
                .order_by(col(SubmissionRow.stored_at).desc()).limit(1))
        with self._db.reader() as s:
            return s.exec(stmt).first()

    def rows(self, job: str) -> list[CampaignRow]:
        """The job's ledger rows in sheet order, each with its stored request."""
        req = [getattr(RequestRow, c) for c in _REQUEST_COLUMNS]
        stmt = (select(OutreachRow.row_key, OutreachRow.row_number, OutreachRow.state, OutreachRow.request_id,
                       *req)
                .outerjoin(RequestRow, col(OutreachRow.request_id) == col(RequestRow.id))
                .where(OutreachRow.job_name == job).order_by(col(OutreachRow.row_number), col(OutreachRow.row_key)))
        with self._db.reader() as s:
            out = []
            for r in s.exec(stmt):
                values: dict[str, Any] = dict(zip(_REQUEST_COLUMNS, r[4:], strict=True))
                values["is_test"] = bool(values["is_test"])
                out.append(CampaignRow(r[0], int(r[1]), r[2], r[3], **values))
            return out

    def answers(self, request_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Request id -> its stored answers (only requests that have some)."""
        out: dict[str, dict[str, Any]] = {}
        ids = list(request_ids)
        with self._db.reader() as s:
            for some in in_lists(ids):
                stmt = request_answers().where(REQUESTS.c.id.in_(some))
                for rid, answers, _display in s.connection().execute(stmt):
                    if answers:
                        out[rid] = dict(answers)
        return out

    def reminded(self, times: Mapping[str, int]) -> None:
        """Remember when each request (id -> the service's time, epoch ms) was last
        reminded by hand; a later time only (an older one is left)."""
        with self._db.session() as s:
            for rid, at in sorted(times.items()):
                s.execute(update(RequestRow).where(col(RequestRow.id) == rid).where(
                    or_(col(RequestRow.last_reminded_at).is_(None), col(RequestRow.last_reminded_at) < at))
                    .values(last_reminded_at=at))

    # -- suppression --------------------------------------------------------------------

    def suppressed(self) -> Suppressed:
        """Lower-cased address -> why outreach must skip it: listed (``listed: reason``),
        ``bounced`` / ``complained`` on any stored request, or ``erased`` (``formsync
        erase``; the store's key is read only when an address was erased)."""
        out: dict[str, str] = {}
        with self._db.reader() as s:
            for email, status in s.exec(
                    select(func.lower(RequestRow.recipient_email), RequestRow.delivery_status)
                    .where(col(RequestRow.delivery_status).in_(UNDELIVERABLE),
                           col(RequestRow.recipient_email).is_not(None)).distinct()):
                out[email] = str(status)
            for row in s.exec(select(Suppression)):
                out[row.email] = f"listed: {row.reason}" if row.reason else "listed"
            erased = frozenset(s.exec(select(Erasure.hash).where(Erasure.kind == "email")))
        return Suppressed(out, erased, self._key() if erased else b"")

    def suppressions(self) -> list[Suppression]:
        """The suppression list (``formsync campaign suppress``), by address."""
        with self._db.reader() as s:
            return list(s.exec(select(Suppression).order_by(col(Suppression.email))))

    def unsuppress(self, emails: Iterable[str]) -> list[str]:
        """Take addresses off the suppression list; returns those that were on it (lower-cased)."""
        removed = []
        with self._db.session() as s:
            for email in sorted({e.strip().lower() for e in emails if e.strip()}):
                row = s.get(Suppression, email)
                if row is not None:
                    s.delete(row)
                    removed.append(email)
        return removed

    def suppress(self, emails: Iterable[str], reason: str | None = None) -> int:
        """Add addresses to the suppression list (lower-cased); returns how many were new."""
        now, added = self._clock(), 0
        with self._db.session() as s:
            for email in sorted({e.strip().lower() for e in emails if e.strip()}):
                if s.get(Suppression, email) is None:
                    s.add(Suppression(email=email, reason=reason, created_at=now))
                    added += 1
        return added
