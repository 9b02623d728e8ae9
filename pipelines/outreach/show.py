"""How the ``formsync outreach`` command shows a run: a Rich progress bar fed by the
sender's progress callback, and the dry run's listing of the plan."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from .plan import Plan
from .send import ProgressCallback


@contextmanager
def progress_bar(show: bool = True) -> Iterator[ProgressCallback | None]:
    """A progress callback drawing a bar (rows done, rows per second, time left) while
    the block runs; None when ``show`` is false."""
    if not show:
        yield None
        return
    bar = Progress(TextColumn("outreach"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                   TimeRemainingColumn())
    task = bar.add_task("rows", total=None, rate="")
    started = time.monotonic()

    def update(done: int, total: int) -> None:
        rate = done / max(time.monotonic() - started, 1e-3)
        bar.update(task, completed=done, total=total, rate=f"{rate:.1f} rows/s")

    with bar:
        yield update


def plan_lines(plan: Plan | None) -> list[str]:
    """The dry run's listing: one line per row that would be created, with its key."""
    return [f"row {r.number}: would create ({r.identity}) key={r.key}" for r in (plan.valid if plan else [])]
