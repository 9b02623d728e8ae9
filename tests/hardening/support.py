"""Support code of the hardening suites: row counts over every table of the store, a
sandbox run as a separate ``formsync sandbox`` process, a TCP proxy that can cut a
database off, and the one line each suite prints with its figures."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from connector.store import Store
from connector.store._tables import StoreModel
from formservice.sandbox.client import SandboxHelpers

FORMSYNC = Path(sys.executable).parent / "formsync"


def table_counts(store: Store) -> dict[str, int]:
    """The number of rows of every table of the store (all of them, not only the event
    tables), by table name."""
    out: dict[str, int] = {}
    with store.database.engine.connect() as conn:
        for table in StoreModel.metadata.sorted_tables:
            out[table.name] = conn.execute(select(func.count()).select_from(table)).scalar_one()
    return out


def report_figures(suite: str, **figures: Any) -> None:
    """Print a suite's figures on one line (``pytest -s`` shows it; docs/reliability.md
    quotes it) and append them to the JSON-lines file ``FORMSYNC_FIGURES`` names, if any."""
    line = json.dumps({"suite": suite, **figures}, sort_keys=True)
    print(f"\nFIGURES {line}")
    target = os.environ.get("FORMSYNC_FIGURES")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


@contextlib.contextmanager
def memory_dir(fallback: Path) -> Iterator[Path]:
    """A scratch directory in memory (``/dev/shm``) when the machine has one, else
    ``fallback``; removed afterwards. For process-crash tests: a SIGKILL leaves the page
    cache intact, so skipping the disk's fsync cost changes nothing that is tested."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield fallback
        return
    path = Path(tempfile.mkdtemp(prefix="formsync-", dir=shm))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# -- a sandbox in its own process ------------------------------------------------------------------


@dataclass
class SandboxProcess:
    """``formsync sandbox`` running as a child process, with its credentials file read."""

    proc: subprocess.Popen[bytes]
    base_url: str
    creds: dict[str, Any]

    def workspace(self, plan: str = "pro") -> dict[str, Any]:
        return next(w for w in self.creds["workspaces"] if w["plan"] == plan)

    def _call(self, path: str, method: str, params: dict[str, Any] | None, plan: str) -> Any:
        req = urllib.request.Request(
            self.base_url + path, data=json.dumps({"method": method, "params": params or {}}).encode(),
            headers={"Authorization": f"Bearer {self.workspace(plan)['token']}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as e:  # a non-2xx answer
            raise AssertionError(f"{method}: {e.code} {e.read()[:1000]!r}") from None
        assert body["ok"], f"{method}: {body}"
        return body["data"]

    def helpers(self, plan: str = "pro") -> SandboxHelpers:
        """The typed helpers client, as the owner of the ``plan`` workspace."""
        return SandboxHelpers(self.base_url, self.workspace(plan)["token"])

    def helper(self, method: str, params: dict[str, Any] | None = None, *, plan: str = "pro") -> Any:
        """Call a sandbox test helper by name from synchronous test code, as the owner of
        the ``plan`` workspace; its data."""
        async def call() -> Any:
            async with self.helpers(plan) as helpers:
                return await helpers.call(method, params)

        return asyncio.run(call())

    def rpc(self, method: str, params: dict[str, Any] | None = None, *, plan: str = "pro") -> Any:
        """Call a JSON-RPC method as the owner of the ``plan`` workspace; its data."""
        return self._call("/api/v1", method, params, plan)


@contextlib.contextmanager
def sandbox_process(data_dir: Path, *, env: dict[str, str] | None = None,
                    extra_args: tuple[str, ...] = ()) -> Iterator[SandboxProcess]:
    """Start ``formsync sandbox --port 0`` on ``data_dir``; stop it (SIGTERM, then kill)
    at the end. Its stdout and stderr go to ``data_dir/sandbox.out`` and ``.err``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    creds_file = data_dir / "creds.json"
    out, err = (data_dir / "sandbox.out").open("wb"), (data_dir / "sandbox.err").open("wb")
    proc = subprocess.Popen([str(FORMSYNC), "sandbox", "--port", "0", "--data-dir", str(data_dir / "db"),
                             "--credentials-file", str(creds_file), *extra_args],
                            stdout=out, stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    try:
        deadline = time.monotonic() + 60
        while not creds_file.exists() or not creds_file.read_text().strip().endswith("}"):
            assert proc.poll() is None, (data_dir / "sandbox.err").read_text()
            assert time.monotonic() < deadline, "the sandbox did not start within 60 s"
            time.sleep(0.05)
        creds = json.loads(creds_file.read_text())
        yield SandboxProcess(proc, creds["baseUrl"], creds)
    finally:
        _stop(proc)
        out.close()
        err.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM a process still running, and kill it if it has not ended within 30 s."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


@contextlib.contextmanager
def receive_process(config: Path, out_dir: Path, *, db: str | None = None, name: str = "receive",
                    env: dict[str, str] | None = None,
                    wrap: Sequence[str] = ()) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``formsync receive --verbose --port 0`` on ``config`` (and ``db`` if given), its
    output in ``out_dir/NAME.out`` and ``.err``, run through ``wrap`` (a command that
    executes its arguments, such as ``ip netns exec NS``); yields the process and the URL
    of its event path. Stopped with SIGTERM (then killed) at the end."""
    out_path, err_path = out_dir / f"{name}.out", out_dir / f"{name}.err"
    out, err = out_path.open("wb"), err_path.open("wb")
    args = [*wrap, str(FORMSYNC), "receive", "--config", str(config), "--port", "0", "--verbose"]
    if db is not None:
        args += ["--db", db]
    proc = subprocess.Popen(args, stdout=out, stderr=err, cwd=out_dir,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **(env or {})})
    try:
        deadline = time.monotonic() + 60
        while "listening on" not in out_path.read_text():
            assert proc.poll() is None, err_path.read_text()
            assert time.monotonic() < deadline, "the receiver did not start within 60 s"
            time.sleep(0.05)
        yield proc, out_path.read_text().split("listening on ", 1)[1].split()[0]
    finally:
        _stop(proc)
        out.close()
        err.close()


# -- a TCP proxy that can cut its traffic --------------------------------------------------------


@dataclass
class TcpProxy:
    """A loopback TCP proxy to ``target_host:target_port`` (here: the shared PostgreSQL
    server, which must never be stopped). ``cut()`` closes the listener and every
    connection, so the client sees its database gone (connections reset, new ones
    refused); ``restore()`` listens again on the same port."""

    target_host: str
    target_port: int
    port: int = 0
    _server: asyncio.AbstractServer | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(self.target_host, self.target_port), 10)
        except (TimeoutError, OSError):
            writer.close()
            return
        self._writers.update((writer, up_writer))
        tasks = [asyncio.create_task(self._pipe(reader, up_writer)), asyncio.create_task(self._pipe(up_reader, writer))]
        self._tasks.update(tasks)
        try:
            await asyncio.gather(*tasks)
        finally:
            self._tasks.difference_update(tasks)
            self._writers.difference_update((writer, up_writer))

    async def cut(self) -> None:
        """Stop listening and reset every open connection."""
        assert self._server is not None
        self._server.close()
        for w in list(self._writers):
            transport = w.transport
            if transport is not None:
                transport.abort()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.wait_for(self._server.wait_closed(), 10)
        self._server = None

    async def restore(self) -> None:
        """Listen again, on the same port."""
        await self.start()

    async def close(self) -> None:
        if self._server is not None:
            await self.cut()


class ThreadedProxy:
    """A ``TcpProxy`` on its own event loop in a thread, so that synchronous database
    calls made on the test's loop (a migration, a count) cannot stall the proxy."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.proxy = TcpProxy(target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="tcp-proxy")

    def _call(self, coro: Any) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    @property
    def port(self) -> int:
        return self.proxy.port

    def start(self) -> None:
        self._thread.start()
        self._call(self.proxy.start())

    def cut(self) -> None:
        self._call(self.proxy.cut())

    def restore(self) -> None:
        self._call(self.proxy.restore())

    def close(self) -> None:
        try:
            self._call(self.proxy.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._loop.close()
