"""pytest fixtures for testing your own pipelines against the sandbox, the way moto is
used for AWS. Installed with formsync (entry point ``pytest11``); needs pytest-asyncio.
The fixtures are pytest-asyncio fixtures, so they work in its default strict mode (mark
the tests ``@pytest.mark.asyncio``) and in ``asyncio_mode = "auto"`` alike.

    @pytest.mark.asyncio
    async def test_my_sync(formsync_client, formsync_sandbox):
        form_id = formsync_sandbox.workspace("pro")["forms"]["Contact"]
        fields = await formsync_client.list_fields(form_id)
        await formsync_sandbox.helpers.clock_advance(60_000)

``formsync_sandbox`` is a running sandbox on a free loopback port with the default seed;
``formsync_client`` is a ``connector.client.FormClient`` for its Pro workspace;
``formsync_receiver`` (``formservice.pytest_receiver``) a real receiver taking the sandbox's
callbacks and webhook deliveries into its own SQLite store, with ``wait_for`` an event.
Needs: ``pip install 'formsync[pytest]'``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .pytest_receiver import ReceiverHandle, formsync_receiver
from .sandbox.handle import SandboxHandle
from .sandbox.runner import SandboxServer

__all__ = ["ReceiverHandle", "SandboxHandle", "formsync_client", "formsync_receiver", "formsync_sandbox"]

try:
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pytest-asyncio absent: the plugin still loads; its fixtures then need it
    async_fixture = pytest.fixture  # type: ignore[assignment]


@async_fixture
async def formsync_sandbox(tmp_path: Path) -> AsyncIterator[SandboxHandle]:
    """A freshly seeded sandbox for one test, on SQLite in the test's tmp_path (its
    credentials also in ``credentials.json`` there)."""
    data_dir = tmp_path / "formsync-sandbox"
    async with SandboxServer(data_dir, credentials_file=data_dir / "credentials.json") as server:
        handle = SandboxHandle(server.base_url, server.credentials)
        try:
            yield handle
        finally:
            await handle.close()


@async_fixture
async def formsync_client(formsync_sandbox: SandboxHandle) -> AsyncIterator[Any]:
    """A FormClient for the sandbox's Pro workspace, with pacing that matches its limits."""
    from connector.client.rpc import FormClient

    async with FormClient(formsync_sandbox.base_url, formsync_sandbox.workspace("pro")["token"]) as client:
        yield client
