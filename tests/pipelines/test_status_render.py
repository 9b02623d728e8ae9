"""``formsync status`` at a glance: everything it shows fits in 80 columns, and the
outreach line says how far a job got and what to do next."""

from __future__ import annotations

import re
import time

from rich.console import Console

from pipelines.operate.status import (
    FormRequests,
    JobStatus,
    OutreachProgress,
    RecentError,
    SchedulerState,
    StatusReport,
    render_status,
)
from pipelines.outreach.counts import RunCounts


def _render(report: StatusReport, width: int = 80) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render_status(report))
    return console.export_text()


def test_status_fits_in_80_columns_and_reads_at_a_glance() -> None:
    now = int(time.time() * 1000)
    report = StatusReport(
        at=now,
        scheduler=SchedulerState(holder="build-host-01:4242:1a2b3c4d", last_beat_at=now - 12_000, alive=True),
        jobs=[JobStatus(id="spring-campaign-2026", kind="outreach", schedule="cron 0 */2 * * 1-5",
                        next_run_at=now + 3_600_000, last_started_at=now - 60_000, last_outcome="error", runs=1234),
              JobStatus(id="nightly", kind="export", schedule="every 86400 s")],
        outreach=[OutreachProgress(job="spring-campaign-2026", form_id="form_rUKANP4vrYZ0ccHqNzkw5I",
                                   counts=RunCounts(rows=50_000, sent=240, left=49_748, invalid=12),
                                   last_change_at=now)],
        requests=[FormRequests(form_id="form_rUKANP4vrYZ0ccHqNzkw5I", completed=120_000, expired=31, canceled=2,
                               pending=49_988)],
        events_received=3, newest_event_at=now,
        errors=[RecentError(at=now, where="outreach spring-campaign-2026 row 6",
                            error="requests.create: VALIDATION_ERROR (EXPIRES_AT_IN_PAST) [expiresAt]: " * 3)],
    )
    text = _render(report)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 80, text
    assert "scheduler alive (build-host-01:4242:1a2b3c4d), last beat 12 s ago" in text
    clock = time.strftime("%Y-%m-%d %H:%M", time.gmtime(now / 1000))
    assert (f"sent 240 of 50,000 rows, 49,748 left; 12 rejected, interrupted {clock} UTC, run again to continue"
            in " ".join(text.split())), text
    for header in ("completed", "expired", "canceled", "pending", "outcome", "next run"):
        assert header in text, f"the {header!r} header is whole at 80 columns:\n{text}"
    assert "120,000" in text and "49,988" in text
    assert "[expiresAt]" in text.replace("\n", " ").replace("│", ""), "an error's brackets are shown as they are"


def test_a_scheduler_that_stopped_or_never_ran_is_said_so() -> None:
    now = int(time.time() * 1000)
    stopped = SchedulerState(holder="h:1:x", last_beat_at=now - 600_000, alive=False)
    assert "no scheduler running; the last one beat at" in _render(StatusReport(at=now, scheduler=stopped))
    assert "no scheduler has run on this database" in _render(StatusReport(at=now))
    counts = RunCounts(rows=12, sent=9, failed=1, invalid=2)
    done = OutreachProgress(job="j", form_id="f", counts=counts, last_run=counts, report="r.csv", last_change_at=now)
    assert done.line().startswith("sent 9 of 12 rows; 2 rejected, 1 refused by the service (see r.csv), done ")


def test_job_ids_never_wrap_and_every_time_reads_one_way() -> None:
    """A long job id keeps its line at 80 columns (the other columns give way), and every
    time in status, in lines and tables, is ``YYYY-MM-DD HH:MM`` UTC."""
    at = 1_796_440_680_000  # 2026-12-05 03:18 UTC
    ids = ("nightly-files", "spring-campaign-2026")
    report = StatusReport(
        at=at, scheduler=SchedulerState(holder="h:1:x", last_beat_at=at - 600_000, alive=False),
        jobs=[JobStatus(id=i, kind="files", schedule="cron 0 2 * * *", next_run_at=at, last_started_at=at - 86_400_000,
                        last_outcome="ok", runs=3) for i in ids],
        outreach=[OutreachProgress(job="spring", form_id="f", counts=RunCounts(rows=3, sent=3), last_change_at=at)],
        events_received=1, newest_event_at=at,
        errors=[RecentError(at=at, where="job nightly-files", error="boom")])
    text = _render(report)
    assert max(len(ln) for ln in text.splitlines()) <= 80, text
    for job_id in ids:
        assert any(f" {job_id} " in ln for ln in text.splitlines()), f"{job_id} is cut or wrapped:\n{text}"
    wide = _render(report, 120)  # the times whole on their lines
    assert "2026-12-05 03:18" in wide and "2026-12-04 03:18" in wide and "2026-12-05 03:08 UTC" in wide
    assert "done 2026-12-05 03:18 UTC" in wide and "newest 2026-12-05 03:18 UTC" in wide
    assert not re.search(r"\d{2}:\d{2}:\d{2}|T\d{2}:|\+00:00|(?<!\d{4}-)\b\d{2}-\d{2} \d{2}:", wide), wide
