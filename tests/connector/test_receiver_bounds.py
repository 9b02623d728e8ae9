"""The receiver's bounds while its database stops answering (PostgreSQL behind a relay
that hangs: connected, answering nothing): every delivery is answered 503 within
``answer_timeout_seconds``, or at once past ``max_queued_bytes``; once the database
answers again, what was committed late is a duplicate on retry and nothing is stored
twice. The network-fault suite (tests/hardening/test_network_faults.py) does the same
across a real impaired link."""

from __future__ import annotations

import asyncio
import json
import time

from sqlalchemy.engine import make_url

from connector.store import Store
from connector.store._tables import RawEvent
from tests.hardening.netfaults import relays

from .test_receiver import encode, envelope, metric, receiver_settings, rows, running, signed

BOUND_S = 0.5
SLACK_S = 1.0  # a busy shared machine


async def test_a_database_that_stops_answering_gets_every_delivery_a_503_in_time(pg_database: str) -> None:
    pg = make_url(pg_database)
    with relays() as hub:
        relay = hub.add("127.0.0.1", (pg.host or "127.0.0.1", pg.port or 5432))
        store = Store(pg.set(host="127.0.0.1", port=relay.port).render_as_string(hide_password=False))
        store.migrate()
        rs = receiver_settings(answer_timeout_seconds=BOUND_S, max_body_bytes=4096, max_queued_bytes=16384)
        bodies = {f"bound-{i}": encode(envelope(f"bound-{i}", padding="x" * 2500)) for i in range(12)}
        try:
            async with running(store, rs, store_process=False) as rx:

                async def post(eid: str) -> tuple[int, str, float]:
                    started = time.monotonic()
                    status, body, _ = await rx.post(bodies[eid], signed(bodies[eid]))
                    return status, body["error"]["message"] if status != 200 else "", time.monotonic() - started

                hub.hang(relay)
                answers = await asyncio.gather(*(post(eid) for eid in bodies))
                held = metric(await rx.metrics(), "formsync_receiver_held_bytes")
                _, ready = await rx.get("/readyz")  # its ping waits for the hung database (5 s)
                hub.resume(relay)
                retried = []
                for eid in bodies:  # the sender's retries, until each is acknowledged (or 50 are not)
                    for _ in range(50):
                        if (answer := await post(eid))[0] == 200:
                            break
                        await asyncio.sleep(0.1)
                    retried.append(answer)
        finally:
            stored = [e.id for e in rows(store, RawEvent)]
            store.close()
    assert {status for status, _, _ in answers} == {503}
    full = [seconds for _, message, seconds in answers if message.startswith("the receiver already holds")]
    slow = [seconds for _, message, seconds in answers if message.startswith("the database did not answer in time")]
    assert len(full) + len(slow) == len(bodies) and full and slow
    assert max(full) < BOUND_S, "refused at once when the queue is full"
    assert BOUND_S <= min(slow) and max(slow) < BOUND_S + SLACK_S
    assert held <= 16384
    assert json.loads(ready) == {"ok": False, "database": "unavailable", "queue": "full: deliveries wait for the "
                                 "database's commits", "queued": json.loads(ready)["queued"]}
    assert {status for status, _, _ in retried} == {200}, retried
    assert sorted(stored) == sorted(bodies), "each event stored once"
