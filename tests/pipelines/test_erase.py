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
from connector.store import Store
from connector.store._tables import SubmissionRow
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


def _people(path: Path) -> Path:
    path.write_text("externalId,name,email\na,Ada,ada@example.com\nb,Bo,bo@example.com\nc,Cy,cy@example.com\n")
    return path


async def test_erase_cancels_their_pending_requests_and_names_the_exports_that_wrote_them(
        sandbox: Sandbox, tmp_path: Path) -> None:
    """With a token, the person's pending request is canceled at the service before their rows
    go (no reminder reaches them); without one the erasure completes, names the request left
    pending and exits 1; the receipt names the --since-last export that had written them."""
    await sandbox.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
    db, key = f"sqlite:///{tmp_path}/erase.db", tmp_path / "store.key"
    base = f'[store]\nurl = "{db}"\nkey_file = "{key}"\n[service]\nbase_url = "{sandbox.base_url}"\n'
    (tmp_path / "with.toml").write_text(base + f'token = "{sandbox.pro.token}"\n')
    (tmp_path / "without.toml").write_text(base)
    form = sandbox.pro.forms["Contact"]
    sheet = _people(tmp_path / "people.csv")
    res = await _cli("outreach", str(sheet), "--form", form, "--job", "spring", "--config", str(tmp_path / "with.toml"))
    assert res.exit_code == 0, res.output
    store = Store(db, key_file=key)
    rows = {r.recipient_email: r.request_id for r in store.campaign.rows("spring")}
    await sandbox.helpers.requests_complete(rows["cy@example.com"] or "", {"topic": "support", "message": "hi"})
    res = await _cli("sync", "--form", form, "--config", str(tmp_path / "with.toml"))
    assert res.exit_code == 0, res.output
    exports = tmp_path / "exports"
    exports.mkdir()
    res = await _cli("export", "--since-last", "nightly", "--out", str(exports / "{form}-{run}.csv"), "--form", form,
                     "--config", str(tmp_path / "with.toml"))
    assert res.exit_code == 0, res.output

    res = await _cli("erase", "--email", "ada@example.com", "--json", "--config", str(tmp_path / "with.toml"))
    assert res.exit_code == 0, res.output
    receipt = json.loads(res.stdout.splitlines()[-1])
    assert receipt["pending_requests"] == [] and receipt["exports"] == []
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        ada = await fc.get_request(rows["ada@example.com"] or "")
        assert (ada.status, ada.cancelReason) == ("canceled", "erased on request")

        res = await _cli("erase", "--email", "bo@example.com", "--json", "--config", str(tmp_path / "without.toml"))
        assert res.exit_code == 1, res.output
        assert json.loads(res.stdout.splitlines()[-1])["pending_requests"] == [rows["bo@example.com"]]
        last = res.stderr.strip().splitlines()[-1]
        assert last.startswith("error: 1 of their requests are still pending at the service"), res.stderr
        assert (await fc.get_request(rows["bo@example.com"] or "")).status == "pending"

    res = await _cli("erase", "--email", "cy@example.com", "--json", "--config", str(tmp_path / "with.toml"))
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.splitlines()[-1])["exports"] == ["nightly"], "the nightly file holds Cy's answers"
    assert not _emails(store) & {"ada@example.com", "bo@example.com", "cy@example.com"}
    store.close()
