"""``formsync erase`` against the sandbox: the command's receipt and its mistakes, and a full
sync after the erase that does not bring the person back."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from typer.testing import CliRunner

from connector.client.rpc import FormClient
from connector.store import Store, SubmissionRow
from pipelines.cli import app
from pipelines.sync.submissions import sync_form
from tests.conftest import Sandbox

ADA = "ada@example.com"


async def _cli(*args: str) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "400"})


def _emails(store: Store) -> set[str | None]:
    with store.database.engine.connect() as conn:
        return set(conn.execute(select(SubmissionRow.respondent_email)).scalars())


async def test_a_full_sync_after_the_erase_does_not_bring_the_person_back(sandbox: Sandbox, tmp_path: Path):
    db = f"sqlite:///{tmp_path}/erase.db"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\n[store]\nurl = "{db}"\n'
                   f'key_file = "{tmp_path / "store.key"}"\n')
    form = sandbox.pro.forms["Everything"]
    for email in ("Ada@Example.com", "bo@example.com"):
        await sandbox.helpers.submissions_create(form, {}, completed=False, respondent_email=email)
    store = Store(db, key_file=tmp_path / "store.key")
    store.migrate()
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await sync_form(fc, store, form, full=True, include_drafts=True)
    assert _emails(store) == {"Ada@Example.com", "bo@example.com"}

    res = await _cli("erase", "--config", str(cfg), "--email", ADA, "--dry-run")
    assert res.exit_code == 0, res.output
    assert "would remove      1  formsync_submissions" in res.output and len(_emails(store)) == 2
    res = await _cli("erase", "--config", str(cfg), "--email", ADA, "--json")
    assert res.exit_code == 0, res.output
    receipt = json.loads(res.stdout.strip().splitlines()[-1])
    assert receipt["matched"] and {"where": "formsync_submissions", "removed": 1} in receipt["lines"]
    assert _emails(store) == {"bo@example.com"}

    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await sync_form(fc, store, form, full=True, include_drafts=True)
    assert _emails(store) == {"bo@example.com"}, "the full sync skips the erased person"
    assert (tmp_path / "store.key").stat().st_mode & 0o077 == 0

    res = await _cli("erase", "--config", str(cfg), "--email", ADA, "--dry-run")
    assert (res.exit_code, res.output.strip()) == (0, "nobody matched: nothing was removed")
    store.close()


async def test_erase_mistakes_are_one_line_and_exit_2(tmp_path: Path):
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/m.db"\n')
    for args, where in ((["--email", "not-an-address"], "--email"), ([], "--email or --external-id"),
                        (["--external-id", " "], "--external-id")):
        res = await _cli("erase", "--config", str(cfg), *args)
        assert res.exit_code == 2, res.output
        assert where in res.output and "Traceback" not in res.output and res.output.count("\n") <= 2
