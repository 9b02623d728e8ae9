"""Reminding and closing a campaign: ``remind`` emails the job's pending requests again
(all, or those idle for a while), ``close`` cancels every one still pending. Both read
the job's requests from the store (refreshed by one poll of its form first), call the
service once per request, paced by the client, and store each answered record, so a
re-run after a crash or a stop goes on from where it was."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from connector import errors, models
from connector.client.rpc import FormClient
from connector.config.settings import OutreachSettings
from connector.store import Store
from connector.store._campaign import CampaignRow

from ..rules.contact import ContactRule, Recipient, contact_rule
from ..sync.poll import poll_once

MAX_REMINDERS = 8  # what the service allows per request (notes, section 1)
SPACING_MS = 10 * 60_000  # one manual reminder per request per 10 minutes (notes, section 1)
REFUSALS_SHOWN = 100
IN_FLIGHT = 4  # calls under way at once; the pacer still admits each one
STORE_BATCH = 50  # answered records stored together (one transaction, not one per call)

Action = Literal["remind", "close"]


class Refusal(BaseModel):
    """A request the service would not remind or cancel, with its sheet row."""

    row: int
    request_id: str
    reason: str


class ActionReport(BaseModel):
    """What a remind or close run did: ``candidates`` pending requests of the job (the
    idle filter's ``not_idle`` and the contact rule's ``suppressed`` left out), each in
    one of: ``done`` reminded or canceled, ``too_recent`` (reminded by formsync within the
    service's 10 minutes: skipped, no call), ``refused`` per reason (a refusal is that
    row's, not the run's failure; the first ``REFUSALS_SHOWN`` are listed),
    ``not_pending`` (found answered, expired or canceled meanwhile), or left by a stop.
    ``suppressed`` are pending requests the contact rule refuses a reminder (no call;
    listed in ``suppressions``). A dry run calls nothing: ``would_do`` is what it would
    remind or cancel, ``done`` stays 0. ``now`` is the service's time the run decided by;
    ``closed_at`` / ``closed_reason`` the campaign's close, when it has one."""

    job: str
    action: Action
    dry_run: bool = False
    candidates: int = 0
    done: int = 0
    would_do: int = 0
    too_recent: int = 0
    not_idle: int = 0
    not_pending: int = 0
    refused: dict[str, int] = {}
    refusals: list[Refusal] = []
    suppressed: int = 0
    suppressions: list[Refusal] = []
    stopped: bool = False
    calls: int = 0
    not_before: str | None = None  # a scheduled close before its time: nothing was done
    first_at: int | None = None  # the service's time of the first request reminded or canceled (epoch ms)
    now: int | None = None
    closed_at: int | None = None
    closed_reason: str | None = None
    plan_refused: str | None = None  # the plan refusal (PLAN_REQUIRED...) after which no call was made

    @property
    def skipped(self) -> str | None:
        """Why a remind run could do nothing it set out to, when so (a scheduled run is
        then recorded ``skipped``): every candidate reminded too recently, or the campaign
        closed with nothing pending; None otherwise."""
        if self.action != "remind" or self.dry_run or self.done or self.refused or self.stopped:
            return None
        if self.candidates and self.too_recent == self.candidates:
            return (f"all {self.too_recent:,} pending requests were reminded less than "
                    f"{SPACING_MS // 60_000} minutes ago (the service's spacing); no call made")
        if not self.candidates and self.closed_at is not None and not self.not_idle:
            return "the campaign is closed: no request is pending"
        return None


class UnknownJob(ValueError):
    """The store holds no outreach job of that name."""

    def __init__(self, job: str) -> None:
        super().__init__(f"no outreach job {job!r} in the store; the job is the --job name of the outreach "
                         f"that sent it (formsync status lists them)")


_UNITS_MS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_idle(text: str) -> int:
    """An idle time such as ``30m``, ``12h``, ``3d`` or ``2w`` in ms; a ``ValueError``
    saying what is accepted otherwise."""
    t = text.strip().lower()
    if len(t) >= 2 and t[-1] in _UNITS_MS and t[:-1].isdigit() and int(t[:-1]) > 0:
        return int(t[:-1]) * _UNITS_MS[t[-1]]
    raise ValueError(f"idle time must be a whole number and a unit (m, h, d or w), such as 3d or 12h; got {text!r}")


def reminded_recently(last_reminded_at: int | None, now_ms: int) -> bool:
    """Whether a request reminded (by hand) at ``last_reminded_at`` is still within the
    service's spacing at ``now_ms`` (both the service's time): the service would refuse
    it ``REMINDER_TOO_SOON``."""
    return last_reminded_at is not None and now_ms - last_reminded_at < SPACING_MS


def spaced_rows(rows: Sequence[CampaignRow], now_ms: int) -> tuple[list[CampaignRow], int]:
    """The rows whose request may be reminded at ``now_ms`` (pure), and how many were
    reminded too recently (see ``reminded_recently``)."""
    ok = [r for r in rows if not reminded_recently(r.last_reminded_at, now_ms)]
    return ok, len(rows) - len(ok)


def last_close(rounds: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The job's last close round (``store.ledger.rounds``), or None: the campaign is
    closed from its ``at``, for its ``reason``."""
    return next((r for r in reversed(rounds) if r.get("kind") == "close"), None)


def pending_rows(rows: Sequence[CampaignRow], *, idle_ms: int | None, now_ms: int) -> tuple[list[CampaignRow], int]:
    """The rows whose request is stored as pending (pure), and how many of those the
    idle filter leaves out: with ``idle_ms``, only requests without activity (or, never
    touched, created) for at least that long."""
    pending = [r for r in rows if r.request_id is not None and r.status == "pending"]
    if idle_ms is None:
        return pending, 0
    idle = [r for r in pending if (r.last_activity_at or r.created_at or 0) <= now_ms - idle_ms]
    return idle, len(pending) - len(idle)


def contactable(rows: Sequence[CampaignRow], candidates: Sequence[CampaignRow], rule: ContactRule
                ) -> tuple[list[CampaignRow], list[Refusal]]:
    """Of ``candidates`` (some of the job's ``rows``), those the contact rule lets be
    sent a message, and a refusal (``suppressed (<why>)``) for each of the others."""
    verdicts = rule.refusals([Recipient(r.row_number, r.recipient_email, r.request_id is not None) for r in rows])
    why = {r.row_key: v for r, v in zip(rows, verdicts, strict=True)}
    keep = [r for r in candidates if why.get(r.row_key) is None]
    refused = [Refusal(row=r.row_number, request_id=r.request_id or "", reason=str(why[r.row_key]))
               for r in candidates if why.get(r.row_key) is not None]
    return keep, refused


async def act(client: FormClient, store: Store, job: str, action: Action, *, reason: str | None = None,
              idle_ms: int | None = None, dry_run: bool = False, refresh: bool = True,
              now_ms: int | None = None, stop: asyncio.Event | None = None,
              rule: ContactRule | None = None) -> ActionReport:
    """Remind (``action="remind"``) or cancel (``"close"``, with ``reason``) every pending
    request of ``job``. ``refresh`` polls the job's form first (pending requests only,
    one call per 100 when nothing changed). A request formsync reminded within the
    service's spacing is skipped without a call. A request the service refuses to remind
    (``REMINDER_TOO_SOON``, ``RECIPIENT_EMAIL_REQUIRED``, ``PLAN_REQUIRED``, the limit of
    8) is listed as that row's refusal; after a plan refusal no further call is made. A
    request no longer pending is counted and left. ``now_ms`` is the service's time for
    the idle filter and the spacing (default: the service's, ``FormClient.service_now``).
    A reminder goes only where the contact rule allows (``rule``, as the job was sent:
    its ``allow_duplicates``; default the store's list and bounces, see
    ``pipelines.rules.contact``); the others are counted ``suppressed``, no call. The
    refreshing poll cancels the form's pending requests the rule refuses.
    Raises ``UnknownJob``; API errors other than a row's refusal are raised (what was
    done is stored)."""
    record = store.campaign.job(job)
    if record is None:
        raise UnknownJob(job)
    report = ActionReport(job=job, action=action, dry_run=dry_run)
    calls_before = client.stats["calls"]
    rule = (rule if rule is not None else contact_rule(store, OutreachSettings())).for_job(
        bool((record.settings or {}).get("allow_duplicates")))
    try:
        if refresh and not dry_run:
            await poll_once(client, store, form_id=record.form_id, rule=rule)
            rule = rule.refreshed(store)
        report.now = await client.service_now() if now_ms is None else now_ms
        closed = last_close(store.ledger.rounds(job))
        if closed is not None:
            report.closed_at, report.closed_reason = int(closed["at"]), closed.get("reason")
        rows = _candidates(store.campaign.rows(job), action, idle_ms, report, rule)
        if dry_run:
            report.would_do = sum(1 for r in rows if action == "close" or not _at_limit(r))
            return report
        await _each(client, store, rows, action, reason, report, stop)
    finally:
        report.calls = int(client.stats["calls"] - calls_before)
    _record(store, report, reason)
    return report


def _record(store: Store, report: ActionReport, reason: str | None) -> None:
    """Remember the round (the page and the funnel's rounds read it): a reminder round
    that reminded any; a close round that canceled any, or the first that finished (the
    campaign is closed from then, for ``reason``)."""
    first_close = report.action == "close" and report.closed_at is None and not report.stopped
    if report.done or first_close:
        counts: dict[str, int | str] = {"done": report.done, "refused": sum(report.refused.values())}
        if report.action == "close" and reason:
            counts["reason"] = reason
        store.ledger.record_round(report.job, report.action, counts, at=report.first_at or report.now)


def _candidates(rows: Sequence[CampaignRow], action: Action, idle_ms: int | None, report: ActionReport,
                rule: ContactRule) -> list[CampaignRow]:
    """The rows to act on at the service's time ``report.now``, the others counted in
    ``report``: idle (``not_idle``), for a reminder the ones the contact rule refuses
    (``suppressed``), then the pending ones (``candidates``), and for a reminder not
    reminded too recently (``too_recent``)."""
    assert report.now is not None
    todo, report.not_idle = pending_rows(rows, idle_ms=idle_ms, now_ms=report.now)
    if action == "remind":
        todo, refused = contactable(rows, todo, rule)
        report.suppressed, report.suppressions = len(refused), refused[:REFUSALS_SHOWN]
    report.candidates = len(todo)
    if action == "remind":
        todo, report.too_recent = spaced_rows(todo, report.now)
    return todo


def _at_limit(r: CampaignRow) -> bool:
    return (r.reminders_sent or 0) >= MAX_REMINDERS


async def _each(client: FormClient, store: Store, rows: Sequence[CampaignRow], action: Action,
                reason: str | None, report: ActionReport, stop: asyncio.Event | None) -> None:
    """Act on each row, ``IN_FLIGHT`` calls at a time: the client's pacer admits each call,
    so the calls run at the limit whatever the round trip (one at a time, a call's latency
    would be lost from every window)."""
    todo = iter(rows)
    answered: list[models.RequestRecord] = []
    reminded: dict[str, int] = {}  # request id -> the service's time of its last reminder

    async def worker() -> None:
        for r in todo:
            if stop is not None and stop.is_set():
                report.stopped = True
                return
            if action == "remind" and _at_limit(r):
                _refuse(report, r, "REMINDER_LIMIT_REACHED")
            elif report.plan_refused:
                _refuse(report, r, report.plan_refused)
            else:
                rec = await _one(client, r, action, reason, report, reminded)
                if rec is not None:
                    answered.append(rec)
                if len(answered) >= STORE_BATCH:
                    batch, answered[:] = list(answered), []
                    times = dict(reminded)
                    reminded.clear()
                    await asyncio.to_thread(_keep, store, batch, times)

    try:
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    finally:  # a record not stored is found again by the next run's poll (or as not pending)
        _keep(store, answered, reminded)
    report.refusals.sort(key=lambda f: f.row)


def _keep(store: Store, records: Sequence[models.RequestRecord], reminded: Mapping[str, int]) -> None:
    """Store what the service answered, and when each request was last reminded."""
    if records:
        store.upsert_requests(records, source="poll")
    if reminded:
        store.campaign.reminded(reminded)


def too_soon_since(details: Mapping[str, Any], now_ms: int) -> int:
    """When a request refused ``REMINDER_TOO_SOON`` at ``now_ms`` was last reminded: from
    the refusal's ``retryAfterMs`` when it says it, else ``now_ms`` (the latest it can
    have been, so the next run waits the whole spacing rather than call too soon)."""
    wait = details.get("retryAfterMs")
    if isinstance(wait, int) and not isinstance(wait, bool) and 0 <= wait <= SPACING_MS:
        return now_ms + wait - SPACING_MS
    return now_ms


async def _one(client: FormClient, r: CampaignRow, action: Action, reason: str | None, report: ActionReport,
               reminded: dict[str, int]) -> models.RequestRecord | None:
    """One call; the record the service answered, or None (the row's refusal is
    reported). ``reminded`` learns when a request was last reminded."""
    assert r.request_id is not None  # pending_rows keeps rows with a request
    try:
        if action == "remind":
            rec = await client.remind_request(r.request_id)
        else:
            rec = await client.cancel_request(r.request_id, **({"reason": reason} if reason else {}))
    except errors.Conflict as e:
        if e.reason == "REQUEST_NOT_PENDING":
            report.not_pending += 1
        else:
            _refuse(report, r, e.reason or e.code)
        if e.reason == "REMINDER_TOO_SOON" and report.now is not None:
            reminded[r.request_id] = too_soon_since(e.details, client.service_clock.known_now() or report.now)
        return None
    except (errors.ValidationError, errors.UpgradeRequired, errors.Forbidden) as e:
        _refuse(report, r, e.reason or e.code)
        if isinstance(e, errors.UpgradeRequired):
            report.plan_refused = e.reason or e.code  # the same for every request of the workspace: no more calls
        return None
    report.done += 1
    if action == "remind":  # the answer's time: its updatedAt, where the service moves it, or its Date
        reminded[r.request_id] = max(rec.updated_at_ms or 0, client.service_clock.known_now() or report.now or 0)
    if (updated := rec.updated_at_ms) is not None:  # the service's own time (a sandbox's test clock included)
        report.first_at = updated if report.first_at is None else min(report.first_at, updated)
    return rec


def _refuse(report: ActionReport, row: CampaignRow, reason: str) -> None:
    report.refused[reason] = report.refused.get(reason, 0) + 1
    if len(report.refusals) < REFUSALS_SHOWN:
        report.refusals.append(Refusal(row=row.row_number, request_id=row.request_id or "", reason=reason))
