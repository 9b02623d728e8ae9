"""Golden wire examples (``golden/*.json``) that the service and the connector must both
agree on.

* The sandbox's real outputs, produced by one scenario over loopback (a request created,
  completed and read; a share-link submission; the signed deliveries both produce; a
  page of ``submissions.list``; a refused call), have each golden's shape: the same keys,
  JSON types, id and timestamp patterns, and the contract values (see ``shapes``).
* The connector's models (and the receiver's event parser) read every golden, and know
  every top-level member it has.

When the wire changes on purpose, regenerate with ``FORMSYNC_WRITE_GOLDEN=1`` and review
the diff: the sandbox's address is written as ``http://127.0.0.1:8787``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from connector import errors, models
from connector.receiver.app import parse_event
from connector.signing import verify
from tests.spec.test_webhooks import Receiver

from .shapes import shape_problems

GOLDEN = Path(__file__).with_name("golden")
WRITE = os.environ.get("FORMSYNC_WRITE_GOLDEN") == "1"
HOSTED_BASE = "http://127.0.0.1:8787"
SUB_SECRET = "whsec_" + "3c" * 32
CONTACT = {"name": "Grace Hopper", "email": "grace@example.test", "topic": "sales", "message": "Pricing?"}
NAMES = ["request_record", "requests_create_result", "submissions_list_page", "event_request_completed",
         "event_submission_completed", "error_envelope"]



def wire_names(model: type[models.WireModel]) -> set[str]:
    """The camelCase names a model reads on the wire (its attributes are snake_case)."""
    return {f.alias or name for name, f in model.model_fields.items()}

def golden(name: str) -> Any:
    return json.loads((GOLDEN / f"{name}.json").read_text())


async def sandbox_outputs(sandbox: Any, catcher: Receiver) -> dict[str, Any]:
    """Run the scenario against the sandbox; its outputs by golden name."""
    form = sandbox.pro.forms["Contact"]
    out: dict[str, Any] = {}
    sub = await sandbox.rpc("webhooks.create", {"formId": form, "targetUrl": catcher.url("webhooks"),
                                                "provider": "zapier", "eventType": "submission_created",
                                                "signingSecret": SUB_SECRET})
    assert sub.status == 200, sub.body
    created = await sandbox.rpc("requests.create", {
        "formId": form, "recipient": {"email": "ada@example.test", "name": "Ada Lovelace"},
        "prefill": {"name": "Ada Lovelace", "topic": "support"}, "externalId": "crm-42",
        "metadata": {"runId": "run-42"}, "callbackUrl": catcher.url("callbacks"), "idempotencyKey": "golden-1"})
    assert created.status == 200, created.body
    out["requests_create_result"] = created.data
    rid = created.data["id"]
    done = await sandbox.helper("requests.complete", {"requestId": rid, "answers": {
        "email": "ada@example.test", "message": "Please call me."}})
    assert done.status == 200, done.body
    out["request_record"] = (await sandbox.rpc("requests.get", {"requestId": rid})).data
    link = await sandbox.rpc("shareLinks.create", {"formId": form})
    sent = await sandbox.helper("shareLinks.submit", {"url": link.data["url"], "answers": CONTACT})
    assert sent.status == 200, sent.body
    flushed = await sandbox.helper("deliveries.flush")
    assert flushed.status == 200, flushed.body
    [callback] = await catcher.wait("callbacks", 1)
    [webhook] = await catcher.wait("webhooks", 1)
    # What was delivered is what the golden pins, and it is signed as the hosted service signs.
    assert verify(callback.headers, callback.body, [sandbox.pro.signing_secret]).ok
    assert verify(webhook.headers, webhook.body, [SUB_SECRET]).ok
    out["event_request_completed"] = callback.json
    out["event_submission_completed"] = webhook.json
    page = await sandbox.rpc("submissions.list", {"formId": form, "limit": 1})
    out["submissions_list_page"] = page.data
    refused = await sandbox.rpc("requests.create", {"formId": form, "prefill": {"nickname": "Ada"}})
    assert refused.status == 400, refused.body
    out["error_envelope"] = refused.body
    return out


def _hosted(value: Any, base_url: str) -> Any:
    """``value`` with the sandbox's loopback address replaced by the documented one."""
    return json.loads(json.dumps(value).replace(base_url, HOSTED_BASE))


async def test_the_sandbox_outputs_have_the_golden_shapes(sandbox):
    async with Receiver() as catcher:
        outputs = await sandbox_outputs(sandbox, catcher)
    assert set(outputs) == set(NAMES)
    if WRITE:
        GOLDEN.mkdir(exist_ok=True)
        for name, value in outputs.items():
            (GOLDEN / f"{name}.json").write_text(json.dumps(_hosted(value, sandbox.base_url), indent=2) + "\n")
    problems = [p for name in NAMES for p in shape_problems(golden(name), outputs[name], name)]
    assert not problems, "the sandbox departs from the golden wire shapes:\n" + "\n".join(problems)


# -- the connector reads every golden ----------------------------------------------------------------

MODELS: dict[str, type[models.WireModel]] = {
    "request_record": models.RequestRecord,
    "requests_create_result": models.RequestCreated,
    "submissions_list_page": models.SubmissionPage,
    "event_request_completed": models.Event,
    "event_submission_completed": models.Event,
}


@pytest.mark.parametrize("name", MODELS)
def test_the_connector_models_read_every_golden_member(name):
    data = golden(name)
    model = MODELS[name]
    parsed = model.model_validate(data)
    unknown = set(data) - wire_names(model)
    assert not unknown, f"{model.__name__} does not know the golden's members {sorted(unknown)}"
    assert parsed.model_dump(mode="json", exclude_unset=True).keys() == data.keys()


def test_request_record_golden_parses_to_its_values():
    data = golden("request_record")
    rec = models.RequestRecord.model_validate(data)
    assert (rec.id, rec.status, rec.externalId, rec.metadata) == (data["id"], "completed", "crm-42",
                                                                   {"runId": "run-42"})
    assert rec.answers == data["answers"] and rec.display == data["display"]
    assert rec.recipient is not None and rec.recipient.email == "ada@example.test"
    assert rec.timeline and {e.type for e in rec.timeline} >= {"created", "completed"}


def test_requests_create_golden_parses_to_its_values():
    data = golden("requests_create_result")
    got = models.RequestCreated.model_validate(data)
    assert (got.id, got.url, got.status, got.externalId) == (data["id"], data["url"], "pending", "crm-42")


def test_submissions_page_golden_parses_and_paginates():
    data = golden("submissions_list_page")
    page = models.SubmissionPage.model_validate(data)
    assert page.has_more and page.next_cursor == data["nextCursor"]
    [item] = page.items
    assert item.id == data["items"][0]["id"] and item.answers == data["items"][0]["answers"]
    assert set(data["items"][0]) <= wire_names(models.Submission)


@pytest.mark.parametrize(("name", "type_"), [("event_request_completed", "request.completed"),
                                              ("event_submission_completed", "submission.completed")])
def test_event_goldens_parse_in_the_models_and_the_receiver(name, type_):
    raw = (GOLDEN / f"{name}.json").read_bytes()
    data = json.loads(raw)
    for event in (models.Event.model_validate(data), parse_event(raw)):
        assert (event.id, event.type, event.test) == (data["id"], type_, False)
        assert event.data.form is not None and event.data.form.id == data["data"]["form"]["id"]
        assert event.data.submission is not None and event.data.submission.id == data["data"]["submission"]["id"]
        assert event.data.answers == data["data"]["answers"]
        assert (event.data.request is not None) == (type_ == "request.completed")
    blocks = data["data"]
    for block, model in (("form", models.EventForm), ("submission", models.EventSubmission),
                         ("request", models.EventRequest)):
        if block in blocks:
            unknown = set(blocks[block]) - wire_names(model)
            assert not unknown, f"{model.__name__} does not know {sorted(unknown)}"


def test_error_envelope_golden_becomes_its_exception():
    data = golden("error_envelope")
    assert data["ok"] is False
    err = errors.from_envelope(data["error"], 400, "requests.create")
    assert isinstance(err, errors.ValidationError)
    assert (err.code, err.reason, err.field) == ("VALIDATION_ERROR", "UNKNOWN_FIELD_KEY", "prefill.nickname")
    assert err.details["validKeys"] == data["error"]["details"]["validKeys"] and err.message


# -- the comparison itself ------------------------------------------------------------------------------


def test_shape_problems_name_each_departure():
    g = {"id": "req_" + "a" * 22, "type": "request.completed", "n": 1, "at": "2026-01-01T00:00:00.000Z",
         "url": "http://127.0.0.1:8787/r/rq_x", "items": [{"k": "v"}], "x": None}
    same = {"id": "req_" + "B" * 22, "type": "request.completed", "n": 7, "at": "2027-02-03T04:05:06.789Z",
            "url": "https://f.example/r/rq_y", "items": [{"k": "w"}, {"k": "z"}], "x": None}
    assert shape_problems(g, same) == []
    bad = {**same, "id": "sub_" + "B" * 22, "type": "request.expired", "n": "7", "at": "yesterday",
           "url": "https://f.example/f/abc", "items": [{"k": 1}], "extra": True}
    del bad["x"]
    got = "\n".join(shape_problems(g, bad))
    for expected in ("$.id", "$.type", "$.n", "$.at", "$.url", "$.items[0].k", "missing key 'x'",
                     "'extra' is not in the golden"):
        assert expected in got, (expected, got)
