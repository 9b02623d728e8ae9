"""A running sandbox as the pytest fixtures hand it out: its address, credentials and
typed test helpers (``formsync_sandbox``; ``formsync_receiver`` takes it too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .client import HelperError, SandboxHelpers


@dataclass
class SandboxHandle:
    """A running sandbox: its address, credentials and its test helpers."""

    base_url: str
    credentials: dict[str, Any]
    _clients: dict[str, SandboxHelpers] = field(default_factory=dict, repr=False)

    def workspace(self, plan: str = "pro") -> dict[str, Any]:
        """The credentials of the seeded workspace on ``plan`` (free, pro or business):
        ``{id, name, plan, token, signingSecret, forms: {name: id}}``."""
        return next(w for w in self.credentials["workspaces"] if w["plan"] == plan)

    def helpers_for(self, plan: str = "pro") -> SandboxHelpers:
        """The typed test helpers, as the owner of the ``plan`` workspace."""
        if plan not in self._clients:
            self._clients[plan] = SandboxHelpers(self.base_url, self.workspace(plan)["token"])
        return self._clients[plan]

    @property
    def helpers(self) -> SandboxHelpers:
        """The typed test helpers as the Pro workspace's owner:
        ``await formsync_sandbox.helpers.requests_complete(request_id, answers)``."""
        return self.helpers_for("pro")

    async def helper(self, method: str, params: dict[str, Any] | None = None, *, plan: str = "pro") -> Any:
        """Call a sandbox test helper by name (``clock.advance``, ``requests.complete``,
        ``mail.list``, ``deliveries.flush``, …) and return its data; AssertionError
        when it fails."""
        try:
            return await self.helpers_for(plan).call(method, params)
        except HelperError as err:
            raise AssertionError(str(err)) from err

    async def restore_snapshot(self, name: str) -> None:
        """Restore the snapshot ``name`` (``snapshot.restore``): the credentials become the
        snapshot's, and the helpers clients use its tokens; AssertionError when it fails."""
        await self.helper("snapshot.restore", {"name": name})
        await self.close()  # their tokens may be gone with the state they were made in

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
