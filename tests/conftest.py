"""Shared fixtures: a real sandbox on a loopback port, seeded with the default seed, a
small JSON-RPC caller that keeps HTTP status, code and details for assertions, and the
typed helpers client.

The ``sandbox`` fixture starts each test's sandbox on a copy of a data dir seeded moments
before (a sandbox restarted on its data dir, as ``formsync sandbox`` is): seeding costs
most of a start, and a thousand tests start one. The copy is made again when older than
``SEEDED_FOR_S``, so the seeded records are never more than that older than the test."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from formservice.sandbox.client import SandboxHelpers
from formservice.sandbox.runner import SandboxServer
from formservice.service import Service


@dataclass
class Workspace:
    id: str
    name: str
    plan: str
    token: str
    signing_secret: str
    user_id: str
    folder_id: str
    forms: dict[str, str]


@dataclass
class Reply:
    status: int
    body: Any
    headers: Any = None

    @property
    def ok(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("ok") is True

    @property
    def data(self) -> Any:
        assert self.ok, f"expected success, got {self.status} {self.body}"
        return self.body["data"]

    @property
    def error(self) -> dict[str, Any]:
        assert isinstance(self.body, dict) and self.body.get("ok") is False, f"expected failure, got {self.body}"
        return self.body["error"]

    @property
    def code(self) -> str:
        return self.error["code"]

    @property
    def details(self) -> dict[str, Any]:
        return self.error.get("details", {})

    def expect(self, code: str, status: int, **details: Any) -> dict[str, Any]:
        """Assert the failure's code, HTTP status and the given details members."""
        assert self.status == status, f"status {self.status} != {status}: {self.body}"
        assert self.code == code, f"code {self.code} != {code}: {self.body}"
        for k, v in details.items():
            assert self.details.get(k) == v, f"details.{k} = {self.details.get(k)!r}, want {v!r}: {self.body}"
        assert self.error["message"], "an error always says what was wrong"
        return self.error


@dataclass
class Sandbox:
    base_url: str
    service: Service
    http: aiohttp.ClientSession
    workspaces: dict[str, Workspace] = field(default_factory=dict)

    def helpers_for(self, ws: str = "pro") -> SandboxHelpers:
        """The typed helpers client, as the owner of workspace ``ws`` (a plan name)."""
        return SandboxHelpers(self.base_url, self.workspaces[ws].token, http=self.http)

    @property
    def helpers(self) -> SandboxHelpers:
        """The typed helpers client, as the owner of the Pro workspace."""
        return self.helpers_for("pro")

    @property
    def free(self) -> Workspace:
        return self.workspaces["free"]

    @property
    def pro(self) -> Workspace:
        return self.workspaces["pro"]

    @property
    def business(self) -> Workspace:
        return self.workspaces["business"]

    async def post(self, path: str, body: Any = None, *, token: str | None = None, raw: bytes | None = None,
                   headers: dict[str, str] | None = None) -> Reply:
        h = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        data = raw if raw is not None else json.dumps(body).encode()
        async with self.http.post(self.base_url + path, data=data, headers=h) as resp:
            text = await resp.text()
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = text
            return Reply(resp.status, parsed, resp.headers)

    async def rpc(self, method: str, params: dict[str, Any] | None = None, *, ws: str | Workspace = "pro",
                  token: str | None = None) -> Reply:
        """Call ``method`` as the owner of workspace ``ws`` (a plan name) unless ``token``."""
        wsp = self.workspaces[ws] if isinstance(ws, str) else ws
        body: dict[str, Any] = {"method": method}
        if params is not None:
            body["params"] = params
        return await self.post("/api/v1", body, token=token or wsp.token)

    async def helper(self, method: str, params: dict[str, Any] | None = None, *, ws: str = "pro",
                     token: str | None = None) -> Reply:
        """A raw helper call, for tests of the helper endpoint's envelope (status, error
        code, details); other tests use :attr:`helpers`."""
        body: dict[str, Any] = {"method": method, "params": params or {}}
        return await self.post("/api/sandbox", body, token=token or self.workspaces[ws].token)


async def start_sandbox(data_dir: Path, seed: Path | None = None) -> tuple[SandboxServer, Sandbox]:
    """A seeded sandbox on a free loopback port; ``await server.stop()`` (after closing
    ``sb.http``) ends it."""
    server = await SandboxServer(data_dir, seed=seed).start()
    assert server.service is not None
    sb = Sandbox(server.base_url, server.service, aiohttp.ClientSession())
    for w in server.credentials["workspaces"]:
        sb.workspaces[w["plan"]] = Workspace(
            id=w["id"], name=w["name"], plan=w["plan"], token=w["token"], signing_secret=w["signingSecret"],
            user_id=w["userId"], folder_id=w["folderId"], forms=w["forms"],
        )
    return server, sb


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``dialects`` (a module's ``pytestmark``) runs once per sandbox
    dialect: the connector must cope with the smallest answers the spec promises. A
    test it does not fit is marked ``full_dialect_only`` with the reason."""
    node = metafunc.definition
    if ("dialect" in metafunc.fixturenames and node.get_closest_marker("dialects")
            and not node.get_closest_marker("full_dialect_only")):
        metafunc.parametrize("dialect", ["full", "minimal"], indirect=True)


@pytest.fixture
def dialect(request: pytest.FixtureRequest) -> str:
    """The dialect the ``sandbox`` fixture answers in: ``full`` unless the test is
    parametrised over both (see ``pytest_generate_tests``)."""
    return str(getattr(request, "param", "full"))


SEEDED_FOR_S = 10.0


class SeededDataDir:
    """A sandbox data dir just seeded with the default seed (the sandbox started and
    stopped on it), copied for each test and seeded again every ``SEEDED_FOR_S``."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.made = 0.0

    async def copy_to(self, target: Path) -> None:
        if self.path is None or time.monotonic() - self.made > SEEDED_FOR_S:
            folder = Path(tempfile.mkdtemp(prefix="formsync-seeded-"))
            atexit.register(shutil.rmtree, folder, True)
            await (await SandboxServer(folder / "sandbox").start()).stop()
            # Stopped, the store has no write-ahead log left: its files are the whole state.
            assert not list((folder / "sandbox").glob("*-wal")), "the seeded data dir kept a WAL file"
            if self.path is not None:
                shutil.rmtree(self.path.parent, ignore_errors=True)
            self.path, self.made = folder / "sandbox", time.monotonic()
        shutil.copytree(self.path, target)


SEEDED = SeededDataDir()


@pytest.fixture
async def sandbox(tmp_path: Path, dialect: str) -> AsyncIterator[Sandbox]:
    """A sandbox seeded with the default seed on a loopback port, on a SQLite file in
    ``tmp_path``, answering in ``dialect``."""
    await SEEDED.copy_to(tmp_path / "sandbox")
    server, sb = await start_sandbox(tmp_path / "sandbox")
    sb.service.dialect = dialect
    try:
        yield sb
    finally:
        await sb.http.close()
        await server.stop()
