"""The receiver serves https from the certificate and key its settings name (a
certificate the test makes for 127.0.0.1): a signed delivery over TLS is verified and
stored; a file that cannot serve is one line naming the setting, and exit code 2."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from connector.receiver.app import run_receiver
from connector.receiver.tls import TlsSettingError, server_context
from connector.store import Store
from tests.deploy.certs import Cert, make_cert, other_key

from .test_receiver import CB_SECRET, encode, envelope, events_in, receiver_settings, signed

FORMSYNC = Path(sys.executable).parent / "formsync"


@pytest.fixture
def cert(tmp_path: Path) -> Cert:
    return make_cert(tmp_path)


def test_a_certificate_and_its_key_make_a_server_context(cert: Cert) -> None:
    assert server_context(cert.cert, cert.key) is not None
    assert server_context(None, None) is None  # plain http


@pytest.mark.parametrize("case, setting, words", [
    ("missing cert", "receiver.tls_cert", "does not exist"),
    ("directory", "receiver.tls_cert", "is a directory"),
    ("key as cert", "receiver.tls_cert", "holds no PEM certificate"),
    ("cert as key", "receiver.tls_key", "holds no PEM private key"),
    ("other key", "receiver.tls_key", "is not the key of the certificate"),
    ("encrypted key", "receiver.tls_key", "is encrypted"),
    ("key only", "receiver.tls_cert", "not set, but receiver.tls_key is"),
])
def test_each_unusable_file_is_named_with_its_setting(cert: Cert, tmp_path: Path, case: str, setting: str,
                                                      words: str) -> None:
    pair = {"missing cert": (tmp_path / "nope.crt", cert.key), "directory": (tmp_path, cert.key),
            "key as cert": (cert.key, cert.key), "cert as key": (cert.cert, cert.cert),
            "other key": (cert.cert, other_key(tmp_path)),
            "encrypted key": (cert.cert, other_key(tmp_path, password=b"pw")), "key only": (None, cert.key)}[case]
    with pytest.raises(TlsSettingError) as caught:
        server_context(*pair)
    assert caught.value.setting == setting and str(caught.value).startswith(setting + ": ")
    assert words in str(caught.value) and "\n" not in str(caught.value)


async def test_a_signed_delivery_over_https_is_stored(cert: Cert, tmp_path: Path) -> None:
    db = tmp_path / "rx.db"
    store = Store(f"sqlite:///{db}")
    store.migrate()
    rs = receiver_settings(tls_cert=cert.cert, tls_key=cert.key, store_process=False)
    stop, ready = asyncio.Event(), asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_receiver(store, rs, host="127.0.0.1", port=0, on_ready=ready.set_result,
                                            stop=stop, handle_signals=False))
    try:
        url = await asyncio.wait_for(ready, 30)
        assert url.startswith("https://127.0.0.1:")
        body = encode(envelope("evt_tls"))
        async with aiohttp.ClientSession() as http:
            async with http.post(url + "/formsync/events", data=body, headers=signed(body),
                                 ssl=cert.client_context()) as resp:
                assert resp.status == 200, await resp.text()
            with pytest.raises(aiohttp.ClientError):  # plain http is not served on the TLS port
                async with http.post(url.replace("https", "http") + "/formsync/events", data=body,
                                     headers=signed(body)) as resp:
                    await resp.read()
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        store.close()
    assert events_in(db) == 1


def test_receive_with_a_missing_certificate_says_so_in_one_line(cert: Cert, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORMSYNC_")}
    env.update(FORMSYNC_RECEIVER__TLS_CERT=str(tmp_path / "gone.crt"), FORMSYNC_RECEIVER__TLS_KEY=str(cert.key),
               FORMSYNC_STORE__URL=f"sqlite:///{tmp_path}/rx.db")
    done = subprocess.run([str(FORMSYNC), "receive", "--port", "0"], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("error: receiver.tls_cert: ") and "gone.crt does not exist" in lines[-1], lines
    assert "Traceback" not in done.stderr and not (tmp_path / "rx.db").exists(), "nothing started"


@pytest.mark.slow  # formsync run in a subprocess: migrations, scheduler and receiver start, about 10 s
async def test_run_serves_its_receiver_over_https(cert: Cert, tmp_path: Path) -> None:
    config = tmp_path / "formsync.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/run.db"\n[receiver]\nenabled = true\nport = 0\n'
                      f'tls_cert = "{cert.cert}"\ntls_key = "{cert.key}"\n'
                      f'callback_secrets = ["{CB_SECRET}"]\nstore_process = false\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORMSYNC_")}
    proc = await asyncio.create_subprocess_exec(str(FORMSYNC), "run", "--config", str(config), env=env, cwd=tmp_path,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        line = ""
        while "listening on" not in line:
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert line, "formsync run ended before its receiver listened"
        url = line.split("listening on ", 1)[1].split()[0].removesuffix("/formsync/events")
        assert url.startswith("https://127.0.0.1:"), line
        body = encode(envelope("evt_run_tls"))
        async with aiohttp.ClientSession() as http, http.post(
                url + "/formsync/events", data=body, headers=signed(body), ssl=cert.client_context()) as resp:
            assert resp.status == 200, await resp.text()
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0 and events_in(tmp_path / "run.db") == 1
