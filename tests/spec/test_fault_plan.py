"""The sandbox's fault plan: the pure decision (``formservice.faults.decide``) and the
``faults.set`` / ``faults.get`` / ``faults.clear`` helpers that install it, with a clear
error for each bad plan and the plan in force kept when a new one is refused."""

from __future__ import annotations

from typing import Any

import pytest

from formservice.faults import FaultPlan, decide, new_state, unknown_methods
from tests.conftest import Sandbox


def plan(*rules: dict[str, Any], seed: int = 0) -> FaultPlan:
    return FaultPlan.model_validate({"seed": seed, "rules": list(rules)})


def kinds(p: FaultPlan, methods: list[str]) -> list[str | None]:
    state = new_state(p)
    return [decide(p, state, m).kind for m in methods]


def test_every_after_count_and_burst_pick_the_calls() -> None:
    p = plan({"kind": "error_5xx", "every": 2, "after": 1, "count": 2, "burst": 2})
    # call 1 is skipped (after); counting from call 2, every 2nd call (3, 5) starts a burst of
    # 2 calls (3-4, 5-6); then both firings of count are spent
    assert kinds(p, ["me.get"] * 10) == [None, None, "error_5xx", "error_5xx", "error_5xx", "error_5xx",
                                         None, None, None, None]


def test_methods_filter_counts_only_matching_calls() -> None:
    p = plan({"kind": "reset", "every": 2, "methods": ["requests.create"]})
    got = kinds(p, ["me.get", "requests.create", "me.get", "requests.create", "requests.create", "requests.create"])
    assert got == [None, None, None, "reset", None, "reset"]


def test_first_refusing_rule_wins_latency_adds_and_a_later_rule_keeps_its_burst() -> None:
    p = plan({"kind": "latency", "latencyMs": 30}, {"kind": "rate_limited", "every": 2, "retryAfterMs": 9},
             {"kind": "drop_after_commit", "burst": 2}, {"kind": "latency", "latencyMs": 5})
    state = new_state(p)
    faults = [decide(p, state, "me.get") for _ in range(4)]
    assert [f.kind for f in faults] == ["drop_after_commit", "rate_limited", "drop_after_commit", "rate_limited"]
    assert all(f.latency_ms == 35 for f in faults)
    assert faults[1].status == 429 and faults[1].retry_after_ms == 9 and faults[1].rule == 1
    # defaults: 500 for a 5xx, 100 ms for a 429
    q = plan({"kind": "error_5xx"}, {"kind": "rate_limited"})
    assert decide(q, new_state(q), "me.get").status == 500
    r = plan({"kind": "rate_limited"})
    assert decide(r, new_state(r), "me.get").retry_after_ms == 100


def test_probability_is_a_function_of_the_seed_and_call_number() -> None:
    rules = ({"kind": "error_5xx", "probability": 0.3}, {"kind": "latency", "probability": 0.5, "latencyMs": 1})
    calls = ["me.get", "forms.list"] * 200
    a, b, c = (kinds(plan(*rules, seed=s), calls) for s in (4, 4, 5))
    assert a == b != c
    share = a.count("error_5xx") / len(a)
    assert 0.2 < share < 0.4
    assert kinds(plan({"kind": "reset", "probability": 0}), calls).count("reset") == 0
    assert kinds(plan({"kind": "reset", "probability": 1}), calls).count("reset") == len(calls)


def test_unknown_methods_names_each_place() -> None:
    p = plan({"kind": "reset", "methods": ["me.get", "nope"]}, {"kind": "latency", "methods": ["x.y"]})
    assert unknown_methods(p, {"me.get"}) == [("rules.0.methods.1", "nope"), ("rules.1.methods.0", "x.y")]


BAD_PLANS = [
    ({"rules": [{"kind": "explode"}]}, "rules.0.kind", "must be one of: rate_limited, error_5xx, latency, reset, "
                                                       "drop_after_commit"),
    ({"rules": [{"kind": "latency", "retryAfterMs": 5}]}, "rules.0",
     "retryAfterMs only applies to kind 'rate_limited', not 'latency'"),
    ({"rules": [{"kind": "rate_limited", "status": 503}]}, "rules.0", "status only applies to kind 'error_5xx'"),
    ({"rules": [{"kind": "reset", "every": 2, "probability": 0.5}]}, "rules.0", "either probability or every"),
    ({"rules": [{"kind": "reset", "probability": 1.5}]}, "rules.0.probability", "1"),
    ({"rules": [{"kind": "error_5xx", "status": 418}]}, "rules.0.status", "500"),
    ({"rules": [{"kind": "reset", "every": 0}]}, "rules.0.every", "1"),
    ({"rules": [{"kind": "reset", "methods": ["requests.craete"]}]}, "rules.0.methods.0",
     "unknown method 'requests.craete'"),
    ({"rules": [{"kind": "reset", "when": "always"}]}, "rules.0.when", "Unknown param"),
    ({"seed": 1}, "rules", "required"),
]


@pytest.mark.parametrize(("params", "field", "says"), BAD_PLANS)
async def test_a_bad_plan_is_refused_with_where_and_why_and_the_plan_in_force_stays(
        sandbox: Sandbox, params: dict[str, Any], field: str, says: str) -> None:
    good = {"seed": 3, "rules": [{"kind": "latency", "latencyMs": 1}]}
    assert (await sandbox.helper("faults.set", good)).ok
    reply = await sandbox.helper("faults.set", params)
    err = reply.expect("VALIDATION_ERROR", 400, field=field)
    assert says in err["message"], err["message"]
    assert (await sandbox.helper("faults.get")).data["plan"] == good


async def test_faults_meet_api_calls_only_and_clear_stops_them(sandbox: Sandbox) -> None:
    assert (await sandbox.helper("faults.set", {"rules": [{"kind": "error_5xx"}]})).ok
    reply = await sandbox.rpc("me.get")
    reply.expect("INTERNAL_ERROR", 500)
    assert (await sandbox.helper("clock.get")).ok  # helpers are never faulted
    cleared = (await sandbox.helper("faults.clear")).data
    assert cleared["calls"] == 1 and cleared["injected"]["error_5xx"] == 1
    assert cleared["log"] == [{"call": 1, "method": "me.get", "kind": "error_5xx", "latencyMs": 0}]
    assert (await sandbox.rpc("me.get")).ok
    assert (await sandbox.helper("faults.get")).data == {
        "plan": None, "calls": 0, "injected": dict.fromkeys(
            ["rate_limited", "error_5xx", "latency", "reset", "drop_after_commit"], 0), "log": []}


async def test_an_injected_429_carries_retry_after_and_a_502_is_a_proxy_page(sandbox: Sandbox) -> None:
    rules = [{"kind": "rate_limited", "count": 1, "retryAfterMs": 1234}, {"kind": "error_5xx", "status": 502}]
    assert (await sandbox.helper("faults.set", {"rules": rules})).ok
    (await sandbox.rpc("me.get")).expect("RATE_LIMITED", 429, retryAfterMs=1234)
    page = await sandbox.rpc("me.get")
    assert page.status == 502 and isinstance(page.body, str)
