"""The contact rule: the pure function with fixed inputs, then the paths that ask it on a
real sandbox over loopback with a SQLite store: outreach (duplicates in one job, the row
that has a request keeps the address, ``outreach.allow_duplicates``), remind (a suppressed
address is not reminded and costs no call), ``campaign suppress`` (cancels the pending
requests, ``--list``, ``--remove``, words and ``--json``), and a bounce seen by poll."""

from __future__ import annotations

import asyncio
import csv
import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from connector.client.rpc import FormClient
from connector.config.settings import OutreachSettings
from connector.store import Store
from connector.store._campaign import CampaignRow
from pipelines.campaign import act, read_campaign
from pipelines.campaign.actions import contactable
from pipelines.campaign.funnel import funnel
from pipelines.cli import app
from pipelines.outreach import run_outreach
from pipelines.outreach.counts import RunCounts, job_counts
from pipelines.rules.contact import ContactRule, Recipient, contact_refusals, contact_rule
from pipelines.sync.poll import poll_once
from tests.conftest import Sandbox

MINUTE = 60_000


def test_the_rule_refuses_blocked_addresses_and_later_duplicates() -> None:
    rows = [Recipient(2, "Ann@X.test"), Recipient(3, "bob@x.test"), Recipient(4, " ann@x.test "),
            Recipient(5, None), Recipient(6, ""), Recipient(7, "eve@x.test")]
    assert contact_refusals(rows, {"eve@x.test": "listed: opted out"}) == [
        None, None, "suppressed (same email as row 2)", None, None, "suppressed (listed: opted out)"]
    assert contact_refusals(rows, {}, allow_duplicates=True) == [None] * 6
    # The row that already has a request keeps the address, wherever it is in the sheet.
    held = [Recipient(2, "ann@x.test"), Recipient(9, "ann@x.test", has_request=True)]
    assert contact_refusals(held, {}) == ["suppressed (same email as row 9)", None]
    assert contact_refusals(held, {"ann@x.test": "bounced"}) == ["suppressed (bounced)"] * 2


def _row(n: int, email: str, *, state: str = "sent", status: str | None = "pending") -> CampaignRow:
    rid = f"req_{n}" if state == "sent" else None
    return CampaignRow(f"ext:{n}", n, state, rid, status=status if rid else None, recipient_email=email)


def test_remind_asks_the_rule_and_the_counts_add_up() -> None:
    rows = [_row(2, "a@x.test"), _row(3, "b@x.test"), _row(4, "A@x.test"), _row(5, "c@x.test", status="completed"),
            _row(6, "d@x.test", state="suppressed"), _row(7, "e@x.test", state="failed")]
    pending = [r for r in rows if r.status == "pending"]
    keep, refused = contactable(rows, pending, ContactRule({"b@x.test": "listed: opted out"}))
    assert [r.row_number for r in keep] == [2]
    assert [(r.row, r.reason) for r in refused] == [(3, "suppressed (listed: opted out)"),
                                                    (4, "suppressed (same email as row 2)")]
    assert [r.row_number for r in contactable(rows, pending, ContactRule({}, allow_duplicates=True))[0]] == [2, 3, 4]

    f = funnel("j", rows, job_counts(Counter(r.state for r in rows), {"invalid": 3}))  # a run interrupted
    assert (f.rows, f.sent, f.rejected, f.suppressed, f.not_sent) == (9, 4, 4, 1, 0)
    assert f.rows == f.sent + f.rejected + f.suppressed + f.not_sent
    assert f.sheet_line() == "9 rows: 4 sent, 4 rejected, 1 suppressed"

    run = RunCounts(rows=12, invalid=2, suppressed=3, skipped_existing=1, changed=1, left=5).finished(4, 1, False)
    assert run.rows == run.sent_total + run.rejected + run.suppressed + run.left
    assert run.outcome() == "sent 5 of 12 rows (4 now, 1 before); 2 rejected, 1 changed since sent, not sent " \
                            "again, 1 refused by the service, 3 suppressed"


def _sheet(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["externalId", "name", "email"])
        w.writerows([ext, f"Person {ext}", email] for ext, email in rows)
    return path


async def test_outreach_sends_one_invitation_per_address_in_a_job(sandbox: Sandbox, tmp_path: Path) -> None:
    await sandbox.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.migrate()
    form = sandbox.pro.forms["Contact"]
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        first = await run_outreach(fc, store, _sheet(tmp_path / "a.csv", [("a", "ann@x.test"), ("b", "ANN@x.test"),
                                                                          ("c", "cy@x.test")]),
                                   form, job="spring", delivery="email", report_path=tmp_path / "a-report.csv")
        assert (first.rows, first.sent, first.suppressed, first.invalid) == (3, 2, 1, 0)
        assert "suppressed (same email as row 2)" in (tmp_path / "a-report.csv").read_text()
        # A new row above the sent one: the row that has a request keeps the address.
        second = await run_outreach(fc, store, _sheet(tmp_path / "b.csv", [("z", "ann@x.test"), ("a", "ann@x.test"),
                                                                           ("b", "ann@x.test"),
                                                                           ("c", "cy@x.test")]),
                                    form, job="spring", delivery="email", report_path=tmp_path / "b-report.csv")
        assert (second.sent, second.skipped_existing, second.suppressed) == (0, 2, 2)
        assert "suppressed (same email as row 3)" in (tmp_path / "b-report.csv").read_text()
        allowed = await run_outreach(fc, store, tmp_path / "a.csv", form, job="autumn", delivery="email",
                                     report_path=tmp_path / "c-report.csv",
                                     rule=contact_rule(store, OutreachSettings(allow_duplicates=True)))
        assert (allowed.sent, allowed.suppressed) == (3, 0)
        await sandbox.helpers.clock_advance(MINUTE)
        spring = {r.request_id for r in store.campaign.rows("spring") if r.request_id}
        invitations = [m for m in (await sandbox.helpers.mail_list(to="ann@x.test")).items
                       if m.kind == "invitation" and m.request_id in spring]
        assert len(invitations) == 1
    f = read_campaign(store, "spring").funnel
    assert (f.rows, f.sent, f.rejected, f.suppressed) == (4, 2, 0, 2), "the rows of the last run, each in one state"


async def _cli(args: list[str], config: Path, token: str, code: int = 0) -> str:
    # In a thread: the command runs its own event loop.
    result = await asyncio.to_thread(CliRunner().invoke, app, [*args, "--config", str(config)],
                                     env={"FORMSYNC_SERVICE__TOKEN": token})
    assert result.exit_code == code, result.output
    assert token not in result.output
    return result.stdout


async def test_suppress_cancels_pending_requests_and_remind_leaves_suppressed_rows(sandbox: Sandbox,
                                                                                   tmp_path: Path) -> None:
    await sandbox.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
    db = f"sqlite:///{tmp_path}/s.db"
    store = Store(db)
    store.migrate()
    form = sandbox.pro.forms["Contact"]
    blocked = tmp_path / "blocked.txt"
    blocked.write_text("# addresses never to contact\n")
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        sent = await run_outreach(fc, store, _sheet(tmp_path / "s.csv", [("a", "ann@x.test"), ("e", "eve@x.test"),
                                                                         ("f", "fay@x.test"), ("b", "bo@bounce.test")]),
                                  form, job="spring", delivery="email", report_path=tmp_path / "r.csv")
        assert sent.sent == 4
        await sandbox.helpers.clock_advance(MINUTE)
        eve = next(r for r in store.campaign.rows("spring") if r.recipient_email == "eve@x.test")
        config = tmp_path / "formsync.toml"
        config.write_text(f'[store]\nurl = "{db}"\n[service]\nbase_url = "{sandbox.base_url}"\n'
                          f'[outreach]\nsuppression_file = "{blocked}"\n')
        said = await _cli(["campaign", "suppress", "Eve@x.test", "--reason", "opted out"], config, sandbox.pro.token)
        assert said.splitlines() == [
            "suppressed eve@x.test", f"eve@x.test: pending request {eve.request_id} canceled "
            "(suppressed (listed: opted out))",
            "done: 1 address added to the suppression list, 1 pending request canceled"]
        record = await fc.get_request(eve.request_id or "")
        assert (record.status, record.cancelReason) == ("canceled", "suppressed (listed: opted out)")
        again = json.loads(await _cli(["campaign", "suppress", "eve@x.test", "--json"], config, sandbox.pro.token))
        assert (again["added"], again["already"], again["canceled"]) == ([], ["eve@x.test"], [])

        # An address added to the file: the remind's poll cancels its pending request, as the bounced one's.
        blocked.write_text("fay@x.test\n")
        report = await act(fc, store, "spring", "remind",
                           rule=contact_rule(store, OutreachSettings(suppression_file=blocked)))
        assert (report.done, report.suppressed) == (1, 0), "fay's and the bounced request were canceled first"
        assert report.calls == 4  # the poll's listing, two cancels, one reminder: none for fay
        fay = next(r for r in store.campaign.rows("spring") if r.recipient_email == "fay@x.test")
        record = await fc.get_request(fay.request_id or "")
        assert (record.status, record.cancelReason) == ("canceled", "suppressed (listed in blocked.txt)")
        shown = json.loads(await _cli(["campaign", "remind", "spring", "--dry-run", "--json"], config,
                                      sandbox.pro.token))
        assert (shown["suppressed"], shown["candidates"]) == (0, 1), "only ann is left to remind"

    mails = (await sandbox.helpers.mail_list()).items
    reminded = {m.to for m in mails if m.kind == "reminder"}
    assert reminded == {"ann@x.test"}
    listed = (await _cli(["campaign", "suppress", "--list"], config, sandbox.pro.token)).splitlines()
    assert listed[0].startswith("eve@x.test: listed (opted out), since ")
    assert listed[1:] == ["bo@bounce.test: bounced", "done: 2 addresses suppressed"]
    removed = await _cli(["campaign", "suppress", "--remove", "eve@x.test", "nobody@x.test"], config,
                         sandbox.pro.token)
    assert removed.splitlines() == ["eve@x.test is no longer suppressed", "nobody@x.test was not on the "
                                    "suppression list", "done: 1 address taken off the suppression list"]
    assert "eve@x.test" not in store.campaign.suppressed()
    wrong = CliRunner().invoke(app, ["campaign", "suppress", "--config", str(config)])
    assert wrong.exit_code == 2 and "give addresses, or --list alone" in wrong.output


async def test_a_bounce_seen_by_poll_cancels_the_pending_request(sandbox: Sandbox, tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.migrate()
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await run_outreach(fc, store, _sheet(tmp_path / "s.csv", [("a", "ann@x.test"), ("b", "bo@bounce.test")]),
                           sandbox.pro.forms["Contact"], job="j", delivery="email", report_path=tmp_path / "r.csv")
        await sandbox.helpers.clock_advance(MINUTE)
        polled = await poll_once(fc, store)
        assert [(c.email, c.reason) for c in polled.suppressed] == [("bo@bounce.test", "suppressed (bounced)")]
        # the figures add up: the canceled request is counted canceled, not still pending
        assert (polled.pending_before, polled.updated, polled.canceled, polled.still_pending) == (2, 1, 1, 1)
        assert (await poll_once(fc, store)).suppressed == [], "once"
    statuses = {r.recipient_email: r.status for r in store.campaign.rows("j")}
    assert statuses == {"ann@x.test": "pending", "bo@bounce.test": "canceled"}


@pytest.mark.parametrize("args", [["campaign", "suppress", "not-an-address"],
                                  ["campaign", "suppress", "a@x.test", "--list"]])
def test_suppress_usage_mistakes_are_one_line(args: list[str], tmp_path: Path) -> None:
    config = tmp_path / "formsync.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/s.db"\n')
    result = CliRunner().invoke(app, [*args, "--config", str(config)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) <= 2
