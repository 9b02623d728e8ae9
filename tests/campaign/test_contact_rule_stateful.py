"""The contact rule's promise, driven as a campaign on a real sandbox (its test clock,
over loopback) with a SQLite store, through the job functions the commands and the
scheduler call (``pipelines.jobs``) on settings read from a config file: send (two jobs,
sent again), edit a sheet row, suppress, list an address in the suppression file, bounce
(recipients on ``bounce.test``, with ``outreach.suppress_bounced`` on or off), poll, remind,
advance the clock, complete, close. After every step: no suppressed or bounced address has
a mail dated after its suppression (an address listed in the file: after the next send,
remind, poll or close), no email has two invitations in one job, no suppressed address is
left with a pending request, the outreach line, the funnel, ``formsync status`` (its
outreach line too), the page, the export (its rows' states) and the job's record agree on
sent, changed, rejected and suppressed, and nothing that was not pending is reminded."""

from __future__ import annotations

import asyncio
import csv
import itertools
from collections import Counter
from collections.abc import Coroutine
from html import escape
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from connector.client.rpc import FormClient
from connector.config.settings import load_settings
from connector.store import Store
from connector.store._erasure import Person
from pipelines.campaign import read_campaign, write_page
from pipelines.campaign import suppress as suppression_list
from pipelines.campaign.export import export_campaign
from pipelines.jobs import CloseParams, JobEnv, OutreachParams, PollParams, RemindParams, kinds
from pipelines.lifecycle.erase import erase_everywhere
from pipelines.operate.status import collect_status
from pipelines.outreach.counts import RunCounts, recorded_counts, row_states
from pipelines.rules.contact import contact_rule
from tests.conftest import Sandbox, start_sandbox

pytestmark = pytest.mark.slow  # about a minute: bounded by examples and steps below

T = TypeVar("T")
JOBS = ("spring", "autumn")
# Six sheet rows: row 4 repeats row 2's address; row 5 bounces.
SHEET = [("a", "p0@x.test"), ("b", "p1@x.test"), ("c", "P0@x.test"), ("d", "b0@bounce.test"), ("e", "p2@x.test"),
         ("f", "p3@x.test")]
ADDRESSES = sorted({e.lower() for _, e in SHEET})
STEPS_MS = (60_000, 11 * 60_000, 86_400_000, 3 * 86_400_000)
FAST = 100_000


class Campaign(RuleBasedStateMachine):
    """One campaign per example, on a sandbox reset to its seed."""

    loop: asyncio.AbstractEventLoop
    sandbox: Sandbox
    root: Path
    examples = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.dir = self.root / f"ex{next(self.examples)}"
        self.dir.mkdir()
        self.store = Store(f"sqlite:///{self.dir}/s.db")
        self.store.migrate()
        self.sheet = self.dir / "sheet.csv"
        self.names = {ext: f"Person {ext}" for ext, _ in SHEET}
        self._write_sheet()
        self.blocked = self.dir / "blocked.txt"
        self.blocked.write_text("# never contact\n")
        self.config = self.dir / "formsync.toml"
        self.bounced = True  # outreach.suppress_bounced, chosen per example
        self._write_config()
        self.form = self.sandbox.pro.forms["Contact"]
        self.suppressed_at: dict[str, int] = {}  # address -> the service's time it was suppressed or seen bounced
        self.filed: set[str] = set()  # listed in the file, in effect from the next send, remind, poll or close
        self.reminded_not_pending: list[str] = []
        self.said: dict[str, str] = {}  # job -> the last outreach line (its counts in words)
        self.erased = False  # a person erased: their rows left the ledger since the last run counted them
        self.run(self._start())

    def _write_sheet(self) -> None:
        with self.sheet.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["externalId", "name", "email"])
            w.writerows([ext, self.names[ext], email] for ext, email in SHEET)

    def _write_config(self) -> None:
        self.config.write_text(f'[store]\nurl = "sqlite:///{self.dir}/s.db"\n[outreach]\ndelivery = "email"\n'
                               f'report_dir = "{self.dir}"\nsuppression_file = "{self.blocked}"\n'
                               f'suppress_bounced = {str(self.bounced).lower()}\n')

    def env(self) -> JobEnv:
        """What each step's job runs with: the settings as the config file has them now."""
        return JobEnv(load_settings(self.config), self.store, client=self.client)

    def _in_effect(self) -> None:
        """A send, remind, poll or close ran: the addresses listed in the file are suppressed from now."""
        now = self.now()
        for address in self.filed:
            self.suppressed_at.setdefault(address, now)
        self.filed.clear()

    async def _start(self) -> None:
        helpers = self.sandbox.helpers
        await helpers.reset()
        await helpers.limits_set(calls_per_minute=FAST, creates_per_minute=FAST)
        self.client = await FormClient(self.sandbox.base_url, self.sandbox.pro.token, calls_per_minute=FAST,
                                       creates_per_minute=FAST).__aenter__()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)

    def now(self) -> int:
        return self.run(self.sandbox.helpers.clock_get()).now_ms

    def teardown(self) -> None:
        self.run(self.client.__aexit__(None, None, None))
        self.store.close()

    # -- steps ----------------------------------------------------------------------------

    @initialize(bounced=st.booleans())
    def choose(self, bounced: bool) -> None:
        self.bounced = bounced
        self._write_config()

    @rule(job=st.sampled_from(JOBS))
    def send(self, job: str) -> None:
        report = self.run(kinds.outreach(OutreachParams(sheet=self.sheet, form=self.form, job=job), self.env()))
        assert report.failed == 0 and report.rows == len(SHEET)
        self.said[job] = report.outcome()
        self._in_effect()

    @rule(ext=st.sampled_from([ext for ext, _ in SHEET]))
    def edit(self, ext: str) -> None:
        self.names[ext] += " (edited)"  # the row's content changes: a job that sent it counts it changed
        self._write_sheet()

    @rule(address=st.sampled_from(ADDRESSES))
    def list_in_file(self, address: str) -> None:
        with self.blocked.open("a") as fh:
            fh.write(f"{address}\n")
        if address not in self.suppressed_at:
            self.filed.add(address)

    @rule(address=st.sampled_from(ADDRESSES))
    def suppress(self, address: str) -> None:
        report = suppression_list.add(self.store, [address], "opted out")
        self.run(suppression_list.cancel_pending(self.client, self.store, report,
                                                 contact_rule(self.store, load_settings(self.config).outreach)))
        self.suppressed_at.setdefault(address, self.now())  # in effect once its requests are canceled

    @rule(address=st.sampled_from(ADDRESSES))
    def erase(self, address: str) -> None:
        receipt = self.run(erase_everywhere(self.store, Person(email=address), self.client))
        assert receipt.pending_requests == [], "their pending requests are canceled first"
        self.suppressed_at.setdefault(address, self.now())  # erased: never contacted again
        self.erased = True

    @rule(ms=st.sampled_from(STEPS_MS))
    def advance(self, ms: int) -> None:
        self.run(self.sandbox.helpers.clock_advance(ms))

    @rule()
    def poll(self) -> None:
        self.run(kinds.poll(PollParams(), self.env()))
        self._in_effect()

    @rule(job=st.sampled_from(JOBS))
    def remind(self, job: str) -> None:
        if self.store.campaign.job(job) is None:
            return
        since = self.now()
        self.run(kinds.remind(RemindParams(job=job), self.env()))
        self._check_reminded(since)
        self._in_effect()

    @rule(job=st.sampled_from(JOBS), pick=st.integers(0, 5))
    def complete(self, job: str, pick: int) -> None:
        pending = [r for r in self.store.campaign.rows(job) if r.status == "pending" and r.request_id]
        if pending:
            rid = pending[pick % len(pending)].request_id or ""
            record = self.run(self.client.get_request(rid))
            if record.status == "pending":
                self.run(self.sandbox.helpers.requests_complete(rid, {"topic": "support", "message": "hi"}))

    @rule(job=st.sampled_from(JOBS))
    def close(self, job: str) -> None:
        if self.store.campaign.job(job) is not None:
            self.run(kinds.close(CloseParams(job=job, reason="closed"), self.env()))
            self._in_effect()

    def _check_reminded(self, since: int) -> None:
        """Every reminder this step sent went to a request still pending (the clock does not move within a step)."""
        mails = self.run(self.sandbox.helpers.mail_list()).items
        for m in mails:
            if m.kind == "reminder" and m.created_at_ms >= since and m.request_id:
                record = self.run(self.client.get_request(m.request_id))
                if record.status != "pending":
                    self.reminded_not_pending.append(m.request_id)

    # -- the promises, after every step ---------------------------------------------------

    @invariant()
    def promises_hold(self) -> None:
        now = self.now()
        for email, why in self.store.campaign.suppressed().items():
            if not why.startswith("listed") and self.bounced:  # seen bounced: canceled in the poll that saw it
                self.suppressed_at.setdefault(email, now)
        mails = self.run(self.sandbox.helpers.mail_list()).items
        late = [(m.to, m.kind) for m in mails if m.to.lower() in self.suppressed_at
                and m.created_at_ms > self.suppressed_at[m.to.lower()]]
        assert late == [], "mail after the address was suppressed"
        for job in JOBS:
            ids = {r.request_id for r in self.store.campaign.rows(job) if r.request_id}
            invitations = Counter(m.to.lower() for m in mails if m.kind == "invitation" and m.request_id in ids)
            assert all(n == 1 for n in invitations.values()), f"two invitations in {job}: {invitations}"
        pending = self.run(self._pending_addresses())
        assert not pending & set(self.suppressed_at), "a suppressed address is left with a pending request"
        assert self.reminded_not_pending == [], "reminded a request that was not pending"
        self._counts_agree()

    async def _pending_addresses(self) -> set[str]:
        return {(r.recipient.email or "").lower() async for r in self.client.iter_requests(form_id=self.form,
                                                                                         status="pending")
                if r.recipient is not None}

    def _counts_agree(self) -> None:
        status = {p.job: p for p in collect_status(load_settings(self.config), self.store).outreach}
        for job in JOBS:
            record = self.store.campaign.job(job)
            if record is None:
                continue
            f = read_campaign(self.store, job).funnel
            recorded = recorded_counts((record.settings or {}).get("outcome", {}))
            assert recorded is not None and status[job].last_run == recorded and status[job].funnel == f
            # one count: the campaign's and status's are one, the run's until an erase took rows
            run = read_campaign(self.store, job).counts
            assert run == status[job].counts and (self.erased or run == recorded)
            if not self.erased:
                assert run.outcome() in status[job].line() and self.said.get(job, run.outcome()) == run.outcome()
            assert f.rows == run.rows == f.sent + f.rejected + f.suppressed + f.not_sent
            assert (f.sent, f.changed, f.rejected, f.suppressed) == (run.sent_total, run.changed, run.rejected,
                                                                    run.suppressed)
            self._page_and_export_agree(job, run)

    def _page_and_export_agree(self, job: str, run: RunCounts) -> None:
        """The page shows the job record's row states, and the export has one row per sheet
        row with the same sent and suppressed figures."""
        f = read_campaign(self.store, job).funnel
        page = self.dir / f"{job}.html"
        write_page(self.store, job, page, self.now())
        html = page.read_text(encoding="utf-8")
        for words, n in row_states(run):
            assert f"<tr><td>{escape(words)}</td><td class=n>{n:,}</td></tr>" in html, (job, words, n)
        assert f"<th>sheet rows</th><th class=n>{run.rows:,}</th>" in html
        out = self.dir / f"{job}.csv"
        export_campaign(self.store, job, "csv", out)
        with out.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        assert len(rows) == f.rows, (job, len(rows), f.rows)
        assert sum(1 for r in rows if r["request_id"]) == f.requests
        assert sum(1 for r in rows if r["status"] == "suppressed") == f.suppressed
        states = Counter(r["row_state"] for r in rows)
        assert (states["sent"], states["changed"], states["changed"] + states["rejected"], states["suppressed"]) == (
            f.sent, f.changed, f.rejected, f.suppressed), (job, states)


def test_the_contact_rule_holds_through_a_campaign(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    server, sb = loop.run_until_complete(start_sandbox(tmp_path / "sandbox"))
    Campaign.loop, Campaign.sandbox, Campaign.root = loop, sb, tmp_path
    try:
        run_state_machine_as_test(Campaign, settings=settings(
            max_examples=12, stateful_step_count=16, deadline=None, derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
    finally:
        loop.run_until_complete(sb.http.close())
        loop.run_until_complete(server.stop())
        loop.close()
