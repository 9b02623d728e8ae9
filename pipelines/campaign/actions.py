"""Reminding and closing a campaign: ``remind`` emails the job's pending requests again
(all, or those idle for a while), ``close`` cancels every one still pending. Both read
the job's requests from the store (refreshed by one poll of its form first), call the
service once per request, paced by the client, and store each answered record, so a
re-run after a crash or a stop goes on from where it was."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel

from connector import errors, models
from connector.client import FormClient
from connector.store import Store
from connector.store.campaign import CampaignRow

from ..outreach.contact import Recipient, contact_refusals
from ..poll import poll_once

MAX_REMINDERS = 8  # what the service allows per request (notes, section 1)
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
    """What a remind or close run did: ``candidates`` pending requests of the job,
    ``done`` reminded or canceled, ``refused`` per reason (a refusal is that row's, not
    the run's failure; the first ``REFUSALS_SHOWN`` are listed), ``not_idle`` left out
    by the idle filter, ``not_pending`` found answered, expired or canceled meanwhile,
    ``suppressed`` pending requests the contact rule refuses a reminder (no call; listed
    in ``suppressions``). A dry run calls nothing: ``done`` is what it would do."""

    job: str
    action: Action
    dry_run: bool = False
    candidates: int = 0
    done: int = 0
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


def pending_rows(rows: Sequence[CampaignRow], *, idle_ms: int | None, now_ms: int) -> tuple[list[CampaignRow], int]:
    """The rows whose request is stored as pending (pure), and how many of those the
    idle filter leaves out: with ``idle_ms``, only requests without activity (or, never
    touched, created) for at least that long."""
    pending = [r for r in rows if r.request_id is not None and r.status == "pending"]
    if idle_ms is None:
        return pending, 0
    idle = [r for r in pending if (r.last_activity_at or r.created_at or 0) <= now_ms - idle_ms]
    return idle, len(pending) - len(idle)


def contactable(rows: Sequence[CampaignRow], candidates: Sequence[CampaignRow], blocked: Mapping[str, str], *,
                allow_duplicates: bool = False) -> tuple[list[CampaignRow], list[Refusal]]:
    """Of ``candidates`` (some of the job's ``rows``), those the contact rule lets be
    sent a message, and a refusal (``suppressed (<why>)``) for each of the others."""
    verdicts = contact_refusals([Recipient(r.row_number, r.recipient_email, r.request_id is not None) for r in rows],
                                blocked, allow_duplicates=allow_duplicates)
    why = {r.row_key: v for r, v in zip(rows, verdicts, strict=True)}
    keep = [r for r in candidates if why.get(r.row_key) is None]
    refused = [Refusal(row=r.row_number, request_id=r.request_id or "", reason=str(why[r.row_key]))
               for r in candidates if why.get(r.row_key) is not None]
    return keep, refused


async def act(client: FormClient, store: Store, job: str, action: Action, *, reason: str | None = None,
              idle_ms: int | None = None, dry_run: bool = False, refresh: bool = True,
              now_ms: int | None = None, stop: asyncio.Event | None = None,
              blocked: Mapping[str, str] | None = None) -> ActionReport:
    """Remind (``action="remind"``) or cancel (``"close"``, with ``reason``) every pending
    request of ``job``. ``refresh`` polls the job's form first (pending requests only,
    one call per 100 when nothing changed). A request the service refuses to remind
    (``REMINDER_TOO_SOON``, ``RECIPIENT_EMAIL_REQUIRED``, ``PLAN_REQUIRED``, the limit of
    8) is listed as that row's refusal; after a plan refusal no further call is made. A
    request no longer pending is counted and left. ``now_ms`` is the service's time for
    the idle filter (default: this machine's). A reminder goes only where the contact
    rule allows (``blocked``: the addresses it refuses, default the store's list and
    bounces; see ``outreach.contact``); the others are counted ``suppressed``, no call.
    Raises ``UnknownJob``; API errors other than a row's refusal are raised (what was
    done is stored)."""
    record = store.campaign.job(job)
    if record is None:
        raise UnknownJob(job)
    report = ActionReport(job=job, action=action, dry_run=dry_run)
    calls_before = client.stats["calls"]
    try:
        if refresh and not dry_run:
            await poll_once(client, store, form_id=record.form_id)
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        every = store.campaign.rows(job)
        rows, report.not_idle = pending_rows(every, idle_ms=idle_ms, now_ms=now)
        if action == "remind":
            rows, refused = contactable(every, rows, store.campaign.suppressed() if blocked is None else blocked,
                                        allow_duplicates=bool((record.settings or {}).get("allow_duplicates")))
            report.suppressed, report.suppressions = len(refused), refused[:REFUSALS_SHOWN]
        report.candidates = len(rows)
        if dry_run:
            report.done = sum(1 for r in rows if action == "close" or (r.reminders_sent or 0) < MAX_REMINDERS)
            return report
        await _each(client, store, rows, action, reason, report, stop)
    finally:
        report.calls = int(client.stats["calls"] - calls_before)
    if report.done:
        store.ledger.record_round(job, action, {"done": report.done, "refused": sum(report.refused.values())},
                                  at=report.first_at)
    return report


async def _each(client: FormClient, store: Store, rows: Sequence[CampaignRow], action: Action,
                reason: str | None, report: ActionReport, stop: asyncio.Event | None) -> None:
    """Act on each row, ``IN_FLIGHT`` calls at a time: the client's pacer admits each call,
    so the calls run at the limit whatever the round trip (one at a time, a call's latency
    would be lost from every window)."""
    todo = iter(rows)
    plan_refused: list[str] = []
    answered: list[models.RequestRecord] = []

    async def worker() -> None:
        for r in todo:
            if stop is not None and stop.is_set():
                report.stopped = True
                return
            if action == "remind" and (r.reminders_sent or 0) >= MAX_REMINDERS:
                _refuse(report, r, "REMINDER_LIMIT_REACHED")
            elif plan_refused:
                _refuse(report, r, plan_refused[0])
            else:
                rec = await _one(client, r, action, reason, report, plan_refused)
                if rec is not None:
                    answered.append(rec)
                if len(answered) >= STORE_BATCH:
                    batch, answered[:] = list(answered), []
                    await asyncio.to_thread(store.upsert_requests, batch, source="poll")

    try:
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    finally:  # a record not stored is found again by the next run's poll (or as not pending)
        if answered:
            store.upsert_requests(answered, source="poll")
    report.refusals.sort(key=lambda f: f.row)


async def _one(client: FormClient, r: CampaignRow, action: Action, reason: str | None, report: ActionReport,
               plan_refused: list[str]) -> models.RequestRecord | None:
    """One call; the record the service answered, or None (the row's refusal is reported)."""
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
        return None
    except (errors.ValidationError, errors.UpgradeRequired, errors.Forbidden) as e:
        _refuse(report, r, e.reason or e.code)
        if isinstance(e, errors.UpgradeRequired):
            plan_refused.append(e.reason or e.code)  # the same for every request of the workspace: no more calls
        return None
    report.done += 1
    if rec.updated_at is not None:  # the service's own time (a sandbox's test clock included)
        report.first_at = rec.updated_at if report.first_at is None else min(report.first_at, rec.updated_at)
    return rec


def _refuse(report: ActionReport, row: CampaignRow, reason: str) -> None:
    report.refused[reason] = report.refused.get(reason, 0) + 1
    if len(report.refusals) < REFUSALS_SHOWN:
        report.refusals.append(Refusal(row=row.row_number, request_id=row.request_id or "", reason=reason))
