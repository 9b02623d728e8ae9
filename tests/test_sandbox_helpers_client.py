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
    assert {name for name, m in HELPERS.items() if m.is_async} == {"reset", "deliveries.flush", "snapshot.save",
                                                                      "snapshot.restore"}
    assert HELPERS["reset"].summary.startswith("Wipe the sandbox back to its seeded state")


async def test_an_async_helper_validates_its_params(sandbox) -> None:
    r = await sandbox.helper("reset", {"now": True})
    r.expect("VALIDATION_ERROR", 400, field="now")
    assert (await sandbox.helpers.reset()).reset is True


async def test_the_helpers_are_not_api_methods(sandbox) -> None:
    (await sandbox.rpc("clock.advance", {"ms": 1})).expect("METHOD_NOT_FOUND", 404)


async def test_helpers_without_async_with_leave_no_session_open(sandbox) -> None:
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        helpers = SandboxHelpers(sandbox.base_url, sandbox.pro.token)  # never entered, never closed
        assert (await helpers.clock_get()).offset_ms == 0
        assert (await helpers.reset()).reset is True
        del helpers
        gc.collect()
    assert not [w for w in caught if "Unclosed" in str(w.message)], [str(w.message) for w in caught]


async def test_helpers_results_read_in_snake_case_and_keep_the_wire_names(sandbox) -> None:
    async with SandboxHelpers(sandbox.base_url, sandbox.pro.token) as helpers:
        moved = await helpers.clock_advance(1_000)
        assert moved.offset_ms == moved.offsetMs == 1_000  # the camelCase name still reads
        assert moved.model_dump() == {"now": moved.now_ms, "offsetMs": 1_000}  # the wire's names
        made = await helpers.submissions_create(sandbox.pro.forms["Contact"], {"name": "Ada", "email": "a@example.test"})
        assert made.is_completed and made.form_id == sandbox.pro.forms["Contact"]
        [event] = (await helpers.events_list(type="submission.completed")).items
        assert event.submission_id == made.id and event.payload is not None
        hook = await sandbox.rpc("webhooks.create", {"formId": made.form_id, "provider": "zapier",
                                                     "targetUrl": "http://127.0.0.1:9/closed"})
        assert hook.status == 200, hook.body
        again = await helpers.submissions_create(made.form_id, {"name": "Bo", "email": "b@example.test"})
        [attempt] = (await helpers.deliveries_flush()).attempts  # port 9 answers nothing
        assert (attempt.status, attempt.attempt_count, attempt.state) == (None, 1, "pending") and attempt.error
        [sent] = (await helpers.events_list(type="submission.completed")).items[1:]
        assert sent.submission_id == again.id and attempt.event_id == sent.id
        assert sent.deliveries[0].subscription_id == hook.data["subscriptionId"]
