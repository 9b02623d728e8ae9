"""Deletions mirrored (``store.reconcile``): the stored submissions the service no longer
lists are marked with when that was noticed (``gone_at``) and logged as deletions
(``reconciled``); one listed again (its form restored) is un-marked. Drafts and the
submissions of test requests are never listed, so never marked."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet

from sqlalchemy import and_, select, update
from sqlalchemy.engine import Connection

from ._database import in_lists
from ._erasure import log_deletions
from ._tables import REQUESTS, SUBMISSIONS


def gone_and_back(stored: dict[str, int | None], listed: AbstractSet[str]) -> tuple[list[str], list[str]]:
    """Of the stored submissions (id -> ``gone_at``), those to mark gone (not listed, not
    marked yet) and those to un-mark (marked, listed again)."""
    gone = sorted(sid for sid, at in stored.items() if at is None and sid not in listed)
    back = sorted(sid for sid, at in stored.items() if at is not None and sid in listed)
    return gone, back


def reconcile(conn: Connection, form_id: str, listed: AbstractSet[str], now: int,
              place: Callable[[], int]) -> tuple[list[str], list[str]]:
    """Mark and un-mark the form's stored submissions against the ids the service lists,
    in ``conn``'s transaction, the marked ones logged at ``place()`` (``log_deletions``);
    the ids marked gone and the ids back."""
    s, r = SUBMISSIONS.c, REQUESTS.c
    test = select(r.id).where(r.is_test.is_(True))
    rows = conn.execute(select(s.id, s.gone_at).where(
        s.form_id == form_id, s.is_completed.is_(True),
        (s.request_id.is_(None)) | s.request_id.not_in(test)))
    gone, back = gone_and_back({sid: at for sid, at in rows}, listed)
    for some in in_lists(gone):
        conn.execute(update(SUBMISSIONS).where(and_(s.id.in_(some), s.gone_at.is_(None))).values(gone_at=now))
    for some in in_lists(back):
        conn.execute(update(SUBMISSIONS).where(s.id.in_(some)).values(gone_at=None))
    log_deletions(conn, "reconciled", now, [("submission", sid, form_id) for sid in gone], place)
    return gone, back
