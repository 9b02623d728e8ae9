"""The sandbox's fault plan: which injected failure (if any) meets the n-th API call.

The plan is data (a seed and a list of rules) and the decision is a pure function of the
plan, the rules' counters, the call number and the method name, so a seed replays the
same faults call for call. The bindings apply the decision (``formservice/rpc.py`` to
``/api/v1`` calls, ``formservice/mcp.py`` to the agent endpoint's ``tools/call``); the
domain never sees it.

Kinds of fault:

- ``rate_limited``: the call is refused, not run: 429 RATE_LIMITED with
  ``details.retryAfterMs``.
- ``error_5xx``: the call is refused, not run: 500 INTERNAL_ERROR in the API envelope, or
  a proxy's bare 502/503/504 page.
- ``latency``: the call waits ``latencyMs`` before it runs; it combines with the others.
- ``reset``: the call runs and commits, then the connection is closed after part of the
  response was sent.
- ``drop_after_commit``: the call runs and commits, then the connection is closed before
  a byte of the response was sent.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Annotated, Literal, Self, get_args

from pydantic import Field, model_validator

from .domain.base import Params, Result

Kind = Literal["rate_limited", "error_5xx", "latency", "reset", "drop_after_commit"]
KINDS: tuple[str, ...] = get_args(Kind)
# The members that shape one kind's fault, and may only be given on a rule of that kind.
KIND_OPTIONS = {"retryAfterMs": "rate_limited", "status": "error_5xx", "latencyMs": "latency"}
LOG_LIMIT = 10_000  # injected faults remembered for faults.get


class FaultRule(Params):
    """One rule: which calls it meets (``methods``, default all), when it fires (on every
    ``every``-th matching call, or with ``probability``, or, with neither, on each one;
    after skipping the first ``after`` matching calls), how often at most (``count``
    firings) and, once fired, on how many consecutive matching calls (``burst``)."""

    kind: Kind
    methods: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None
    probability: Annotated[float, Field(ge=0, le=1)] | None = None
    every: Annotated[int, Field(ge=1)] | None = None
    after: Annotated[int, Field(ge=0)] = 0
    count: Annotated[int, Field(ge=1)] | None = None
    burst: Annotated[int, Field(ge=1, le=1000)] = 1
    retryAfterMs: Annotated[int, Field(ge=0, le=60_000)] | None = None
    status: Literal[500, 502, 503, 504] | None = None
    latencyMs: Annotated[int, Field(ge=0, le=30_000)] | None = None

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        if self.probability is not None and self.every is not None:
            raise ValueError("give either probability or every, not both")
        for option, kind in KIND_OPTIONS.items():
            if getattr(self, option) is not None and self.kind != kind:
                raise ValueError(f"{option} only applies to kind {kind!r}, not {self.kind!r}")
        return self

    @property
    def retry_after_ms(self) -> int:
        return 100 if self.retryAfterMs is None else self.retryAfterMs

    @property
    def http_status(self) -> int:
        return self.status or 500

    @property
    def latency_ms(self) -> int:
        return 200 if self.latencyMs is None else self.latencyMs


class FaultPlan(Params):
    """``faults.set`` params: a seed (the same seed replays the same faults) and the rules,
    tried in order for every ``/api/v1`` call and ``tools/call``; the first refusing or dropping rule that
    fires decides the call, and every firing latency rule adds its delay."""

    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    rules: Annotated[list[FaultRule], Field(max_length=50)]


@dataclass(frozen=True)
class Fault:
    """What to do to one call; ``latency_ms`` applies before anything else."""

    kind: str | None = None  # rate_limited, error_5xx, reset, drop_after_commit; None: answer normally
    latency_ms: int = 0
    status: int = 0
    retry_after_ms: int = 0
    rule: int | None = None  # index of the rule that chose ``kind``


@dataclass
class RuleState:
    matched: int = 0  # matching calls seen
    fired: int = 0  # firings started (a burst is one firing)
    burst_left: int = 0  # consecutive matching calls the current burst still takes


@dataclass
class FaultState:
    """The counters a plan's decisions depend on: the call number and, per rule, how
    often it matched and fired."""

    calls: int = 0
    rules: list[RuleState] = field(default_factory=list)


def unknown_methods(plan: FaultPlan, known: Collection[str]) -> list[tuple[str, str]]:
    """``(param path, name)`` of every method a rule names that is not in ``known``."""
    return [(f"rules.{i}.methods.{j}", name) for i, rule in enumerate(plan.rules)
            for j, name in enumerate(rule.methods or []) if name not in known]


def new_state(plan: FaultPlan) -> FaultState:
    return FaultState(rules=[RuleState() for _ in plan.rules])


def _fires(plan: FaultPlan, index: int, rule: FaultRule, st: RuleState, call: int) -> bool:
    """Whether ``rule`` starts a firing on this matching call (``st.matched`` already counts it)."""
    if rule.count is not None and st.fired >= rule.count:
        return False
    n = st.matched - rule.after  # 1 for the first matching call past ``after``
    if n < 1:
        return False
    if rule.every is not None:
        return n % rule.every == 0
    if rule.probability is not None:
        # One generator per (seed, call, rule): the outcome does not depend on other rules.
        return random.Random(f"{plan.seed}:{call}:{index}").random() < rule.probability
    return True


def decide(plan: FaultPlan, state: FaultState, method: str) -> Fault:
    """The fault for the next call (``method``), advancing ``state``'s counters. Pure
    apart from ``state``: the same plan, from a new state, given the same methods in the
    same order, decides the same faults."""
    state.calls += 1
    latency = 0
    chosen: tuple[int, FaultRule] | None = None
    for index, rule in enumerate(plan.rules):
        if rule.methods is not None and method not in rule.methods:
            continue
        st = state.rules[index]
        st.matched += 1
        if rule.kind != "latency" and chosen is not None:
            continue  # this call's outcome is decided; a later rule neither fires nor spends its burst
        if st.burst_left > 0:
            st.burst_left -= 1
        elif _fires(plan, index, rule, st, state.calls):
            st.fired += 1
            st.burst_left = rule.burst - 1
        else:
            continue
        if rule.kind == "latency":
            latency += rule.latency_ms
        else:
            chosen = (index, rule)
    if chosen is None:
        return Fault(latency_ms=latency)
    index, rule = chosen
    if rule.kind == "rate_limited":
        return Fault(kind=rule.kind, latency_ms=latency, rule=index, status=429, retry_after_ms=rule.retry_after_ms)
    if rule.kind == "error_5xx":
        return Fault(kind=rule.kind, latency_ms=latency, rule=index, status=rule.http_status)
    return Fault(kind=rule.kind, latency_ms=latency, rule=index)


class InjectedFault(Result):
    call: int
    method: str
    kind: str
    latencyMs: int = 0


class FaultsView(Result):
    """``faults.get``: the plan in force (null when none), the calls it has met and the
    faults it injected, by kind and one by one (the latest ``LOG_LIMIT``)."""

    plan: FaultPlan | None
    calls: int
    injected: dict[str, int]
    log: list[InjectedFault]


class FaultInjector:
    """The sandbox's current plan and its counters (one per sandbox, across tokens)."""

    def __init__(self) -> None:
        self.plan: FaultPlan | None = None
        self.state = FaultState()
        self.log: list[InjectedFault] = []
        self.injected = dict.fromkeys(KINDS, 0)

    def set(self, plan: FaultPlan) -> None:
        self.plan = plan
        self.state = new_state(plan)
        self.log = []
        self.injected = dict.fromkeys(KINDS, 0)

    def clear(self) -> None:
        self.plan = None
        self.state = FaultState()
        self.log = []
        self.injected = dict.fromkeys(KINDS, 0)

    def next(self, method: str) -> Fault:
        """The fault for the next call of ``method`` (an API method or an agent tool; none
        without a plan)."""
        if self.plan is None:
            return Fault()
        fault = decide(self.plan, self.state, method)
        if fault.kind is not None:
            self.injected[fault.kind] += 1
        if fault.latency_ms:
            self.injected["latency"] += 1
        if fault.kind is not None or fault.latency_ms:
            if len(self.log) >= LOG_LIMIT:
                del self.log[0]
            self.log.append(InjectedFault(call=self.state.calls, method=method, kind=fault.kind or "latency",
                                          latencyMs=fault.latency_ms))
        return fault

    def view(self) -> FaultsView:
        return FaultsView(plan=self.plan, calls=self.state.calls, injected=dict(self.injected), log=list(self.log))
