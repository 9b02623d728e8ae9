"""The campaign's funnel: what became of an outreach job's rows, computed from the
store's rows and the rows' counts (``RunCounts``) alone (pure). The ``campaign``
command, ``formsync status``, the HTML page and the campaign export all read these
numbers from here."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from connector.store._campaign import UNDELIVERABLE, CampaignRow

from ..outreach.counts import RunCounts, job_counts

DELIVERED = frozenset({"sent", "delivered"})


class Funnel(BaseModel):
    """An outreach job's funnel. The sheet's rows, each in one state, as ``RunCounts``
    counts them (``job_counts``): ``rows`` == ``sent`` (rows with a request, sent now or
    before) + ``rejected`` (invalid, ``changed`` since sent, or refused by the service) +
    ``suppressed`` (refused by the contact rule) + ``not_sent`` (no request yet: a stopped
    run). The requests: ``requests`` the job's rows hold (the sent rows', and a changed
    row keeps the one it was sent); of them, delivery: ``delivered`` / ``bounced`` (or
    complained) / ``failed`` / ``not_emailed`` (delivery none, test requests) /
    ``queued``. ``opened`` and ``started`` count every request known to have got that far
    (a completed request was opened and started). Status: ``pending``, ``completed``,
    ``expired``, ``canceled`` (``unknown``: a request the store has not seen).
    ``response_rate`` is completed / requests; ``median_answer_seconds`` the median time
    from creation to completion."""

    job: str
    rows: int = 0
    sent: int = 0
    rejected: int = 0
    suppressed: int = 0
    not_sent: int = 0
    changed: int = 0
    requests: int = 0
    delivered: int = 0
    bounced: int = 0
    failed: int = 0
    not_emailed: int = 0
    queued: int = 0
    opened: int = 0
    started: int = 0
    pending: int = 0
    completed: int = 0
    expired: int = 0
    canceled: int = 0
    unknown: int = 0
    reminders_sent: int = 0
    response_rate: float = 0.0
    median_answer_seconds: float | None = None

    def line(self) -> str:
        """One line (within 72 columns for the usual sizes), as ``formsync status`` shows it."""
        rate = f"{self.response_rate:.0%}"
        return (f"opened {self.opened:,}, completed {self.completed:,} ({rate}), pending {self.pending:,}, "
                f"bounced {self.bounced:,}")

    def counts(self) -> RunCounts:
        """The sheet's rows in their states, as ``RunCounts`` (the rows sent now and before alike)."""
        rejected = self.rejected - self.changed
        return RunCounts(rows=self.rows, sent=self.sent, changed=self.changed, invalid=rejected,
                         suppressed=self.suppressed, left=self.not_sent)

    def sheet_line(self) -> str:
        """The sheet's rows in their states, in ``RunCounts.states_line``'s words."""
        return self.counts().states_line()


def funnel(job: str, rows: Sequence[CampaignRow], counts: RunCounts | None = None) -> Funnel:
    """The funnel of ``job`` from its campaign rows (``store.campaign.rows``) and its
    sheet rows' states (``job_counts``; by default the ledger's rows alone)."""
    c = counts if counts is not None else job_counts(Counter(r.state for r in rows), None)
    f = Funnel(job=job, rows=c.rows, sent=c.sent_total, changed=c.changed, rejected=c.rejected,
               suppressed=c.suppressed, not_sent=c.left)
    answer_ms: list[int] = []
    for r in rows:
        if r.request_id is None:
            continue
        f.requests += 1
        _count_delivery(f, r)
        done = r.status == "completed"
        f.opened += bool(r.opened_at is not None or r.started_at is not None or done)
        f.started += bool(r.started_at is not None or done)
        if r.status in ("pending", "completed", "expired", "canceled"):
            setattr(f, r.status, getattr(f, r.status) + 1)
        else:
            f.unknown += 1
        f.reminders_sent += r.reminders_sent or 0
        if done and r.completed_at is not None and r.created_at is not None:
            answer_ms.append(r.completed_at - r.created_at)
    f.response_rate = f.completed / f.requests if f.requests else 0.0
    f.median_answer_seconds = statistics.median(answer_ms) / 1000 if answer_ms else None
    return f


def _count_delivery(f: Funnel, r: CampaignRow) -> None:
    d = r.delivery_status
    if d in DELIVERED:
        f.delivered += 1
    elif d in UNDELIVERABLE:
        f.bounced += 1
    elif d == "failed":
        f.failed += 1
    elif d == "queued":
        f.queued += 1
    else:  # not_requested (delivery none, a test request) or not read yet
        f.not_emailed += 1


class Round(BaseModel):
    """One send round of a campaign: the invitations, or a reminder round, and the
    completions that came in after it and before the next round."""

    name: str
    at: int  # epoch ms
    reminded: int = 0
    completed_after: int = 0


def rounds(rows: Sequence[CampaignRow], reminder_rounds: Sequence[tuple[int, int]]) -> list[Round]:
    """What each round brought: ``reminder_rounds`` are ``(at, reminded)`` of each remind
    run (``store.ledger.rounds``). The first round is the invitations (from the first
    request's creation)."""
    created = [r.created_at for r in rows if r.request_id is not None and r.created_at is not None]
    out = [Round(name="invitations", at=min(created) if created else 0, reminded=0)]
    for i, (at, n) in enumerate(sorted(reminder_rounds), start=1):
        out.append(Round(name=f"reminder {i}", at=at, reminded=n))
    for r in rows:
        if r.status == "completed" and r.completed_at is not None:
            owner = [rd for rd in out if rd.at <= r.completed_at]
            (owner[-1] if owner else out[0]).completed_after += 1
    return out


def cumulative_completions(rows: Sequence[CampaignRow]) -> list[tuple[int, int]]:
    """``(epoch ms, completions so far)`` at each completion, in time order."""
    times = sorted(r.completed_at for r in rows if r.status == "completed" and r.completed_at is not None)
    return [(at, n) for n, at in enumerate(times, start=1)]


class Closed(BaseModel):
    """When a campaign was closed (epoch ms, the service's time of its close round) and
    why (the reason its requests were canceled with; None when none was given)."""

    at: int
    reason: str | None = None


def closed(round_records: Sequence[Mapping[str, Any]], rows: Sequence[CampaignRow]) -> Closed | None:
    """Whether the campaign is closed (pure): it is once a close round canceled requests
    (``store.ledger.rounds``, kind ``close``); when: the last such round; why: the reason
    most of its canceled requests carry. None while it is open."""
    closes = [int(r["at"]) for r in round_records if r.get("kind") == "close"]
    if not closes:
        return None
    at = max(closes)
    reasons = Counter(r.cancel_reason for r in rows if r.status == "canceled" and r.cancel_reason)
    return Closed(at=at, reason=reasons.most_common(1)[0][0] if reasons else None)
