"""The campaign's pure rules: the funnel and its rounds, which requests a remind or close
takes, idle times, suppression of a plan's rows and the suppression file, the campaign
table, the page's escaping, and the remind and close job params."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.config.settings import JobSettings
from connector.models import FieldDescriptor
from connector.store._campaign import CampaignRow
from pipelines.campaign.actions import parse_idle, pending_rows
from pipelines.campaign.funnel import cumulative_completions, funnel, rounds
from pipelines.campaign.page import campaign_page
from pipelines.campaign.table import NOT_SENT, campaign_table
from pipelines.operate.jobs import ConfigError, parse_params
from pipelines.outreach import plan_rows
from pipelines.outreach.suppression import apply_contact_rule
from pipelines.rules.contact import ContactRule, read_suppression_file

T0 = 1_780_000_000_000
MIN = 60_000


def row(n: int, status: str | None, **kw: object) -> CampaignRow:
    rid = None if status is None else f"req_{n}"
    return CampaignRow(f"ext:{n}", n, "sent" if rid else "pending", rid, status=status, created_at=T0, **kw)  # type: ignore[arg-type]


ROWS = [
    row(2, "completed", delivery_status="sent", completed_at=T0 + 10 * MIN, reminders_sent=0),
    row(3, "completed", delivery_status="sent", opened_at=T0 + MIN, completed_at=T0 + 40 * MIN, reminders_sent=1),
    row(4, "pending", delivery_status="bounced", reminders_sent=2, last_activity_at=T0),
    row(5, "pending", delivery_status="sent", opened_at=T0 + 5 * MIN, last_activity_at=T0 + 50 * MIN),
    row(6, "canceled", delivery_status="failed"),
    row(7, "expired", delivery_status="not_requested", started_at=T0 + MIN),
    row(8, None),
]


def test_funnel_counts_each_step_once() -> None:
    f = funnel("spring", ROWS)
    assert (f.rows, f.sent, f.delivered, f.bounced, f.failed, f.not_emailed) == (7, 6, 3, 1, 1, 1)
    assert (f.opened, f.started, f.completed, f.pending, f.canceled, f.expired) == (4, 3, 2, 2, 1, 1)
    assert f.reminders_sent == 3 and f.response_rate == pytest.approx(2 / 6)
    assert f.median_answer_seconds == 25 * 60  # 10 and 40 minutes
    assert f.line() == "opened 4, completed 2 (33%), pending 2, bounced 1"
    empty = funnel("none", [])
    assert (empty.sent, empty.response_rate, empty.median_answer_seconds) == (0, 0.0, None)


def test_each_round_gets_the_answers_until_the_next() -> None:
    got = rounds(ROWS, [(T0 + 30 * MIN, 3)])
    assert [(r.name, r.at, r.reminded, r.completed_after) for r in got] == [
        ("invitations", T0, 0, 1), ("reminder 1", T0 + 30 * MIN, 3, 1)]
    assert cumulative_completions(ROWS) == [(T0 + 10 * MIN, 1), (T0 + 40 * MIN, 2)]


def test_pending_rows_and_the_idle_filter() -> None:
    everyone, left_out = pending_rows(ROWS, idle_ms=None, now_ms=T0 + 60 * MIN)
    assert [r.row_number for r in everyone] == [4, 5] and left_out == 0
    idle, left_out = pending_rows(ROWS, idle_ms=30 * MIN, now_ms=T0 + 60 * MIN)
    assert [r.row_number for r in idle] == [4] and left_out == 1  # row 5 was active 10 minutes ago


@pytest.mark.parametrize(("text", "ms"), [("30m", 30 * MIN), ("12h", 12 * 60 * MIN), ("3D", 3 * 1440 * MIN),
                                          ("2w", 14 * 1440 * MIN)])
def test_idle_times(text: str, ms: int) -> None:
    assert parse_idle(text) == ms


@pytest.mark.parametrize("text", ["3", "3 days", "0d", "-1d", "d", "1.5h"])
def test_idle_times_refused(text: str) -> None:
    with pytest.raises(ValueError, match="a whole number and a unit"):
        parse_idle(text)


def test_suppressed_rows_are_reported_not_sent(tmp_path: Path) -> None:
    fields = [FieldDescriptor(key="name", type="text", title="Name")]
    rows = [{"email": e, "name": "N"} for e in ("a@x.test", "B@X.test", "c@x.test", "")]
    plan = plan_rows(rows, fields, job="j", form_id="form_1")
    kept = apply_contact_rule(plan, ContactRule({"b@x.test": "bounced", "c@x.test": "listed: opted out"}))
    assert [r.number for r in kept.valid] == [2, 5]
    assert [(n, p.problem) for n, p in kept.rejected] == [(3, "suppressed (bounced)"),
                                                          (4, "suppressed (listed: opted out)")]
    assert (kept.rows, kept.suppressed, kept.invalid) == (4, 2, 0) and apply_contact_rule(plan, ContactRule()) is plan
    sent_before = apply_contact_rule(plan, ContactRule({"b@x.test": "bounced"}), to_send={r.identity for r in plan.valid[2:]})
    assert [r.number for r in sent_before.valid] == [2, 3, 4, 5], "a row sent already is left as it is"

    listed = tmp_path / "list.txt"
    listed.write_text("# opted out\nAda@Example.com\n\nbob@example.com, asked by phone\nnot an address\n")
    assert read_suppression_file(listed) == {"ada@example.com": "listed in list.txt",
                                             "bob@example.com": "listed in list.txt"}
    table = tmp_path / "crm.csv"
    table.write_text("\ufeffName,Email\nAda,ada@example.com\nNo mail,\n")
    assert read_suppression_file(table) == {"ada@example.com": "listed in crm.csv"}


def test_campaign_table_has_every_sheet_row_and_keeps_names_apart() -> None:
    sheet = {2: {"email": "a@x.test", "status": "vip"}, 3: {"email": "b@x.test", "status": ""},
             9: {"email": "c@x.test", "status": ""}}
    table = campaign_table(["email", "status"], sheet, ROWS[:2], {"req_2": {"topic": "sales", "n": 4},
                                                                   "req_3": {"tags": ["a", "b"]}})
    assert table.column_names[:4] == ["row", "email", "status", "request_id"]
    assert "status (2)" in table.column_names and table.column_names[-3:] == ["answer.topic", "answer.n", "answer.tags"]
    got = table.to_pylist()
    assert [r["row"] for r in got] == [2, 3, 9] and got[2]["status (2)"] == NOT_SENT
    assert (got[0]["answer.n"], got[1]["answer.tags"]) == ("4", '["a", "b"]')
    assert str(table.schema.field("completed_at").type) == "timestamp[ms, tz=UTC]"


def test_the_page_escapes_what_it_shows() -> None:
    f = funnel("<b>spring</b>", ROWS)
    html = campaign_page(f, "form_<x>", rounds(ROWS, []), cumulative_completions(ROWS), T0)
    assert "<b>spring</b>" not in html and "&lt;b&gt;spring&lt;/b&gt;" in html and "form_&lt;x&gt;" in html
    assert "<script" not in html and "src=" not in html and "href=" not in html


@pytest.mark.parametrize(("kind", "params", "message"), [
    ("remind", {}, "missing param 'job'; required: job; optional: idle"),
    ("remind", {"job": "s", "idle": "soon"}, "param 'idle': .*a whole number and a unit"),
    ("close", {"job": "s"}, "missing param 'at'"),
    ("close", {"job": "s", "at": "next friday"}, "param 'at'"),
    ("close", {"job": "s", "at": "2026-06-30", "when": "x"}, "unknown param 'when'"),
])
def test_remind_and_close_job_params_are_checked(kind: str, params: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=f"job 'j' \\({kind}\\): {message}"):
        parse_params(JobSettings(id="j", kind=kind, interval_seconds=60, params=params))  # type: ignore[arg-type]


def test_remind_and_close_job_params_read() -> None:
    p = parse_params(JobSettings(id="j", kind="close", interval_seconds=60,
                                 params={"job": "s", "at": "2026-06-30T18:00:00Z", "reason": "done"}))
    assert (p.job, p.at.isoformat(), p.reason) == ("s", "2026-06-30T18:00:00+00:00", "done")  # type: ignore[attr-defined]
