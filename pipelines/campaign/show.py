"""The funnel as the ``campaign funnel`` command prints it (a Rich table)."""

from __future__ import annotations

from rich.table import Table

from .funnel import Funnel

# The sheet's rows in their states (``RunCounts``'), then the job's requests and what became of them.
_ROWS = ("rows", "sent", "rejected", "changed since sent", "suppressed", "not sent yet")


def funnel_table(f: Funnel) -> Table:
    """The sheet's rows in their states, then the funnel of the job's requests, one step a
    line, each with its share of the requests."""
    table = Table(title=f"Campaign {f.job}", title_justify="left")
    table.add_column("step")
    table.add_column("count", justify="right")
    table.add_column("of requests", justify="right")
    steps = [("rows", f.rows), ("sent", f.sent), ("rejected", f.rejected), ("changed since sent", f.changed),
             ("suppressed", f.suppressed), ("not sent yet", f.not_sent), ("requests", f.requests),
             ("delivered", f.delivered), ("bounced", f.bounced), ("failed", f.failed),
             ("not emailed", f.not_emailed), ("opened", f.opened), ("started", f.started),
             ("completed", f.completed), ("pending", f.pending), ("expired", f.expired), ("canceled", f.canceled),
             ("reminders sent", f.reminders_sent)]
    for name, n in steps:
        share = f"{n / f.requests:.0%}" if f.requests and name not in (*_ROWS, "requests", "reminders sent") else ""
        table.add_row(name, f"{n:,}", share)
    median = "-" if f.median_answer_seconds is None else f"{f.median_answer_seconds / 3600:.1f} h"
    table.caption = f"{f.sheet_line()}; response rate {f.response_rate:.0%}, median time to answer {median}"
    return table
