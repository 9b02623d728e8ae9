"""How the ``formsync outreach`` command shows a run: the estimate before it starts, a Rich
progress bar (or, without a terminal, a log line at most every 30 s) with the measured
rate and the time left at it (and whether it is waiting for the rate limit), and the
summary with the first rows of the report. Every count comes from ``RunCounts``."""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from .columns import header_key
from .report import OutreachReport
from .run import Prepared
from .send import ProgressCallback, SendProgress

REJECTED_SHOWN = 10
RATE_WINDOW = 60.0  # seconds of sends the shown rate is measured over
LOG_EVERY = 30.0  # seconds between progress lines without a terminal


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
    return (f"{p.counts.estimate(p.form_id)}: {duration(pace_seconds(p.to_send, per_minute))} "
            f"at {per_minute} creates per minute (service.creates_per_minute)")


def greeting_warning(p: Prepared, delivery: str) -> str | None:
    """A warning when emailed invitations would greet nobody: valid rows without a
    recipient name, with the mapping that gives one (None when every row has one)."""
    if delivery != "email":
        return None
    nameless = sum(1 for r in p.plan.valid if not r.params.recipient.get("name"))
    if not nameless:
        return None
    said = f"warning: {nameless:,} of {len(p.plan.valid):,} invitations would greet nobody (no recipient name"
    given = next((c for c, ts in p.targets.items() if "name" in ts), None)
    if given is not None:
        return f"{said}: {given!r} is empty in those rows); fill it in the sheet"
    column = next((c for c in p.sheet.columns if "name" in header_key(c)), "<column>")
    fed = [t.removeprefix("prefill.") for t in p.targets.get(column, ())]
    return f'{said}); map a column to name too: [outreach] mapping = {{ "{column}" = {json.dumps(["name", *fed])} }}'


def summary_lines(p: Prepared, report: OutreachReport, *, dry_run: bool, per_minute: int,
                  delivery: str = "none") -> list[str]:
    """The run's summary: how the sheet was read, what was (or would be) sent, on a dry
    run the ``greeting_warning``, and the first ``REJECTED_SHOWN`` lines of the report
    with where the full list is."""
    read = p.sheet.describe()
    lines = [f"{p.sheet.path.name}{f' ({read})' if read else ''}: {report.rows:,} rows, "
             f"{report.rows - report.invalid:,} valid, {report.invalid:,} rejected"]
    if dry_run:
        lines.append(f"dry run: {report.outcome(dry_run=True)} ({duration(pace_seconds(p.to_send, per_minute))}); "
                     "nothing was sent")
        warning = greeting_warning(p, delivery)
        lines += [warning] if warning is not None else []
    problems = report.lines
    if problems:
        shown = problems[:REJECTED_SHOWN]
        lines.append(f"report: {report.problems:,} rows, {len(problems):,} problems (the first {len(shown)} here; "
                     f"all in {p.report_path}):")
        lines += [f"  row {n}: {pr.column + ': ' if pr.column else ''}{pr.problem}"
                  + (f" (accepted: {pr.accepted})" if pr.accepted else "") for n, pr in shown]
    if report.links_path is not None:
        lines.append(f"links (externalId, email, url): {report.links_path}")
    return lines


class RateMeter:
    """The rate of creates as measured over the last ``RATE_WINDOW`` seconds, and the time
    left at it; ``clock`` gives seconds (monotonic)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.marks: deque[tuple[float, int]] = deque()

    def note(self, sent: int) -> None:
        now = self.clock()
        self.marks.append((now, sent))
        while len(self.marks) > 2 and now - self.marks[1][0] >= RATE_WINDOW:
            self.marks.popleft()

    def per_minute(self) -> float | None:
        """Creates per minute over the window; None before two sends were measured apart."""
        if len(self.marks) < 2:
            return None
        (t0, s0), (t1, s1) = self.marks[0], self.marks[-1]
        return 60.0 * (s1 - s0) / (t1 - t0) if t1 > t0 and s1 > s0 else None


def progress_note(at: SendProgress, meter: RateMeter) -> str:
    """The progress text: the measured rate, the time left at that rate, and the wait for
    the next slot when the run is waiting for the limit."""
    rate = meter.per_minute()
    note = "measuring the rate" if rate is None else \
        f"{rate:,.0f}/min, {duration(60.0 * (at.total - at.done) / rate + at.waiting)} left"
    if at.waiting > 0:
        note += f"; waiting for the rate limit, next in {math.ceil(at.waiting)} s"
    return note


def progress_log(write: Callable[[str], None], clock: Callable[[], float] = time.monotonic,
                 every: float = LOG_EVERY) -> ProgressCallback:
    """A progress callback for a log: a line on the first row, then at most one every
    ``every`` seconds (``outreach: 120 of 495 rows, 58/min, about 6 min left``)."""
    meter, last = RateMeter(clock), [-math.inf]

    def update(at: SendProgress) -> None:
        if at.waiting == 0:
            meter.note(at.sent)
        if clock() - last[0] >= every:
            last[0] = clock()
            write(f"outreach: {at.done:,} of {at.total:,} rows, {progress_note(at, meter)}")
    return update


@contextmanager
def progress_bar(show: bool = True) -> Iterator[ProgressCallback | None]:
    """A progress callback drawing a bar on stderr while the block runs: rows done, the
    measured rate, the time left at it, and whether it is waiting for the limit (with the
    seconds to the next slot). None when ``show`` is false."""
    if not show:
        yield None
        return
    bar = Progress(TextColumn("outreach"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"),
                   console=Console(stderr=True), transient=True)
    task = bar.add_task("rows", total=None, note="")
    meter = RateMeter()

    def update(at: SendProgress) -> None:
        if at.waiting == 0:
            meter.note(at.sent)
        bar.update(task, completed=at.done, total=at.total, note=progress_note(at, meter))

    with bar:
        yield update
