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
A test marked ``@pytest.mark.sandbox_snapshot("name")`` gets a sandbox restored to the
snapshot ``name`` from ``formsync_snapshot_dir`` (a folder for the whole session; override
the fixture to build or keep snapshots there).
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

__all__ = ["ReceiverHandle", "SandboxHandle", "formsync_client", "formsync_receiver", "formsync_sandbox",
           "formsync_snapshot_dir"]

MARKER = "sandbox_snapshot"

try:
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pytest-asyncio absent: the plugin still loads; its fixtures then need it
    async_fixture = pytest.fixture  # type: ignore[assignment]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(name): start the test's formsync_sandbox restored to the "
                                       "snapshot name (saved in formsync_snapshot_dir)")


@pytest.fixture(scope="session")
def formsync_snapshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every ``formsync_sandbox`` of the session keeps its snapshots in (so one
    test's or fixture's ``snapshot.save`` is another's ``sandbox_snapshot``); a new empty
    folder unless overridden."""
    return tmp_path_factory.mktemp("formsync-snapshots")


@async_fixture
async def formsync_sandbox(tmp_path: Path, formsync_snapshot_dir: Path,
                           request: pytest.FixtureRequest) -> AsyncIterator[SandboxHandle]:
    """A freshly seeded sandbox for one test, on SQLite in the test's tmp_path (its
    credentials also in ``credentials.json`` there); restored to the snapshot the test's
    ``sandbox_snapshot`` marker names, if any."""
    data_dir = tmp_path / "formsync-sandbox"
    async with SandboxServer(data_dir, credentials_file=data_dir / "credentials.json",
                             snapshot_dir=formsync_snapshot_dir) as server:
        handle = SandboxHandle(server.base_url, server.credentials)
        try:
            marker = request.node.get_closest_marker(MARKER)
            if marker is not None:
                await handle.restore_snapshot(*marker.args, **marker.kwargs)
            yield handle
        finally:
            await handle.close()


@async_fixture
async def formsync_client(formsync_sandbox: SandboxHandle) -> AsyncIterator[Any]:
    """A FormClient for the sandbox's Pro workspace, with pacing that matches its limits."""
    from connector.client.rpc import FormClient

    async with FormClient(formsync_sandbox.base_url, formsync_sandbox.workspace("pro")["token"]) as client:
        yield client
