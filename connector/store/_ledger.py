"""The outreach ledger (``store.ledger``): each outreach job and the state of each of its
sheet rows, so a run killed at any point resumes without sending a row twice.

A row's states: ``pending`` (recorded by a run about to send it, no create issued yet),
``sending`` (a create is being issued with the row's idempotency key: it may have
reached the service), ``sent`` (the request id is recorded), ``failed`` (the service
refused the create: nothing was sent), ``changed`` (the sheet's row no longer matches what was sent; never sent again),
``suppressed`` (the contact rule refused it, ``error`` says why; nothing was sent, and
the next run asks the rule again).
A re-run sends again only rows without a request: ``pending`` and ``sending`` ones with
the same key (the service deduplicates a create that did arrive), and ``failed`` ones as
the sheet now has them. The schema's constraint also admits ``invalid``, which nothing
writes: rejected rows live in the run's report, not in the ledger."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, NamedTuple, Protocol

from sqlmodel import Session, col, select

from ._tables import OutreachJob, OutreachRow

RowState = Literal["pending", "sending", "sent", "failed", "changed", "suppressed"]
ROW_STATES: tuple[RowState, ...] = ("pending", "sending", "sent", "failed", "changed", "suppressed")
# States of a row without a request that the next run sends as the sheet then has it.
_RESENT = ("failed", "suppressed")
# What ``record_pending`` decided for a row: send it now, it was sent already, or it
# changed since it was recorded (now marked ``changed``, not sent).
Claim = Literal["send", "sent", "changed"]
CHANGED_ERROR = "content changed since it was recorded; not sent again"


def claim_of(rec: OutreachRow | None, content_hash: str) -> Claim:
    """The decision for a row about to be sent, given its record: a new row, or one the
    service refused (as the sheet now has it), is sent; one whose content differs from
    the record is ``changed``; one with a request is ``sent``; one recorded but never
    confirmed is sent again with its key."""
    if rec is None or (rec.state in _RESENT and rec.request_id is None):
        return "send"
    if rec.content_hash != content_hash:
        return "changed"
    return "sent" if rec.request_id is not None else "send"


class PendingRow(NamedTuple):
    """A row a run is about to send: its key in the job, sheet row number, content hash
    and idempotency key."""

    row_key: str
    row_number: int
    content_hash: str
    idempotency_key: str


class Sessions(Protocol):
    """Where the ledger's transactions come from (the store)."""

    def session(self) -> AbstractContextManager[Session]: ...

    def reader(self) -> AbstractContextManager[Session]: ...


class OutreachLedger:
    """Named operations on the outreach tables, each one short transaction; ``clock``
    gives the time recorded on each change (epoch ms)."""

    def __init__(self, db: Sessions, clock: Callable[[], int]) -> None:
        self._db, self._clock = db, clock

    # -- jobs -----------------------------------------------------------------------

    def open_job(self, job: str, form_id: str, source_path: str, settings: Mapping[str, Any]) -> None:
        """Record the job unless it is recorded already (a re-run keeps the first record)."""
        now = self._clock()
        with self._db.session() as s:
            if s.get(OutreachJob, job) is None:
                s.add(OutreachJob(name=job, form_id=form_id, source_path=source_path, created_at=now,
                                  updated_at=now, settings=dict(settings)))

    def documents(self, job: str) -> dict[str, str]:
        """The job's uploaded documents: file SHA-256 -> document id."""
        with self._db.reader() as s:
            rec = s.get(OutreachJob, job)
            return dict(((rec.settings if rec else None) or {}).get("documents", {}))

    def record_documents(self, job: str, ids: Mapping[str, str]) -> None:
        """Remember the job's uploaded documents (file SHA-256 -> document id)."""
        with self._db.session() as s:
            rec = s.get(OutreachJob, job)
            if rec is not None:
                rec.settings = {**(rec.settings or {}), "documents": dict(ids)}
                rec.updated_at = self._clock()
                s.add(rec)

    def record_outcome(self, job: str, outcome: Mapping[str, Any]) -> None:
        """Remember how the job's last run ended (its counts, report file, when), for
        ``formsync status``."""
        with self._db.session() as s:
            rec = s.get(OutreachJob, job)
            if rec is not None:
                rec.settings = {**(rec.settings or {}), "outcome": {**outcome, "at": self._clock()}}
                rec.updated_at = self._clock()
                s.add(rec)

    def record_round(self, job: str, kind: str, counts: Mapping[str, int | str], *, at: int | None = None) -> int:
        """Remember a reminder or close round of the job (``kind``: ``remind`` or
        ``close``) with its counts (and a close's ``reason``), at ``at`` (the service's
        time; default now); returns its time (epoch ms)."""
        now = self._clock() if at is None else at
        with self._db.session() as s:
            rec = s.get(OutreachJob, job)
            if rec is not None:
                settings = rec.settings or {}
                rounds = [*settings.get("rounds", []), {"kind": kind, "at": now, **counts}]
                rec.settings, rec.updated_at = {**settings, "rounds": rounds}, self._clock()
                s.add(rec)
        return now

    def rounds(self, job: str) -> list[dict[str, Any]]:
        """The job's reminder and close rounds, oldest first (see ``record_round``)."""
        with self._db.reader() as s:
            rec = s.get(OutreachJob, job)
            return list(((rec.settings if rec else None) or {}).get("rounds", []))

    # -- rows -----------------------------------------------------------------------

    def rows_to_send(self, job: str, rows: Mapping[str, str]) -> set[str]:
        """Of ``rows`` (row key -> content hash), those not already sent with this same
        content, read in one query (a row never goes back from sent, so a run can trust
        this snapshot)."""
        with self._db.reader() as s:
            sent = {r.row_key: r.content_hash for r in s.exec(select(OutreachRow).where(
                OutreachRow.job_name == job, col(OutreachRow.request_id).is_not(None)))}
        return {key for key, chash in rows.items() if sent.get(key) != chash}

    def record_pending(self, job: str, rows: Sequence[PendingRow]) -> dict[str, Claim]:
        """Record the rows a run is about to send, in one transaction, before any of their
        creates. A new row, or one the service refused last time (as the sheet now has
        it), becomes ``pending``; a row recorded but never confirmed keeps its state and
        key. Their claim is ``send``; a row with a request already is ``sent``; a row whose
        content differs from the recorded one is ``changed`` (so marked, with its number)."""
        if not rows:
            return {}
        now = self._clock()
        with self._db.session() as s:
            known = {r.row_key: r for r in s.exec(select(OutreachRow).where(OutreachRow.job_name == job))}
            return {row.row_key: self._claim(s, job, known.get(row.row_key), row, now) for row in rows}

    def claims(self, job: str, rows: Mapping[str, str]) -> dict[str, Claim]:
        """What ``record_pending`` would decide for each of ``rows`` (row key -> content
        hash), read in one query and written nowhere: for counting a run before it sends."""
        with self._db.reader() as s:
            known = {r.row_key: r for r in s.exec(select(OutreachRow).where(OutreachRow.job_name == job))}
        return {key: claim_of(known.get(key), chash) for key, chash in rows.items()}

    @staticmethod
    def _claim(s: Session, job: str, rec: OutreachRow | None, row: PendingRow, now: int) -> Claim:
        claim = claim_of(rec, row.content_hash)
        if rec is None:
            s.add(OutreachRow(job_name=job, row_key=row.row_key, row_number=row.row_number,
                              content_hash=row.content_hash, idempotency_key=row.idempotency_key, state="pending",
                              updated_at=now))
        elif claim == "changed":
            rec.state, rec.row_number, rec.updated_at, rec.error = "changed", row.row_number, now, CHANGED_ERROR
            s.add(rec)
        elif claim == "send":
            if rec.state in _RESENT:
                rec.state, rec.content_hash, rec.row_number, rec.error = "pending", row.content_hash, row.row_number, None
                rec.updated_at = now
            s.add(rec)
        return claim

    def record_suppressed(self, job: str, rows: Sequence[tuple[PendingRow, str]]) -> None:
        """Record the rows the contact rule refused (each with why) as ``suppressed``, in
        one transaction: a new row is added, a row without a request that no create may
        have reached (``pending``, ``failed``, ``suppressed``) is updated, any other left."""
        if not rows:
            return
        now = self._clock()
        with self._db.session() as s:
            known = {r.row_key: r for r in s.exec(select(OutreachRow).where(OutreachRow.job_name == job))}
            for row, why in rows:
                rec = known.get(row.row_key)
                if rec is None:
                    rec = OutreachRow(job_name=job, row_key=row.row_key, row_number=row.row_number,
                                      content_hash=row.content_hash, idempotency_key=row.idempotency_key,
                                      state="suppressed", error=why, updated_at=now)
                elif rec.request_id is None and rec.state in ("pending", *_RESENT):
                    rec.state, rec.row_number, rec.content_hash, rec.error = ("suppressed", row.row_number,
                                                                              row.content_hash, why)
                    rec.updated_at = now
                else:
                    continue
                s.add(rec)

    def mark_sending(self, job: str, row_key: str) -> None:
        """The row's create is about to be issued: ``sending``, one more attempt."""
        self._update(job, row_key, "sending", attempt=True)

    def mark_sent(self, job: str, row_key: str, request_id: str) -> None:
        """The row's request exists: ``sent`` with its id (final)."""
        self._update(job, row_key, "sent", request_id=request_id, error=None)

    def mark_failed(self, job: str, row_key: str, error: str) -> None:
        """The service refused the row's create, or it could not be made: ``failed``,
        nothing sent; the next run sends the row as the sheet then has it."""
        self._update(job, row_key, "failed", error=error)

    def _row(self, s: Session, job: str, row_key: str) -> OutreachRow | None:
        return s.exec(select(OutreachRow).where(OutreachRow.job_name == job, OutreachRow.row_key == row_key)).first()

    def _update(self, job: str, row_key: str, state: RowState, *, attempt: bool = False, **values: Any) -> None:
        with self._db.session() as s:
            rec = self._row(s, job, row_key)
            if rec is None:
                raise LookupError(f"outreach job {job!r} has no row {row_key!r}")
            rec.state, rec.updated_at = state, self._clock()
            rec.attempts += attempt
            for name, value in values.items():
                setattr(rec, name, value)
            s.add(rec)
