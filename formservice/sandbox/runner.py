"""Starting and stopping a sandbox: ``SandboxServer`` is the one way (the ``formsync
sandbox`` command, the pytest plugin, the demo, the test fixtures and the benchmarks all
go through it)."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import signal
import socket
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from connector._process.serverlog import quiet_malformed_requests

from ..app import create_app
from ..delivery import trusting
from ..dialect import Dialect
from ..service import Service
from .client import SandboxHelpers
from .seed import CREDENTIALS, load_seed, prepare
from .snapshots import SnapshotStore

log = logging.getLogger("formservice.sandbox")


class SandboxServer:
    """A seeded sandbox serving on ``host``:``port`` (0 picks a free port).

    ``async with SandboxServer(data_dir) as sb:`` binds, seeds ``data_dir`` on first start
    (or reuses what it holds) and stops everything on exit; ``start()`` / ``stop()`` do
    the same by hand. Once started: ``sb.base_url``, ``sb.credentials`` (what the
    credentials file holds), ``sb.service`` (the in-process service) and
    ``sb.helpers(plan)``, a helpers client for a seeded workspace. ``start`` raises
    ``OSError`` when the port cannot be bound and ``SeedError`` (a ``ValueError``) for a bad seed; nothing
    stays bound or open then. ``dialect`` ``minimal`` answers only what the spec shows
    (formservice/dialect.py); the ``dialect.set`` helper switches it while running.
    ``ca_file`` (PEM) adds authorities its https deliveries trust (``ValueError`` if it
    cannot be used). ``snapshot_dir`` keeps the ``snapshot.*`` helpers' snapshots
    (default: ``snapshots`` in the data dir)."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", port: int = 0, seed: Path | None = None,
                 credentials_file: Path | None = None, dialect: Dialect = "full", ca_file: Path | None = None,
                 snapshot_dir: Path | None = None) -> None:
        self.dialect: Dialect = dialect
        self.tls = trusting(ca_file) if ca_file is not None else None
        self.data_dir = Path(data_dir)
        self.host, self.port, self.seed = host, port, seed
        self.credentials_file = credentials_file
        self.snapshot_dir = snapshot_dir or self.data_dir / "snapshots"
        self.service: Service | None = None
        self.runner: web.AppRunner | None = None
        self.credentials: dict[str, Any] = {}

    async def start(self) -> SandboxServer:
        """Bind, seed (first start) and write the credentials file when one is named.
        The seed is read and the port bound first: a seed that is not one, or a port that
        cannot be bound, leaves no data dir behind (nor does a seed the service refuses)."""
        seed = load_seed(self.seed)
        sock = _bind(self.host, self.port)
        made = not self.data_dir.exists()
        try:
            service = Service(self.data_dir)
        except BaseException:
            sock.close()
            _remove_new(self.data_dir, made)
            raise
        service.dialect = self.dialect
        quiet_malformed_requests()
        app = create_app(service)
        service.worker.tls = self.tls or True
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        try:
            await web.SockSite(runner, sock).start()
            bound = runner.addresses[0][1]
            shown_host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
            service.base_url = f"http://{shown_host}:{bound}"
            self.credentials = prepare(service, self.data_dir, seed, self.seed)
        except BaseException:  # a bad seed: nothing stays bound or open, or made
            await runner.cleanup()
            sock.close()
            service.engine.dispose()
            _remove_new(self.data_dir, made)
            raise
        self.service, self.runner = service, runner
        service.snapshots = SnapshotStore(self.snapshot_dir, credentials=self.credentials, credential_files=[
            self.data_dir / CREDENTIALS, *([self.credentials_file] if self.credentials_file else [])])
        if self.credentials_file is not None:
            self.credentials_file.parent.mkdir(parents=True, exist_ok=True)
            self.credentials_file.write_text(json.dumps(self.credentials, indent=2))
        log.info("sandbox listening on %s", service.base_url)
        return self

    async def stop(self) -> None:
        """Stop serving (deliveries under way finish first) and close the store."""
        runner, service = self.runner, self.service
        self.runner = self.service = None
        if runner is not None:
            await runner.cleanup()
        if service is not None:
            service.engine.dispose()

    async def __aenter__(self) -> SandboxServer:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return str(self.credentials["baseUrl"])

    @property
    def bound_port(self) -> int:
        """The port bound (the one picked when ``port`` was 0)."""
        if self.runner is None:
            raise RuntimeError("the sandbox is not running")
        return int(self.runner.addresses[0][1])

    def workspace(self, plan: str = "pro") -> dict[str, Any]:
        """The credentials of the seeded workspace on ``plan`` (free, pro or business)."""
        return next(w for w in self.credentials["workspaces"] if w["plan"] == plan)

    def helpers(self, plan: str = "pro") -> SandboxHelpers:
        """A helpers client acting as the owner of the ``plan`` workspace; ``async with``
        it to keep one HTTP session for its calls."""
        return SandboxHelpers(self.base_url, self.workspace(plan)["token"])


def _remove_new(data_dir: Path, made: bool) -> None:
    """Remove the data dir this start made (a failed start leaves nothing behind)."""
    if made:
        shutil.rmtree(data_dir, ignore_errors=True)


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port``; ``OSError`` (naming the address) if not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=128)


async def serve(host: str, port: int, data_dir: Path, seed: Path | None, credentials_file: Path | None,
                ready: asyncio.Event | None = None, stop: asyncio.Event | None = None,
                dialect: Dialect = "full", ca_file: Path | None = None, snapshot_dir: Path | None = None) -> None:
    """Run the sandbox until ``stop`` is set (or SIGINT/SIGTERM): bind, seed on first
    start, write the credentials file, serve (in ``dialect``), its https deliveries also
    trusting the authorities of ``ca_file``, its snapshots kept in ``snapshot_dir``."""
    async with SandboxServer(data_dir, host=host, port=port, seed=seed, credentials_file=credentials_file,
                             dialect=dialect, ca_file=ca_file, snapshot_dir=snapshot_dir) as sb:
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        if ready is not None:
            ready.set()
        print(f"formsync sandbox listening on {sb.base_url}", flush=True)
        await stop.wait()
