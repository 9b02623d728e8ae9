"""``formsync status`` at a glance: everything it shows fits in 80 columns, and the
outreach line says how far a job got and what to do next."""

from __future__ import annotations

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
        outreach=[OutreachProgress(job="spring-campaign-2026", form_id="form_rUKANP4vrYZ0ccHqNzkw5I", rows=49_988,
                                   sent=240, pending=49_748, sheet_rows=50_000, rejected=12, last_change_at=now)],
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
    clock = time.strftime("%H:%M", time.gmtime(now / 1000))
    assert f"    240 of 50,000 sent, 12 rejected, interrupted {clock}, run again to continue" in lines, text
    for header in ("completed", "expired", "canceled", "pending", "outcome", "next run"):
        assert header in text, f"the {header!r} header is whole at 80 columns:\n{text}"
    assert "120,000" in text and "49,988" in text
    assert "[expiresAt]" in text.replace("\n", " ").replace("│", ""), "an error's brackets are shown as they are"


def test_a_scheduler_that_stopped_or_never_ran_is_said_so() -> None:
    now = int(time.time() * 1000)
    stopped = SchedulerState(holder="h:1:x", last_beat_at=now - 600_000, alive=False)
    assert "no scheduler running; the last one beat at" in _render(StatusReport(at=now, scheduler=stopped))
    assert "no scheduler has run on this database" in _render(StatusReport(at=now))
    done = OutreachProgress(job="j", form_id="f", rows=10, sent=9, failed=1, sheet_rows=12, rejected=2,
                            last_change_at=now)
    assert done.line().startswith("9 of 12 sent, 3 rejected, done ")
