"""The typed helpers client covers every registered helper, and the async helpers sit in
the same registry as the others."""

from __future__ import annotations

import re

from formservice.sandbox.client import SandboxHelpers
from formservice.sandbox.helpers import HELPERS


def method_name(helper: str) -> str:
    """``shareLinks.submit`` -> ``share_links_submit``."""
    return re.sub(r"([A-Z])", r"_\1", helper.replace(".", "_")).lower()


def test_every_helper_has_a_client_method() -> None:
    missing = [name for name in HELPERS if not callable(getattr(SandboxHelpers, method_name(name), None))]
    assert missing == []


def test_async_helpers_are_registered_like_the_others() -> None:
    assert {name for name, m in HELPERS.items() if m.is_async} == {"reset", "deliveries.flush"}
    assert HELPERS["reset"].summary.startswith("Wipe the sandbox back to its seeded state")


async def test_an_async_helper_validates_its_params(sandbox) -> None:
    r = await sandbox.helper("reset", {"now": True})
    r.expect("VALIDATION_ERROR", 400, field="now")
    assert (await sandbox.helpers.reset()).reset is True


async def test_the_helpers_are_not_api_methods(sandbox) -> None:
    (await sandbox.rpc("clock.advance", {"ms": 1})).expect("METHOD_NOT_FOUND", 404)
