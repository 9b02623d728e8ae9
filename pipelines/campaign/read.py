"""A campaign read from the store: its funnel, its rounds and its page (the one place
the command, ``formsync status`` and the HTML page take their numbers from)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from connector.store import Store
from connector.store.campaign import CampaignRow

from .actions import UnknownJob
from .funnel import Funnel, Round, cumulative_completions, funnel, rounds
from .page import campaign_page


@dataclass(frozen=True)
class Campaign:
    """A job's campaign as the store holds it."""

    job: str
    form_id: str
    rows: list[CampaignRow]
    funnel: Funnel
    rounds: list[Round]


def read_campaign(store: Store, job: str) -> Campaign:
    """The campaign of outreach job ``job`` (``UnknownJob`` when the store has none)."""
    record = store.campaign.job(job)
    if record is None:
        raise UnknownJob(job)
    rows = store.campaign.rows(job)
    reminders = [(int(r["at"]), int(r.get("done", 0))) for r in store.ledger.rounds(job) if r.get("kind") == "remind"]
    return Campaign(job, record.form_id, rows, funnel(job, rows), rounds(rows, reminders))


def write_page(store: Store, job: str, out: Path, now_ms: int) -> Campaign:
    """Write the campaign's HTML page to ``out`` (made complete, then renamed into place),
    as of ``now_ms``: the service's time (``connector.clock``), the clock its chart runs on."""
    c = read_campaign(store, job)
    html = campaign_page(c.funnel, c.form_id, c.rounds, cumulative_completions(c.rows), now_ms)
    tmp = out.with_name(f".{out.name}.partial")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return c
