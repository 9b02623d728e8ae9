"""A secret rotation as docs/receive.md tells it, with no restart, while 100 events are
delivered: the receiver re-reads its secrets file, ``subscribe remove --superseded``
waits for the deliveries the sandbox still holds, and no delivery fails, on SQLite and
PostgreSQL. The receiver's reload on its own: a failed one keeps the secrets held."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from click.testing import Result
from pydantic import SecretStr
from sqlalchemy import func, select
from typer.testing import CliRunner

from connector.config.secrets_file import file_secrets, with_secrets
from connector.config.settings import ReceiverSettings
from connector.receiver import create_receiver_app, run_receiver
from connector.receiver._secrets import RELOAD_EVERY_S, WebhookSecrets
from connector.store import Store
from connector.store._tables import EVENTS
from pipelines.cli import app
from pipelines.connect.subscriptions import RETRY_HORIZON_MS, held_back
from tests.conftest import Sandbox
from tests.connector.conftest import pg_database  # noqa: F401  (fixture)
from tests.stores import migrated_store

EVENTS_SENT = 100


def test_a_reload_that_fails_keeps_the_secrets_held(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path, now = tmp_path / "webhook.env", [0.0]
    path.write_text(with_secrets("", ["whsec_old"]))

    def usable(secrets: list[SecretStr]) -> None:
        if any(s.get_secret_value() == "bad" for s in secrets):
            raise ValueError("unusable")

    held = WebhookSecrets([SecretStr("whsec_old"), SecretStr("whsec_cfg")], path, usable, clock=lambda: now[0])
    values = lambda: [s.get_secret_value() for s in held.get()]  # noqa: E731
    assert values() == ["whsec_cfg", "whsec_old"]
    path.write_text(with_secrets("", ["whsec_old", "whsec_new"]))
    assert values() == ["whsec_cfg", "whsec_old"], "looked at once a second at most"
    now[0] = 1.0
    assert values() == ["whsec_cfg", "whsec_old", "whsec_new"]
    path.write_text(with_secrets("", ["whsec_new"]))
    now[0] = 2.0
    assert values() == ["whsec_cfg", "whsec_new"], "dropped from the file: dropped, though the environment held it"
    for broken in ("not a line\n", with_secrets("", ["bad"])):
        path.write_text(broken)
        now[0] += 1
        with caplog.at_level(logging.WARNING, "connector.receiver"):
            assert values() == ["whsec_cfg", "whsec_new"]
        now[0] += 1
        assert values() == ["whsec_cfg", "whsec_new"]
    said = [r.getMessage() for r in caplog.records if "not reloaded" in r.getMessage()]
    assert len(said) == 2 and "webhook.env:1" in said[0] and "bad" not in " ".join(said), "one line per change"
    path.unlink()
    assert not held.reload() and values() == ["whsec_cfg", "whsec_new"]


def test_the_hosted_service_waits_for_its_retry_horizon() -> None:
    rotated = 1_800_000_000_000
    old = {"sub_a": rotated, "sub_b": rotated - 60_000}
    assert 27.5 * 3_600_000 < RETRY_HORIZON_MS < 27.7 * 3_600_000
    said = held_back(old, None, rotated + 3_600_000)
    assert said is not None and "until 2027-01-16T11:37+00:00" in said and "--force" in said
    assert held_back(old, None, rotated + RETRY_HORIZON_MS) is None
    assert held_back(old, {"sub_a": 0, "sub_x": 3}, rotated) is None, "the sandbox says: none held for these"
    said = held_back(old, {"sub_a": 2, "sub_b": 1}, rotated)
    assert said is not None and said.startswith("the service still holds 3 deliveries for 2 of the 2 superseded")


@asynccontextmanager
async def _receiving(store: Store, secrets_file: Path) -> AsyncIterator[str]:
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    settings = ReceiverSettings(secrets_file=secrets_file, store_process=False)
    task = asyncio.create_task(run_receiver(store, settings, port=0, stop=stop, handle_signals=False,
                                            on_ready=ready.set_result))
    try:
        yield await asyncio.wait_for(ready, 30) + settings.path + "/webhooks"
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def _formsync(env: dict[str, str], *args: str) -> Result:
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("FORMSYNC_")}
    return await asyncio.to_thread(CliRunner().invoke, app, ["subscribe", *args], env={**unset, **env},
                                   prog_name="formsync")


def _stored(store: Store) -> int:
    with store.database.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(EVENTS)
                                .where(EVENTS.c.type == "submission.completed")).scalar_one())


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    url = f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite" else \
        str(request.getfixturevalue("pg_database"))
    s = migrated_store(url)
    return s


@pytest.mark.slow  # about 20 s each: 100 submissions made one after the other
async def test_a_rotation_while_100_events_are_delivered_fails_no_delivery(sandbox: Sandbox, store: Store,
                                                                          tmp_path: Path) -> None:
    form, secrets_file = sandbox.pro.forms["Contact"], tmp_path / "webhook.env"
    env = {"FORMSYNC_SERVICE__BASE_URL": sandbox.base_url, "FORMSYNC_SERVICE__TOKEN": sandbox.pro.token,
           "FORMSYNC_STORE__URL": f"sqlite:///{tmp_path / 'cli.db'}", "FORMSYNC_RECEIVER__SECRETS_FILE": str(secrets_file)}
    with pytest.raises(ValueError, match="cannot read the secrets file"):
        create_receiver_app(store, ReceiverSettings(secrets_file=tmp_path / "absent", store_process=False))
    secrets_file.write_text("")
    async with _receiving(store, secrets_file) as target:
        made = await _formsync(env, "create", "--url", target, "--form", form, "--event", "submission_created")
        assert made.exit_code == 0, made.output
        [old] = file_secrets(secrets_file.read_text())  # handed over in the file the receiver reads

        async def send() -> None:
            for i in range(EVENTS_SENT):
                await sandbox.helpers.submissions_create(form, {"name": f"P{i}", "email": f"p{i}@example.com"})
                await asyncio.sleep(0.01)

        sending = asyncio.create_task(send())
        for args in (("secret",), ("check", "--url", target), ("create", "--url", target, "--form", form,
                                                              "--event", "submission_created", "--rotate")):
            done = await _formsync(env, *args)
            assert done.exit_code == 0, done.output
        [_, new] = file_secrets(secrets_file.read_text())
        for _ in range(100):  # refused (exit 1, nothing removed) while the sandbox holds deliveries for them
            done = await _formsync(env, "remove", "--url", target, "--form", form, "--superseded")
            if done.exit_code == 0:
                break
            assert done.exit_code == 1 and "still holds" in done.output and done.output.count("\n") <= 2, done.output
            await asyncio.sleep(0.2)  # each try spends a call of the service's budget (webhooks.list)
        assert done.exit_code == 0, done.output
        assert len(json.loads(done.stdout.splitlines()[-1])["removed"]) == 1
        secrets_file.write_text(with_secrets(secrets_file.read_text(), [new]))  # the old secret dropped
        await asyncio.wait_for(sending, 120)
        deadline = asyncio.get_running_loop().time() + 60
        while (await sandbox.helpers.deliveries_pending()).items and asyncio.get_running_loop().time() < deadline:
            await sandbox.helpers.deliveries_flush()
        assert (await sandbox.helpers.deliveries_pending()).items == []

        await asyncio.sleep(RELOAD_EVERY_S)  # a dropped secret is dropped within a second
        late = await _formsync({**env, "FORMSYNC_RECEIVER__WEBHOOK_SECRETS": json.dumps([old])}, "check", "--url",
                               target)
        assert late.exit_code == 1, "the old secret is no longer held, and no restart was needed"

    events = (await sandbox.helpers.events_list(type="submission.completed")).items
    deliveries = [d for e in events for d in e.deliveries]
    attempts = [a for d in deliveries for a in d.attempts]
    assert len(events) == EVENTS_SENT and _stored(store) == EVENTS_SENT
    assert attempts and all(a.status == 200 for a in attempts), "no delivery was refused or unanswered"
    given_up = [(e.id, d.id) for e in events for d in e.deliveries if d.state != "delivered"]
    # A delivery to an old subscription made after the check and before its removal is
    # given up with it; its event's delivery to the new subscription was answered.
    assert all(any(d.state == "delivered" for d in e.deliveries) for e in events)
    assert len(given_up) <= 2, given_up
    store.close()


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    """``proc``'s output lines as they come (read by a thread of their own)."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    out = proc.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in out], daemon=True).start()
    return lines


def _line_with(lines: queue.Queue[str], text: str, seconds: float = 30) -> str:
    """The first line holding ``text`` within ``seconds`` ("" if none came)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if text in line:
            return line
    return ""


def test_sighup_makes_formsync_receive_read_its_secrets_file_at_once(tmp_path: Path) -> None:
    secrets_file = tmp_path / "webhook.env"
    secrets_file.write_text(with_secrets("", ["whsec_old"]))
    (tmp_path / "formsync.toml").write_text(f'[store]\nurl = "sqlite:///{tmp_path}/r.db"\n[receiver]\nport = 0\n'
                                            f'store_process = false\nsecrets_file = "{secrets_file}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORMSYNC_")}
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "receive", "--verbose", "--config",
                             str(tmp_path / "formsync.toml")], env={**env, "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = _lines(proc)
        assert "listening" in _line_with(lines, "listening")
        secrets_file.write_text(with_secrets("", ["whsec_old", "whsec_new"]))
        proc.send_signal(signal.SIGHUP)  # no delivery arrives: only the signal makes it look
        line = _line_with(lines, "webhook secrets", 10)
        assert "webhook secrets reloaded from" in line and "2 now" in line and "whsec" not in line, line
        assert proc.poll() is None, "SIGHUP does not stop it"
    finally:
        proc.terminate()
        proc.wait(30)
