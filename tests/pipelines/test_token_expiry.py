"""Expiry seen coming: formsync records when it first used a static ``service.token`` (by
its fingerprint), ``formsync status`` says from day 23 that an API token expires in at most
N days (exit 4, a metric), warns at once about a static ``fbo_`` token and about a token set
beside a stored sign-in, and a 401 to an expired token names the fix."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from connector.client._pacing import token_key
from connector.store import Store
from pipelines.cli import app
from pipelines.cli.errors import ExitCode
from pipelines.operate.health import credential_problems
from pipelines.operate.status import Credentials, StatusReport

DAY_MS = 24 * 3600 * 1000
NOW = 1_800_000_000_000
TOKEN = "fb_" + "Q" * 32
TOKENS = re.compile(r"fb(o|or)?_[A-Za-z0-9]{16,}")


def said(creds: Credentials, at: int = NOW) -> list[str]:
    return [n.line() for n in credential_problems(StatusReport(at=at, credentials=creds))]


def test_an_api_token_is_said_from_day_23_of_its_first_use() -> None:
    assert said(Credentials(token_kind="api", token_first_used_at=NOW - 22 * DAY_MS - 1)) == []
    assert said(Credentials(token_kind="api", token_first_used_at=NOW - 23 * DAY_MS)) == [
        "attention: the API token expires in at most 7 days: run `formsync login` or set a new token"]
    assert said(Credentials(token_kind="api", token_first_used_at=NOW - 29 * DAY_MS - 60_000)) == [
        "attention: the API token expires in at most 1 day: run `formsync login` or set a new token"]
    assert said(Credentials(token_kind="api", token_first_used_at=NOW - 31 * DAY_MS)) == [
        "attention: the API token has expired (API tokens last 30 days): run `formsync login` or set a new token"]
    assert said(Credentials(token_kind="api")) == []  # never used yet: nothing known


def test_a_static_oauth_token_and_a_refused_sign_in_are_said_at_once() -> None:
    assert said(Credentials(token_kind="oauth", token_first_used_at=NOW)) == [
        "attention: service.token is an OAuth access token (fbo_), which lasts one hour: run `formsync login` "
        "instead, and remove service.token"]
    assert said(Credentials(signed_in=True, refused="invalid_grant")) == [
        "attention: the service refused the stored sign-in (invalid_grant): run `formsync login` to sign in again"]
    assert said(Credentials(signed_in=True)) == []
    # A token wins over the sign-in: its refusal does not stop anything.
    assert said(Credentials(token_kind="api", token_first_used_at=NOW, signed_in=True, refused="invalid_grant")) == []


def status(cfg: Path, *extra: str) -> Result:
    return CliRunner().invoke(app, ["status", "--config", str(cfg), *extra], env={"COLUMNS": "200"})


def test_status_says_the_api_token_expires_with_exit_4_and_a_metric(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\ntoken = "{TOKEN}"\n[store]\nurl = "{url}"\n')
    first = int(time.time() * 1000) - 24 * DAY_MS
    with Store(url, clock=lambda: first) as store:
        store.migrate()
        store.grants.note_token_use(token_key(TOKEN), "api")
    res = status(cfg)
    assert res.exit_code == ExitCode.ATTENTION, res.output
    assert res.stderr.strip().splitlines()[-1] == ("attention: the API token expires in at most 6 days: run `formsync login` or set "
                                  "a new token")
    assert "Service token: an API token (fb_), expires " in res.stdout
    metrics = status(cfg, "--format", "prometheus")
    seconds = float(re.search(r"^formsync_api_token_expiry_seconds (\S+)$", metrics.stdout, re.M).group(1))
    assert 5 * 86400 < seconds <= 6 * 86400
    assert 'formsync_problems{kind="token_expiring"} 1.0' in metrics.stdout
    # The same token beside a stored sign-in: the token wins, and status says so.
    with Store(url) as store:
        store.grants.save_client("http://127.0.0.1:8787", "fboc_x", None, "k")
        store.grants.sign_in("http://127.0.0.1:8787", workspace_id="ws_x", scope="api:read",
                             tokens={"refresh_token": b"sealed", "access_token": b"sealed"})
    both = status(cfg)
    assert "warning: service.token is set beside a stored sign-in: the token wins" in both.stderr
    for out in (res, metrics, both):
        assert not TOKENS.search(out.output), out.output


async def test_a_command_records_the_first_use_and_a_401_to_an_expired_token_names_the_fix(
        tmp_path: Path, sandbox: Any) -> None:
    token = (await sandbox.helpers.tokens_create("expiring")).token
    url = f"sqlite:///{tmp_path}/s.db"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{token}"\n[store]\nurl = "{url}"\n')

    async def sync() -> Result:
        return await asyncio.to_thread(CliRunner().invoke, app, ["sync", "--config", str(cfg)],
                                       env={"COLUMNS": "400"})

    assert (await sync()).exit_code == 0
    with Store(url) as store:
        first = store.grants.token_first_used(token_key(token))
    assert first is not None
    await sandbox.helpers.clock_advance(31 * DAY_MS)
    res = await sync()
    assert res.exit_code == ExitCode.FAILED, res.output
    assert res.stderr.strip().splitlines() == [
        "error: workspaces.list: UNAUTHORIZED (TOKEN_EXPIRED): Token expired: API tokens last 30 days; create a new "
        "one.; check service.token "
        "(or FORMSYNC_SERVICE__TOKEN), or run `formsync login`"], res.stderr
    with Store(url) as store:
        assert store.grants.token_first_used(token_key(token)) == first  # the first use stays the first
    assert token not in res.output
