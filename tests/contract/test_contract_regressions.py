"""What contract fuzzing (tests/contract/test_schemathesis.py) found where the service and
its published OpenAPI document disagreed, each pinned by a fast test, and the single-method
documents the fuzzer derives."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.conftest import Sandbox
from tests.contract.test_schemathesis import method_document, method_names
from tests.spec.test_openapi import params_schema, resolve


@pytest.fixture
async def doc(sandbox: Sandbox) -> dict[str, Any]:
    async with sandbox.http.get(sandbox.base_url + "/api/v1/openapi.json") as resp:
        return await resp.json()


def validator(doc: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator({**schema, "components": doc["components"]})


async def test_an_integral_number_is_taken_where_the_schema_says_integer(sandbox: Sandbox, doc: dict[str, Any]) -> None:
    """JSON Schema's integer takes 2.0; the service refused it ("must be an integer")."""
    limit = params_schema(doc, "forms.list")["properties"]["limit"]
    assert validator(doc, limit).is_valid(2.0)
    page = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 2.0})
    assert len(page.data["items"]) == 2
    reply = await sandbox.rpc("formSettings.update", {"formId": sandbox.pro.forms["Contact"], "maxEdits": 1e0})
    assert reply.data["maxEdits"] == 1
    # a fraction is still no integer, and says so
    (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 2.5})).expect(
        "VALIDATION_ERROR", 400, field="limit", reason="INVALID_TYPE")
    # a huge integral float is a number out of range, never a crash
    (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 1e300})).expect(
        "VALIDATION_ERROR", 400, field="limit")


@pytest.mark.parametrize("param", ["name", "cover", "logo"])
async def test_forms_update_publishes_no_null_where_it_refuses_null(
        sandbox: Sandbox, doc: dict[str, Any], param: str) -> None:
    """The schema offered null for name, cover and logo, which the service refuses."""
    schema = params_schema(doc, "forms.update")["properties"][param]
    assert not validator(doc, schema).is_valid(None)
    reply = await sandbox.rpc("forms.update", {"formId": sandbox.pro.forms["Contact"], param: None})
    err = reply.expect("VALIDATION_ERROR", 400, field=param, reason="INVALID_TYPE")
    assert "cannot be null" in err["message"]
    # what the schema does offer is taken
    value = "Renamed" if param == "name" else {"type": "none"}
    assert validator(doc, schema).is_valid(value)
    assert (await sandbox.rpc("forms.update", {"formId": sandbox.pro.forms["Contact"], param: value})).ok


async def test_each_method_document_takes_only_that_method_and_checks_its_own_result(doc: dict[str, Any]) -> None:
    names = method_names(doc)
    assert len(names) >= 30 and "requests.create" in names
    for name in names:
        one = method_document(doc, name)
        op = one["paths"]["/api/v1"]["post"]
        body = resolve(one, op["requestBody"]["content"]["application/json"]["schema"]["$ref"])
        assert body["properties"]["method"]["const"] == name
        data = op["responses"]["200"]["content"]["application/json"]["schema"]["properties"]["data"]
        envelope = resolve(doc, doc["paths"]["/api/v1"]["post"]["requestBody"]["content"]["application/json"]
                           ["schema"]["discriminator"]["mapping"][name])
        assert data == envelope.get("x-result", {})
    me = method_document(doc, "me.get")["paths"]["/api/v1"]["post"]["responses"]["200"]
    data = me["content"]["application/json"]["schema"]["properties"]["data"]
    assert "$ref" in data  # me.get publishes its result
    check = validator(doc, resolve(doc, data["$ref"]))
    assert not check.is_valid({"unexpected": True})


async def test_requests_sample_publishes_its_event_types(sandbox: Sandbox, doc: dict[str, Any]) -> None:
    """eventType was a bare string in the schema; only three values are taken."""
    schema = params_schema(doc, "requests.sample")["properties"]["eventType"]
    assert schema["enum"] == ["request_completed", "request_expired", "request_canceled"]
    form = sandbox.pro.forms["Contact"]
    for event_type in schema["enum"]:
        assert (await sandbox.rpc("requests.sample", {"formId": form, "eventType": event_type})).ok
    (await sandbox.rpc("requests.sample", {"formId": form, "eventType": "request_sent"})).expect(
        "VALIDATION_ERROR", 400, field="eventType", reason="INVALID_VALUE")
