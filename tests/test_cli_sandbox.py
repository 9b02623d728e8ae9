"""`formsync sandbox` as a user runs it: a subprocess on a free port that writes its
credentials file, answers with the tokens in it, stops cleanly on Ctrl-C and keeps its
data across a restart."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

FORMSYNC = Path(sys.executable).parent / "formsync"
START_TIMEOUT_S = 60


@dataclass
class Running:
    proc: asyncio.subprocess.Process
    creds: dict[str, Any]
    banner: str


@asynccontextmanager
async def sandbox_process(data_dir: Path, creds_file: Path, *options: str) -> AsyncIterator[Running]:
    """Start the sandbox, wait for its "listening" line, and make sure it is gone after."""
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "sandbox", "--port", "0", "--data-dir", str(data_dir), "--credentials-file", str(creds_file),
        *options,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        banner = ""
        while "listening" not in banner:
            line = await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT_S)
            if not line:
                err = await proc.stderr.read()
                raise AssertionError(f"sandbox exited before listening: {err.decode(errors='replace')}")
            banner = line.decode()
        yield Running(proc, json.loads(creds_file.read_text()), banner)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def stop(run: Running) -> tuple[int, str]:
    """Ctrl-C: SIGINT, then the exit code and everything written to stderr."""
    run.proc.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(run.proc.communicate(), 30)
    return run.proc.returncode, err.decode(errors="replace")


async def rpc(base_url: str, token: str, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(
        base_url + "/api/v1", json={"method": method, "params": params},
        headers={"Authorization": f"Bearer {token}"},
    ) as resp:
        return resp.status, await resp.json()


@pytest.mark.slow  # two sandbox processes one after the other: about 10 s
async def test_sandbox_command_serves_stops_and_restarts(tmp_path):
    assert FORMSYNC.exists(), f"the console script is installed next to {sys.executable}"
    data_dir, creds_file = tmp_path / "data", tmp_path / "out" / "creds.json"

    async with sandbox_process(data_dir, creds_file) as run:
        creds = run.creds
        assert creds["baseUrl"].startswith("http://127.0.0.1:") and creds["baseUrl"] in run.banner
        assert not creds["baseUrl"].endswith(":0")
        assert sorted(w["plan"] for w in creds["workspaces"]) == ["business", "free", "pro"]
        for w in creds["workspaces"]:
            assert {"id", "name", "plan", "token", "signingSecret", "forms"} <= set(w)
            assert w["token"].startswith("fb_") and len(w["token"]) == 35
            assert w["signingSecret"] and "Contact" in w["forms"]
        pro = next(w for w in creds["workspaces"] if w["plan"] == "pro")
        status, body = await rpc(creds["baseUrl"], pro["token"], "forms.list",
                                 {"workspaceId": pro["id"], "limit": 100})
        assert status == 200 and body["ok"] is True
        assert {f["id"] for f in body["data"]["items"]} == set(pro["forms"].values())
        status, body = await rpc(creds["baseUrl"], pro["token"], "forms.create",
                                 {"workspaceId": pro["id"], "name": "Made before restart"})
        assert status == 200, body
        made = body["data"]["id"]
        code, err = await stop(run)
        assert code == 0, err
        assert "Traceback" not in err, err

    # stopped means stopped: nothing answers on the old address any more
    with pytest.raises(aiohttp.ClientConnectionError):
        await rpc(creds["baseUrl"], pro["token"], "me.get", {})
    creds_file.unlink()  # the restart must write it again
    async with sandbox_process(data_dir, creds_file) as again:
        creds2 = again.creds
        assert creds2["baseUrl"] in again.banner
        pro2 = next(w for w in creds2["workspaces"] if w["plan"] == "pro")
        assert pro2["token"] == pro["token"] and pro2["id"] == pro["id"] and pro2["forms"] == pro["forms"]
        status, body = await rpc(creds2["baseUrl"], pro["token"], "forms.get", {"formId": made})
        assert status == 200 and body["data"]["name"] == "Made before restart"
        code, err = await stop(again)
        assert code == 0 and "Traceback" not in err, err


async def test_sandbox_command_stops_on_sigterm(tmp_path):
    async with sandbox_process(tmp_path / "d", tmp_path / "c.json") as run:
        run.proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(run.proc.communicate(), 30)
        assert run.proc.returncode == 0 and "Traceback" not in err.decode(), err


async def test_sandbox_command_refuses_missing_seed(tmp_path):
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "sandbox", "--port", "0", "--data-dir", str(tmp_path / "d"),
        "--seed", str(tmp_path / "nope.yaml"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode != 0
    text = (out + err).decode()
    assert "nope.yaml" in text and "Traceback" not in text


@pytest.mark.parametrize(("text", "said"), [
    ("workspaces:\n  - name: A\n    plan: pro\n   forms: [\n", r"seed\.yaml:4:4: expected <block end>"),
    ("workspaces: [\n", r"seed\.yaml:2:1: expected the node content"),
    ("workspaces:\n  - name: A\n    forms:\n      - published: true\n", r"seed\.yaml: .*missing key 'name'"),
])
async def test_sandbox_command_names_a_malformed_seed_and_leaves_no_data_dir(tmp_path, text, said):
    """A seed that is not YAML is one line naming file:line:col (exit 2); one the service
    cannot apply names the file; neither leaves a data directory behind."""
    (tmp_path / "seed.yaml").write_text(text)
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "sandbox", "--port", "0", "--data-dir", "sb", "--seed", "seed.yaml", cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    text_err = err.decode()
    assert proc.returncode == 2, text_err
    assert re.match(rf"error: --seed: {said}", text_err) and len(text_err.strip().splitlines()) == 1, text_err
    assert not out and "Traceback" not in text_err
    assert not (tmp_path / "sb").exists(), "a failed start leaves no data directory"


async def test_sandbox_command_answers_in_the_minimal_dialect(tmp_path):
    async with sandbox_process(tmp_path / "d", tmp_path / "c.json", "--dialect", "minimal") as run:
        ws = next(w for w in run.creds["workspaces"] if w["plan"] == "pro")
        status, body = await rpc(run.creds["baseUrl"], ws["token"], "requests.create",
                                 {"formId": ws["forms"]["Contact"], "prefill": {"topic": "Sales"}})
        assert status == 400 and "reason" not in body["error"].get("details", {})
        assert re.match(r"[A-Z_]+: ", body["error"]["message"]), "the reason leads the message"
        code, _ = await stop(run)
    assert code == 0


async def test_sandbox_on_a_port_in_use_names_port_and_leaves_nothing(tmp_path):
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    data_dir = tmp_path / "never-made"
    try:
        proc = await asyncio.create_subprocess_exec(
            str(FORMSYNC), "sandbox", "--port", str(port), "--data-dir", str(data_dir),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        taken.close()
    text = err.decode()
    assert proc.returncode == 1, text
    assert f"port {port} on 127.0.0.1 is in use" in text and "--port" in text, text
    assert "receiver.port" not in text and "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    assert not data_dir.exists(), "a failed start leaves no data directory behind"


async def helper(base_url: str, token: str, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(
        base_url + "/api/sandbox", json={"method": method, "params": params},
        headers={"Authorization": f"Bearer {token}"},
    ) as resp:
        return resp.status, await resp.json()


@pytest.mark.slow  # two sandbox processes one after the other: about 10 s
async def test_snapshots_in_snapshot_dir_outlive_the_sandbox(tmp_path):
    shots, creds_file = tmp_path / "shots", tmp_path / "creds.json"
    async with sandbox_process(tmp_path / "a", creds_file, "--snapshot-dir", str(shots)) as run:
        pro = next(w for w in run.creds["workspaces"] if w["plan"] == "pro")
        status, body = await helper(run.creds["baseUrl"], pro["token"], "snapshot.save", {"name": "kept"})
        assert status == 200 and body["data"]["name"] == "kept", body
        code, err = await stop(run)
        assert code == 0, err
    assert (shots / "kept.db").is_file()
    async with sandbox_process(tmp_path / "b", creds_file, "--snapshot-dir", str(shots)) as run:
        own = next(w for w in run.creds["workspaces"] if w["plan"] == "pro")["token"]
        status, body = await helper(run.creds["baseUrl"], own, "snapshot.list", {})
        assert [i["name"] for i in body["data"]["items"]] == ["kept"], body
        status, body = await helper(run.creds["baseUrl"], own, "snapshot.restore", {"name": "kept"})
        assert status == 200, body
        written = json.loads(creds_file.read_text())
        assert next(w for w in written["workspaces"] if w["plan"] == "pro")["token"] == pro["token"]
        assert (await rpc(run.creds["baseUrl"], pro["token"], "me.get", {}))[0] == 200
        assert (await rpc(run.creds["baseUrl"], own, "me.get", {}))[0] == 401
        code, err = await stop(run)
        assert code == 0 and "Traceback" not in err, err
