"""The pure parts of one clock and commands that speak: the ``Date`` header read as the
service's time, the reminder spacing (which rows a remind skips without a call, what a
``REMINDER_TOO_SOON`` refusal says of the last reminder), a remind job scheduled more
often than the spacing refused, and the words of a remind or close run: a dry run, a
closed campaign, a plan refusal, a run that could only skip."""

from __future__ import annotations

import pytest

from connector.client._clock import ServiceClock, date_ms, on_this_machine
from connector.config.settings import JobSettings
from connector.store._campaign import CampaignRow
from pipelines.campaign.actions import (
    SPACING_MS,
    ActionReport,
    Refusal,
    reminded_recently,
    spaced_rows,
    too_soon_since,
)
from pipelines.campaign.words import action_lines, action_outcome, plan_refusal
from pipelines.operate.jobs import ConfigError, check_spacing, shortest_gap, trigger_for

T0 = 1_780_000_000_000  # 2026-05-28 20:26:40 UTC
MIN = 60_000


def test_the_date_header_is_the_service_time() -> None:
    assert date_ms("Thu, 28 May 2026 20:26:40 GMT") == T0
    assert date_ms(None) is None and date_ms("soon") is None and date_ms("") is None
    local = [T0 / 1000 - 3 * 86_400]  # this machine is 3 days behind the service (a test clock moved)
    clock = ServiceClock(lambda: local[0])
    assert clock.known_now() is None
    clock.observe("Thu, 28 May 2026 20:26:40 GMT")
    local[0] += 90
    assert clock.known_now() == T0 + 90_000
    clock.observe("garbage")  # an answer without a readable date changes nothing
    assert clock.known_now() == T0 + 90_000
    clock.set_now(T0 + 90_123)  # the sandbox's clock.get, to the millisecond
    clock.observe("Thu, 28 May 2026 20:28:10 GMT")  # its second agrees: the finer time stays
    assert clock.known_now() == T0 + 90_123
    clock.observe("Fri, 29 May 2026 20:28:10 GMT")  # a day later (a test clock moved): taken
    assert clock.known_now() == T0 + 90_000 + 86_400_000


@pytest.mark.parametrize(("url", "local"), [("http://127.0.0.1:8787", True), ("http://localhost:1", True),
                                            ("http://[::1]:8787", True), ("https://api.formstep.example", False),
                                            ("http://10.0.0.5:8787", False)])
def test_only_a_service_on_this_machine_may_be_the_sandbox(url: str, local: bool) -> None:
    assert on_this_machine(url) is local


def test_the_reminder_spacing() -> None:
    assert not reminded_recently(None, T0)
    assert reminded_recently(T0, T0 + SPACING_MS - 1) and not reminded_recently(T0, T0 + SPACING_MS)
    rows = [CampaignRow(f"ext:{n}", n, "sent", f"req_{n}", status="pending", last_reminded_at=at)
            for n, at in ((2, None), (3, T0 - 9 * MIN), (4, T0 - 11 * MIN))]
    ok, skipped = spaced_rows(rows, T0)
    assert [r.row_number for r in ok] == [2, 4] and skipped == 1
    # The service says how long to wait: the reminder was sent SPACING - wait ago.
    assert too_soon_since({"retryAfterMs": 4 * MIN}, T0) == T0 - 6 * MIN
    for said in ({}, {"retryAfterMs": "soon"}, {"retryAfterMs": True}, {"retryAfterMs": 11 * MIN}):
        assert too_soon_since(said, T0) == T0  # unknown: as if just now, so the next run waits it out


@pytest.mark.parametrize(("schedule", "gap"), [({"interval_seconds": 599}, 599), ({"cron": "*/5 * * * *"}, 300),
                                               ({"cron": "0,5 9 * * *"}, 300)])
def test_a_remind_job_more_often_than_the_spacing_is_refused(schedule: dict[str, object], gap: int) -> None:
    job = JobSettings.model_validate({"id": "nag", "kind": "remind", "params": {"job": "s"}, **schedule})
    assert shortest_gap(trigger_for(job)) == gap
    with pytest.raises(ConfigError, match=rf"^job 'nag' \(remind\): runs every {gap} s, more often than the service "
                                          r"lets a request be reminded \(once per 10 minutes\); set interval_seconds"):
        check_spacing(job, trigger_for(job))


@pytest.mark.parametrize("schedule", [{"interval_seconds": 600}, {"cron": "0 9 * * 1"}, {"after": "poll"}])
def test_a_remind_job_at_the_spacing_or_slower_is_taken(schedule: dict[str, object]) -> None:
    check_spacing(JobSettings.model_validate({"id": "nag", "kind": "remind", "params": {"job": "s"}, **schedule}),
                  None if "after" in schedule else trigger_for(JobSettings.model_validate(
                      {"id": "nag", "kind": "remind", "params": {"job": "s"}, **schedule})))
    fast_poll = JobSettings(id="p", kind="poll", interval_seconds=1)
    check_spacing(fast_poll, trigger_for(fast_poll))  # only remind jobs have the spacing


def report(**kw: object) -> ActionReport:
    return ActionReport.model_validate({"job": "spring", "action": "remind", "now": T0, **kw})


def test_a_run_said_in_words() -> None:
    r = report(candidates=20, done=15, too_recent=2, not_idle=4, refused={"REMINDER_TOO_SOON": 3}, calls=19,
               refusals=[Refusal(row=n, request_id=f"req_{n}", reason="REMINDER_TOO_SOON") for n in (4, 7, 9)])
    assert action_outcome(r) == ("reminded 15 of 20 pending requests; 2 reminded less than 10 minutes ago, skipped "
                                 "without a call, 3 refused (REMINDER_TOO_SOON 3), 4 not idle long enough, left out")
    lines = action_lines(r)
    assert lines[0] == "campaign spring: 20 pending requests as of 2026-05-28 20:26 UTC (the service's time)"
    assert "row 7 (req_7): refused, REMINDER_TOO_SOON" in lines and lines[-1] == "19 calls to the service"
    assert r.skipped is None


def test_a_dry_run_says_what_it_would_do() -> None:
    r = report(dry_run=True, candidates=20, would_do=20)
    assert action_outcome(r) == "would remind 20 of 20 pending requests (a dry run: nothing was called)"
    assert r.done == 0 and "calls to the service" not in " ".join(action_lines(r))


def test_a_closed_campaign_and_a_run_that_could_only_skip_say_why() -> None:
    closed = report(closed_at=T0 - 86_400_000, closed_reason="survey closed")
    assert action_outcome(closed) == ("nothing to remind: the campaign spring was closed on 2026-05-27 20:26 UTC "
                                      "(survey closed) and no request is pending")
    assert closed.skipped == "the campaign is closed: no request is pending"
    spaced = report(candidates=24, too_recent=24, calls=1)
    assert spaced.skipped is not None and spaced.skipped.startswith("all 24 pending requests were reminded less than 10")
    assert report(candidates=24, too_recent=23, done=1).skipped is None
    close = ActionReport(job="spring", action="close", candidates=3, done=3, closed_at=None)
    assert action_outcome(close) == "canceled 3 of 3 pending requests; the campaign is closed" and close.skipped is None


def test_a_plan_refusal_is_the_run_failing() -> None:
    r = report(candidates=2, refused={"PLAN_REQUIRED": 2}, plan_refused="PLAN_REQUIRED", calls=2)
    assert plan_refusal(r) == ("the service refused to remind on this workspace's plan (PLAN_REQUIRED): reminders need "
                               "the Pro plan or higher; 0 of 2 done")
    assert "refused the rest for this workspace's plan (PLAN_REQUIRED)" in action_outcome(r)
    assert plan_refusal(report(candidates=2, done=2)) is None
