"""Spec "Versioning" 4: the OpenAPI 3.1 document at GET /api/v1/openapi.json describes
every method, with params schemas generated from the models that validate the calls."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate as validate_openapi

from formservice.domain.base import METHODS

BODY_POINTER = "#/paths/~1api~1v1/post/requestBody/content/application~1json/schema"


@pytest.fixture
async def doc(sandbox) -> dict[str, Any]:
    async with sandbox.http.get(sandbox.base_url + "/api/v1/openapi.json") as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        return await resp.json()


def resolve(doc: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"only local refs are used: {ref}"
    node: Any = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, f"{ref} does not resolve (no {part!r})"
        node = node[part]
    return node


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


def call_schemas(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-method envelope schemas of the request body, keyed by method name."""
    body = resolve(doc, BODY_POINTER)
    out = {}
    for alt in body["oneOf"]:
        schema = resolve(doc, alt["$ref"]) if "$ref" in alt else alt
        out[schema["properties"]["method"]["const"]] = schema
    return out


def params_schema(doc: dict[str, Any], method: str) -> dict[str, Any]:
    p = call_schemas(doc)[method]["properties"]["params"]
    if "anyOf" in p:  # a method that needs no params takes null too (read as omitted)
        p = next(a for a in p["anyOf"] if a.get("type") != "null")
    return resolve(doc, p["$ref"]) if "$ref" in p else p


async def test_params_may_be_null_exactly_where_they_may_be_omitted(doc, sandbox):
    for name, schema in call_schemas(doc).items():
        nullable = {"type": "null"} in schema["properties"]["params"].get("anyOf", [])
        assert nullable == ("params" not in schema["required"]), name
    assert (await sandbox.post("/api/v1", {"method": "me.get", "params": None}, token=sandbox.pro.token)).ok
    refused = await sandbox.post("/api/v1", {"method": "forms.get", "params": None}, token=sandbox.pro.token)
    refused.expect("VALIDATION_ERROR", 400)


async def test_document_is_openapi_3_1_and_valid(doc):
    assert doc["openapi"].startswith("3.1")
    assert doc["info"]["title"] and doc["info"]["version"]
    validate_openapi(doc)  # raises on any violation of the OpenAPI 3.1 schema


async def test_every_ref_resolves(doc):
    found = refs(doc)
    assert found, "the document uses component refs"
    for ref in found:
        resolve(doc, ref)


async def test_every_method_is_in_the_request_body(doc):
    calls = call_schemas(doc)
    assert sorted(calls) == sorted(METHODS)
    body = resolve(doc, BODY_POINTER)
    mapping = body["discriminator"]["mapping"]
    assert sorted(mapping) == sorted(METHODS)
    for name, schema in calls.items():
        assert schema["properties"]["params"], name
        assert schema["additionalProperties"] is False


async def test_params_schemas_come_from_the_models(doc):
    for name, m in METHODS.items():
        schema = params_schema(doc, name)
        assert schema["type"] == "object", name
        assert schema.get("additionalProperties") is False, f"{name}: unknown params are refused"
        assert set(schema.get("properties", {})) == set(m.params.model_fields), name
        required = {k for k, f in m.params.model_fields.items() if f.is_required()}
        assert set(schema.get("required", [])) == required, name
        envelope_required = set(call_schemas(doc)[name]["required"])
        assert ("params" in envelope_required) == bool(required), f"{name}: params may be omitted only when empty"


async def test_forms_list_limit_bounds(doc):
    props = params_schema(doc, "forms.list")["properties"]
    limit = props["limit"]
    assert limit["type"] == "integer"
    assert limit["minimum"] == 1 and limit["maximum"] == 100 and limit["default"] == 20
    assert params_schema(doc, "forms.list")["required"] == ["workspaceId"]


async def test_no_pydantic_only_keywords_leak(doc):
    def walk(node: Any, names: bool = False) -> None:
        if isinstance(node, dict):
            if not names:
                leaked = {"ge", "le", "gt", "lt"} & set(node)
                assert not leaked, f"non-JSON-Schema keywords {leaked} in {node}"
            for k, v in node.items():
                walk(v, names=not names and k == "properties")
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc["components"]["schemas"])
    offset = resolve(doc, "#/components/schemas/CoverImage")["properties"]["offsetY"]
    assert offset["minimum"] == 0 and offset["maximum"] == 100


async def test_schema_agrees_with_the_server(sandbox, doc):
    """Bodies the document accepts are accepted by the server's params check, and bodies it
    refuses are refused with VALIDATION_ERROR."""
    validator = Draft202012Validator({**doc, "$ref": BODY_POINTER})
    form = sandbox.pro.forms["Contact"]
    good = [
        {"method": "forms.list", "params": {"workspaceId": sandbox.pro.id, "limit": 100}},
        {"method": "forms.get", "params": {"formId": form}},
        {"method": "forms.update", "params": {"formId": form, "cover": {"type": "color", "color": "#123456"}}},
        {"method": "me.get"},
    ]
    bad = [
        {"method": "forms.list", "params": {"workspaceId": sandbox.pro.id, "limit": 101}},
        {"method": "forms.list", "params": {"workspaceId": sandbox.pro.id, "limt": 5}},
        {"method": "forms.list", "params": {}},
        {"method": "forms.update", "params": {"formId": form, "cover": {"type": "image", "url": "https://x.test/i",
                                                                         "offsetY": 101}}},
        {"method": "forms.update", "params": {"formId": form, "logo": {"type": "icon", "name": "Nope"}}},
    ]
    for body in good:
        assert not list(validator.iter_errors(body)), body
        r = await sandbox.post("/api/v1", body, token=sandbox.pro.token)
        assert r.status == 200, (body, r.body)
    for body in bad:
        assert list(validator.iter_errors(body)), f"the document should refuse {body}"
        r = await sandbox.post("/api/v1", body, token=sandbox.pro.token)
        r.expect("VALIDATION_ERROR", 400)


async def test_error_schema_lists_the_closed_code_set(doc):
    codes = resolve(doc, "#/components/schemas/Error")["properties"]["error"]["properties"]["code"]["enum"]
    assert sorted(codes) == sorted(["VALIDATION_ERROR", "UNAUTHORIZED", "UPGRADE_REQUIRED", "FORBIDDEN",
                                    "NOT_FOUND", "METHOD_NOT_FOUND", "CONFLICT", "RATE_LIMITED",
                                    "INTERNAL_ERROR"])
    responses = doc["paths"]["/api/v1"]["post"]["responses"]
    assert {"200", "400", "401", "402", "403", "404", "409", "429", "500"} <= set(responses)
