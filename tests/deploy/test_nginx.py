"""The nginx site ``formsync deploy nginx`` writes from a settings file, as written, in front
of a receiver: ``nginx -t`` takes it, and nginx from Debian's packages (started by the test
with its own prefix on free loopback ports, not the system service) ends TLS with a
certificate the test makes, passes deliveries on to the receiver's port and path from the
settings, with the client address and scheme; the receiver uses them only with
``receiver.trust_proxy``."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from connector.receiver.app import create_receiver_app
from connector.store import Store
from tests.connector.test_receiver import encode, envelope, receiver_settings, signed
from tests.deploy.certs import Cert, make_cert
from tests.deploy.written import deploy

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
# CI must never pass by skipping: there a missing nginx fails the tests.
pytestmark = pytest.mark.skipif(not Path(NGINX).exists() and not (os.environ.get("CI") or os.environ.get("FORMSYNC_CI")),
                                reason="nginx is not installed (scripts/test installs it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def site_for(tmp_path: Path, cert: Cert, listen: int, upstream: int) -> str:
    """The site ``formsync deploy nginx`` writes for this test's certificate and ports."""
    deploy(tmp_path, "nginx", f'[receiver]\nport = {upstream}\n[deploy]\nlisten = ["127.0.0.1:{listen}"]\n'
                              f'server_name = "localhost"\ntls_cert = "{cert.cert}"\ntls_key = "{cert.key}"\n')
    return (tmp_path / "nginx" / "formsync.conf").read_text()


def configure(prefix: Path, site: str) -> Path:
    """An nginx.conf with everything under ``prefix``, including ``site``."""
    (prefix / "logs").mkdir(parents=True)
    (prefix / "site.conf").write_text(site)
    user = "user root;\n" if os.geteuid() == 0 else ""  # its workers read the test's files
    (prefix / "nginx.conf").write_text(
        f"{user}worker_processes 1;\npid {prefix}/nginx.pid;\nerror_log {prefix}/logs/error.log;\n"
        "events { worker_connections 64; }\n"
        f"http {{\n  access_log {prefix}/logs/access.log;\n  client_body_temp_path {prefix}/body;\n"
        f"  proxy_temp_path {prefix}/proxy;\n  include {prefix}/site.conf;\n}}\n")
    return prefix / "nginx.conf"


def test_nginx_t_takes_the_site_as_written(tmp_path: Path) -> None:
    site = site_for(tmp_path, make_cert(tmp_path), free_port(), 9123)
    assert "proxy_pass http://127.0.0.1:9123;" in site and "location /formsync/events {" in site
    conf = configure(tmp_path / "prefix", site)
    done = subprocess.run([NGINX, "-t", "-p", str(tmp_path / "prefix"), "-c", str(conf)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "test is successful" in done.stderr, done.stderr


@contextmanager
def nginx(prefix: Path, site: str, port: int) -> Iterator[None]:
    """nginx in the foreground with everything under ``prefix``, until the block ends."""
    configure(prefix, site)
    proc = subprocess.Popen([NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        assert proc.poll() is None, f"nginx did not start: {proc.stderr.read() if proc.stderr else ''}"
        yield
    finally:
        proc.terminate()
        proc.wait(20)


@asynccontextmanager
async def receiver(tmp_path: Path, port: int, *, trust_proxy: bool) -> AsyncIterator[Store]:
    store = Store(f"sqlite:///{tmp_path}/rx.db")
    store.migrate()
    runner = web.AppRunner(create_receiver_app(store, receiver_settings(trust_proxy=trust_proxy, store_process=False)))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield store
    finally:
        await runner.cleanup()
        store.close()


async def deliver(url: str, eid: str, cert: Cert | None = None, headers: dict[str, str] | None = None) -> None:
    body = encode(envelope(eid))
    async with aiohttp.ClientSession() as http, http.post(
            url + "/formsync/events", data=body, headers={**signed(body), **(headers or {})},
            ssl=cert.client_context() if cert else True) as resp:
        assert resp.status == 200, await resp.text()


async def test_behind_nginx_over_https_the_receiver_sees_the_client_and_scheme(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="connector.receiver")
    cert, listen, upstream = make_cert(tmp_path), free_port(), free_port()
    async with receiver(tmp_path, upstream, trust_proxy=True):
        with nginx(tmp_path / "prefix", site_for(tmp_path, cert, listen, upstream), listen):
            # A client's own X-Forwarded-For is kept before the address nginx saw, never trusted.
            await deliver(f"https://127.0.0.1:{listen}", "evt_nginx", cert, {"X-Forwarded-For": "203.0.113.9"})
    stored = [r.getMessage() for r in caplog.records if "evt_nginx" in r.getMessage()]
    assert stored and stored[0].endswith("stored (client 127.0.0.1 over https)"), stored


async def test_without_trust_proxy_forwarded_headers_are_ignored(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="connector.receiver")
    port = free_port()
    forged = {"X-Forwarded-For": "198.51.100.7", "X-Forwarded-Proto": "https"}
    async with receiver(tmp_path, port, trust_proxy=False):
        await deliver(f"http://127.0.0.1:{port}", "evt_direct", headers=forged)
    stored = [r.getMessage() for r in caplog.records if "evt_direct" in r.getMessage()]
    assert stored and stored[0].endswith("stored (client 127.0.0.1 over http)"), stored
