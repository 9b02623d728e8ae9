"""No drift: the receiver reads a form's field list in the background when an answer
names a key the store has no descriptor for, over real HTTP against the sandbox, when a
service token is configured (SQLite, PostgreSQL, MariaDB); without one the keys are held
back from the typed outputs (the long table keeps them), the receiver names the forms
once in its log, and ``formsync status`` names them with the fix, within 80 columns."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from rich.console import Console
from sqlmodel import select

from connector.client._field_lists import HELD_MARGIN_MS, FieldListLearner
from connector.config.settings import ServiceSettings, Settings
from connector.store import Store
from connector.store._tables import FormField
from pipelines.operate.status import collect_status, render_status
from tests.conftest import Sandbox

from .test_receiver import flush, receiver_settings, running
from .test_store import T0, events, sub_event

ANSWERS = {"name": "Grace Hopper", "email": "grace@example.test"}


async def complete_with_callback(sandbox: Sandbox, form: str, url: str, n: int) -> None:
    """``n`` requests to ``form`` completed, their callbacks delivered to ``url``."""
    for _ in range(n):
        r = await sandbox.rpc("requests.create", {"formId": form, "callbackUrl": url})
        assert r.status == 200, r.body
        assert (await sandbox.helper("requests.complete", {"requestId": r.data["id"], "answers": ANSWERS})).ok
        assert all(a["status"] == 200 for a in await flush(sandbox))


async def until(what: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, f"not within {seconds} s"
        await asyncio.sleep(0.05)


def fields_of(store: Store, form: str) -> dict[str, str]:
    with store.database.reader() as s:
        return {f.field_key: f.source for f in s.exec(select(FormField).where(FormField.form_id == form))}


async def test_the_receiver_reads_a_new_forms_field_list_once_after_the_commit(
        sandbox: Sandbox, store: Store) -> None:
    form = sandbox.pro.forms["Contact"]
    service = ServiceSettings(base_url=sandbox.base_url, token=sandbox.pro.token)
    rs = receiver_settings(callback_secrets=[sandbox.pro.signing_secret])
    async with running(store, rs, service=service) as rx:
        await complete_with_callback(sandbox, form, rx.url("callbacks"), 2)
        await until(lambda: store.held_back_fields([form]) == {}, 10)
        await complete_with_callback(sandbox, form, rx.url("callbacks"), 1)
        await asyncio.sleep(0.3)
    # every field of the form, answered or not (the hidden one too), from fields.list
    assert fields_of(store, form) == dict.fromkeys(["name", "email", "topic", "message", "source"], "fields.list")
    calls = (await sandbox.helper("calls.list", {"method": "fields.list"})).data
    assert calls["count"] == 1, "one fields.list per new form, whatever the deliveries"


async def test_without_a_token_the_receiver_and_status_name_the_held_back_fields(
        sandbox: Sandbox, sqlite_store: Store, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="formsync.fields")
    form = sandbox.pro.forms["Contact"]
    rs = receiver_settings(callback_secrets=[sandbox.pro.signing_secret])
    async with running(sqlite_store, rs) as rx:
        await complete_with_callback(sandbox, form, rx.url("callbacks"), 1)
        await until(lambda: any(form in r.getMessage() for r in caplog.records), 10)
        await complete_with_callback(sandbox, form, rx.url("callbacks"), 1)
        await asyncio.sleep(2.5)  # past the learner's pause: it looked again, and said nothing new
    said = [r.getMessage() for r in caplog.records if form in r.getMessage()]
    assert len(said) == 1 and "set service.token" in said[0] and "formsync views" in said[0]
    assert (await sandbox.helper("calls.list", {"method": "fields.list"})).data["count"] == 0
    report = collect_status(Settings(), sqlite_store)
    assert report.held_back == {form: ["name", "email"]}
    assert [c.name for c in sqlite_store.schema(form).fields()] == []  # no typed column without the list
    with sqlite_store.database.engine.connect() as conn:
        kept = conn.exec_driver_sql("SELECT answers FROM formsync_submissions").scalars().all()
    assert len(kept) == 2 and all("Grace Hopper" in a for a in kept)  # nothing lost
    console = Console(width=80, record=True)
    console.print(render_status(report))
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert form in text and "set service.token" in text and "formsync views" in text


async def test_without_a_token_each_form_is_named_when_it_holds_new_keys_and_only_the_recent_ones_are_kept(
        tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="formsync.fields")
    now = [T0]
    store = Store(f"sqlite:///{tmp_path / 'rx.db'}", clock=lambda: now[0])
    store.migrate()
    learner = FieldListLearner(store, None)

    def answer(form: str, key: str) -> None:
        ev = sub_event(f"evt_{form}_{key}_{now[0]}", f"sub_{form}_{key}_{now[0]}", answers={key: 1})
        ev["data"]["form"]["id"] = form
        store.store_events(events(ev))

    async def named() -> list[str]:
        caplog.clear()
        await learner.round()
        return [f for r in caplog.records for f in r.getMessage().split("form(s) ")[1].split(":")[0].split(", ")]

    try:
        for form in ("form_0", "form_1", "form_2"):
            answer(form, "a")
        assert await named() == ["form_0", "form_1", "form_2"]
        assert await named() == []
        now[0] += 10_000
        answer("form_3", "a")
        answer("form_0", "a")  # held already: nothing new
        assert await named() == ["form_3"]
        now[0] += 3 * HELD_MARGIN_MS
        assert await named() == [] and await named() == []
        assert learner._said == {}, "the forms named before the keys a look reads again are not kept"
        answer("form_0", "b")  # a new key: named again
        assert await named() == ["form_0"]
    finally:
        store.close()
