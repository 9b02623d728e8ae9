"""Incremental sync of a form's submissions into the store.

``submissions.list`` is read newest first (limit 100) down to the stored high-water mark:
the ``createdAt`` and id of the newest submission the last finished walk saw. A cycle with
no new submissions costs one call.

Why the mark only moves at the end of a walk: the walk goes from the newest submission
down to the old mark. Were the mark moved to the newest item while older pages were still
to come, a crash in between would leave those pages below the new mark, and no later walk
would ever read them. So every page but the last is stored without touching the mark, and
the last page (the one that reaches the old mark, or the end of the list) is stored in the
same transaction that moves the mark to the newest item of the walk. A walk that fails
halfway leaves the old mark; the next one reads the same pages again (rows are upserted,
newest wins, so nothing doubles) and finishes the job. Submissions that arrive during a
walk sit above its first item; the keyset cursor does not shift for them, and the next
walk picks them up.

Where the walk stops: ``createdAt`` has whole-second precision while the service orders by
its own finer time, so within one second the id order says nothing. The walk stops at the
mark's own id, or at the first item of an earlier second than the mark's (the mark's own
submission may be gone, purged by retention). Items of the mark's second that come before
it are stored again: harmless. The store compares marks as ``(createdAt, id)`` strings
and only moves one forward in that order, so when the newest item of a walk shares the
old mark's second but has a smaller id, the old mark is dropped first (see the comment
in ``sync_form``).

What an incremental walk does not see: edits of submissions below the mark, and drafts
completed after the mark moved past them (they keep their place in the list). ``full``
re-reads everything (the list is newest first, has no ``updatedAt`` filter and at most 100
a page: ceil(N/100) calls for N submissions); the receiver's events cover edits as they
happen. With ``full_every_ms`` (a sync job: ``sync.full_every_hours``), a walk is full
when the form's last full walk (kept in the store, on the service's clock) is older than
that, so edits reach a store without a receiver within that time. A re-read row whose
content did not change keeps its place in the arrival order: nothing is sent again.
Drafts are synced under a stream of their own, so switching ``include_drafts`` never
skips anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import BaseModel

from connector import models
from connector._times import to_service, utc
from connector.client._field_lists import learn_field_lists
from connector.client.rpc import UNSET, FormClient
from connector.store import ExportFilter, Store
from connector.store._mapping import SyncMark

PAGE = 100
HOUR_MS = 3_600_000


def stream_of(include_drafts: bool) -> str:
    """The cursor stream of a sync with or without drafts (each keeps its own mark)."""
    return "submissions+drafts" if include_drafts else "submissions"


class SyncReport(BaseModel):
    """What one sync of one form did: ``full`` whether it read the whole list (asked for,
    the first sync, or due after ``full_every_ms``); ``fetched`` items (newer than the old
    mark, or all) were stored (``written`` of them changed a row); ``calls`` made; the mark
    before and after as ``"<createdAt> <id>"`` (None when there is none); ``last_full``,
    when the form's list was last read whole (the service's clock, ISO; None: never)."""

    form_id: str
    full: bool
    include_drafts: bool
    last_full: str | None = None
    fetched: int = 0
    written: int = 0
    calls: int = 0
    cursor_before: str | None = None
    cursor_after: str | None = None


class SyncAllReport(BaseModel):
    """The sync of every form of a workspace."""

    workspace_id: str
    forms: list[SyncReport] = []
    calls: int = 0


def _when(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _show(mark: SyncMark | None) -> str | None:
    return None if mark is None else f"{mark.created_at} {mark.submission_id}"


def _below(item: models.Submission, mark: SyncMark) -> bool:
    """Whether the walk has reached the old mark at ``item`` (see the module docstring)."""
    return item.id == mark.submission_id or item.created_at < utc(mark.created_at)


def _behind(newest: SyncMark, old: SyncMark) -> bool:
    return newest != old and (newest.created_at, newest.submission_id) < (old.created_at, old.submission_id)


def full_due(last_full: int | None, now: int, full_every_ms: int | None) -> bool:
    """Whether a sync with ``full_every_ms`` reads the form's whole list now (pure):
    never read whole, or last read whole ``full_every_ms`` ago or more."""
    return full_every_ms is not None and (last_full is None or now - last_full >= full_every_ms)


async def sync_form(client: FormClient, store: Store, form_id: str, *, full: bool = False,
                    include_drafts: bool = False, full_every_ms: int | None = None) -> SyncReport:
    """Store the form's submissions that are newer than its stored mark (all of them when
    ``full``, on the first run, or when ``full_every_ms`` is given and the form's last
    full read is that old: see ``full_due``), then move the mark to the newest one, in
    the same transaction as the last page; a walk that read everything is kept as the
    form's last full read. Drafts are included only with ``include_drafts`` (a Pro
    feature: on Free the service refuses it with UPGRADE_REQUIRED). A form whose answers
    name a key its field list lacks gets the list read (``learn_field_lists``). API errors are raised;
    pages stored before an error stay, and the mark stays where it was."""
    stream = stream_of(include_drafts)
    old = store.get_cursor(form_id, stream)
    last_full = store.full_syncs([form_id])[form_id]
    if not full and full_every_ms is not None:
        full = full_due(last_full, await client.service_now(), full_every_ms)
    report = SyncReport(form_id=form_id, full=full or old is None, include_drafts=include_drafts,
                        cursor_before=_show(old), last_full=_when(last_full))
    stop = None if full else old
    calls_before = client.stats["calls"]
    newest: SyncMark | None = None
    cursor: str | None = None
    try:
        while True:
            page = await client.list_submissions(form_id, include_drafts=include_drafts, limit=PAGE,
                                                 cursor=cursor or UNSET)
            if newest is None and page.items:
                newest = SyncMark(to_service(page.items[0].created_at), page.items[0].id)
            fresh: list[models.Submission] = []
            reached = False
            for item in page.items:
                if stop is not None and _below(item, stop):
                    reached = True
                    break
                fresh.append(item)
            last = reached or not page.has_more or not page.next_cursor
            if last and newest is not None and old is not None and _behind(newest, old):
                # The newest item sorts below the old mark by (createdAt, id) although it
                # is newer (same second, smaller id), and the store only moves a mark
                # forward in that order: drop the old mark first. A crash right here
                # leaves no mark, so the next walk reads everything: slower, never a gap.
                store.reset_cursor(form_id, stream)
            if fresh or (last and newest is not None and newest != old):
                written = store.sync_page(form_id, fresh, newest if last else None, form_name=page.form_name,
                                          stream=stream)
                report.fetched += len(fresh)
                report.written += len(written)
            if last:
                break
            cursor = page.next_cursor
        if report.full:
            at = await client.service_now()  # from the last answer's Date: no call
            store.record_full_sync(form_id, at)
            report.last_full = _when(at)
        if report.fetched:  # a new key's column appears only once fields.list names it
            await learn_field_lists(client, store, [form_id])
    finally:
        report.calls = int(client.stats["calls"] - calls_before)
    report.cursor_after = _show(store.get_cursor(form_id, stream))
    return report


async def sync_all(client: FormClient, store: Store, workspace_id: str, *, full: bool = False,
                   include_drafts: bool = False, full_every_ms: int | None = None) -> SyncAllReport:
    """``sync_form`` for every form of the workspace (``forms.list``, 100 a page), one
    after the other, each with the same ``full_every_ms``: the calls of several full
    reads are paced by the client within its call budget. Raises the first API error;
    forms synced before it stay synced."""
    report = SyncAllReport(workspace_id=workspace_id)
    calls_before = client.stats["calls"]
    try:
        form_ids = [f.id async for f in client.iter_forms(workspace_id)]
        for fid in form_ids:
            report.forms.append(await sync_form(client, store, fid, full=full, include_drafts=include_drafts,
                                                full_every_ms=full_every_ms))
    finally:
        report.calls = int(client.stats["calls"] - calls_before)
    return report


def full_read_calls(stored: int) -> int:
    """The calls of a full read of a form holding ``stored`` submissions (pure): the list
    has no ``updatedAt`` filter and 100 a page, so ceil(N/100), and one for an empty list."""
    return max(1, math.ceil(stored / PAGE))


def edits_line(forms: Sequence[SyncReport], full_every_hours: float, calls: int) -> str:
    """The last line of ``formsync sync`` by hand (pure): how edits of stored submissions
    are caught and when a sync job's next full read is due (the earliest among ``forms``;
    ``calls``: what a full read of them costs now)."""
    every = round(full_every_hours * HOUR_MS)
    last = [f.last_full for f in forms]
    due = "now" if not forms or None in last else _when(
        min(int(datetime.fromisoformat(t).timestamp() * 1000) for t in last if t is not None) + every)
    if any(f.full for f in forms):
        done = f"this sync read {'the form' if len(forms) == 1 else 'the forms'} whole, edits included"
    else:
        done = "this sync read new submissions only, not edits of stored ones"
    return (f"{done}; a sync job reads each form whole every {full_every_hours:g} h (sync.full_every_hours), "
            f"next due {due}, {calls} call(s) now (ceil(N/100)); formsync sync --full reads edits now, "
            f"the receiver as they happen")


def edits_note(store: Store, report: BaseModel, full_every_hours: float) -> str:
    """``edits_line`` for the forms of a sync's ``report`` (``SyncReport`` or
    ``SyncAllReport``), with what a full read of them costs now (their stored submissions)."""
    forms = [report] if isinstance(report, SyncReport) else report.forms if isinstance(report, SyncAllReport) else []
    calls = sum(full_read_calls(store.exports.count_submissions(ExportFilter(form_id=f.form_id))) for f in forms)
    return edits_line(forms, full_every_hours, calls)
