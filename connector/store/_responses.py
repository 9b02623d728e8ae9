"""One response, one submission row, whichever route brought it: a completion event
(the receiver), a completed request record (``formsync poll``) or a ``submissions.list``
item (``formsync sync``).

The rule, in the order it is applied inside the write's transaction:

1. A completed request record that carries its answers becomes a submission row whose
   id is the submission id the record names (``submissionId``), or the one a stored
   version of the request already names. Its answers are then stored once, on that row
   (the request row links to it), as a completion event stores them.
2. A record that names no submission (the spec's smallest record has no
   ``submissionId``) first looks for a stored submission of the same form that no
   request claims and that holds the same answers (one response is claimed once: the
   oldest such row). Found, the request links to it. Otherwise the row gets the
   provisional id ``provisional:<request id>``.
3. When a submission row with the service's own id arrives later (an event, a
   ``submissions.list`` item), it replaces the provisional row: the one of its request
   (the item names it), or else one of the same form holding the same answers. The
   provisional row is deleted, and the request and the submission link to each other.

So the same completion never makes two rows; the provisional id shows only while no
route has told which submission the request made."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import and_, delete, select, update

from ._exports import json_value
from ._merge import SUBMISSION_MERGE
from ._tables import REQUESTS, SUBMISSIONS
from ._writer import Writer

PROVISIONAL = "provisional:"
# Every provisional id sorts in [PROVISIONAL, _AFTER): a range read of the primary key.
_AFTER = PROVISIONAL[:-1] + chr(ord(PROVISIONAL[-1]) + 1)


def provisional_id(request_id: str) -> str:
    """The submission id a completed request's answers are stored under until the
    service names the submission."""
    return PROVISIONAL + request_id


def is_provisional(submission_id: str) -> bool:
    """Whether ``submission_id`` is a provisional id (see ``provisional_id``)."""
    return submission_id.startswith(PROVISIONAL)


def completion_row(request: Mapping[str, Any], submission_id: str, form_id: str) -> dict[str, Any]:
    """The submission row of a completed request row (``request_rows`` shape) that
    carries its answers (pure). Only what the record tells of the submission is set:
    its answers and display, its request, ``completedAt`` as the submitted time and the
    request's language."""
    row: dict[str, Any] = {
        "id": submission_id, "form_id": form_id, "request_id": request["id"], "is_completed": True,
        "answers": request["answers"], "display": request.get("display") or {}, "source": request["source"],
        "last_event_id": None, "observed_at": request["stored_at"], "stored_at": request["stored_at"],
    }
    if request.get("completed_at") is not None:
        row["submitted_at"] = request["completed_at"]
    if request.get("language") is not None:  # the language the request opened the form in
        row["language"] = request["language"]
    return row


def completions(w: Writer, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The submission rows of the completed request rows that carry answers (rules 1 and
    2), read against the stored rows in ``w``'s transaction. Each such request row is
    changed to link its submission and to carry no answers of its own; a request whose
    form is unknown keeps its answers on its own row (no submission row without a form)."""
    done = [r for r in requests if r.get("status") == "completed" and r.get("answers") is not None]
    if not done:
        return []
    q = REQUESTS.c
    stored = {rid: {"form_id": form, "submission_id": sid} for rid, form, sid in w.conn.execute(
        select(q.id, q.form_id, q.submission_id).where(q.id.in_([r["id"] for r in done])))}
    claimed: set[str] = set()
    out = []
    for r in done:
        old = stored.get(r["id"], {})
        form_id = r.get("form_id") or old.get("form_id")
        if not form_id:
            continue
        sid = r.get("submission_id") or old.get("submission_id")
        if sid is None:
            sid = _unclaimed(w, form_id, r["answers"], claimed) or provisional_id(r["id"])
        claimed.add(sid)
        out.append(completion_row(r, sid, form_id))
        r["submission_id"] = sid
        r.pop("answers")
        r.pop("display", None)
    return out


def _unclaimed(w: Writer, form_id: str, answers: Any, claimed: set[str]) -> str | None:
    """The oldest stored submission of the form that no request claims and that holds
    ``answers`` (rule 2), or None."""
    s = SUBMISSIONS.c
    stmt = (select(s.id, s.answers).where(and_(s.form_id == form_id, s.request_id.is_(None)))
            .order_by(s.submitted_at, s.id))
    for sid, stored in w.conn.execute(stmt):
        if sid not in claimed and not is_provisional(sid) and json_value(stored) == answers:
            return str(sid)
    return None


def replace_provisional(w: Writer, rows: Sequence[Mapping[str, Any]]) -> None:
    """Rule 3 for submission rows just written with the service's own ids: each replaces
    the provisional row of its request, or one of its form holding the same answers."""
    real = [r for r in rows if not is_provisional(r["id"])]
    linked = {provisional_id(r["request_id"]): r for r in real if r.get("request_id")}
    loose = [r for r in real if not r.get("request_id")]
    found: dict[str, tuple[str, Mapping[str, Any]]] = {}  # provisional id -> (request id, real row)
    if linked:
        # The merge's own read of stored rows (a statement built once, on the writer's
        # cursor): this runs for every batch of completion events the receiver commits.
        for pid in w.ranks(SUBMISSIONS.name, SUBMISSION_MERGE.rank_cols, list(linked)):
            found[pid] = (pid.removeprefix(PROVISIONAL), linked[pid])
    if loose:
        found.update(_matches(w, loose))
    if not found:
        return
    w.conn.execute(delete(SUBMISSIONS).where(SUBMISSIONS.c.id.in_(list(found))))
    for rid, row in found.values():
        w.conn.execute(update(REQUESTS).where(REQUESTS.c.id == rid).values(submission_id=row["id"]))
        w.conn.execute(update(SUBMISSIONS).where(and_(SUBMISSIONS.c.id == row["id"],
                                                      SUBMISSIONS.c.request_id.is_(None)))
                       .values(request_id=rid))


def _matches(w: Writer, loose: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """Provisional rows of the loose rows' forms holding the same answers, each claimed
    once, oldest first: provisional id -> (its request id, the real row)."""
    s = SUBMISSIONS.c
    forms = sorted({r["form_id"] for r in loose})
    stmt = (select(s.id, s.form_id, s.request_id, s.answers)
            .where(and_(s.id >= PROVISIONAL, s.id < _AFTER, s.form_id.in_(forms))).order_by(s.stored_at, s.id))
    candidates = [(pid, form, rid, json_value(answers)) for pid, form, rid, answers in w.conn.execute(stmt)]
    out: dict[str, tuple[str, Mapping[str, Any]]] = {}
    if not candidates:  # the usual case: nothing provisional, nothing more to read
        return out
    # A row a request claimed before (this version of it does not say so) claims no other.
    linked = {sid for sid, rid in w.conn.execute(select(s.id, s.request_id).where(
        s.id.in_([r["id"] for r in loose]))) if rid is not None}
    for row in (r for r in loose if r["id"] not in linked):
        for pid, form, rid, answers in candidates:
            if pid not in out and form == row["form_id"] and answers == row.get("answers"):
                out[pid] = (rid, row)
                break
    return out
