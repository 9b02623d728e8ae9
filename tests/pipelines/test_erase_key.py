"""An erasure bound to its key: the store's key file replaced, moved away, made
world-readable and restored, each followed by erase, sync --full, poll, a webhook delivery
and a load. The erased person never comes back; each refusal is one line naming the key
file, exit 2, and changes nothing stored (not even the token's first use)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from connector.client.rpc import FormClient
from connector.config.keyfile import KeyFileError, key_id
from connector.config.settings import ReceiverSettings
from connector.signing import formstep_headers
from connector.store import Store
from pipelines.cli import app
from pipelines.sync.submissions import sync_form
from tests.conftest import Sandbox
from tests.connector.test_erasure import every_text
from tests.connector.test_receiver import running

ADA = "ada@example.com"
SECRET = "whsec_" + "c4" * 32


async def _cli(*args: str) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "400"})


def _delivery(eid: str) -> bytes:
    """A completion naming Ada, as the service would call back."""
    return json.dumps({
        "id": eid, "type": "request.completed", "createdAt": "2026-05-01T10:00:00.000Z", "apiVersion": "2026-09-24",
        "test": False, "data": {
            "request": {"id": f"req_{eid}", "externalId": None, "status": "completed", "outcome": None,
                        "createdAt": "2026-05-01T09:00:00.000Z", "completedAt": "2026-05-01T10:00:00.000Z",
                        "recipient": {"email": ADA, "name": "Ada"}},
            "form": {"id": "form_1", "name": "Contact", "snapshotId": "snap_1"},
            "submission": {"id": f"sub_{eid}", "respondentEmail": ADA, "submittedAt": "2026-05-01T10:00:00.000Z",
                           "updatedAt": None, "editCount": 0, "pdfUrl": None, "language": None},
            "answers": {"email": ADA}, "display": {"email": ADA}}}).encode()


def _replace(key: Path) -> None:
    key.unlink()
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, os.urandom(32))
    os.close(fd)


# replaced by other random bytes (mode 0600), moved away, made world-readable
STATES: list[Callable[[Path], None]] = [_replace, Path.unlink, lambda key: key.chmod(0o644)]


def _refused(res: Any, key: Path) -> None:
    out = res.output.strip()
    assert res.exit_code == 2, res.output
    assert len(out.splitlines()) == 1 and str(key) in out and "Traceback" not in out, out
    assert "formsync login" not in out and ("restore" in out or "chmod 600" in out), out


async def test_a_changed_key_never_lets_the_erased_person_back(sandbox: Sandbox, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the load's DuckDB file and dlt's folders land here
    db, key = f"sqlite:///{tmp_path}/erase.db", tmp_path / "store.key"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{sandbox.pro.token}"\n'
                   f'[store]\nurl = "{db}"\nkey_file = "{key}"\n[receiver]\ncallback_secrets = ["{SECRET}"]\n')
    form = sandbox.pro.forms["Everything"]
    for email in (ADA, "bo@example.com"):
        await sandbox.helpers.submissions_create(form, {}, completed=False, respondent_email=email)
    store = Store(db, key_file=key)
    store.migrate()
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await sync_form(fc, store, form, full=True, include_drafts=True)
    res = await _cli("erase", "--config", str(cfg), "--email", ADA)
    assert res.exit_code == 0, res.output
    original = key.read_bytes()
    with store.database.engine.connect() as conn:
        assert set(conn.execute(text("SELECT key_id FROM formsync_erasures")).scalars()) == {key_id(original)}
    assert ADA not in every_text(store)

    def token_uses() -> int:
        with store.database.engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM formsync_token_uses")).scalar_one())

    async def one_round(refuse: bool) -> None:
        before, uses = every_text(store), token_uses()  # the first erase used the token: it canceled nothing
        for args in (["erase", "--email", "bo@example.com"], ["sync", "--form", form, "--full", "--drafts"], ["poll"]):
            res = await _cli(*args, "--config", str(cfg))
            if refuse:
                _refused(res, key)
                assert every_text(store) == before, f"{args[0]} refused at its start writes nothing"
            else:
                assert res.exit_code == 0, res.output
        if refuse:  # the sends, which check erased addresses by keyed hash, and the receiver
            sheet = tmp_path / "sheet.csv"
            sheet.write_text(f"email\n{ADA}\n")
            for args in (["campaign", "remind", "spring"], ["campaign", "close", "spring"],
                         ["outreach", str(sheet), "--form", form], ["dead-letters", "replay"], ["receive"]):
                _refused(await _cli(*args, "--config", str(cfg)), key)
                assert every_text(store) == before, f"{args[0]} refused at its start writes nothing"
        receiving = Store(db, key_file=key)  # a receiver started before the key changed reads it at first need
        try:
            rs = ReceiverSettings(callback_secrets=[SECRET], store_process=False)
            async with running(receiving, rs) as rx:
                body = _delivery(f"evt_{len(before)}")
                status, _, _ = await rx.post(body, formstep_headers(SECRET, body, int(time.time()), event_id="evt_hdr",
                                                                    event_type="request.completed"),
                                             "callbacks")
            assert (status >= 500) if refuse else (status == 200), status
        finally:
            receiving.close()
        res = await _cli("load", "--config", str(cfg))
        assert res.exit_code == 0, res.output
        assert ADA not in every_text(store)
        assert token_uses() == uses == 1, "a refused command records no use of the token"

    for change in STATES:
        change(key)
        await one_round(refuse=True)
        key.unlink(missing_ok=True)  # restored from the backup kept with the database
        key.write_bytes(original)
        key.chmod(0o600)
    await one_round(refuse=False)
    assert "bo@example.com" not in every_text(store)
    store.close()


def test_nothing_makes_a_new_key_while_erasures_are_kept_but_the_reset(tmp_path: Path) -> None:
    """erase (by the library too) and login make no key while tombstones are kept;
    ``formsync key reset --forget-erasures`` does, and says what it forgets."""
    from connector.store._erasure import Person

    db, key = f"sqlite:///{tmp_path}/k.db", tmp_path / "formsync.key"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "{db}"\n')
    with Store(db) as store:
        assert store.key_file == key
        store.migrate()
        store.erase(Person(email=ADA))
    key.unlink()
    with Store(db) as store:
        with pytest.raises(KeyFileError, match="restore"):
            store.erase(Person(email="bo@example.com"))
    assert not key.exists()
    runner = CliRunner()
    res = runner.invoke(app, ["key", "reset", "--config", str(cfg)])
    assert res.exit_code == 2 and "--forget-erasures" in res.output and not key.exists(), res.output
    res = runner.invoke(app, ["key", "reset", "--config", str(cfg), "--forget-erasures"])
    assert res.exit_code == 0 and "erased people can come back" in res.output, res.output
    assert key.stat().st_mode & 0o077 == 0
    with Store(db) as store:
        with store.database.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM formsync_erasures")).scalar_one() == 0
        store.erase(Person(email="bo@example.com"))  # the new key's first tombstone
        with store.database.engine.connect() as conn:
            assert set(conn.execute(text("SELECT key_id FROM formsync_erasures")).scalars()) == {
                key_id(key.read_bytes())}


def test_a_store_opened_anywhere_finds_the_key_where_a_command_does(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """On a server database, ``Store(url)`` from another directory finds the key the
    settings place (beside the settings file, or its store.key_file), as ``key_path`` does."""
    from connector.config.keyfile import key_path
    from connector.config.settings import load_settings

    url = "postgresql+psycopg://nobody@127.0.0.1:1/none"  # never reached: the place is all that is read
    cfg = tmp_path / "etc" / "formsync.toml"
    cfg.parent.mkdir()
    cfg.write_text(f'[store]\nurl = "{url}"\n')
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("FORMSYNC_STORE__KEY_FILE", raising=False)
    monkeypatch.setenv("FORMSYNC_CONFIG", str(cfg))
    wanted = key_path(load_settings(cfg).store, cfg)
    assert wanted == cfg.parent / "formsync.key"
    for store in (Store(url), Store(url, config=cfg)):
        assert store.key_file == wanted
        store.close()
    cfg.write_text(f'[store]\nurl = "{url}"\nkey_file = "{tmp_path / "keys" / "k.key"}"\n')
    with Store(url) as store:
        assert store.key_file == key_path(load_settings(cfg).store, cfg) == tmp_path / "keys" / "k.key"
    monkeypatch.setenv("FORMSYNC_STORE__KEY_FILE", str(tmp_path / "env.key"))
    with Store(url) as store:
        assert store.key_file == key_path(load_settings(cfg).store, cfg) == tmp_path / "env.key"


async def test_a_scheduled_job_is_refused_before_its_run_is_recorded(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """The scheduler checks the key before a poll, sync, outreach, remind or close run:
    with another key nothing is recorded (no run, no token use) and one line says why."""
    from connector.config.settings import JobSettings, Settings
    from connector.store._erasure import Person
    from pipelines.jobs import PollParams
    from pipelines.operate.scheduler import JobRuntime

    key = tmp_path / "formsync.key"
    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        store.migrate()
        store.erase(Person(email=ADA))
    _replace(key)
    settings = Settings(service={"token": "fb_" + "Q" * 32, "base_url": "http://127.0.0.1:9"},
                        jobs=[JobSettings(id="p", kind="poll", interval_seconds=60)])
    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        before = every_text(store)
        await JobRuntime(settings, store, {"p": PollParams()}).execute("p")
        assert every_text(store) == before
    [line] = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert line.startswith("job p (poll) refused: ") and str(key) in line
