"""A row travels again only when it changed, on SQLite, PostgreSQL and MariaDB, over real
HTTP against the sandbox: ``sync --full`` of unchanged submissions moves no arrival place
(the next ``--since-last`` export has no row), an edit moves exactly its row, a held-back
key that gets its column moves only the rows answering it (under every export name). A
field added and answered within a minute of the form's last ``fields.list`` read gets its
column in the same sync; a sync with ``full_every_ms`` elapsed (the sandbox's clock
advanced) reads the form whole and catches an edit; by hand, ``formsync sync`` says how
edits are caught; an export and a load name the keys they leave out."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from connector.client.rpc import FormClient
from connector.store import Store
from connector.store._tables import RequestRow, SubmissionRow
from formservice.domain.forms import edit_blocks
from formservice.tables import Form
from pipelines.cli import app
from pipelines.export.write import export
from pipelines.operate.jobs import summarise
from pipelines.sync.submissions import HOUR_MS, edits_line, full_due, sync_form
from tests.conftest import Sandbox
from tests.items import list_item

from .test_store import T0, events, poll_record, sub_event

FAST = {"callsPerMinute": 10000, "createsPerMinute": 10000}


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[FormClient]:
    assert (await sandbox.helper("limits.set", FAST, ws="pro")).ok
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        yield fc


def places(store: Store, form: str) -> dict[str, int]:
    with store.database.reader() as s:
        return {r.id: r.arrival for r in s.exec(select(SubmissionRow).where(SubmissionRow.form_id == form))}


def since_last(store: Store, tmp_path: Path, name: str, form: str, n: int) -> int:
    """The rows an incremental export of ``form`` under ``name`` writes (its cursor moves)."""
    report = export(store, "csv", tmp_path / f"{name}-{n}.csv", form_id=form, since_last=name)
    return sum(report.rows.values())


async def submit(sandbox: Sandbox, form: str, answers: dict[str, Any]) -> str:
    reply = await sandbox.helper("submissions.create", {"formId": form, "answers": answers})
    assert reply.ok, reply.body
    return str(reply.data["id"])


async def contact_with_edits(sandbox: Sandbox) -> tuple[str, list[str]]:
    """The Contact form, edits allowed, with three submissions (and the seed's)."""
    form = sandbox.pro.forms["Contact"]
    assert (await sandbox.rpc("formSettings.update", {"formId": form, "editAfterSubmit": True,
                                                      "maxEdits": 3})).status == 200
    made = [await submit(sandbox, form, {"name": f"Person {i}", "email": f"p{i}@example.test"}) for i in range(3)]
    return form, made


async def test_a_full_sync_of_unchanged_rows_moves_nothing_and_an_edit_moves_its_row_only(
        sandbox: Sandbox, client: FormClient, store: Store, tmp_path: Path) -> None:
    form, made = await contact_with_edits(sandbox)
    first = await sync_form(client, store, form)
    assert first.full and first.last_full is not None, "the first sync reads the form whole"
    assert since_last(store, tmp_path, "nightly", form, 1) == first.fetched >= 3
    before = places(store, form)

    again = await sync_form(client, store, form, full=True)
    assert again.fetched == first.fetched and places(store, form) == before, "re-read, unchanged: no place moves"
    assert since_last(store, tmp_path, "nightly", form, 2) == 0

    await sandbox.helpers.clock_advance(60_000)
    await sandbox.helpers.submissions_update(made[1], {"name": "Edited"})
    await sync_form(client, store, form, full=True)
    after = places(store, form)
    assert {sid for sid in after if after[sid] != before[sid]} == {made[1]}, "the edit moves exactly its row"
    assert since_last(store, tmp_path, "nightly", form, 3) == 1
    assert "Edited" in (tmp_path / "nightly-3.csv").read_text()


def test_a_version_in_another_envelope_with_the_same_content_keeps_its_place(store: Store) -> None:
    """``updatedAt``/``editCount`` are not the test: the stored content is."""
    store.upsert_submissions([list_item("sub_a", {"q": 1}), list_item("sub_b", {"q": 2})], "form_x")
    before = places(store, "form_x")
    # A newer envelope (it wins the merge) with the same answers: the row is re-written, not moved.
    store.upsert_submissions([list_item("sub_a", {"q": 1}, edits=1)], "form_x", source="poll")
    assert places(store, "form_x") == before
    store.upsert_submissions([list_item("sub_b", {"q": 3}, edits=2)], "form_x")
    moved = places(store, "form_x")
    assert moved["sub_a"] == before["sub_a"] and moved["sub_b"] > before["sub_b"]


def test_a_replayed_event_and_a_polled_record_unchanged_keep_their_places(store: Store) -> None:
    store.store_events(events(sub_event("evt_1", "sub_1")))
    [first] = places(store, "form_contact").values()
    store.store_events(events(sub_event("evt_2", "sub_1", created=T0 + 5_000)))  # redelivered under a new id
    assert places(store, "form_contact") == {"sub_1": first}
    store.store_events(events(sub_event("evt_3", "sub_1", type="submission.updated", updated=T0 + 60_000, edits=1,
                                        answers={"name": "Bo"})))
    assert places(store, "form_contact")["sub_1"] > first

    def request_place() -> int:
        with store.database.reader() as s:
            row = s.get(RequestRow, "req_1")
            assert row is not None
            return row.arrival

    store.upsert_requests([poll_record("req_1", "pending", T0)])
    polled = request_place()
    store.upsert_requests([poll_record("req_1", "pending", T0 + 1_000)])  # a newer envelope, the same content
    assert request_place() == polled
    store.upsert_requests([poll_record("req_1", "pending", T0 + 2_000, deliveryStatus="delivered")])
    assert request_place() > polled


def test_a_held_back_key_getting_its_column_moves_only_the_rows_answering_it(store: Store, tmp_path: Path) -> None:
    form = "form_held"
    store.record_fields(form, [{"key": "name", "type": "text", "title": "Name"}])
    store.upsert_submissions([list_item("sub_1", {"name": "A", "extra": "x"}), list_item("sub_2", {"name": "B"}),
                              list_item("sub_3", {"name": "C", "extra": None})], form)
    store.upsert_submissions([list_item("sub_4", {"name": "D", "extra": "y"})], form)
    assert store.held_back_fields([form]) == {form: ["extra"]}
    for name in ("nightly", "other"):
        assert since_last(store, tmp_path, name, form, 1) == 4
    before = places(store, form)

    store.record_fields(form, [{"key": "name", "type": "text", "title": "Name"},
                               {"key": "extra", "type": "text", "title": "Extra"}])
    after = places(store, form)
    assert {sid for sid in after if after[sid] != before[sid]} == {"sub_1", "sub_4"}
    for name in ("nightly", "other"):  # under every name, those rows only, with the new column
        assert since_last(store, tmp_path, name, form, 2) == 2
        text = (tmp_path / f"{name}-2.csv").read_text().splitlines()
        assert "extra" in text[0] and sorted(line.split(",")[0].strip('"') for line in text[1:]) == ["sub_1", "sub_4"]


def edit_draft(sandbox: Sandbox, form_id: str, block: dict[str, Any]) -> None:
    """Add a question to a form's draft as the editor does (there is no API method)."""
    with sandbox.service.session() as s:
        form = s.get(Form, form_id)
        assert form is not None
        edit_blocks(form, [*(dict(b) for b in form.blocks or []), block], sandbox.service.now())
        s.add(form)
        s.commit()


async def test_a_field_added_and_answered_within_a_minute_gets_its_column_in_the_same_sync(
        sandbox: Sandbox, client: FormClient, store: Store) -> None:
    form = sandbox.pro.forms["Contact"]
    await sync_form(client, store, form)  # reads the form's fields.list now
    edit_draft(sandbox, form, {"type": "text", "key": "department", "title": "Department"})
    assert (await sandbox.rpc("forms.publish", {"formId": form})).status == 200
    await submit(sandbox, form, {"name": "New", "email": "new@example.test", "department": "Ops"})
    await sync_form(client, store, form)  # seconds later: the new key is asked about at once
    assert store.held_back_fields([form]) == {}
    assert "department" in [c.name for c in store.schema(form).columns]
    assert (await sandbox.helper("calls.list", {"method": "fields.list"})).data["count"] == 2

    await submit(sandbox, form, {"name": "Newer", "email": "n2@example.test", "department": "Ops"})
    await sync_form(client, store, form)  # a known key: no read
    assert (await sandbox.helper("calls.list", {"method": "fields.list"})).data["count"] == 2


async def test_a_sync_with_full_every_elapsed_reads_the_form_whole_and_catches_an_edit(
        sandbox: Sandbox, client: FormClient, store: Store) -> None:
    form, made = await contact_with_edits(sandbox)
    first = await sync_form(client, store, form, full_every_ms=HOUR_MS)
    assert first.full
    await sandbox.helpers.clock_advance(60_000)
    await sandbox.helpers.submissions_update(made[0], {"name": "Caught"})

    quiet = await sync_form(client, store, form, full_every_ms=HOUR_MS)
    assert (quiet.full, quiet.calls) == (False, 1), "within the hour: incremental, one call"
    with store.database.reader() as s:
        row = s.get(SubmissionRow, made[0])
        assert row is not None and row.answers is not None and row.answers["name"] == "Person 0"

    await sandbox.helpers.clock_advance(HOUR_MS)
    due = await sync_form(client, store, form, full_every_ms=HOUR_MS)
    assert due.full and due.calls == 1 and due.last_full != first.last_full
    assert summarise("sync", due).startswith(f"form {form}: read whole (edits included), fetched ")
    assert "read whole" not in summarise("sync", quiet)
    with store.database.reader() as s:
        row = s.get(SubmissionRow, made[0])
        assert row is not None and row.answers is not None and row.answers["name"] == "Caught"


def test_when_a_full_read_is_due_and_what_sync_says() -> None:
    assert full_due(None, 5, HOUR_MS) and full_due(0, HOUR_MS, HOUR_MS) and not full_due(1, HOUR_MS, HOUR_MS)
    assert not full_due(None, 5, None), "by hand: never of itself"


async def formsync(*args: str, env: dict[str, str] | None = None) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "400", **(env or {})})


async def test_cli_sync_says_how_edits_are_caught_and_export_names_held_keys(
        sandbox: Sandbox, client: FormClient, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{sandbox.pro.token}"\n'
                   f'[store]\nurl = "sqlite:///{tmp_path}/cli.db"\n[sync]\nfull_every_hours = 12\n')
    res = await formsync("sync", "--config", str(cfg), "--form", form)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["full"] is True
    last = res.stderr.strip().splitlines()[-1]
    assert "read the form whole" in last and "every 12 h" in last and "1 call(s)" in last, last
    res = await formsync("sync", "--config", str(cfg), "--form", form)
    last = res.stderr.strip().splitlines()[-1]
    assert "new submissions only" in last and "next due 20" in last and "--full" in last, last

    # Without a token nothing asks fields.list: the key stays held and the export names it.
    store = Store(f"sqlite:///{tmp_path}/cli.db")
    store.upsert_submissions([list_item("sub_new", {"name": "A", "email": "a@example.test", "shoe": 42})], form)
    store.close()
    plain = tmp_path / "plain.toml"
    plain.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/cli.db"\n')
    res = await formsync("export", "--config", str(plain), "--form", form, "--out", str(tmp_path / "x.csv"))
    assert res.exit_code == 0, res.output
    held = [line for line in res.stderr.splitlines() if "held back" in line]
    assert len(held) == 1 and f"form {form}: shoe" in held[0] and "service.token" in held[0], res.stderr


def test_the_edits_line_with_no_full_read_yet() -> None:
    from pipelines.sync.submissions import SyncReport

    line = edits_line([SyncReport(form_id="f", full=False, include_drafts=False)], 24, 3)
    assert "next due now" in line and "3 call(s)" in line and "\n" not in line
