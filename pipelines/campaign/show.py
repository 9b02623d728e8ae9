"""The funnel as the ``campaign funnel`` command prints it (a Rich table)."""

from __future__ import annotations

from rich.table import Table

from .funnel import Funnel


def funnel_table(f: Funnel) -> Table:
    """The funnel, one step a line, each with its share of the requests sent."""
    table = Table(title=f"Campaign {f.job}", title_justify="left")
    table.add_column("step")
    table.add_column("count", justify="right")
    table.add_column("of sent", justify="right")
    steps = [("rows", f.rows), ("rejected", f.rejected), ("suppressed", f.suppressed), ("sent", f.sent), ("delivered", f.delivered), ("bounced", f.bounced),
             ("failed", f.failed), ("not emailed", f.not_emailed), ("opened", f.opened), ("started", f.started),
             ("completed", f.completed), ("pending", f.pending), ("expired", f.expired), ("canceled", f.canceled),
             ("reminders sent", f.reminders_sent)]
    for name, n in steps:
        share = f"{n / f.sent:.0%}" if f.sent and name not in ("rows", "rejected", "suppressed", "sent", "reminders sent") else ""
        table.add_row(name, f"{n:,}", share)
    median = "-" if f.median_answer_seconds is None else f"{f.median_answer_seconds / 3600:.1f} h"
    table.caption = f"{f.sheet_line()}; response rate {f.response_rate:.0%}, median time to answer {median}"
    return table
