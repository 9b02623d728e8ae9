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
re-reads everything; the receiver's events cover edits as they happen. Drafts are synced
under a stream of their own, so switching ``include_drafts`` never skips anything.
"""

from __future__ import annotations

from pydantic import BaseModel

from connector import models
from connector.client.field_lists import learn_field_lists
from connector.client.rpc import UNSET, FormClient
from connector.store import Store, SyncMark
from connector.times import to_service, utc

PAGE = 100


def stream_of(include_drafts: bool) -> str:
    """The cursor stream of a sync with or without drafts (each keeps its own mark)."""
    return "submissions+drafts" if include_drafts else "submissions"


class SyncReport(BaseModel):
    """What one sync of one form did: ``fetched`` items newer than the old mark were
    stored (``written`` of them changed a row); ``calls`` made; the mark before and after
    as ``"<createdAt> <id>"`` (None when there is none)."""

    form_id: str
    full: bool
    include_drafts: bool
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


def _show(mark: SyncMark | None) -> str | None:
    return None if mark is None else f"{mark.created_at} {mark.submission_id}"


def _below(item: models.Submission, mark: SyncMark) -> bool:
    """Whether the walk has reached the old mark at ``item`` (see the module docstring)."""
    return item.id == mark.submission_id or item.created_at < utc(mark.created_at)


def _behind(newest: SyncMark, old: SyncMark) -> bool:
    return newest != old and (newest.created_at, newest.submission_id) < (old.created_at, old.submission_id)


async def sync_form(client: FormClient, store: Store, form_id: str, *, full: bool = False,
                    include_drafts: bool = False) -> SyncReport:
    """Store the form's submissions that are newer than its stored mark (all of them when
    ``full`` or on the first run), then move the mark to the newest one, in the same
    transaction as the last page. Drafts are included only with ``include_drafts`` (a Pro
    feature: on Free the service refuses it with UPGRADE_REQUIRED). A form whose answers
    name a key its field list lacks gets the list read (``learn_field_lists``). API errors are raised;
    pages stored before an error stay, and the mark stays where it was."""
    stream = stream_of(include_drafts)
    old = store.get_cursor(form_id, stream)
    report = SyncReport(form_id=form_id, full=full, include_drafts=include_drafts, cursor_before=_show(old))
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
        if report.fetched:  # a new key's column appears only once fields.list names it
            await learn_field_lists(client, store, [form_id])
    finally:
        report.calls = int(client.stats["calls"] - calls_before)
    report.cursor_after = _show(store.get_cursor(form_id, stream))
    return report


async def sync_all(client: FormClient, store: Store, workspace_id: str, *, full: bool = False,
                   include_drafts: bool = False) -> SyncAllReport:
    """``sync_form`` for every form of the workspace (``forms.list``, 100 a page), one
    after the other. Raises the first API error; forms synced before it stay synced."""
    report = SyncAllReport(workspace_id=workspace_id)
    calls_before = client.stats["calls"]
    try:
        form_ids = [f.id async for f in client.iter_forms(workspace_id)]
        for fid in form_ids:
            report.forms.append(await sync_form(client, store, fid, full=full, include_drafts=include_drafts))
    finally:
        report.calls = int(client.stats["calls"] - calls_before)
    return report
