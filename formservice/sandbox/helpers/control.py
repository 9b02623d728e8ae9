"""Helpers that drive the sandbox itself: its clock, reset, deliveries, rate limits, the
call log and the injected faults."""

from __future__ import annotations

from ...agent.tools import TOOLS
from ...clock import from_ms
from ...domain.base import METHODS, Ctx
from ...domain.misc import MethodList, listing
from ...errors import ApiError
from ...faults import FaultPlan, FaultsView, unknown_methods
from ...service import Service
from ..models import (
    AdvanceParams,
    CallItem,
    CallList,
    CallsParams,
    ClockResult,
    FlushedAttempt,
    FlushResult,
    LimitsParams,
    LimitsView,
    NoParams,
    ResetResult,
)
from ..seed import seed_credentials
from .registry import HELPERS, helper


@helper("clock.advance")
def clock_advance(ctx: Ctx, p: AdvanceParams) -> ClockResult:
    """Move the test clock forward and run the time-driven work that became due."""
    svc: Service = ctx.service
    now = svc.advance_clock(p.ms)
    if svc.worker is not None:
        ctx.after_commit.append(svc.worker.tick)
    return ClockResult(now=from_ms(now), offset_ms=svc.clock.offset_ms)


@helper("clock.get")
def clock_get(ctx: Ctx, p: NoParams) -> ClockResult:
    """The test clock's current time."""
    return ClockResult(now=from_ms(ctx.service.now()), offset_ms=ctx.service.clock.offset_ms)


@helper("reset")
async def reset(service: Service, p: NoParams) -> ResetResult:
    """Wipe the sandbox back to its seeded state: every workspace, form, request,
    submission, token and delivery made since is gone; the seeded tokens work again; the
    clock, rate limits and fault plan are a new sandbox's. Delivery attempts under way
    finish first, so none writes into the restored store."""
    await service.worker.settle()
    try:
        service.restore_seed_state()
    except LookupError:
        raise ApiError("CONFLICT", "This sandbox's data dir was seeded before reset existed, so no copy of its "
                       "seeded state was kept; start the sandbox on a new --data-dir to use reset.",
                       reason="NO_SEED_STATE") from None
    if service.snapshots is not None:  # a snapshot restored may have handed out others
        service.snapshots.put_credentials(seed_credentials(service.data_dir))
    return ResetResult(reset=True, now=from_ms(service.now()))


@helper("deliveries.flush")
async def deliveries_flush(service: Service, p: NoParams) -> FlushResult:
    """Attempt every due delivery now (after doing the time-driven work that is due)."""
    service.worker.tick()
    return FlushResult(attempts=[FlushedAttempt.model_validate(a) for a in await service.worker.flush()])


@helper("limits.set")
def limits_set(ctx: Ctx, p: LimitsParams) -> LimitsView:
    """Change the rate limits of this sandbox (raise them for a benchmark, shrink them to
    provoke throttling); ``windowMs`` scales the window those per-minute limits count in."""
    names = {"callsPerMinute": "calls_per_minute", "createsPerMinute": "creates_per_minute",
             "failedAuth": "failed_auth", "windowMs": "rate_window_ms"}
    values = {names[k]: v for k, v in p.model_dump(exclude_none=True).items()}
    lim = ctx.service.set_limits(**values)
    return LimitsView(calls_per_minute=lim.calls_per_minute, creates_per_minute=lim.creates_per_minute,
                      failed_auth=lim.failed_auth, window_ms=lim.rate_window_ms)


@helper("calls.list")
def calls_list(ctx: Ctx, p: CallsParams) -> CallList:
    """The API calls this token made (counted on the server), optionally since a time or
    of one method: what poll and sync cost assertions count."""
    items = [CallItem(at=from_ms(at), method=m) for at, tok, m in ctx.service.call_log
             if tok == ctx.token.id and (p.since is None or at >= p.since) and (p.method in (None, m))]
    return CallList(count=len(items), items=items)


@helper("faults.set")
def faults_set(ctx: Ctx, p: FaultPlan) -> FaultsView:
    """Inject faults into every later ``/api/v1`` call and ``/api/mcp`` ``tools/call``
    (of any token), as the seeded plan decides; replaces the plan in force and restarts
    its counters. ``methods`` names API methods (``requests.create``) or tools
    (``request_create``)."""
    unknown = unknown_methods(p, set(METHODS) | set(TOOLS))
    if unknown:
        where, name = unknown[0]
        raise ApiError("VALIDATION_ERROR", f"{where}: unknown method {name!r}; name /api/v1 methods such as "
                       "'requests.create' (/api/v1's methods.list has them all) or agent tools such as 'request_create'.",
                       reason="UNKNOWN_METHOD", field=where)
    ctx.service.faults.set(p)
    return ctx.service.faults.view()


@helper("faults.get")
def faults_get(ctx: Ctx, p: NoParams) -> FaultsView:
    """The fault plan in force, the calls it met and the faults it injected."""
    return ctx.service.faults.view()


@helper("faults.clear")
def faults_clear(ctx: Ctx, p: NoParams) -> FaultsView:
    """Stop injecting faults; returns what the plan had injected."""
    view = ctx.service.faults.view()
    ctx.service.faults.clear()
    return view


@helper("methods.list")
def methods_list(ctx: Ctx, p: NoParams) -> MethodList:
    """The names of every helper ``/api/sandbox`` answers, with a one-line summary each
    (what an unknown helper's error points to; ``/api/v1``'s ``methods.list`` lists the API)."""
    return listing(HELPERS)
