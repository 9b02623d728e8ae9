"""The ``formsync_receiver`` fixture as a user's test suite uses it: the sandbox's callback
and a subscription's delivery verified and stored over real HTTP, ``wait_for`` by type,
request, external id and submission, a timeout that says what did arrive; and the plugin
needing only what ``formsync[pytest]`` installs."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTACT = {"name": "Ada", "email": "ada@example.com", "topic": "sales"}


async def test_a_callback_is_waited_for_by_request_and_external_id(formsync_sandbox, formsync_client,
                                                                     formsync_receiver):
    form_id = formsync_sandbox.workspace("pro")["forms"]["Contact"]
    req = await formsync_client.create_request(form_id, external_id="crm-42",
                                               callback_url=formsync_receiver.callback_url)
    other = await formsync_client.create_request(form_id, callback_url=formsync_receiver.callback_url)
    await formsync_sandbox.helpers.requests_complete(other.id, CONTACT)
    await formsync_sandbox.helpers.requests_complete(req.id, CONTACT)
    event = await formsync_receiver.wait_for("request.completed", external_id="crm-42", source="callback")
    assert event.data.request is not None and event.data.request.id == req.id
    assert event.data.answers is not None and {k: event.data.answers[k] for k in CONTACT} == CONTACT
    same = await formsync_receiver.wait_for("request.completed", request_id=req.id, timeout=1)
    assert same.id == event.id
    assert len(formsync_receiver.events("request.completed")) == 2


async def test_a_subscription_delivery_is_waited_for_by_submission(formsync_sandbox, formsync_client,
                                                                   formsync_receiver):
    form_id = formsync_sandbox.workspace("pro")["forms"]["Contact"]
    subs = await formsync_receiver.subscribe(form_id, "submission_created", "request_canceled")
    assert [s.eventType for s in subs] == ["submission_created", "request_canceled"]
    link = await formsync_client.create_share_link(form_id)
    sent = await formsync_sandbox.helper("shareLinks.submit", {"url": link.url, "answers": CONTACT})
    event = await formsync_receiver.wait_for("submission.completed", submission_id=sent["submissionId"],
                                             source="webhook")
    assert event.data.form is not None and event.data.form.id == form_id
    req = await formsync_client.create_request(form_id)
    await formsync_client.cancel_request(req.id)
    canceled = await formsync_receiver.wait_for("request.canceled", request_id=req.id)
    assert canceled.data.request is not None and canceled.data.request.status == "canceled"


async def test_waiting_in_vain_says_what_arrived(formsync_sandbox, formsync_client, formsync_receiver):
    form_id = formsync_sandbox.workspace("pro")["forms"]["Contact"]
    req = await formsync_client.create_request(form_id, callback_url=formsync_receiver.callback_url)
    await formsync_client.cancel_request(req.id)
    await formsync_receiver.wait_for("request.canceled", request_id=req.id)
    with pytest.raises(AssertionError, match=r"no request.completed event with request.id=req_\w+ arrived at "
                                             r"http://127.0.0.1:\d+ within 0.3 s; stored: request.canceled x1"):
        await formsync_receiver.wait_for("request.completed", request_id=req.id, timeout=0.3)


# -- what the plugin needs ---------------------------------------------------------------------

PLUGIN = [ROOT / "formservice" / "pytest_plugin.py", ROOT / "formservice" / "pytest_receiver.py"]


def _top_modules(path: Path) -> set[str]:
    """Every module the file imports, anywhere in it (functions and TYPE_CHECKING included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _requirement_names(reqs: list[str]) -> set[str]:
    return {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower() for r in reqs}


def test_the_plugin_imports_only_what_the_pytest_extra_and_formsync_provide():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    allowed = _requirement_names(project["dependencies"]) | _requirement_names(
        project["optional-dependencies"]["pytest"])
    assert _requirement_names(project["optional-dependencies"]["pytest"]) == {"pytest", "pytest-asyncio"}
    dists = packages_distributions()
    for path in PLUGIN:
        for module in _top_modules(path):
            if module in sys.stdlib_module_names or module in {"formservice", "connector"}:
                continue
            provided_by = {d.lower() for d in dists.get(module, [])}
            assert provided_by & allowed, f"{path.name} imports {module}, which formsync[pytest] does not install"
