"""A campaign read from the store: its funnel, its rounds and its page (the one place
the command, ``formsync status`` and the HTML page take their numbers from)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from connector.store import Store
from connector.store._campaign import CampaignRow

from ..outreach.counts import RunCounts, job_counts
from .actions import UnknownJob
from .funnel import Closed, Funnel, Round, closed, cumulative_completions, funnel, rounds
from .page import campaign_page


@dataclass(frozen=True)
class Campaign:
    """A job's campaign as the store holds it: ``closed`` when and why it was closed (None
    while open), ``counts`` its sheet rows' states as its last run recorded them (None
    before a run recorded any), ``form_name`` as the store knows it."""

    job: str
    form_id: str
    rows: list[CampaignRow]
    funnel: Funnel
    rounds: list[Round]
    counts: RunCounts
    closed: Closed | None = None
    form_name: str | None = None


def read_campaign(store: Store, job: str) -> Campaign:
    """The campaign of outreach job ``job`` (``UnknownJob`` when the store has none)."""
    record = store.campaign.job(job)
    if record is None:
        raise UnknownJob(job)
    rows = store.campaign.rows(job)
    recorded = store.ledger.rounds(job)
    reminders = [(int(r["at"]), int(r.get("done", 0))) for r in recorded if r.get("kind") == "remind"]
    counts = job_counts(Counter(r.state for r in rows), (record.settings or {}).get("outcome"))
    return Campaign(job, record.form_id, rows, funnel(job, rows, counts), rounds(rows, reminders), counts,
                    closed(recorded, rows), store.campaign.form_name(record.form_id))


def write_page(store: Store, job: str, out: Path, now_ms: int, *, form_name: str | None = None) -> Campaign:
    """Write the campaign's HTML page to ``out`` (made complete, then renamed into place),
    as of ``now_ms``: the service's time (``connector.client._clock``), the clock its chart runs on;
    ``form_name`` (as the service names the form now) over the name the store knows."""
    c = read_campaign(store, job)
    html = campaign_page(c.funnel, c.form_id, c.rounds, cumulative_completions(c.rows), now_ms,
                         form_name=form_name or c.form_name, closed=c.closed, counts=c.counts)
    tmp = out.with_name(f".{out.name}.partial")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return c
