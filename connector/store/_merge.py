"""Newest-wins merging of submission and request rows, on any ``Writer``: a row is
inserted when its id is new, replaces the stored version when it ranks above it, and
otherwise only fills in columns still unknown (NULL) whose value never changes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table

from ._mapping import request_rank, submission_rank
from ._tables import REQUESTS, SUBMISSIONS
from ._writer import Writer, by_keys


@dataclass(frozen=True)
class Merge:
    """How rows of one table are merged: ``rank`` orders versions (stored rows are read
    back with ``rank_cols``); ``keep`` columns are written once and never changed;
    ``fill`` columns are filled in by a losing write while still NULL (each is fixed
    once known, or NULL there only means "not seen yet")."""

    table: Table
    rank: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    rank_cols: tuple[str, ...]
    keep: frozenset[str]
    fill: frozenset[str]


SUBMISSION_MERGE = Merge(
    SUBMISSIONS, submission_rank, ("updated_at", "submitted_at", "edit_count", "observed_at"),
    # submittedAt never changes; keeping the first keeps an event's ms over a list's seconds.
    keep=frozenset({"submitted_at", "created_at", "request_id"}),
    fill=frozenset({"submitted_at", "created_at", "request_id", "form_name", "snapshot_id", "respondent_email",
                    "language"}),
)
REQUEST_MERGE = Merge(
    REQUESTS, request_rank, ("status", "updated_at"),
    keep=frozenset(),
    fill=frozenset({"form_id", "workspace_id", "external_id", "metadata", "context", "recipient_email",
                    "recipient_name", "language", "url", "created_at", "expires_at", "delivery_status",
                    "opened_at", "started_at", "last_activity_at", "reminders_sent", "data_purged_at"}),
)


def _merge_once(w: Writer, m: Merge, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Write rows with distinct ids, newest wins. Returns the rows that were written
    (inserted, or newer than the stored version)."""
    t = m.table.name
    rows = sorted(rows, key=lambda r: r["id"])  # one lock order for every writer
    inserted = w.insert_new(t, rows)
    written = [r for r in rows if r["id"] in inserted]
    rest = [r for r in rows if r["id"] not in inserted]
    if not rest:
        return written
    stored = w.ranks(t, m.rank_cols, [r["id"] for r in rest])
    winners = [r for r in rest if m.rank(r) > m.rank(stored[r["id"]])]
    losers = [r for r in rest if m.rank(r) <= m.rank(stored[r["id"]])]
    for keys, group in by_keys(winners):
        w.update(t, keys, m.keep, group)
    for keys, group in by_keys(losers):
        w.update(t, [k for k in keys if k in m.fill], m.fill, group)
    return written + winners


def merge(w: Writer, m: Merge, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge rows that may repeat an id: they are applied in rounds, oldest version
    first, so each one is merged exactly as if it came alone. Returns the rows written."""
    if not rows:
        return []
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_id.setdefault(r["id"], []).append(r)
    if len(by_id) == len(rows):  # the usual case: every id once
        return _merge_once(w, m, list(rows))
    for versions in by_id.values():
        versions.sort(key=m.rank)
    written: list[dict[str, Any]] = []
    depth = max(len(v) for v in by_id.values())
    for i in range(depth):
        written += _merge_once(w, m, [v[i] for v in by_id.values() if len(v) > i])
    return written


def write_submissions(w: Writer, rows: Sequence[dict[str, Any]]) -> list[str]:
    """Merge submission rows (their answers are stored once, as the row's JSON; the
    long form is derived when read, see ``answer_tuples``). Returns the ids written,
    sorted."""
    return sorted({r["id"] for r in merge(w, SUBMISSION_MERGE, rows)})
