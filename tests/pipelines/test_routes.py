"""Every route, one response: the same completed requests brought by the receiver (the
sandbox's own completion events), by ``poll`` and by ``sync``, alone and together in
every order that matters, give the same wide export; in the minimal dialect (request
records name no submission) a provisional row is replaced, never doubled. A real sandbox
over loopback HTTP and SQLite stores; the store-level rule on all three databases is in
tests/connector/test_responses.py."""

from __future__ import annotations

import csv
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from connector.client._field_lists import learn_field_lists
from connector.client.rpc import FormClient
from connector.models import Event
from connector.store import Store
from connector.store._responses import is_provisional
from pipelines.export.write import export
from pipelines.sync.poll import poll_once
from pipelines.sync.submissions import sync_form
from tests.conftest import Sandbox

pytestmark = pytest.mark.dialects

FAST = {"callsPerMinute": 10000, "createsPerMinute": 10000}
ANSWERS = [{"reviewer": "Grace Hopper", "decision": "approve", "comments": "Fine"},
           {"reviewer": "Alan Turing", "decision": "decline"}]

Route = Callable[[Store], Awaitable[Any]]


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[FormClient]:
    assert (await sandbox.helper("limits.set", FAST)).ok
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        yield fc


async def completed_requests(sandbox: Sandbox, client: FormClient, form: str) -> list[dict[str, Any]]:
    """Three requests made (as outreach stores them), two of them completed; the
    create records, to seed each store with."""
    records = []
    for _ in range(3):
        created = await client.create_request(form)
        records.append({**created.model_dump(exclude_unset=True), "formId": form})
    for rec, answers in zip(records, ANSWERS, strict=False):
        assert (await sandbox.helper("requests.complete", {"requestId": rec["id"], "answers": answers})).ok
    return records


def routes(sandbox: Sandbox, client: FormClient, form: str) -> dict[str, Route]:
    async def receiver(store: Store) -> None:
        items = (await sandbox.helper("events.list", {"formId": form, "type": "request.completed"})).data["items"]
        assert len(items) == 2
        store.store_events([Event.model_validate(i["payload"]) for i in items], source="callback")
        # What the receiver's field-list learner does after the commit (a receiver with a token).
        await learn_field_lists(client, store, [form])

    async def poll(store: Store) -> None:
        await poll_once(client, store)  # reads only the requests the store still holds as pending

    async def sync(store: Store) -> None:
        await sync_form(client, store, form, full=True)

    return {"receiver": receiver, "poll": poll, "sync": sync}


def wide_rows(store: Store, out: Path) -> list[dict[str, str]]:
    """The wide export's rows, by request id; times to the second, the precision of
    ``submissions.list`` (an event or a request record gives milliseconds)."""
    export(store, "csv", out, table="wide", form_id=None)
    with out.open(newline="", encoding="utf-8-sig") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: r["request_id"])
    return [{k: v[:19] if k.endswith("_at") else v for k, v in r.items()} for r in rows]


ORDERS = [("receiver",), ("poll",), ("sync",), ("receiver", "poll", "sync"), ("poll", "sync", "receiver"),
          ("sync", "poll", "receiver"), ("poll", "receiver")]


async def test_every_route_and_every_order_gives_one_row_per_completion(
        sandbox: Sandbox, client: FormClient, tmp_path: Path, dialect: str) -> None:
    form = sandbox.pro.forms["Approval"]
    records = await completed_requests(sandbox, client, form)
    by_route = routes(sandbox, client, form)
    exports: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for order in ORDERS:
        name = "-".join(order)
        store = Store(f"sqlite:///{tmp_path / name}.db")
        store.migrate()
        store.upsert_requests(records, source="poll")
        for route in order:
            await by_route[route](store)
        exports[order] = wide_rows(store, tmp_path / f"{name}.csv")
        store.close()
    done = sorted(r["id"] for r in records[:2])
    for order, rows in exports.items():
        # In the minimal dialect submissions.list names no request: sync alone cannot link them.
        unlinked = dialect == "minimal" and order == ("sync",)
        assert sorted(r["request_id"] for r in rows) == (["", ""] if unlinked else done), order
        assert sorted(r["reviewer"] for r in rows) == ["Alan Turing", "Grace Hopper"], order
        # Only poll alone, in the minimal dialect, cannot know the submission's own id.
        provisional = dialect == "minimal" and order == ("poll",)
        assert all(is_provisional(r["submission_id"]) == provisional for r in rows), order
    if dialect == "full":  # every route names the submission and its times: the same rows, cell by cell
        # (but stored_at: when each store received the row)
        exports = {o: [{k: v for k, v in r.items() if k != "stored_at"} for r in rows] for o, rows in exports.items()}
        first = exports[ORDERS[0]]
        for order, rows in exports.items():
            if order == ("sync",):  # submissions.list carries no language: a sync-only store has none
                assert {r["language"] for r in rows} == {""}
                rows = [{**r, "language": "en"} for r in rows]
            assert rows == first, order
        assert {r["language"] for r in first} == {"en"}
