"""Reads of the stored requests (``formsync_requests``): what poll refreshes, what status
counts, what the demo checks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, case, func, or_
from sqlalchemy import select as core_select
from sqlmodel import col, select

from ._database import Database, in_lists
from ._exports import json_value
from ._tables import REQUESTS, SUBMISSIONS, RequestRow, request_answers

_SLICE = 500  # rows read at once by a streamed read


@dataclass(frozen=True)
class PendingRequest:
    """A request the store holds as ``pending``: its id, form and times (epoch ms)."""

    id: str
    form_id: str | None
    created_at: int | None
    expires_at: int | None


class RequestReads:
    """The stored requests repository (``store.requests``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def pending(self, form_id: str | None = None) -> list[PendingRequest]:
        """The requests stored as ``pending`` (of one form when ``form_id``)."""
        stmt = select(RequestRow).where(RequestRow.status == "pending")
        if form_id is not None:
            stmt = stmt.where(RequestRow.form_id == form_id)
        with self._db.reader() as s:
            return [PendingRequest(r.id, r.form_id, r.created_at, r.expires_at) for r in s.exec(stmt)]

    def pending_to(self, emails: Iterable[str], *, form_id: str | None = None) -> list[tuple[str, str]]:
        """``(request id, lower-cased address)`` of each request stored as ``pending`` (of
        ``form_id`` when given) whose recipient is one of ``emails`` (compared lower-cased)."""
        wanted = sorted({e.strip().lower() for e in emails if e.strip()})
        out: list[tuple[str, str]] = []
        with self._db.reader() as s:
            for some in in_lists(wanted):
                address = func.lower(RequestRow.recipient_email)
                stmt = (select(RequestRow.id, address).where(RequestRow.status == "pending")
                        .where(address.in_(some)).order_by(col(RequestRow.id)))
                if form_id is not None:
                    stmt = stmt.where(RequestRow.form_id == form_id)
                out.extend((rid, str(email)) for rid, email in s.exec(stmt))
        return out

    def pending_count(self) -> int:
        """How many requests are stored as ``pending``."""
        with self._db.reader() as s:
            return int(s.exec(select(func.count()).select_from(RequestRow)
                              .where(col(RequestRow.status) == "pending")).one())

    def status_counts(self, ids: Iterable[str]) -> dict[str, int]:
        """How many of the requests ``ids`` are stored with each status."""
        with self._db.reader() as s:
            rows = s.exec(select(RequestRow.status, func.count()).where(col(RequestRow.id).in_(list(ids)))
                          .group_by(col(RequestRow.status))).all()
        return {status: int(n) for status, n in rows}

    def status_by_form(self) -> dict[str, dict[str, int]]:
        """Form id ('?' when unknown) -> status -> how many requests are stored."""
        out: dict[str, dict[str, int]] = {}
        with self._db.reader() as s:
            for form_id, status, n in s.exec(select(RequestRow.form_id, RequestRow.status, func.count())
                                             .group_by(col(RequestRow.form_id), col(RequestRow.status))):
                out.setdefault(form_id or "?", {})[status] = int(n)
        return out

    def each_form_status(self, statuses: Sequence[str]) -> Iterator[tuple[str, dict[str, int]]]:
        """Each form id ('?' when unknown) with how many of its requests are stored with
        each of ``statuses`` (a form whose requests have other statuses only comes with
        zeros), one form at a time: the database counts, and its rows are read in slices,
        so the memory held does not grow with the number of forms."""
        r = REQUESTS.c
        counts = [func.count(case((r.status == s, 1))) for s in statuses]
        # Grouped by the column itself (not '?' for null): the index on (form_id, arrival) serves it.
        stmt = core_select(r.form_id, *counts).group_by(r.form_id)
        with self._db.reader() as s:
            for part in s.connection().execution_options(yield_per=_SLICE).execute(stmt).partitions():
                for form_id, *ns in part:
                    yield form_id or "?", {status: int(n) for status, n in zip(statuses, ns, strict=True)}

    def answers(self, ids: Iterable[str]) -> dict[str, tuple[Any, Any]]:
        """The answers and display of the requests ``ids`` (id -> ``(answers, display)``,
        None where unknown): stored once, on the request's submission row."""
        stmt = request_answers().where(REQUESTS.c.id.in_(list(ids)))
        with self._db.reader() as s:
            return {rid: (json_value(a), json_value(d)) for rid, a, d in s.connection().execute(stmt)}

    def data_purged(self, form_id: str, now: int, also: Sequence[str] = ()) -> list[tuple[str, str | None]]:
        """``(request id, submission id)`` of the form's requests whose answers the service
        purged (``dataPurgedAt``) by ``now`` (its clock, epoch ms), or that it says so of
        now (``also``), and that still hold answers here: on their own row, or on their
        submission's (None when none is stored)."""
        r = REQUESTS.c
        stored, held = _answers_held()
        purged = and_(r.data_purged_at.is_not(None), r.data_purged_at <= now)
        stmt = (core_select(r.id, r.submission_id, stored).where(
            r.form_id == form_id, or_(purged, r.id.in_(list(also))) if also else purged, held).order_by(r.id))
        with self._db.reader() as sess:
            return [(rid, sid if has else None) for rid, sid, has in sess.connection().execute(stmt)]

    def holds_answers(self, form_id: str) -> bool:
        """Whether the store holds answers of a completed request of ``form_id`` that the
        service has not been seen to purge (what ``formsync purge`` asks the service about)."""
        r = REQUESTS.c
        stmt = core_select(core_select(r.id).where(r.form_id == form_id, r.status == "completed",
                                                   r.data_purged_at.is_(None), _answers_held()[1]).exists())
        with self._db.reader() as sess:
            return bool(sess.connection().execute(stmt).scalar())

    def purged_forms(self, now: int) -> list[str]:
        """The forms with requests whose answers the service purged by ``now``."""
        r = REQUESTS.c
        stmt = (core_select(r.form_id).where(r.form_id.is_not(None), r.data_purged_at.is_not(None),
                                        r.data_purged_at <= now).distinct().order_by(r.form_id))
        with self._db.reader() as sess:
            return [str(f) for f in sess.connection().execute(stmt).scalars()]


def _answers_held() -> tuple[Any, Any]:
    """Of a request row: whether its submission is stored, and whether the store holds its
    answers (on the request's row, or on that submission's)."""
    r, s = REQUESTS.c, SUBMISSIONS.c
    stored = core_select(s.id).where(s.id == r.submission_id).exists()
    return stored, or_(r.answers.is_not(None), stored)
