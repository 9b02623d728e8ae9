"""The client against a sandbox that injects faults (``faults.set``): 429 bursts are waited
out for ``retryAfterMs``, 5xx answers and cut connections are retried only when the call
is safe to repeat, and a create whose answer was lost after the service committed it ends
with ``deduplicated: true`` and one request. Counts come from the sandbox itself
(``faults.get``, ``calls.list``, ``requests.list``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from connector import errors
from connector.client.rpc import FormClient
from tests.conftest import Sandbox

FAST = {"callsPerMinute": 10000, "createsPerMinute": 10000}
# Short backoff through the client's own options, so retries cost milliseconds here.
QUICK = {"calls_per_minute": 10000, "creates_per_minute": 10000, "backoff_base": 0.005, "backoff_cap": 0.02,
         "max_retries": 8, "timeout": 10.0}

# Every kind of fault at once, each on a few percent of calls (by a seeded draw).
MIXED_RULES: tuple[dict[str, Any], ...] = (
    {"kind": "rate_limited", "probability": 0.08, "burst": 2, "retryAfterMs": 5},
    {"kind": "error_5xx", "probability": 0.08, "status": 503},
    {"kind": "error_5xx", "probability": 0.05},
    {"kind": "reset", "probability": 0.08},
    {"kind": "drop_after_commit", "probability": 0.08},
    {"kind": "latency", "probability": 0.1, "latencyMs": 20},
)


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[FormClient]:
    assert (await sandbox.helper("limits.set", FAST)).ok
    async with FormClient(sandbox.base_url, sandbox.pro.token, **QUICK) as fc:
        yield fc


async def set_faults(sandbox: Sandbox, *rules: dict[str, Any], seed: int = 7) -> None:
    reply = await sandbox.helper("faults.set", {"seed": seed, "rules": list(rules)})
    assert reply.ok, reply.body


async def injected(sandbox: Sandbox) -> dict[str, int]:
    return dict((await sandbox.helper("faults.get")).data["injected"])


async def requests_of(client: FormClient, form_id: str, external_id: str) -> list[Any]:
    return [r async for r in client.iter_requests(form_id=form_id, external_id=external_id)]


@pytest.mark.parametrize("kind", ["drop_after_commit", "reset"])
async def test_create_with_key_whose_answer_is_lost_after_commit_is_deduplicated_on_retry(
        sandbox: Sandbox, client: FormClient, kind: str) -> None:
    form = sandbox.pro.forms["Contact"]
    await set_faults(sandbox, {"kind": kind, "methods": ["requests.create"], "count": 1})
    created = await client.create_request(form, external_id=f"lost-{kind}", idempotency_key=f"key-{kind}")
    assert created.deduplicated is True  # the first send committed; the retry found it
    assert client.stats["retries"] == 1
    assert (await injected(sandbox))[kind] == 1
    await sandbox.helper("faults.clear")
    found = await requests_of(client, form, f"lost-{kind}")
    assert [r.id for r in found] == [created.id]
    creates = (await sandbox.helper("calls.list", {"method": "requests.create"})).data["count"]
    assert creates == 2  # the committed send and its deduplicated retry, nothing more


async def test_create_without_key_is_not_repeated_after_a_lost_answer(sandbox: Sandbox, client: FormClient) -> None:
    form = sandbox.pro.forms["Contact"]
    await set_faults(sandbox, {"kind": "drop_after_commit", "methods": ["requests.create"], "count": 1})
    with pytest.raises(errors.TransportError) as caught:
        await client.create_request(form, external_id="no-key")
    assert caught.value.outcome_unknown is True
    assert client.stats["retries"] == 0
    await sandbox.helper("faults.clear")
    assert len(await requests_of(client, form, "no-key")) == 1  # it was created once, and only once


async def test_rate_limited_burst_waits_retry_after_each_time_and_runs_the_call_once(
        sandbox: Sandbox, client: FormClient) -> None:
    await set_faults(sandbox, {"kind": "rate_limited", "methods": ["forms.list"], "count": 1, "burst": 3,
                               "retryAfterMs": 60})
    before = (await sandbox.helper("calls.list", {"method": "forms.list"})).data["count"]
    started = time.monotonic()
    page = await client.list_forms(sandbox.pro.id)
    waited = time.monotonic() - started
    assert page.items
    assert client.stats["rate_limited"] == 3 and client.stats["retries"] == 3
    assert waited >= 3 * 0.060  # each refusal's retryAfterMs was waited out
    assert (await injected(sandbox))["rate_limited"] == 3
    # The refused sends never ran: the service counted one forms.list.
    assert (await sandbox.helper("calls.list", {"method": "forms.list"})).data["count"] == before + 1


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_5xx_on_a_safe_call_is_retried_with_backoff(sandbox: Sandbox, client: FormClient, status: int) -> None:
    await set_faults(sandbox, {"kind": "error_5xx", "status": status, "methods": ["me.get"], "count": 1, "burst": 2})
    me = await client.me()
    assert me.id == sandbox.pro.user_id
    assert client.stats["retries"] == 2
    assert (await injected(sandbox))["error_5xx"] == 2


async def test_5xx_on_a_create_without_key_raises_at_once_and_creates_nothing(
        sandbox: Sandbox, client: FormClient) -> None:
    form = sandbox.pro.forms["Contact"]
    await set_faults(sandbox, {"kind": "error_5xx", "methods": ["requests.create"], "count": 1})
    with pytest.raises(errors.InternalError) as caught:
        await client.create_request(form, external_id="refused")
    assert caught.value.outcome_unknown is True and client.stats["retries"] == 0
    await sandbox.helper("faults.clear")
    assert await requests_of(client, form, "refused") == []


async def test_latency_is_added_and_the_call_succeeds(sandbox: Sandbox, client: FormClient) -> None:
    await set_faults(sandbox, {"kind": "latency", "latencyMs": 150, "methods": ["me.get"]})
    started = time.monotonic()
    await client.me()
    assert time.monotonic() - started >= 0.150
    assert client.stats["retries"] == 0 and (await injected(sandbox))["latency"] == 1


async def test_a_retry_budget_spent_on_faults_gives_up_with_the_attempt_count(
        sandbox: Sandbox, client: FormClient) -> None:
    await set_faults(sandbox, {"kind": "error_5xx", "methods": ["me.get"]})  # every call fails
    with pytest.raises(errors.InternalError) as caught:
        await client.me()
    assert client.stats["calls"] == QUICK["max_retries"] + 1
    assert caught.value.attempts == 9 and "gave up after 9 attempts" in str(caught.value)


async def test_every_call_of_a_mixed_plan_ends_right_with_no_duplicate_creates(
        sandbox: Sandbox, client: FormClient) -> None:
    """60 keyed creates and reads under every kind of fault at once: each create yields
    exactly one request, each read its answer."""
    form = sandbox.pro.forms["Contact"]
    await set_faults(sandbox, *MIXED_RULES, seed=2026)
    ids = {}
    for i in range(60):
        created = await client.create_request(form, external_id=f"mix-{i}", idempotency_key=f"mix-{i}")
        ids[f"mix-{i}"] = created.id
        assert (await client.get_request(created.id)).id == created.id
    view = (await sandbox.helper("faults.get")).data
    await sandbox.helper("faults.clear")
    for kind in ("rate_limited", "error_5xx", "reset", "drop_after_commit", "latency"):
        assert view["injected"][kind] > 0, f"the plan injected no {kind}: {view['injected']}"
    assert client.stats["retries"] >= sum(view["injected"][k] for k in ("rate_limited", "error_5xx", "reset",
                                                                        "drop_after_commit"))
    listed = [r async for r in client.iter_requests(form_id=form) if (r.externalId or "").startswith("mix-")]
    assert sorted(r.externalId for r in listed) == sorted(ids)  # none lost, none twice
    assert {r.externalId: r.id for r in listed} == ids


async def test_the_same_seed_injects_the_same_faults(sandbox: Sandbox, client: FormClient) -> None:
    plan = ({"kind": "error_5xx", "probability": 0.3}, {"kind": "latency", "probability": 0.3, "latencyMs": 1})
    logs = []
    for _ in range(2):
        await set_faults(sandbox, *plan, seed=99)
        for _ in range(20):
            await client.me()
        logs.append((await sandbox.helper("faults.get")).data["log"])
    assert logs[0] == logs[1] and len(logs[0]) > 0
