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
