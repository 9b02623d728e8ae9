"""pytest fixtures for testing your own pipelines against the sandbox, the way moto is
used for AWS. Installed with formsync (entry point ``pytest11``); needs pytest-asyncio.
The fixtures are pytest-asyncio fixtures, so they work in its default strict mode (mark
the tests ``@pytest.mark.asyncio``) and in ``asyncio_mode = "auto"`` alike.

    @pytest.mark.asyncio
    async def test_my_sync(formsync_client, formsync_sandbox):
        form_id = formsync_sandbox.workspace("pro")["forms"]["Contact"]
        fields = await formsync_client.list_fields(form_id)

``formsync_sandbox`` is a running sandbox on a free loopback port with the default seed;
``formsync_client`` is a ``connector.client.FormClient`` for its Pro workspace.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

try:
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pytest-asyncio absent: the plugin still loads; its fixtures then need it
    async_fixture = pytest.fixture  # type: ignore[assignment]


@dataclass
class SandboxHandle:
    """A running sandbox: its address, credentials and a way to call its test helpers."""

    base_url: str
    credentials: dict[str, Any]

    def workspace(self, plan: str = "pro") -> dict[str, Any]:
        """The credentials of the seeded workspace on ``plan`` (free, pro or business):
        ``{id, name, plan, token, signingSecret, forms: {name: id}}``."""
        return next(w for w in self.credentials["workspaces"] if w["plan"] == plan)

    async def helper(self, method: str, params: dict[str, Any] | None = None, *, plan: str = "pro") -> Any:
        """Call a sandbox test helper (``clock.advance``, ``requests.complete``, ``mail.list``,
        ``deliveries.flush``, …) and return its data."""
        headers = {"Authorization": f"Bearer {self.workspace(plan)['token']}"}
        async with aiohttp.ClientSession() as http, http.post(
                f"{self.base_url}/api/sandbox", json={"method": method, "params": params or {}},
                headers=headers) as resp:
            body = await resp.json()
        if not body.get("ok"):
            raise AssertionError(f"sandbox helper {method} failed: {body.get('error')}")
        return body["data"]


async def start_sandbox(data_dir: Path, seed: Path | None = None) -> tuple[web.AppRunner, SandboxHandle]:
    """Start a seeded sandbox on a free loopback port; returns its runner and handle."""
    from .sandbox import start

    runner, service, creds = await start(data_dir, seed=seed)
    (data_dir / "credentials.json").write_text(json.dumps(creds, indent=2))
    return runner, SandboxHandle(service.base_url, creds)


@async_fixture
async def formsync_sandbox(tmp_path: Path) -> AsyncIterator[SandboxHandle]:
    """A freshly seeded sandbox for one test, on SQLite in the test's tmp_path."""
    runner, handle = await start_sandbox(tmp_path / "formsync-sandbox")
    try:
        yield handle
    finally:
        await runner.cleanup()


@async_fixture
async def formsync_client(formsync_sandbox: SandboxHandle) -> AsyncIterator[Any]:
    """A FormClient for the sandbox's Pro workspace, with pacing that matches its limits."""
    from connector.client import FormClient

    async with FormClient(formsync_sandbox.base_url, formsync_sandbox.workspace("pro")["token"]) as client:
        yield client
