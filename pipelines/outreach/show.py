"""How the ``formsync outreach`` command shows a run: the estimate before it starts, a Rich
progress bar whose rate and time left come from the rate limit (and that says when it is
waiting for it), and the summary with the first rejected rows (the report has them all)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from .report import OutreachReport
from .run import Prepared
from .send import ProgressCallback, SendProgress

REJECTED_SHOWN = 10


def pace_seconds(rows: int, per_minute: int) -> float:
    """Seconds the rate limit makes ``rows`` creates take: ``per_minute`` at once, then
    ``per_minute`` more each minute (the n-th create waits for the window of the
    ``per_minute``-th before it)."""
    return 60.0 * ((rows - 1) // per_minute) if rows > 0 else 0.0


def duration(seconds: float) -> str:
    """A duration in words a person reads at a glance: ``under a minute``, ``about 3 min``, ``about 2 h 5 min``."""
    if seconds < 60:
        return "under a minute"
    minutes = math.ceil(seconds / 60)
    return f"about {minutes} min" if minutes < 60 else f"about {minutes // 60} h {minutes % 60} min"


def estimate_line(p: Prepared, per_minute: int) -> str:
    """What the run is about to do and how long the rate limit makes it take."""
    before = len(p.plan.valid) - p.to_send
    also = f" ({before:,} sent before)" if before else ""
    return (f"sending {p.to_send:,} of {p.plan.rows:,} rows to {p.form_id}{also}: {duration(pace_seconds(p.to_send, per_minute))} "
            f"at {per_minute} creates per minute (service.creates_per_minute)")


def summary_lines(p: Prepared, report: OutreachReport, *, dry_run: bool, per_minute: int) -> list[str]:
    """The run's summary: how the sheet was read, what was (or would be) sent, and the
    first ``REJECTED_SHOWN`` rejected rows with where the full list is."""
    read = p.sheet.describe()
    lines = [f"{p.sheet.path.name}{f' ({read})' if read else ''}: {p.plan.rows:,} rows, "
             f"{len(p.plan.valid):,} valid, {p.plan.invalid:,} rejected"]
    if dry_run:
        lines.append(f"dry run: would send {p.to_send:,} requests ({duration(pace_seconds(p.to_send, per_minute))}); "
                     "nothing was sent")
    else:
        lines.append(f"sent {report.sent:,}, sent before {report.skipped_existing:,}, failed {report.failed:,}, "
                     f"changed {report.changed:,}" + (f", left {report.left:,}" if report.stopped else ""))
    problems = sorted(p.plan.rejected, key=lambda line: line[0])
    if problems:
        shown = problems[:REJECTED_SHOWN]
        lines.append(f"rejected rows (first {len(shown)} of {len(problems)} problems; all in {p.report_path}):")
        lines += [f"  row {n}: {pr.column + ': ' if pr.column else ''}{pr.problem}"
                  + (f" (accepted: {pr.accepted})" if pr.accepted else "") for n, pr in shown]
    if report.links_path is not None:
        lines.append(f"links (externalId, email, url): {report.links_path}")
    return lines


def progress_note(at: SendProgress, per_minute: int) -> str:
    """The bar's text: the rate the limit allows, the time left at that rate, and the wait
    for the next slot when the run is waiting for the limit."""
    left = pace_seconds(at.total - at.done, per_minute) + at.waiting
    note = f"{per_minute}/min, {duration(left)} left"
    if at.waiting > 0:
        note += f"; waiting for the rate limit, next in {math.ceil(at.waiting)} s"
    return note


@contextmanager
def progress_bar(per_minute: int, show: bool = True) -> Iterator[ProgressCallback | None]:
    """A progress callback drawing a bar on stderr while the block runs: rows done, the
    rate the limit allows, the time left at that rate, and whether it is waiting for the
    limit (with the seconds to the next slot). None when ``show`` is false."""
    if not show:
        yield None
        return
    bar = Progress(TextColumn("outreach"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task("rows", total=None, note="")

    def update(at: SendProgress) -> None:
        bar.update(task, completed=at.done, total=at.total, note=progress_note(at, per_minute))

    with bar:
        yield update
