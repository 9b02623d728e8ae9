"""``formsync views`` over a store synced from the sandbox: the Contact form's view is
created, typed from fields.list, listed as JSON, and answers plain SQL."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from sqlalchemy import text
from typer.testing import CliRunner

from connector.store import Store
from connector.store._schema import view_name
from pipelines.cli import app


async def test_views_command_types_columns_from_fields_list(sandbox: Any, tmp_path: Path) -> None:
    from connector.client.rpc import FormClient
    from pipelines.sync.submissions import sync_form

    form = sandbox.pro.forms["Contact"]
    url = f"sqlite:///{tmp_path / 'views.db'}"
    store = Store(url)
    store.migrate()
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await sync_form(fc, store, form)
        fields = (await fc.list_fields(form)).items
    store.close()
    env = {"FORMSYNC_STORE__URL": url, "FORMSYNC_SERVICE__BASE_URL": sandbox.base_url,
           "FORMSYNC_SERVICE__TOKEN": sandbox.pro.token}
    result = await asyncio.to_thread(CliRunner().invoke, app, ["views"], env=env)
    assert result.exit_code == 0, result.output
    (listed,) = json.loads(result.stdout)["views"]
    assert listed["view"] == view_name(form, "Contact") and listed["form_id"] == form
    assert listed["alias"] == view_name(form)  # the name of before, for one release
    keys = list(dict.fromkeys(c["field_key"] for c in listed["columns"] if c["field_key"]))
    assert keys == [f.key for f in fields if f.type != "documents"], "fields.list order"
    kinds = {c["name"]: c["type"] for c in listed["columns"]}
    assert kinds["topic"] == "text" and kinds["topic_label"] == "text" and kinds["submitted_at"] == "timestamp"
    store = Store(url)
    with store.database.engine.connect() as conn:
        got = conn.execute(text(f"SELECT topic, count(*) FROM {listed['view']} GROUP BY topic ORDER BY topic")).all()
    store.close()
    assert sum(n for _, n in got) == 3 and all(t for t, _ in got)


def test_views_command_without_a_token_types_nothing_from_answers(tmp_path: Path) -> None:
    from tests.connector.test_store import events, sub_event

    url = f"sqlite:///{tmp_path / 'plain.db'}"
    store = Store(url)
    store.migrate()
    store.store_events(events(sub_event("evt_1", "sub_1", answers={"name": "Ann", "score": 3})))
    store.close()
    result = CliRunner().invoke(app, ["views"], env={"FORMSYNC_STORE__URL": url})
    assert result.exit_code == 0, result.output
    (listed,) = json.loads(result.stdout)["views"]
    assert [c["field_key"] for c in listed["columns"] if c["field_key"]] == []  # held back until fields.list
    from rich.console import Console

    from connector.config.settings import Settings
    from pipelines.operate.status import collect_status, render_status

    with Store(url) as store:
        console = Console(width=100, record=True)
        console.print(render_status(collect_status(Settings(), store)))
    shown = console.export_text()
    assert "form form_contact: name, score" in shown and "service.token" in shown


def test_status_says_what_a_sqlite_stores_many_views_cost_and_the_fix(tmp_path: Path, pg_database: str,
                                                                      monkeypatch: Any) -> None:
    """Every connection to a SQLite file keeps each of its views parsed: from
    ``MANY_SQLITE_VIEWS`` views ``formsync status`` says so, with the fix; a server
    database keeps its views itself, so it says nothing of them."""
    from rich.console import Console

    from connector.config.settings import Settings
    from pipelines.operate import status
    from tests.connector.test_store import events, sub_event

    def shown(url: str) -> tuple[int | None, str]:
        with Store(url) as store:
            store.migrate()
            evs = [sub_event(f"evt_{i}", f"sub_{i}") for i in range(3)]
            for i, e in enumerate(evs):
                e["data"]["form"] = {"id": f"form_{i}", "name": f"Form {i}", "snapshotId": "snap_1"}
            store.store_events(events(*evs))
            report = status.collect_status(Settings(), store)
        console = Console(width=100, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        console.print(status.render_status(report))
        return report.sqlite_views, console.export_text()

    monkeypatch.setattr(status, "MANY_SQLITE_VIEWS", 6)
    views, text_ = shown(f"sqlite:///{tmp_path / 'many.db'}")
    assert views == 6  # three forms, each with its view and the alias of its old name
    assert "SQLite store with 6 views: every connection to the file keeps each one parsed" in text_
    assert f"fix: {status.MANY_VIEWS_FIX}" in text_
    monkeypatch.setattr(status, "MANY_SQLITE_VIEWS", 7)
    assert "SQLite store with" not in shown(f"sqlite:///{tmp_path / 'fewer.db'}")[1]
    monkeypatch.setattr(status, "MANY_SQLITE_VIEWS", 0)
    views, text_ = shown(pg_database)
    assert views is None and "SQLite store with" not in text_
