"""One person's data erased (``store.erase``) and kept out afterwards (``barred``).

An erase finds a person by address (the recipient's and the respondent's email, answers
equal to it, event and dead-letter bodies naming it) or by external id, removes every row
that holds them in one transaction, writes each removal to the deletion log, and keeps
tombstones: keyed hashes (HMAC-SHA256 with the store's key) of the address, the external id
and the erased submission, request and event ids. Every ingest path asks ``barred`` which of
its rows a tombstone names and drops them, so a sync, poll, retry or replay never brings the
person back; an erased event id stays a duplicate."""

from __future__ import annotations

import hashlib
import hmac
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table, delete, func, or_, select, update
from sqlalchemy.engine import Connection

from ..config.keyfile import key_id
from ._database import in_lists
from ._tables import (
    ARCHIVED,
    DEAD_LETTERS,
    DELETIONS,
    ERASURES,
    EVENTS,
    REQUESTS,
    SUBMISSIONS,
    JobRun,
    OutreachRow,
    Suppression,
)

ERASED = "[erased]"  # what an address becomes in a job run's text
_BATCH = 500
_EMAIL = re.compile(r"[A-Za-z0-9._%+'-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
JOB_RUNS: Table = JobRun.__table__  # type: ignore[attr-defined]
OUTREACH_ROWS: Table = OutreachRow.__table__  # type: ignore[attr-defined]
SUPPRESSIONS: Table = Suppression.__table__  # type: ignore[attr-defined]


def erasure_hash(key: bytes, kind: str, value: str) -> str:
    """The tombstone of ``value`` (an address is compared trimmed and lower-cased): the
    hex HMAC-SHA256, with the store's key, of ``kind:value``."""
    norm = value.strip().lower() if kind == "email" else value
    return hmac.new(key, f"{kind}:{norm}".encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Person:
    """Who an erase looks for: an address, an external id, or both."""

    email: str | None = None
    external_id: str | None = None

    @property
    def address(self) -> str | None:
        """The address, trimmed and lower-cased."""
        return self.email.strip().lower() if self.email else None

    def named_in(self, text: str) -> bool:
        """Whether ``text`` (a body, a job run's text) names the person."""
        if self.address and self.address in text.lower():
            return True
        return bool(self.external_id) and f'"{self.external_id}"' in text


@dataclass
class Found:
    """What an erase removes, table by table."""

    requests: dict[str, str | None] = field(default_factory=dict)  # id -> form id
    submissions: dict[str, str] = field(default_factory=dict)  # id -> form id
    events: list[str] = field(default_factory=list)
    dead_letters: list[str] = field(default_factory=list)
    outreach_rows: list[int] = field(default_factory=list)
    suppressions: list[str] = field(default_factory=list)
    job_runs: list[int] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)  # requests kept, their answers removed (purge)
    archived: int = 0  # archived-file rows of the erased submissions
    locations: list[str] = field(default_factory=list)  # files no remaining answer uses

    def counts(self) -> dict[str, int]:
        """Rows found per table or location (the receipt's figures)."""
        return {"formsync_requests": len(self.requests), "formsync_submissions": len(self.submissions),
                "formsync_events": len(self.events), "formsync_dead_letters": len(self.dead_letters),
                "formsync_outreach_rows": len(self.outreach_rows), "formsync_suppressions": len(self.suppressions),
                "formsync_job_runs": len(self.job_runs), "request answers cleared": len(self.cleared), "formsync_archived_files": self.archived,
                "archived file bytes": len(self.locations)}


def find(conn: Connection, person: Person) -> Found:
    """Every row that holds ``person``, read in ``conn``'s transaction."""
    found = Found()
    _find_requests_and_submissions(conn, person, found)
    ids = set(found.requests) | set(found.submissions)
    found.events = [eid for eid, body in _bodies(conn, EVENTS) if person.named_in(body) or _names_any(body, ids)]
    found.dead_letters = [key for key, body in _bodies(conn, DEAD_LETTERS)
                          if person.named_in(body) or _names_any(body, ids)]
    o = OUTREACH_ROWS.c
    keys = [k for k in (person.address, person.external_id) if k]
    found.outreach_rows = list(conn.execute(select(o.id).where(or_(
        o.request_id.in_(list(found.requests)), func.lower(o.row_key).in_([k.lower() for k in keys]))).order_by(o.id))
        .scalars())
    if person.address:
        found.suppressions = list(conn.execute(select(SUPPRESSIONS.c.email).where(
            SUPPRESSIONS.c.email == person.address)).scalars())
    j = JOB_RUNS.c
    found.job_runs = [rid for rid, error, summary in conn.execute(select(j.id, j.error, j.summary).order_by(j.id))
                      if person.named_in(f"{error or ''}\n{summary or ''}")]
    _find_files(conn, found)
    return found


def _find_requests_and_submissions(conn: Connection, person: Person, found: Found) -> None:
    r, s = REQUESTS.c, SUBMISSIONS.c
    who = []
    if person.address:
        who.append(func.lower(r.recipient_email) == person.address)
    if person.external_id:
        who.append(r.external_id == person.external_id)
    linked: set[str] = set()
    for rid, form_id, sub_id in conn.execute(select(r.id, r.form_id, r.submission_id).where(or_(*who)))\
            if who else []:
        found.requests[rid] = form_id
        if sub_id:
            linked.add(sub_id)
    for sid, form_id, request_id, email, answers in _submissions(conn):
        if (sid in linked or request_id in found.requests
                or (person.address and (email or "").strip().lower() == person.address)
                or (person.address and _answers_address(answers, person.address))):
            found.submissions[sid] = form_id
    via = {rid for rid, in conn.execute(select(s.request_id).where(
        s.id.in_(list(found.submissions)), s.request_id.is_not(None)))}
    for rid, form_id in conn.execute(select(r.id, r.form_id).where(r.id.in_(list(via - set(found.requests))))):
        found.requests[rid] = form_id


def _submissions(conn: Connection) -> Iterator[tuple[str, str, str | None, str | None, Any]]:
    s, last = SUBMISSIONS.c, ""
    while True:
        rows = list(conn.execute(select(s.id, s.form_id, s.request_id, s.respondent_email, s.answers)
                                 .where(s.id > last).order_by(s.id).limit(_BATCH)))
        yield from ((r[0], r[1], r[2], r[3], r[4]) for r in rows)
        if len(rows) < _BATCH:
            return
        last = rows[-1][0]


def _answers_address(answers: Any, address: str) -> bool:
    """Whether an answer (at any depth: a group's members too) equals the address."""
    if isinstance(answers, str):
        return answers.strip().lower() == address
    if isinstance(answers, Mapping):
        return any(_answers_address(v, address) for v in answers.values())
    if isinstance(answers, list):
        return any(_answers_address(v, address) for v in answers)
    return False


def _bodies(conn: Connection, table: Table) -> Iterator[tuple[str, str]]:
    """Each row's id and its body as text, read in batches."""
    c, last = table.c, ""
    while True:
        rows = list(conn.execute(select(c.id, c.body_zlib).where(c.id > last).order_by(c.id).limit(_BATCH)))
        for key, body in rows:
            yield key, zlib.decompress(body).decode("utf-8", "surrogateescape")
        if len(rows) < _BATCH:
            return
        last = rows[-1][0]


def _names_any(body: str, ids: Iterable[str]) -> bool:
    return any(f'"{i}"' in body for i in ids)


def _find_files(conn: Connection, found: Found) -> None:
    a = ARCHIVED.c
    subs = list(found.submissions)
    rows = list(conn.execute(select(a.sha256, a.location).where(a.submission_id.in_(subs))))
    found.archived = len(rows)
    shared = set(conn.execute(select(a.sha256).where(a.sha256.in_({sha for sha, _ in rows}),
                                                     a.submission_id.not_in(subs))).scalars())
    found.locations = sorted({loc for sha, loc in rows if sha not in shared})


def remove(conn: Connection, found: Found, person: Person, key: bytes, now: int, place: Callable[[], int]) -> None:
    """Remove what ``find`` found, log each removal (reason ``erase``), redact the job
    runs' texts, and keep the tombstones, in ``conn``'s transaction (the removals last:
    the log's place is the transaction's last lock, see ``log_deletions``)."""
    conn.execute(delete(OUTREACH_ROWS).where(OUTREACH_ROWS.c.id.in_(found.outreach_rows)))
    conn.execute(delete(SUPPRESSIONS).where(SUPPRESSIONS.c.email.in_(found.suppressions)))
    _redact_runs(conn, found.job_runs, person)
    marks = [("submission", sid) for sid in found.submissions] + [("request", rid) for rid in found.requests]
    marks += [("event", eid) for eid in found.events]
    marks += [(k, v) for k, v in (("email", person.address), ("external_id", person.external_id)) if v]
    hashes = {erasure_hash(key, kind, value): kind for kind, value in marks}
    kept = set(conn.execute(select(ERASURES.c.hash).where(ERASURES.c.hash.in_(list(hashes)))).scalars())
    made_with = key_id(key)
    new = [{"hash": h, "kind": kind, "erased_at": now, "key_id": made_with} for h, kind in hashes.items()
           if h not in kept]
    if new:
        conn.execute(ERASURES.insert(), new)
    remove_rows(conn, found, "erase", now, place)


def remove_rows(conn: Connection, found: Found, reason: str, now: int, place: Callable[[], int]) -> None:
    """Remove ``found``'s submissions (with their archived-file rows), requests, events and
    dead letters, clear the answers of its ``cleared`` requests, and log each removal with
    ``reason`` (``log_deletions``, last), in ``conn``'s transaction: the one way rows
    leave the store."""
    subs, reqs = list(found.submissions), list(found.requests)
    conn.execute(delete(ARCHIVED).where(ARCHIVED.c.submission_id.in_(subs)))
    conn.execute(delete(SUBMISSIONS).where(SUBMISSIONS.c.id.in_(subs)))
    conn.execute(delete(REQUESTS).where(REQUESTS.c.id.in_(reqs)))
    conn.execute(update(REQUESTS).where(REQUESTS.c.id.in_(found.cleared)).values(answers=None, display=None))
    conn.execute(delete(EVENTS).where(EVENTS.c.id.in_(found.events)))
    conn.execute(delete(DEAD_LETTERS).where(DEAD_LETTERS.c.id.in_(found.dead_letters)))
    log_deletions(conn, reason, now, [("submission", sid, form) for sid, form in found.submissions.items()]
                  + [("request", rid, form) for rid, form in found.requests.items()]
                  + [("event", eid, None) for eid in found.events], place)


def find_submissions(conn: Connection, submissions: Mapping[str, str]) -> Found:
    """What removing ``submissions`` (id -> form id) takes with it: their events, archived
    files (the bytes only when no other answer uses them) and their requests' answers."""
    found = Found(submissions=dict(submissions))
    ids = set(submissions)
    found.events = [eid for eid, body in _bodies(conn, EVENTS) if _names_any(body, ids)] if ids else []
    found.cleared = sorted(set(conn.execute(select(REQUESTS.c.id).where(or_(
        REQUESTS.c.submission_id.in_(list(ids)), REQUESTS.c.id.in_(select(SUBMISSIONS.c.request_id).where(
            SUBMISSIONS.c.id.in_(list(ids))))))).scalars()))
    _find_files(conn, found)
    return found


def _redact_runs(conn: Connection, ids: Sequence[int], person: Person) -> None:
    j = JOB_RUNS.c
    for rid, error, summary in list(conn.execute(select(j.id, j.error, j.summary).where(j.id.in_(list(ids))))):
        conn.execute(update(JOB_RUNS).where(j.id == rid).values(
            error=redact(error, person), summary=redact(summary, person)))


def redact(text: str | None, person: Person) -> str | None:
    """``text`` with the person's address and external id replaced by ``[erased]``."""
    if text is None:
        return None
    for value in (person.email, person.external_id):
        if value and value.strip():
            text = re.sub(re.escape(value.strip()), ERASED, text, flags=re.IGNORECASE)
    return text


def log_deletions(conn: Connection, reason: str, now: int, items: Sequence[tuple[str, str, str | None]],
                  place: Callable[[], int]) -> None:
    """Write ``(kind, id, form id)`` removals to the deletion log, in ``conn``'s transaction,
    at a place of the store's arrival order (``place()``, ``Writer.take_place``): places are
    taken in commit order, so a load reading the log past its cursor never skips a removal
    that commits after a later one (the log's own id is given at insert, not at commit).
    Call it last: nothing is waited for once the place is taken (the inserts wait on no lock)."""
    if items:
        at = place()
        conn.execute(DELETIONS.insert(), [{"kind": kind, "item_id": item, "form_id": form, "reason": reason,
                                           "deleted_at": now, "arrival": at} for kind, item, form in items])


# -- ingest ----------------------------------------------------------------------------------


def marks_of(row: Mapping[str, Any], kind: str) -> list[tuple[str, str]]:
    """What in a submission, request or event row (``kind``) a tombstone may name: its id,
    the ids it links, its addresses and external id, and every address in its answers."""
    out = [(kind, str(row["id"]))]
    for col, mark in (("request_id", "request"), ("submission_id", "submission"), ("external_id", "external_id"),
                      ("recipient_email", "email"), ("respondent_email", "email")):
        if row.get(col):
            out.append((mark, str(row[col])))
    text = zlib.decompress(row["body_zlib"]).decode("utf-8", "replace") if kind == "event" else repr(row.get("answers"))
    out.extend(("email", m) for m in _EMAIL.findall(text))
    return out


def barred(conn: Connection, key: Callable[[], bytes], marks: Sequence[Sequence[tuple[str, str]]]) -> set[int]:
    """Which items (their places in ``marks``, one list of marks per item) a tombstone names."""
    k = key()
    hashed = [{erasure_hash(k, kind, value) for kind, value in item} for item in marks]
    every = sorted(set().union(*hashed)) if hashed else []
    kept: set[str] = set()
    for some in in_lists(every):
        kept.update(conn.execute(select(ERASURES.c.hash).where(ERASURES.c.hash.in_(some))).scalars())
    return {i for i, hs in enumerate(hashed) if hs & kept}


def erasure_keys(conn: Connection) -> set[str]:
    """The ids of the keys the tombstones were made with (one, unless a key was lost)."""
    return set(conn.execute(select(ERASURES.c.key_id).where(ERASURES.c.key_id.is_not(None)).distinct()).scalars())


def forget_erasures(conn: Connection) -> int:
    """Drop every tombstone (``formsync key reset --forget-erasures``); returns how many."""
    return int(conn.execute(delete(ERASURES)).rowcount or 0)


def any_erased(conn: Connection) -> bool:
    """Whether a tombstone is kept (none: ingest need not look, nor read the key)."""
    return conn.execute(select(ERASURES.c.hash).limit(1)).first() is not None
