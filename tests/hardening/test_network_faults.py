"""Network faults, for real: the receiver (``formsync receive``) and the client
(``formsync outreach``) run in a network namespace joined to the host by a veth pair; the
sandbox and PostgreSQL stay on the host, each reached over the veth through a relay
(tests/hardening/netfaults.py). Faults: nftables drops (all of a flow's packets, or a
random share), TCP resets, a tbf rate limit, relay delay and a relay that hangs (the
database's peer stays connected and answers nothing).

Asserted under each: no acknowledged event lost, none stored twice, no outreach row sent
twice, every delivery answered (200 only after the commit, else 503 within the
receiver's answer bound of 5 s), memory bounded while the database is away, and the time
to recover once the fault ends (reported as figures)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy.engine import make_url

from connector.store import Store
from connector.store._tables import RawEvent
from formservice.delivery import RETRY_SCHEDULE_MS
from tests.connector.test_receiver import (
    CONTACT,
    encode,
    envelope,
    metric,
    receiver_settings,
    rows,
    running,
    signed,
)
from tests.pipelines.test_outreach import sheet_rows, write_csv

from .netfaults import Link, Relay, Relays, link, relays, require_capability, rss_bytes
from .support import FORMSYNC, SandboxProcess, receive_process, report_figures, sandbox_process

pytestmark = pytest.mark.slow

ANSWER_BOUND_S = 5.0  # ReceiverSettings.answer_timeout_seconds' default, which the receiver here keeps
SLACK_S = 2.5  # a busy shared machine: the client, the veth, the receiver's loop reading a flood
MAX_QUEUED = 4 * 1024 * 1024  # the receiver's max_queued_bytes here, small so a flood passes it quickly
SENDER_TIMEOUT_S = 15.0  # the hosted service's (and the sandbox's) attempt timeout
FAULT_S = 3.0  # how long each fault lasts
ROWS = 12  # the outreach sheet


@dataclass
class World:
    link: Link
    hub: Relays
    db_relay: Relay  # namespace -> host's PostgreSQL
    api_relay: Relay  # namespace -> host's sandbox
    rx_relay: Relay  # host's sandbox -> the receiver in the namespace
    rx_url: str  # the receiver's event path, reached directly from the host over the veth
    rx_port: int
    rx_pid: int
    sandbox: SandboxProcess
    store: Store  # the receiver's database, read from the host directly
    secret: str
    tmp: Path

    def base(self) -> str:
        return self.rx_url.split("/formsync", 1)[0]


@pytest.fixture(scope="module")
def world(pg_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_capability()
    tmp = tmp_path_factory.mktemp("netfaults")
    with contextlib.ExitStack() as stack:
        lk = stack.enter_context(link())
        hub = stack.enter_context(relays())
        sb = stack.enter_context(sandbox_process(tmp / "sandbox"))
        sb.helper("limits.set", {"callsPerMinute": 1_000_000, "createsPerMinute": 1_000_000})
        pg = make_url(pg_database)
        db_relay = hub.add(lk.host_ip, (pg.host or "127.0.0.1", pg.port or 5432))
        api_relay = hub.add(lk.host_ip, ("127.0.0.1", int(sb.base_url.rsplit(":", 1)[1])))
        secret = sb.workspace("pro")["signingSecret"]
        config = tmp / "receive.toml"
        config.write_text(f'[receiver]\nhost = "{lk.ns_ip}"\ncallback_secrets = ["{secret}"]\n'
                          f"max_queued_bytes = {MAX_QUEUED}\n")
        db_in_ns = pg.set(host=lk.host_ip, port=db_relay.port).render_as_string(hide_password=False)
        store = Store(pg_database)
        store.migrate()
        stack.callback(store.close)
        proc, url = stack.enter_context(receive_process(config, tmp, db=db_in_ns, wrap=lk.wrap([])))
        port = int(url.split(":")[2].split("/")[0])
        rx_relay = hub.add("127.0.0.1", (lk.ns_ip, port))
        yield World(lk, hub, db_relay, api_relay, rx_relay, url, port, proc.pid, sb, store, secret, tmp)


# -- deliveries sent from the test --------------------------------------------------------------


@dataclass
class Answer:
    event_id: str
    status: int  # 0: no answer (the connection failed or timed out)
    seconds: float
    body: dict[str, Any]


async def deliver(http: aiohttp.ClientSession, w: World, eid: str, *, pad: int = 0) -> Answer:
    """POST one signed event to the receiver (directly, over the veth) and time its answer."""
    payload = envelope(eid)
    if pad:
        payload["padding"] = "x" * pad
    body = encode(payload)
    started = time.monotonic()
    try:
        async with http.post(w.rx_url, data=body, headers=signed(body, w.secret)) as resp:
            text = await resp.text()
            return Answer(eid, resp.status, time.monotonic() - started, json.loads(text) if text else {})
    except (aiohttp.ClientError, TimeoutError):
        return Answer(eid, 0, time.monotonic() - started, {})


async def health(http: aiohttp.ClientSession, w: World) -> int:
    async with http.get(w.base() + "/healthz") as resp:
        return resp.status


async def held_bytes(http: aiohttp.ClientSession, w: World) -> float:
    async with http.get(w.base() + "/metrics") as resp:
        return metric(await resp.text(), "formsync_receiver_held_bytes")


async def recovery_seconds(http: aiohttp.ClientSession, w: World, prefix: str, since: float) -> float:
    """Seconds from ``since`` (the fault's end) until a new event is acknowledged."""
    for i in range(400):
        if (await deliver(http, w, f"{prefix}-probe-{i}")).status == 200:
            return time.monotonic() - since
        await asyncio.sleep(0.05)
    raise AssertionError("the receiver did not recover within 400 probes")


def stored_ids(store: Store) -> list[str]:
    return [e.id for e in rows(store, RawEvent)]


def check_answers(answers: list[Answer], within: float = ANSWER_BOUND_S + SLACK_S) -> None:
    """Every delivery answered 200 or 503, ``within`` seconds of its sending."""
    late = [a for a in answers if a.status not in (200, 503) or a.seconds > within]
    assert not late, [(a.event_id, a.status, round(a.seconds, 2)) for a in late[:10]]


async def retry_until_acknowledged(http: aiohttp.ClientSession, w: World, ids: list[str]) -> Counter[str]:
    """The sender's retries of ``ids`` until each is answered 200; how many were stored, how many duplicates."""
    outcome: Counter[str] = Counter()
    todo = list(ids)
    for _ in range(20):
        answers = await asyncio.gather(*(deliver(http, w, eid) for eid in todo))
        todo = [a.event_id for a in answers if a.status != 200]
        outcome.update(a.body.get("status", "") for a in answers if a.status == 200)
        if not todo:
            return outcome
        await asyncio.sleep(0.5)
    raise AssertionError(f"{len(todo)} events never acknowledged after the fault")


# -- receiver <-> database ----------------------------------------------------------------------


async def test_database_partitioned_or_hung(world: World) -> None:
    w, figures = world, {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http:
        baseline = await asyncio.gather(*(deliver(http, w, f"base-{i}") for i in range(20)))
        assert {a.status for a in baseline} == {200}
        rss_before = rss_bytes(w.rx_pid)

        # -- partition: the database's packets go nowhere, both ways, connections stay open --
        w.link.partition(w.db_relay.port)
        started = time.monotonic()
        samples: list[float] = []
        # 20 small deliveries, and a flood of 60 of 150 KB at once: 9 MB against a 4 MiB bound.
        # The health check (its ping waits out its timeout) and the samples run while the wave
        # is in flight.
        wave = asyncio.gather(*(deliver(http, w, f"part-{i}") for i in range(20)),
                              *(deliver(http, w, f"flood-{i}", pad=150_000) for i in range(60)))
        during, _, partitioned_health = await asyncio.gather(wave, _sample_peak(http, w, samples, wave),
                                                             health(http, w))
        peak_held = max(samples)
        rss_peak = rss_bytes(w.rx_pid)
        assert partitioned_health == 503
        left = FAULT_S - (time.monotonic() - started)
        if left > 0:
            await asyncio.sleep(left)
        w.link.clear()
        healed = time.monotonic()
        figures["partition_recovery_s"] = round(await recovery_seconds(http, w, "part", healed), 2)
        check_answers(during[:20])
        # A flood's bodies take their time to arrive on a busy machine: answered within the sender's 15 s.
        check_answers(during[20:], within=SENDER_TIMEOUT_S)
        assert all(a.status == 503 for a in during), Counter(a.status for a in during)
        full = sum(a.body.get("error", {}).get("message", "").startswith("the receiver already holds") for a in during)
        assert full > 0, "a flood past max_queued_bytes is refused at once"
        assert peak_held <= MAX_QUEUED
        figures.update(partition_answer_max_s=round(max(a.seconds for a in during[:20]), 2),
                       flood_answer_max_s=round(max(a.seconds for a in during[20:]), 2),
                       partition_queue_full=full, partition_deliveries=len(during),
                       rss_growth_mib=round((rss_peak - rss_before) / 2**20, 1),
                       held_peak_mib=round(peak_held / 2**20, 2))
        assert rss_peak - rss_before < 64 * 2**20, "memory stays bounded while the database is away"
        outcome = await retry_until_acknowledged(http, w, [a.event_id for a in during])
        figures["partition_retries"] = dict(outcome)

        # -- hung peer: the database's relay reads and forwards nothing; the kernel keeps it alive --
        w.hub.hang(w.db_relay)
        *hung, hung_health = await asyncio.gather(*(deliver(http, w, f"hung-{i}") for i in range(30)),
                                                  health(http, w))
        await asyncio.sleep(max(0.0, FAULT_S - ANSWER_BOUND_S))
        assert hung_health == 503
        w.hub.resume(w.db_relay)
        resumed = time.monotonic()
        figures["hung_recovery_s"] = round(await recovery_seconds(http, w, "hung", resumed), 2)
        check_answers(hung)
        assert all(a.status == 503 for a in hung), Counter(a.status for a in hung)
        figures["hung_answer_max_s"] = round(max(a.seconds for a in hung), 2)
        # A batch stuck behind the hung peer commits once it resumes, after its 503: the retry is a duplicate.
        outcome = await retry_until_acknowledged(http, w, [a.event_id for a in hung])
        figures["hung_retries"] = dict(outcome)
        assert await health(http, w) == 200

    acknowledged = {a.event_id for a in baseline} | {a.event_id for a in during} | {a.event_id for a in hung}
    ids = stored_ids(w.store)
    assert len(ids) == len(set(ids)), "no event stored twice"
    assert acknowledged <= set(ids), "every acknowledged event stored"
    report_figures("network faults: receiver to database", **figures)


async def _sample_peak(http: aiohttp.ClientSession, w: World, out: list[float], wave: asyncio.Future[Any]) -> None:
    """The receiver's held bytes, sampled until ``wave`` is answered (a scrape takes up to
    the store collector's 2 s while the database is away)."""
    while True:
        out.append(await held_bytes(http, w))
        if wave.done():
            return
        await asyncio.sleep(0.1)


# -- sandbox -> receiver ------------------------------------------------------------------------


async def test_deliveries_through_loss_resets_and_a_slow_link(world: World) -> None:
    w, figures = world, {}
    sb, form = w.sandbox, w.sandbox.workspace("pro")["forms"]["Contact"]
    callback = f"http://127.0.0.1:{w.rx_relay.port}/formsync/events"
    async with w.sandbox.helpers() as helpers:
        async def complete(n: int) -> list[str]:
            ids = []
            for _ in range(n):
                rid = (await asyncio.to_thread(sb.rpc, "requests.create", {"formId": form, "callbackUrl": callback}))["id"]
                await helpers.requests_complete(rid, CONTACT)
                ids.append(rid)
            return ids

        async def under(fault: str, apply: Any) -> None:
            apply()
            started = time.monotonic()
            await complete(8)
            flushed = await helpers.deliveries_flush()
            figures[f"{fault}_flush_s"] = round(time.monotonic() - started, 2)
            figures[f"{fault}_attempts"] = dict(Counter(str(a.status) for a in flushed.attempts))
            w.link.clear()
            w.hub.set_delay(w.rx_relay, 0.0)

        await under("loss30", lambda: w.link.loss(w.rx_port, 30))
        await under("reset", lambda: w.link.resets(w.rx_port))
        await under("slow", lambda: (w.link.shape(256), w.hub.set_delay(w.rx_relay, 0.15)))

        cleared = time.monotonic()
        for _ in range(10):  # the sandbox's retries, on its test clock
            pending = [d for e in (await helpers.events_list(form_id=form)).items for d in e.deliveries
                       if d.kind == "callback" and d.state != "delivered"]
            if not pending:
                break
            await helpers.clock_advance(RETRY_SCHEDULE_MS[0])
            await helpers.deliveries_flush()
        figures["redelivered_s"] = round(time.monotonic() - cleared, 2)
        events = (await helpers.events_list(form_id=form)).items
    callbacks = [(e.id, d) for e in events for d in e.deliveries if d.kind == "callback"]
    assert callbacks and all(d.state == "delivered" for _, d in callbacks), "every event delivered after the faults"
    ids = stored_ids(w.store)
    assert len(ids) == len(set(ids))
    assert {eid for eid, _ in callbacks} <= set(ids), "every event the receiver acknowledged is stored"
    report_figures("network faults: sandbox to receiver", events=len(callbacks), **figures)


# -- client -> service --------------------------------------------------------------------------


def test_outreach_and_poll_through_loss_and_resets(world: World) -> None:
    w, figures = world, {}
    form = w.sandbox.workspace("pro")["forms"]["Contact"]
    sheet = write_csv(w.tmp / "sheet.csv", sheet_rows(ROWS, bad=False))
    config = w.tmp / "client.toml"
    config.write_text(f'[service]\nbase_url = "http://{w.link.host_ip}:{w.api_relay.port}"\n'
                      f'timeout_seconds = 5\n[store]\nurl = "sqlite:///{w.tmp / "client.db"}"\n')
    env = {"FORMSYNC_SERVICE__TOKEN": w.sandbox.workspace("pro")["token"], "COLUMNS": "200"}

    def run(*args: str) -> tuple[int, float]:
        started = time.monotonic()
        done = subprocess.run(w.link.wrap([str(FORMSYNC), *args, "--config", str(config)]), capture_output=True,
                              text=True, timeout=120, env={**os.environ, **env}, cwd=w.tmp)
        assert done.returncode in (0, 1, 3), done.stderr[-2000:]
        return done.returncode, time.monotonic() - started

    w.link.loss(w.api_relay.port, 10)
    w.link.resets(w.api_relay.port, 2)
    try:
        codes = []
        for attempt in range(4):  # a run cut short by the faults is resumed by the same command
            code, seconds = run("outreach", str(sheet), "--form", form, "--job", "netfaults")
            codes.append(code)
            figures[f"outreach_run{attempt}_s"] = round(seconds, 2)
            if code == 0:
                break
        code, seconds = run("poll", "--form", form)
        figures["poll_s"] = round(seconds, 2)
    finally:
        w.link.clear()
    assert codes[-1] == 0, codes
    sent = Counter(r["externalId"] for r in _all_requests(w.sandbox, form) if (r.get("externalId") or "").startswith("c-"))
    assert sorted(sent) == sorted(f"c-{i}" for i in range(ROWS)), "every row sent"
    assert set(sent.values()) == {1}, "no row sent twice"
    report_figures("network faults: client to service", rows=ROWS, runs=len(codes), **figures)


def _all_requests(sb: SandboxProcess, form: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        page = sb.rpc("requests.list", {"formId": form, "limit": 100, **({"cursor": cursor} if cursor else {})})
        out += page["items"]
        cursor = page.get("nextCursor")
        if not cursor:
            return out
    raise AssertionError("requests.list never ended")


# -- a database hung for longer than a commit may take ------------------------------------------


async def test_a_store_process_stuck_on_a_hung_database_is_replaced(pg_database: str, caplog: pytest.LogCaptureFixture
                                                                    ) -> None:
    """The receiver in this process (answer bound 1 s, so a batch may take 3 s) on a
    database whose relay hangs for longer: deliveries are answered 503 within the bound,
    the stuck store process is replaced, and after the hang everything is stored once.
    Loopback only: no namespace, so this one runs without root too."""
    caplog.set_level(logging.WARNING, "connector.receiver")
    pg = make_url(pg_database)
    with relays() as hub:
        relay = hub.add("127.0.0.1", (pg.host or "127.0.0.1", pg.port or 5432))
        store = Store(pg.set(host="127.0.0.1", port=relay.port).render_as_string(hide_password=False))
        store.migrate()
        rs = receiver_settings(answer_timeout_seconds=1.0)
        try:
            async with running(store, rs, store_process=True) as rx:
                assert (await rx.post(encode(envelope("stuck-0")), signed(encode(envelope("stuck-0")))))[0] == 200
                hub.hang(relay)
                answers = []
                for i in range(1, 5):  # one a second: the last ones after the commit bound
                    body = encode(envelope(f"stuck-{i}"))
                    started = time.monotonic()
                    status, *_ = await rx.post(body, signed(body))
                    answers.append((status, time.monotonic() - started))
                hub.resume(relay)
                resumed = time.monotonic()
                for i in range(1, 5):
                    for _ in range(100):
                        body = encode(envelope(f"stuck-{i}"))
                        if (await rx.post(body, signed(body)))[0] == 200:
                            break
                        await asyncio.sleep(0.1)
                recovered = time.monotonic() - resumed
        finally:
            store.close()
    assert [status for status, _ in answers] == [503] * 4
    assert max(seconds for _, seconds in answers) < 1.0 + SLACK_S
    assert any("did not commit a batch within 3 s" in r.getMessage() for r in caplog.records)
    verify = Store(pg_database)
    try:
        ids = stored_ids(verify)
    finally:
        verify.close()
    assert sorted(i for i in ids if i.startswith("stuck-")) == [f"stuck-{i}" for i in range(5)]  # each once
    report_figures("network faults: store process on a hung database", answer_max_s=round(
        max(s for _, s in answers), 2), recovery_s=round(recovered, 2))
