"""``formsync demo``: the whole flow on this machine, in one process, on loopback.

It starts the sandbox and the receiver on free ports, subscribes webhooks for the
seeded Contact form of the Pro workspace, sends one request per row of
``pipelines/cli/data/contacts.csv`` (package data) with callbacks to the receiver, answers most requests
through their recipient pages as people would, cancels one, lets one expire on the
sandbox's test clock, has every callback and webhook delivered and checks the receiver
stored each of them, polls and syncs, exports CSV, XLSX and Parquet, and prints a
summary (also written to ``summary.json``).

Everything it keeps lives in the output directory: the sandbox's data and the
connector's database under ``.state/``, so a second run reuses them. Each step looks at
the state first and only does what is still missing: a re-run sends no request (the
outreach job remembers its rows), answers, cancels and expires nothing new, and prints
the same figures, which are all read back from the store and the sandbox rather than
counted along the way. The exported files are written again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from pydantic import BaseModel, SecretStr, ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from connector.client.rpc import FormClient
from connector.config.settings import OutreachSettings, ReceiverSettings, ServiceSettings, Settings
from connector.models import RequestRecord
from connector.receiver.app import RECEIVER_KEY, Channel, Receiver, create_receiver_app, event_paths
from connector.store import Store
from formservice.sandbox.recipient import answer_request
from pipelines.jobs import ExportParams, JobEnv, OutreachParams, PollParams, SyncParams, kinds
from pipelines.outreach import read_sheet
from pipelines.sync.submissions import SyncReport

if TYPE_CHECKING:
    from formservice.sandbox.client import SandboxHelpers

log = logging.getLogger("pipelines.demo")

# Package data, so the demo runs from an installed wheel as from a checkout.
DEMO_SHEET = Path(str(resources.files("pipelines.cli") / "data" / "contacts.csv"))
DEMO_PLAN = "pro"
DEMO_FORM = "Contact"
JOB = "demo"
TOKEN_NAME = "formsync-demo"
STATE_DIR = ".state"
STATE_FILE = "demo.json"
EXPORT_STEM = "responses"
REPORT_FILE = "rejected-rows.csv"
SUMMARY_FILE = "summary.json"
# The rows whose request is canceled, and left to expire, instead of being answered.
CANCEL_EXTERNAL_ID = "CUST-1023"
EXPIRE_EXTERNAL_ID = "CUST-1024"
CANCEL_REASON = "The customer asked to be left out of this campaign."
WEBHOOK_EVENTS = ("request_completed", "request_canceled", "request_expired")
WEBHOOK_PROVIDER = "n8n"
FLUSH_ROUNDS = 5
TOPICS = ("sales", "support", "other")
MESSAGES = (
    "Could you send me the pricing for 50 seats?",
    "Our invoices still show the old company address.",
    "We would like a demo for our operations team next week.",
    "The export to Excel works well; thanks for the quick fix.",
    "Please add our second office to the account.",
    "Is there a discount for yearly billing?",
    "Single sign-on would help us roll this out.",
)


class DemoError(Exception):
    """The demo cannot run or could not finish; the message says what to do."""


class OutDirError(DemoError):
    """The output directory cannot be used."""


# ======================================================================================
# Pure parts
# ======================================================================================


def check_out_dir(out: Path) -> Path:
    """``out`` as the demo's output directory: created when missing; an existing file, a
    non-empty directory that holds no demo state, or a directory that cannot be written
    to is an ``OutDirError`` saying so."""
    if out.exists() and not out.is_dir():
        raise OutDirError(f"{out} is a file; give a directory for the demo's files (it is created if missing)")
    if out.is_dir() and any(out.iterdir()) and not (out / STATE_DIR).is_dir():
        raise OutDirError(f"{out} is not empty and holds no earlier demo run ({STATE_DIR}/ is missing); "
                          f"give a new or empty directory")
    try:
        (out / STATE_DIR).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutDirError(f"cannot create {out / STATE_DIR}: {e.strerror or e}") from None
    if not os.access(out, os.W_OK) or not os.access(out / STATE_DIR, os.W_OK):
        raise OutDirError(f"{out} is not writable")
    return out


def recipient_choices(external_id: str) -> dict[str, str]:
    """What the recipient of row ``external_id`` answers where the page is blank: a topic
    and a message, picked from fixed lists by a hash of the id (the same on every run)."""
    n = int.from_bytes(hashlib.sha256(external_id.encode()).digest()[:4], "big")
    return {"topic": TOPICS[n % len(TOPICS)], "message": MESSAGES[n % len(MESSAGES)]}


def external_id_of(row_key: str) -> str | None:
    """The externalId inside an outreach row identity (``ext:<id>``), else None."""
    return row_key.removeprefix("ext:") if row_key.startswith("ext:") else None


class DemoState(BaseModel):
    """What a re-run needs beyond the databases: the ports used last time (tried first, so
    the links and callback URLs of earlier requests keep working) and the webhook
    subscriptions' signing secret."""

    sandbox_port: int = 0
    receiver_port: int = 0
    webhook_secret: str


def load_state(path: Path) -> DemoState:
    """The state file, or a new state (fresh webhook secret) when there is none yet. An
    unreadable file is a ``DemoError``."""
    if not path.exists():
        return DemoState(webhook_secret="whsec_" + secrets.token_urlsafe(32))
    try:
        return DemoState.model_validate_json(path.read_text())
    except (ValidationError, ValueError, OSError) as e:
        raise DemoError(f"{path} is damaged ({type(e).__name__}); delete {path.parent} to start over") from None


class RejectedRow(BaseModel):
    """A sheet row that was not sent: its number in the sheet (header = row 1) and why."""

    row: int
    external_id: str | None = None
    problems: list[str]


def rejected_rows(report: Path, sheet_rows: Sequence[dict[str, str]]) -> list[RejectedRow]:
    """The outreach report (``row,column,problem,accepted``) grouped by row, in row order."""
    import csv

    by_row: dict[int, list[str]] = {}
    with report.open(newline="", encoding="utf-8") as fh:
        for line in csv.DictReader(fh):
            text = f"{line['column']}: {line['problem']}" if line["column"] else line["problem"]
            if line.get("accepted"):
                text += f" (accepted: {line['accepted']})"
            by_row.setdefault(int(line["row"]), []).append(text)
    out = []
    for number in sorted(by_row):
        ext = sheet_rows[number - 2].get("externalId") if 2 <= number <= len(sheet_rows) + 1 else None
        out.append(RejectedRow(row=number, external_id=ext or None, problems=by_row[number]))
    return out


class FileWritten(BaseModel):
    """A file the demo wrote, and its data rows where it has any."""

    path: str
    format: str
    rows: int | None = None


class DemoSummary(BaseModel):
    """The figures of a demo run. All but ``this_run`` and ``seconds`` are read from the
    store and the sandbox after the run, so a re-run shows the same ones: the sheet's rows
    as the job's counts have them (``job_counts``: ``sheet_rows``, ``sent``,
    ``rejected_count``), ``rejected`` the reasons from the run's report file, ``files``
    the files this run wrote into the directory."""

    out_dir: str
    form: str
    form_id: str
    sheet_rows: int
    sent: int
    completed: int
    canceled: int
    expired: int
    pending: int
    rejected: list[RejectedRow]
    rejected_count: int = 0
    callbacks_delivered: int
    webhooks_delivered: int
    events_stored: int
    deliveries_refused: int
    submissions_synced: int
    submissions_from_requests: int
    files: list[FileWritten]
    this_run: dict[str, int]
    seconds: float


def delivery_counts(events: Sequence[Mapping[str, Any]], request_ids: set[str]) -> dict[str, Any]:
    """From the sandbox's ``events.list`` items: the ids of the events of ``request_ids``,
    the callback and webhook deliveries that succeeded, the attempts answered with
    something other than 2xx, and the deliveries still waiting."""
    ids: list[str] = []
    counts = {"callback": 0, "webhook": 0}
    refused = waiting = 0
    for ev in events:
        if ev.get("requestId") not in request_ids:
            continue
        ids.append(ev["id"])
        for d in ev.get("deliveries", []):
            if d["state"] == "delivered":
                counts[d["kind"]] = counts.get(d["kind"], 0) + 1
            elif d["state"] == "pending":
                waiting += 1
            refused += sum(1 for a in d.get("attempts", []) if not 200 <= (a.get("status") or 0) < 300)
    return {"event_ids": ids, "callbacks": counts["callback"], "webhooks": counts["webhook"], "refused": refused,
            "waiting": waiting}


# ======================================================================================
# The run
# ======================================================================================


class _DemoTokens:
    """The demo's current API token, for its receiver's ``fields.list`` reads: the
    receiver starts before the first token is minted, and the token is renewed as the
    demo moves the sandbox's clock."""

    key = "demo"

    def __init__(self) -> None:
        self.current = ""

    async def token(self) -> SecretStr:
        return SecretStr(self.current)

    async def renew(self, stale: SecretStr) -> SecretStr:
        return SecretStr(self.current)


@dataclass
class _World:
    """The running parts of one demo run."""

    service: Any  # the in-process formservice Service
    workspace: dict[str, Any]  # the demo workspace's credentials
    form_id: str
    store: Store
    http: aiohttp.ClientSession
    receiver: Receiver
    receiver_url: str
    paths: dict[Channel, str]
    tokens: _DemoTokens
    token: str = ""
    client: FormClient | None = None

    @property
    def sandbox_url(self) -> str:
        return str(self.service.base_url)

    @property
    def api(self) -> FormClient:
        if self.client is None:
            raise RuntimeError("no client yet: call renew_token() first")
        return self.client

    async def renew_token(self) -> None:
        """Mint a fresh API token and switch the client to it: tokens last 30 days on the
        sandbox's clock, and the demo moves that clock past the seeded token's lifetime."""
        from formservice.sandbox.seed import renew_token

        self.token = self.tokens.current = renew_token(self.service, self.workspace["id"], self.workspace["userId"],
                                                       TOKEN_NAME)
        old, self.client = self.client, FormClient(self.sandbox_url, self.token)
        await self.client.__aenter__()
        if old is not None:
            await old.close()

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    @property
    def helpers(self) -> SandboxHelpers:
        """The sandbox's test helpers, with the demo's current token."""
        from formservice.sandbox.client import SandboxHelpers

        return SandboxHelpers(self.sandbox_url, self.token, http=self.http)


async def _bind(start: Callable[[int], Awaitable[Any]], preferred: int) -> Any:
    """Start on the port used last time when it is free, else on a free one."""
    if preferred:
        try:
            return await start(preferred)
        except OSError:
            log.info("port %d is taken; using a free one", preferred)
    return await start(0)


async def _start_receiver(stack: AsyncExitStack, store: Store, settings: ReceiverSettings,
                          preferred: int, service: ServiceSettings, tokens: _DemoTokens) -> tuple[Receiver, int]:
    # With the service and the demo's token, the receiver reads each new form's field list
    # as a real installation with service.token does (none held back, nothing to warn of).
    app = create_receiver_app(store, settings, service=service, tokens=tokens)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    stack.push_async_callback(runner.cleanup)  # stops taking deliveries, then commits what is queued

    async def start(port: int) -> int:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        return int(runner.addresses[0][1])

    return app[RECEIVER_KEY], await _bind(start, preferred)


def job_requests(store: Store) -> dict[str, str | None]:
    """The requests the demo's outreach job created: request id -> externalId."""
    return {rid: external_id_of(key) for rid, key in store.outreach_progress.requests_of(JOB).items()}


async def _ensure_webhooks(w: _World, secret: str) -> None:
    """One subscription per terminal request event, to this run's receiver. The demo's
    subscriptions from an earlier run that point elsewhere (another port) are removed."""
    target = w.receiver_url + w.paths["webhooks"]
    have: set[str] = set()
    for sub in await w.api.list_webhooks(w.form_id):
        url = urlsplit(sub.target_url)
        ours = url.hostname == "127.0.0.1" and url.path == w.paths["webhooks"]
        if ours and sub.target_url == target and sub.event_type in WEBHOOK_EVENTS and sub.event_type not in have:
            have.add(sub.event_type)
        elif ours:
            await w.api.delete_webhook(sub.subscription_id)
    for event_type in WEBHOOK_EVENTS:
        if event_type not in have:
            await w.api.create_webhook(w.form_id, target, WEBHOOK_PROVIDER, event_type=event_type,
                                       signing_secret=secret)


async def _track(w: _World, ids: dict[str, str | None]) -> dict[str, RequestRecord]:
    """The job's requests as the service shows them now, also stored (with their form) so
    that poll can follow the pending ones."""
    records = {r.id: r async for r in w.api.iter_requests(form_id=w.form_id) if r.id in ids}
    if records:
        w.store.upsert_requests([r.model_dump(exclude_none=True) for r in records.values()], source="poll")
    return records


def to_answer(records: dict[str, RequestRecord], ids: dict[str, str | None]) -> list[tuple[str, RequestRecord]]:
    """The (externalId, request) pairs the recipients answer: every pending request of the
    job but the one the demo cancels and the one it lets expire."""
    out = []
    for rid, rec in records.items():
        ext = ids.get(rid) or rid
        if rec.status == "pending" and ext not in (CANCEL_EXTERNAL_ID, EXPIRE_EXTERNAL_ID):
            out.append((ext, rec))
    return out


async def _answer(w: _World, todo: list[tuple[str, RequestRecord]], advance: Callable[[], None]) -> int:
    """Answer each request through its page as its recipient would. Returns how many."""
    for ext, rec in todo:
        if not rec.url:
            raise DemoError(f"request {rec.id} ({ext}) has no url to open")
        try:
            result = await answer_request(w.http, rec.url, recipient_choices(ext))
        except ValueError as e:
            raise DemoError(f"the recipient page of {ext} could not be answered: {e}") from None
        if not result.thanked:
            raise DemoError(f"the recipient page of {ext} refused the answers (HTTP {result.status}): "
                            f"{' '.join(result.errors.split())[:300]}")
        advance()
    return len(todo)


async def _cancel_and_expire(w: _World, records: dict[str, RequestRecord], ids: dict[str, str | None]
                             ) -> tuple[int, int]:
    by_ext = {ext: records[rid] for rid, ext in ids.items() if rid in records and ext}
    canceled = expired = 0
    target = by_ext.get(CANCEL_EXTERNAL_ID)
    if target is not None and target.status == "pending":
        await w.api.cancel_request(target.id, reason=CANCEL_REASON)
        canceled = 1
    target = by_ext.get(EXPIRE_EXTERNAL_ID)
    if target is not None and target.status == "pending" and target.expires_at_ms is not None:
        now = (await w.helpers.clock_get()).now_ms
        if target.expires_at_ms >= now:
            # The test clock jumps past the request's expiresAt; the sandbox expires it at once.
            await w.helpers.clock_advance(target.expires_at_ms - now + 1000)
            await w.renew_token()
        expired = 1
    return canceled, expired


async def _deliver(w: _World, request_ids: set[str]) -> dict[str, Any]:
    """Have every due callback and webhook delivery attempted now, until none of the job's
    is waiting (bounded), and return the delivery counts."""
    counts: dict[str, Any] = {}
    for _ in range(FLUSH_ROUNDS):
        await w.helpers.deliveries_flush()
        events = [e.model_dump() for e in (await w.helpers.events_list(form_id=w.form_id)).items]
        counts = delivery_counts(events, request_ids)
        if not counts["waiting"]:
            break
        await asyncio.sleep(0.2)
    return counts


async def _export_all(env: JobEnv, out: Path, form_id: str) -> list[FileWritten]:
    files = []
    for fmt, table in (("csv", "wide"), ("xlsx", "all"), ("parquet", "wide")):
        path = out / f"{EXPORT_STEM}.{fmt}"
        run = await kinds.export(ExportParams.model_validate({"format": fmt, "out": path, "table": table,
                                                              "form": form_id}), env)
        files.append(FileWritten(path=str(path), format=fmt, rows=run.files[0].rows["wide"]))
    return files


def _env(w: _World, out: Path) -> JobEnv:
    """The demo's jobs run as the commands run them, on its client and the sandbox's clock."""
    async def clock() -> int:
        return (await w.helpers.clock_get()).now_ms

    settings = Settings.model_construct(
        service=ServiceSettings(base_url=w.sandbox_url),
        outreach=OutreachSettings(callback_url=w.receiver_url + w.paths["callbacks"], report_dir=out))
    return JobEnv(settings, w.store, client=w.api, clock=clock)


STEPS = ("start the sandbox and the receiver", "subscribe webhooks", "send requests from the sheet",
         "recipients answer on their pages", "cancel one, let one expire", "deliver callbacks and webhooks",
         "poll and sync", "export")


class _Steps:
    """Rich progress: one bar over the steps, one for the recipients' answers."""

    def __init__(self, console: Console, show: bool) -> None:
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=True, disable=not show)
        self.task = self.bar.add_task("formsync demo", total=len(STEPS))

    @contextmanager
    def step(self, index: int) -> Iterator[None]:
        self.bar.update(self.task, description=f"{STEPS[index]}")
        began = time.monotonic()
        yield
        log.info("%s: %.2f s", STEPS[index], time.monotonic() - began)
        self.bar.update(self.task, completed=index + 1)

    def sub(self, description: str, total: int) -> Callable[[], None]:
        task = self.bar.add_task(f"  {description}", total=total)
        return lambda: self.bar.advance(task)


async def _start(stack: AsyncExitStack, state_dir: Path, state: DemoState) -> tuple[_World, DemoState]:
    """The demo's first step: the sandbox, the store and the receiver, each on the port of
    the last run when it is free, stopped by ``stack``; the state with this run's ports."""
    from formservice.sandbox.runner import SandboxServer

    async def sandbox_on(port: int) -> SandboxServer:
        return await SandboxServer(state_dir / "sandbox", port=port).start()

    sandbox = await _bind(sandbox_on, state.sandbox_port)
    stack.push_async_callback(sandbox.stop)
    ws = sandbox.workspace(DEMO_PLAN)
    store = Store(f"sqlite:///{state_dir / 'formsync.db'}")
    stack.callback(store.close)
    store.migrate()
    settings = ReceiverSettings(host="127.0.0.1", port=0, callback_secrets=[SecretStr(ws["signingSecret"])],
                                webhook_secrets=[SecretStr(state.webhook_secret)])
    tokens = _DemoTokens()
    receiver, receiver_port = await _start_receiver(stack, store, settings, state.receiver_port,
                                                    ServiceSettings(base_url=str(sandbox.service.base_url)), tokens)
    state = state.model_copy(update={"sandbox_port": sandbox.bound_port, "receiver_port": receiver_port})
    http = await stack.enter_async_context(aiohttp.ClientSession())
    w = _World(service=sandbox.service, workspace=ws, form_id=ws["forms"][DEMO_FORM], store=store, http=http,
               receiver=receiver, receiver_url=f"http://127.0.0.1:{receiver_port}", paths=event_paths(settings),
               tokens=tokens)
    stack.push_async_callback(w.close)
    await w.renew_token()
    return w, state


def _summarise(w: _World, out: Path, request_ids: set[str], delivered: dict[str, Any], files: list[FileWritten],
               this_run: dict[str, int], seconds: float) -> DemoSummary:
    """The run's summary, from the store (everything earlier runs stored too) and this run's counts."""
    from pipelines.campaign.read import read_campaign

    store = w.store
    statuses = store.requests.status_counts(request_ids)
    total, from_requests = store.submissions.completed_counts(w.form_id)
    counts = read_campaign(store, JOB).counts
    rejected = rejected_rows(out / REPORT_FILE, read_sheet(DEMO_SHEET))
    known = {f.path: f for f in [FileWritten(path=str(out / REPORT_FILE), format="csv", rows=counts.problems),
                                 *files]}
    return DemoSummary(
        out_dir=str(out), form=f"{DEMO_FORM} ({w.workspace['name']})", form_id=w.form_id,
        sheet_rows=counts.rows, sent=counts.sent_total,
        completed=statuses.get("completed", 0), canceled=statuses.get("canceled", 0),
        expired=statuses.get("expired", 0), pending=statuses.get("pending", 0),
        rejected=rejected, rejected_count=counts.rejected,
        callbacks_delivered=delivered["callbacks"], webhooks_delivered=delivered["webhooks"],
        events_stored=store.events.count_stored(delivered["event_ids"]), deliveries_refused=delivered["refused"],
        submissions_synced=total, submissions_from_requests=from_requests,
        files=files_written(out, time.time() - seconds - MTIME_SLACK_S, known), this_run=this_run, seconds=seconds)


MTIME_SLACK_S = 0.05  # a file's time can lag the clock by a tick of the kernel's


def files_written(out: Path, since: float, known: Mapping[str, FileWritten]) -> list[FileWritten]:
    """The files this run wrote into ``out``: those changed since ``since`` (epoch
    seconds), not the state folder, in name order, with their rows where ``known`` says
    them; the summary file it is about to write last."""
    summary = out / SUMMARY_FILE
    found = [p for p in sorted(out.iterdir()) if p.is_file() and not p.name.startswith(".") and p != summary
             and p.stat().st_mtime >= since]
    listed = [known.get(str(p)) or FileWritten(path=str(p), format=p.name.rsplit(".", 1)[-1]) for p in found]
    return [*listed, FileWritten(path=str(summary), format="json")]


async def run_demo(out: Path, *, console: Console | None = None, progress: bool = True) -> DemoSummary:
    """Run the demo into ``out`` (see the module docstring) and return its summary, also
    written to ``out/summary.json``. ``DemoError`` (``OutDirError`` for ``out`` itself)
    when it cannot run or finish; what earlier runs stored is kept either way."""
    started = time.monotonic()
    from formservice.sandbox.client import HelperError

    console = console or Console()
    out = check_out_dir(out)
    state_dir = out / STATE_DIR
    if not DEMO_SHEET.is_file():
        raise DemoError(f"the demo sheet {DEMO_SHEET} is missing; reinstall formsync")
    state_path = state_dir / STATE_FILE
    state = load_state(state_path)
    steps = _Steps(console, progress)
    this_run: dict[str, int] = {}
    try:
        async with AsyncExitStack() as stack:
            stack.enter_context(steps.bar)
            with steps.step(0):
                w, state = await _start(stack, state_dir, state)
                state_path.write_text(state.model_dump_json(indent=2))
                store = w.store
            with steps.step(1):
                await _ensure_webhooks(w, state.webhook_secret)
            with steps.step(2):
                outreach = await kinds.outreach(OutreachParams(sheet=DEMO_SHEET, form=w.form_id, job=JOB,
                                                                 report=out / REPORT_FILE), _env(w, out))
                this_run["requests_created"] = outreach.sent
                ids = job_requests(store)
                records = await _track(w, ids)
            with steps.step(3):
                todo = to_answer(records, ids)
                this_run["answered"] = await _answer(w, todo, steps.sub("recipients", len(todo)))
            with steps.step(4):
                this_run["canceled"], this_run["expired"] = await _cancel_and_expire(w, records, ids)
            with steps.step(5):
                delivered = await _deliver(w, set(ids))
            with steps.step(6):
                polled = await kinds.poll(PollParams(form=w.form_id), _env(w, out))
                synced = await kinds.sync(SyncParams(form=w.form_id), _env(w, out))
                this_run["polled_updates"] = polled.updated
                this_run["synced_new"] = synced.fetched if isinstance(synced, SyncReport) else 0
            with steps.step(7):
                files = await _export_all(_env(w, out), out, w.form_id)
            this_run.update(receiver_counts(w.receiver))
            summary = _summarise(w, out, set(ids), delivered, files, this_run, round(time.monotonic() - started, 2))
    except HelperError as err:  # a helper the demo relies on refused: one line, no traceback
        raise DemoError(str(err)) from None
    (out / SUMMARY_FILE).write_text(summary.model_dump_json(indent=2))
    return summary


def receiver_counts(receiver: Receiver) -> dict[str, int]:
    """What this process's receiver took: deliveries per channel, duplicates, refusals."""
    reg = receiver.metrics.registry

    def value(name: str, labels: dict[str, str] | None = None) -> int:
        return int(reg.get_sample_value(name, labels or {}) or 0)

    refused = sum(int(s.value) for m in receiver.metrics.rejected.collect() for s in m.samples
                  if s.name.endswith("_total"))
    return {"callbacks_received": value("formsync_receiver_received_total", {"channel": "callbacks"}),
            "webhooks_received": value("formsync_receiver_received_total", {"channel": "webhooks"}),
            "duplicates": value("formsync_receiver_duplicates_total"), "refused": refused}


# ======================================================================================
# Printing
# ======================================================================================


def render_summary(summary: DemoSummary, console: Console) -> None:
    """Print the summary as Rich tables: the figures, the rejected rows, the files."""
    t = Table(title=f"formsync demo: {summary.form}", show_header=True, header_style="bold")
    t.add_column("", style="bold")
    t.add_column("count", justify="right")
    t.add_column("what it is")
    rows = [
        ("rows in the sheet", summary.sheet_rows, "formsync's demo sheet"),
        ("requests sent", summary.sent, f"one per valid row; callbacks to the receiver (this run: "
                                        f"{summary.this_run.get('requests_created', 0)} new)"),
        ("completed", summary.completed, "answered by the recipients on their pages"),
        ("canceled", summary.canceled, f"requests.cancel ({CANCEL_EXTERNAL_ID})"),
        ("expired", summary.expired, f"the test clock moved past expiresAt ({EXPIRE_EXTERNAL_ID})"),
        ("still pending", summary.pending, ""),
        ("rejected rows", summary.rejected_count, f"not sent; reasons below and in {REPORT_FILE}"),
        ("callbacks received", summary.callbacks_delivered, "signed, verified and stored by the receiver"),
        ("webhook events received", summary.webhooks_delivered, "same events via the subscriptions; "
                                                                 "duplicates stored once"),
        ("events stored", summary.events_stored, "distinct event ids in the database"),
        ("deliveries refused", summary.deliveries_refused, "attempts not answered 2xx"),
        ("submissions synced", summary.submissions_synced,
         f"{summary.submissions_from_requests} from requests, "
         f"{summary.submissions_synced - summary.submissions_from_requests} from the public link"),
        ("files written", len(summary.files), str(summary.out_dir)),
    ]
    for name, n, what in rows:
        t.add_row(name, str(n), escape(what))
    console.print(t)
    if summary.rejected:
        r = Table(title="rejected rows", header_style="bold")
        r.add_column("row", justify="right")
        r.add_column("externalId")
        r.add_column("reason")
        for row in summary.rejected:
            r.add_row(str(row.row), escape(row.external_id or ""), escape("; ".join(row.problems)))
        console.print(r)
    f = Table(title="files", header_style="bold")
    f.add_column("file")
    f.add_column("rows", justify="right")
    for file in summary.files:
        f.add_row(escape(file.path), "" if file.rows is None else str(file.rows))
    console.print(f)
    console.print(f"done in {summary.seconds:.1f} s; run it again in the same directory: nothing new is sent, "
                  f"the same figures come back.")
