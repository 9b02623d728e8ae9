"""Polling of pending requests, for setups without a receiver.

``poll_once`` brings every request the store holds as ``pending`` up to date, reading
many requests per call instead of one ``requests.get`` each.

Cost model of one cycle, per form with ``n`` stored pending requests:

* ``requests.list`` with ``status=pending`` (limit 100), newest first: one call per 100
  pending requests of the form, and it stops early once every stored pending id has been
  seen or the listing has gone below the oldest of them. When nothing changed that is
  ``ceil(n / 100)`` calls (fewer when the form's newest pending requests are ours).
* Every stored pending request missing from that listing has left ``pending``
  ("leavers"). Those past their ``expiresAt`` are looked up in a ``status=expired``
  listing when there are at least two of them (one call resolves up to 100); the others
  in a ``status=canceled`` listing when there are at least ``LIST_THRESHOLD`` of them.
  Each such listing also stops as soon as its candidates are found or passed.
* Whatever is left is read with ``requests.get``, one call each: completed requests
  always (list summaries carry no answers), plus any leaver a listing did not resolve.
* A listing's status filter is not trusted: every listed record is taken by the status it
  carries, so a record the ``pending`` listing answers as completed is read whole with
  ``requests.get`` (its answers stored), and one answered as expired or canceled is
  stored as it is.

So a cycle costs ``ceil(n/100)`` calls when nothing changed, and about ``ceil(n/100) +
completed + (0..2 listings)`` when requests left ``pending``, plus one ``fields.list``
per form answered for the first time (its schema, see ``connector.client._field_lists``). Stored pending requests
whose form is unknown (a ``requests.create`` result carries no ``formId``) are read with
``requests.get`` one by one; that also stores their form, so later cycles list them.
Last, a pending request whose address is suppressed, bounced or complained (the contact
rule's blocked addresses) is canceled with that reason: one ``requests.cancel`` each,
once, of the polled form only (``rule``, default the store's list and bounces; see
``pipelines.rules.contact``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from pydantic import BaseModel

from connector import errors, models
from connector.client._field_lists import learn_field_lists
from connector.client.rpc import UNSET, FormClient
from connector.config.settings import OutreachSettings
from connector.store import Store
from connector.store._requests import PendingRequest

from ..outreach.suppression import cancel_blocked
from ..rules.contact import Canceled, ContactRule, contact_rule

PAGE = 100
# Below this many candidates, one requests.get each is no dearer than a listing that may
# need a page or two and may resolve none of them.
LIST_THRESHOLD = 3


class PollReport(BaseModel):
    """What one poll cycle did. ``updated`` counts requests that left ``pending`` and were
    stored with their new status (``completed`` / ``expired`` / ``canceled`` split it;
    ``canceled`` includes those of ``suppressed``, canceled by this cycle for the contact
    rule); ``missing`` are stored pending requests the service no longer shows to this
    token. Of the requests polled, ``pending_before`` == ``updated`` + ``still_pending`` +
    ``missing``."""

    pending_before: int
    updated: int = 0
    still_pending: int = 0
    completed: int = 0
    expired: int = 0
    canceled: int = 0
    missing: list[str] = []
    # pending requests canceled because their address is suppressed, bounced or complained
    suppressed: list[Canceled] = []
    calls: int = 0


def stored_pending(store: Store, form_id: str | None = None) -> list[PendingRequest]:
    """The requests the store holds as ``pending`` (of one form when ``form_id``)."""
    return store.requests.pending(form_id)


def _floor(items: Iterable[PendingRequest]) -> tuple[int, str] | None:
    """The listing position (createdAt, id) of the oldest item, or None when any
    creation time is unknown (then a listing cannot stop early)."""
    keys = [(p.created_at, p.id) for p in items]
    if any(c is None for c, _ in keys):
        return None
    return min(cast(list[tuple[int, str]], keys))  # no None left, as checked above


async def _walk(client: FormClient, form_id: str, status: str, wanted: dict[str, PendingRequest],
                include_test: bool) -> list[models.RequestRecord]:
    """Page through the form's ``status`` listing (newest first) and return the records
    whose id is in ``wanted``; stops once all are found or the listing has passed the
    oldest of them."""
    floor = _floor(wanted.values())
    left = set(wanted)
    found: list[models.RequestRecord] = []
    cursor: str | None = None
    while left:
        page = await client.list_requests(form_id=form_id, status=status, limit=PAGE, include_test=include_test,
                                          cursor=cursor or UNSET)
        for rec in page.items:
            if rec.id in left:
                left.discard(rec.id)
                found.append(rec)
        last = page.items[-1] if page.items else None
        passed = (floor is not None and last is not None and last.created_at_ms is not None
                  and (last.created_at_ms, last.id) <= floor)
        if not page.has_more or not page.next_cursor or passed:
            break
        cursor = page.next_cursor
    return found


@dataclass
class ByStatus:
    """Listed records by the status each one carries: a listing's status filter is not
    trusted (a service may answer a record that has since moved on)."""

    pending: list[models.RequestRecord]
    final: list[models.RequestRecord]  # expired or canceled: the summary is the whole news
    reread: list[models.RequestRecord]  # completed (answers only come with requests.get) or unknown


FINAL_WITHOUT_ANSWERS = frozenset({"expired", "canceled"})


def sort_by_status(records: Iterable[models.RequestRecord]) -> ByStatus:
    """Split listed records by their own ``status`` (a pure rule)."""
    out = ByStatus([], [], [])
    for rec in records:
        if rec.status == "pending":
            out.pending.append(rec)
        elif rec.status in FINAL_WITHOUT_ANSWERS:
            out.final.append(rec)
        else:
            out.reread.append(rec)
    return out


async def _poll_form(client: FormClient, store: Store, form_id: str, tracked: Sequence[PendingRequest], now_ms: int,
                     report: PollReport, answered: set[str]) -> None:
    by_id = {p.id: p for p in tracked}
    # Test requests only show in listings with includeTest: without it a stored test
    # request would look like a leaver and cost a requests.get every cycle.
    listed = sort_by_status(await _walk(client, form_id, "pending", by_id, include_test=True))
    if listed.pending:
        store.upsert_requests(listed.pending, source="poll")
    report.still_pending += len(listed.pending)
    known = {r.id for r in (*listed.pending, *listed.final, *listed.reread)}
    leavers = {i: p for i, p in by_id.items() if i not in known}
    resolved = list(listed.final)
    reread = [r.id for r in listed.reread]
    if leavers:
        overdue = {i: p for i, p in leavers.items() if p.expires_at is not None and p.expires_at <= now_ms}
        found: list[models.RequestRecord] = []
        if len(overdue) >= 2:
            found += await _walk(client, form_id, "expired", overdue, include_test=True)
        others = {i: p for i, p in leavers.items() if i not in overdue}
        if len(others) >= LIST_THRESHOLD:
            found += await _walk(client, form_id, "canceled", others, include_test=True)
        checked = sort_by_status(found)
        resolved += checked.final
        # A leaver listed as pending or completed after all is read whole, as is any leaver no listing showed.
        listed_ids = {r.id for r in checked.final}
        reread += [i for i in leavers if i not in listed_ids]
    if resolved:
        store.upsert_requests(resolved, source="poll")
        _count(report, resolved)
    await _get_each(client, store, reread, report, answered, form_id)


async def _get_each(client: FormClient, store: Store, ids: Sequence[str], report: PollReport, answered: set[str],
                    form_id: str | None = None) -> None:
    """Read requests one by one (full records, with answers once completed) and store
    them; the forms of those completed go into ``answered``."""
    got: list[models.RequestRecord] = []
    for rid in ids:
        try:
            got.append(await client.get_request(rid))
        except (errors.NotFound, errors.Forbidden):
            report.missing.append(rid)
    if got:
        store.upsert_requests(got, source="poll")
    terminal = [r for r in got if r.status != "pending"]
    answered.update(f for r in terminal if r.status == "completed" and (f := r.form_id or form_id))
    report.still_pending += len(got) - len(terminal)
    _count(report, terminal)


def _count(report: PollReport, records: Sequence[models.RequestRecord]) -> None:
    for r in records:
        report.updated += 1
        if r.status in ("completed", "expired", "canceled"):
            setattr(report, r.status, getattr(report, r.status) + 1)


def _count_suppressed(report: PollReport, polled: set[str]) -> None:
    """The requests of this poll the contact rule's cancel step took out of ``pending``
    are counted canceled, no longer still pending (it cancels only stored pending
    requests: those this poll found still pending, or of forms it was not asked about)."""
    mine = sum(1 for c in report.suppressed if c.request_id in polled and c.request_id not in report.missing)
    report.updated, report.canceled, report.still_pending = (report.updated + mine, report.canceled + mine,
                                                             report.still_pending - mine)


async def poll_once(client: FormClient, store: Store, *, form_id: str | None = None,
                    now_ms: int | None = None, rule: ContactRule | None = None) -> PollReport:
    """Bring every stored pending request (of ``form_id`` when given) up to date: those
    still pending are refreshed from ``requests.list`` pages, those that completed are
    stored with their answers and display (``requests.get``) as their submissions' rows,
    expired and canceled ones with their new status and time; a form whose answers
    name a key its field list lacks gets its ``fields.list`` read (``learn_field_lists``).
    ``now_ms`` (epoch ms, default the current time) only decides which requests are taken
    as overdue; ``rule`` (default: the store's list and bounces) which pending requests of
    the polled form are canceled as suppressed. See the module docstring for the cost.
    API errors other than a request gone missing are raised; what was stored stays."""
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    pending = stored_pending(store, form_id)
    report = PollReport(pending_before=len(pending))
    calls_before = client.stats["calls"]
    by_form: dict[str, list[PendingRequest]] = {}
    unknown: list[str] = []
    for p in pending:
        if p.form_id is None:
            unknown.append(p.id)
        else:
            by_form.setdefault(p.form_id, []).append(p)
    answered: set[str] = set()  # forms whose answers this cycle stored
    try:
        for fid in sorted(by_form):
            await _poll_form(client, store, fid, by_form[fid], now_ms, report, answered)
        await _get_each(client, store, unknown, report, answered)
        # An answered key the field list lacks: the list is read now, before any export shows the key.
        await learn_field_lists(client, store, answered)
        # The rule as the store is now: this poll may have stored a bounce or a complaint.
        rule = rule.refreshed(store) if rule is not None else contact_rule(store, OutreachSettings())
        report.suppressed = await cancel_blocked(client, store, rule, form_id=form_id)
        _count_suppressed(report, {p.id for p in pending})
    finally:
        report.calls = int(client.stats["calls"] - calls_before)
    return report
