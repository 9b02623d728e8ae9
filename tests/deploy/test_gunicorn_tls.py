"""The receiver under gunicorn (``-c python:connector.gunicorn_conf``) binds and serves
https from the settings' certificate and key; a TLS mistake ends gunicorn with one line
and exit code 2 before any worker starts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from connector.store import Store
from tests.connector.test_receiver import CB_SECRET, encode, envelope, events_in, signed
from tests.deploy.certs import make_cert
from tests.deploy.test_nginx import free_port

GUNICORN = Path(sys.executable).parent / "gunicorn"
APP = "connector.serving:receiver_app"


def gunicorn_env(tmp_path: Path, **receiver: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORMSYNC_")}
    env.update(FORMSYNC_STORE__URL=f"sqlite:///{tmp_path}/rx.db", FORMSYNC_RECEIVER__HOST="127.0.0.1",
               FORMSYNC_RECEIVER__CALLBACK_SECRETS=json.dumps([CB_SECRET]),
               **{f"FORMSYNC_RECEIVER__{k.upper()}": v for k, v in receiver.items()})
    return env


@pytest.mark.slow  # a gunicorn master, its worker and the worker's store process: about 10 s or more
@pytest.mark.skipif(not GUNICORN.exists(), reason="gunicorn is not installed")
async def test_gunicorn_serves_https_from_the_settings(tmp_path: Path) -> None:
    cert, port = make_cert(tmp_path), free_port()
    env = gunicorn_env(tmp_path, tls_cert=str(cert.cert), tls_key=str(cert.key), port=str(port))
    proc = await asyncio.create_subprocess_exec(
        str(GUNICORN), "-c", "python:connector.gunicorn_conf", APP, "--workers", "1", env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    url = f"https://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            deadline = time.monotonic() + 60
            while True:
                assert proc.returncode is None, (await proc.stderr.read()).decode() if proc.stderr else ""
                try:
                    async with http.get(url + "/healthz", ssl=cert.client_context()) as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    assert time.monotonic() < deadline, "gunicorn did not answer over https"
                    await asyncio.sleep(0.2)
            body = encode(envelope("evt_gunicorn"))
            async with http.post(url + "/formsync/events", data=body, headers=signed(body),
                                 ssl=cert.client_context()) as resp:
                assert resp.status == 200, await resp.text()
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 60)
    assert events_in(tmp_path / "rx.db") == 1


@pytest.mark.skipif(not GUNICORN.exists(), reason="gunicorn is not installed")
def test_gunicorn_with_a_mismatched_key_stops_in_one_line(tmp_path: Path) -> None:
    cert, other = make_cert(tmp_path, "a"), make_cert(tmp_path, "b")
    env = gunicorn_env(tmp_path, tls_cert=str(cert.cert), tls_key=str(other.key), port=str(free_port()))
    done = subprocess.run([str(GUNICORN), "-c", "python:connector.gunicorn_conf", APP], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: receiver.tls_key: {other.key} is not the key of the certificate {cert.cert}; "
        "give the key the certificate was made with"], done.stderr
    assert not Store(f"sqlite:///{tmp_path}/rx.db").exists()
