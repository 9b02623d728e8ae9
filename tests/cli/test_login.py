"""``formsync login`` and ``logout`` as people run them: a real process printing the
address, the consent page approved over HTTP, the browser's redirect to the loopback
listener; then commands that use the stored sign-in. Each mistake is one line with its
exit code, stores nothing half, and no output holds a token."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import stat
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from connector.config.keyfile import create_key
from connector.store import Store
from pipelines.cli import app
from pipelines.cli.errors import ExitCode
from tests.connector.test_grant import sign_in
from tests.spec.test_oauth import decide

FORMSYNC = Path(sys.executable).parent / "formsync"
TOKEN_RE = re.compile(r"fb(o|or)?_[A-Za-z0-9]{16,}")
ADDRESS = "open this address in a browser to sign in: "


def config(tmp_path: Path, base_url: str) -> Path:
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{base_url}"\n[store]\nurl = "sqlite:///{tmp_path}/store.db"\n')
    return cfg


async def run_login(sandbox: Any, cfg: Path, *args: str, workspace: str = "Pro Workspace",
                    decision: str = "approve", paste: bool = False) -> tuple[int, str, str]:
    """``formsync login --no-browser``, answered as a person answers in a browser; with
    ``paste``, the browser is elsewhere: the redirected address is pasted back instead."""
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "login", "--config", str(cfg), "--no-browser", *args,
        stdin=asyncio.subprocess.PIPE if paste else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "COLUMNS": "400"})
    assert proc.stderr is not None
    said: list[str] = []
    try:
        while not said or ADDRESS not in said[-1]:
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert line, said
            said.append(line)
        async with sandbox.http.get(said[-1].split(ADDRESS, 1)[1].strip(), allow_redirects=False) as resp:
            page = await resp.text()
        status, location, body = await decide(sandbox, page, workspace=workspace, decision=decision)
        assert status == 302 and location, body
        if paste:
            out, err = await asyncio.wait_for(proc.communicate(f"  {location}\n".encode()), 60)
        else:
            async with sandbox.http.get(location) as resp:
                assert resp.status == 200
            out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), "".join(said) + err.decode()


def no_token(*texts: str) -> None:
    for text in texts:
        assert not TOKEN_RE.search(text), text


async def cli(*args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "400"})


def grant_row(tmp_path: Path, url: str) -> Any:
    with Store(f"sqlite:///{tmp_path}/store.db") as store:
        return store.grants.get(url)


async def test_login_then_commands_use_the_sign_in_then_logout(tmp_path: Path, sandbox: Any) -> None:
    cfg = config(tmp_path, sandbox.base_url)
    code, out, err = await run_login(sandbox, cfg, "--workspace", sandbox.pro.id)
    assert code == 0, err
    assert out == f"signed in to workspace Pro Workspace ({sandbox.pro.id}) at {sandbox.base_url}\n"
    key = tmp_path / "formsync.key"  # beside the SQLite database
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    synced = await cli("sync", "--config", str(cfg))
    assert synced.exit_code == 0, synced.output
    await sandbox.helpers.clock_advance(20 * 24 * 3600 * 1000)
    again = await cli("sync", "--config", str(cfg))
    assert again.exit_code == 0, again.output
    assert grant_row(tmp_path, sandbox.base_url).generation == 2
    gone = await cli("logout", "--config", str(cfg))
    assert gone.exit_code == 0 and gone.stdout == f"signed out of {sandbox.base_url}\n"
    after = await cli("sync", "--config", str(cfg))
    assert after.exit_code == ExitCode.USAGE and "run `formsync login`" in after.stderr
    no_token(out, err, synced.output, again.output, gone.output, after.output)
    assert grant_row(tmp_path, sandbox.base_url).client_id  # the registered client is kept


async def test_the_redirected_address_may_be_pasted(tmp_path: Path, sandbox: Any) -> None:
    code, out, err = await run_login(sandbox, config(tmp_path, sandbox.base_url), "--port", "0", paste=True)
    assert code == 0, err
    assert out.startswith("signed in to workspace Pro Workspace")
    assert "paste here the whole address" in err
    assert grant_row(tmp_path, sandbox.base_url).refresh_token is not None
    no_token(out, err)


async def test_a_workspace_other_than_asked_stores_nothing(tmp_path: Path, sandbox: Any) -> None:
    cfg = config(tmp_path, sandbox.base_url)
    code, out, err = await run_login(sandbox, cfg, "--workspace", "Pro Workspace", workspace="Free Workspace")
    assert code == ExitCode.USAGE and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: --workspace: the consent page chose workspace 'Free Workspace'"), err
    assert "nothing was stored" in last and "Traceback" not in err
    assert grant_row(tmp_path, sandbox.base_url).refresh_token is None
    no_token(out, err)


async def test_a_denied_consent_is_one_line(tmp_path: Path, sandbox: Any) -> None:
    cfg = config(tmp_path, sandbox.base_url)
    code, out, err = await run_login(sandbox, cfg, decision="deny")
    assert code == ExitCode.FAILED and out == ""
    assert err.strip().splitlines()[-1] == ("error: the sign-in was denied at the consent page: run `formsync login` "
                                            "again and choose Approve; nothing was stored")
    assert grant_row(tmp_path, sandbox.base_url).refresh_token is None


async def test_a_taken_port_and_a_service_without_oauth_are_one_line(tmp_path: Path, sandbox: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = await cli("login", "--config", str(config(tmp_path, sandbox.base_url)), "--no-browser",
                        "--port", str(port))
    assert res.exit_code == ExitCode.FAILED, res.output
    assert res.stderr.strip() == (f"error: cannot listen on 127.0.0.1:{port}: port {port} on 127.0.0.1 is in use; "
                                  "choose another port (--port; 0 picks a free one)")
    with socket.socket() as closed:  # a port nothing listens on: the service's OAuth endpoints are away
        closed.bind(("127.0.0.1", 0))
        away = f"http://127.0.0.1:{closed.getsockname()[1]}"
    res = await cli("login", "--config", str(config(tmp_path, away)), "--no-browser")
    assert res.exit_code == ExitCode.FAILED, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot sign in: OAuth metadata: the service at "), lines
    assert "nothing was stored" in lines[0]
    assert grant_row(tmp_path, away) is None


async def test_a_key_file_open_to_others_missing_or_replaced_stops_in_one_line(tmp_path: Path, sandbox: Any) -> None:
    cfg = config(tmp_path, sandbox.base_url)
    path = tmp_path / "formsync.key"
    with Store(f"sqlite:///{tmp_path}/store.db") as store:
        store.migrate()
        await sign_in(sandbox, store, create_key(path))
    path.chmod(0o644)
    wanted = {"open": f"error: {path}: the store's key file has mode 0644: others may read it; run chmod 600 {path}",
              "missing": f"error: {path}: the store's key file is missing: restore the file from the backup kept "
                         "with the database (or set store.key_file to where it is); `formsync key reset "
                         "--forget-erasures` makes a new key and forgets every erasure and the sign-in",
              "replaced": f"error: {path}: the store's key file is not the key that made the stored sign-in (it "
                          "was changed or replaced): restore the file from the backup kept with the database (or "
                          "set store.key_file to where it is); `formsync key reset --forget-erasures` makes a new "
                          "key and forgets them"}
    for case, line in wanted.items():
        if case == "missing":
            path.unlink()
        elif case == "replaced":
            create_key(path)
        res = await cli("sync", "--config", str(cfg))
        assert res.exit_code == ExitCode.USAGE, (case, res.output)
        assert res.stderr.strip() == line, case
    assert grant_row(tmp_path, sandbox.base_url).generation == 1  # nothing stored changed
    path.unlink()  # login makes no new key while a sign-in needs the old one
    res = await cli("login", "--config", str(cfg), "--no-browser")
    assert res.exit_code == ExitCode.USAGE and res.stderr.strip() == wanted["missing"], res.output
    assert not path.exists() and grant_row(tmp_path, sandbox.base_url).generation == 1
