"""Spec "Envelope" and "Errors": the body a call sends, the shapes a success and a failure
come back in, the HTTP status of each error code, and the details that name the cause."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Literal

import pytest
from pydantic import Field

from formservice.domain.base import METHODS, Params
from formservice.domain.forms import Cover
from formservice.errors import ApiError
from formservice.validation import parse_params

# The spec's error table, written out here (not imported) so the service cannot drift from it.
SPEC_STATUS = {
    "VALIDATION_ERROR": 400,
    "UNAUTHORIZED": 401,
    "UPGRADE_REQUIRED": 402,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_FOUND": 404,
    "CONFLICT": 409,
    "RATE_LIMITED": 429,
    "INTERNAL_ERROR": 500,
}
MIB = 1024 * 1024


def assert_failure_shape(reply) -> None:
    """A failure is exactly {ok: false, error: {code, message, details?}}, its code is in
    the closed set and its HTTP status is the one the error table gives that code."""
    body = reply.body
    assert isinstance(body, dict) and set(body) == {"ok", "error"}, body
    assert body["ok"] is False
    err = body["error"]
    assert set(err) <= {"code", "message", "details"} and {"code", "message"} <= set(err), err
    assert err["code"] in SPEC_STATUS, f"{err['code']} is outside the closed code set"
    assert reply.status == SPEC_STATUS[err["code"]], (reply.status, err)
    assert isinstance(err["message"], str) and err["message"].strip()
    if "details" in err:
        assert isinstance(err["details"], dict) and err["details"], "details, when present, name a cause"


async def post_raw(sandbox, raw: bytes, token: str | None = None):
    return await sandbox.post("/api/v1", raw=raw, token=token or sandbox.pro.token)


# -- success ---------------------------------------------------------------------------


async def test_success_is_ok_true_with_data(sandbox):
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 2})
    assert r.status == 200
    assert set(r.body) == {"ok", "data"} and r.body["ok"] is True
    assert len(r.data["items"]) == 2 and r.data["hasMore"] is True


async def test_params_may_be_omitted(sandbox):
    # the conftest helper sends no "params" key at all when params is None
    r = await post_raw(sandbox, json.dumps({"method": "me.get"}).encode())
    assert r.status == 200 and r.data["email"] == "owner@pro.example.test"


async def test_params_null_counts_as_omitted(sandbox):
    r = await post_raw(sandbox, b'{"method": "me.get", "params": null}')
    assert r.status == 200 and set(r.data) == {"id", "email", "name"}


async def test_omitted_params_still_checked_for_required_fields(sandbox):
    r = await sandbox.rpc("forms.get")
    r.expect("VALIDATION_ERROR", 400, field="formId", reason="REQUIRED")
    assert_failure_shape(r)


# -- body size -------------------------------------------------------------------------


def padded_me_get(size: int) -> bytes:
    """A valid me.get envelope padded with trailing whitespace to exactly ``size`` bytes."""
    core = b'{"method": "me.get"}'
    return core + b" " * (size - len(core))


async def test_body_of_exactly_1_mib_is_accepted(sandbox):
    r = await post_raw(sandbox, padded_me_get(MIB))
    assert r.status == 200, r.body
    assert r.data["email"] == "owner@pro.example.test"


async def test_body_over_1_mib_is_refused(sandbox):
    r = await post_raw(sandbox, padded_me_get(MIB + 1))
    r.expect("VALIDATION_ERROR", 400, reason="BODY_TOO_LARGE")
    assert "1 MiB" in r.error["message"]
    assert_failure_shape(r)


async def test_chunked_body_over_1_mib_is_refused(sandbox):
    # no Content-Length: the limit must hold while the body streams in
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"method": "me.get", "params": {}}'
        for _ in range(17):
            yield b" " * (64 * 1024)

    async with sandbox.http.post(sandbox.base_url + "/api/v1", data=chunks(),
                                 headers={"Authorization": f"Bearer {sandbox.pro.token}",
                                          "Content-Type": "application/json"}) as resp:
        body = await resp.json()
    assert resp.status == 400
    assert body["error"]["code"] == "VALIDATION_ERROR"
    assert body["error"]["details"]["reason"] == "BODY_TOO_LARGE"


# -- malformed envelopes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason", "says"),
    [
        (b"", "EMPTY_BODY", "empty"),
        (b"{\"method\": ", "MALFORMED_JSON", "not valid JSON"),
        (b"{'method': 'me.get'}", "MALFORMED_JSON", "not valid JSON"),
        (b'{"method": "me.get", "params": {"x": NaN}}', "MALFORMED_JSON", "NaN"),
        (b'{"method": "me.get", "params": {"x": 1e999}}', "MALFORMED_JSON", "out of range"),
        (b"[" * 5000 + b"]" * 5000, "TOO_DEEP", "deeper"),
        (b'[{"method": "me.get"}]', "INVALID_ENVELOPE", "not an array"),
        (b'"me.get"', "INVALID_ENVELOPE", "not a string"),
        (b"42", "INVALID_ENVELOPE", "not a number"),
        (b"null", "INVALID_ENVELOPE", "not null"),
    ],
    ids=["empty", "truncated", "single-quotes", "nan", "overflow", "too-deep", "array", "string", "number",
         "null"],
)
async def test_malformed_body_is_a_validation_error(sandbox, raw, reason, says):
    r = await post_raw(sandbox, raw)
    r.expect("VALIDATION_ERROR", 400, reason=reason)
    assert says in r.error["message"], r.error["message"]
    assert_failure_shape(r)


async def test_lone_surrogate_is_refused_not_stored(sandbox):
    raw = json.dumps({"method": "forms.create",
                      "params": {"workspaceId": sandbox.pro.id, "name": "bad \ud800 name"}}).encode()
    before = (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 100})).data["items"]
    r = await post_raw(sandbox, raw)
    r.expect("VALIDATION_ERROR", 400, reason="INVALID_UNICODE")
    after = (await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 100})).data["items"]
    assert [f["id"] for f in after] == [f["id"] for f in before]


async def test_missing_method(sandbox):
    r = await post_raw(sandbox, b'{"params": {}}')
    r.expect("VALIDATION_ERROR", 400, field="method", reason="REQUIRED")
    assert '"method"' in r.error["message"]
    assert_failure_shape(r)


@pytest.mark.parametrize(("method", "got"), [(7, "a number"), (None, "null"), (["me.get"], "an array"),
                                             ("", "an empty string")])
async def test_method_must_be_a_string(sandbox, method, got):
    r = await post_raw(sandbox, json.dumps({"method": method}).encode())
    r.expect("VALIDATION_ERROR", 400, field="method", expectedType="string")
    assert got in r.error["message"], r.error["message"]
    assert_failure_shape(r)


@pytest.mark.parametrize(("params", "got"), [([], "an array"), ("x", "a string"), (3, "a number"),
                                             (True, "a boolean")])
async def test_params_must_be_an_object(sandbox, params, got):
    r = await post_raw(sandbox, json.dumps({"method": "me.get", "params": params}).encode())
    r.expect("VALIDATION_ERROR", 400, field="params", expectedType="object")
    assert got in r.error["message"], r.error["message"]
    assert_failure_shape(r)


async def test_unknown_envelope_key_is_named(sandbox):
    r = await post_raw(sandbox, b'{"method": "me.get", "parms": {}}')
    r.expect("VALIDATION_ERROR", 400, field="parms", validKeys=["method", "params"])
    assert_failure_shape(r)


# -- methods ---------------------------------------------------------------------------


async def test_unknown_method(sandbox):
    r = await sandbox.rpc("forms.lsit", {"workspaceId": sandbox.pro.id})
    r.expect("METHOD_NOT_FOUND", 404)
    assert "forms.lsit" in r.error["message"]
    assert_failure_shape(r)


async def test_error_messages_follow_the_hosted_services_patterns(sandbox):
    """Notes section 5: the messages connectors match on. NOT_FOUND says "<Thing> not
    found", METHOD_NOT_FOUND starts "Unknown method: <name>", a token of the right shape
    that does not exist is "Invalid token", a malformed one "Bad API token"."""
    r = await sandbox.rpc("forms.lsit", {})
    assert r.error["message"].startswith("Unknown method: forms.lsit")
    r = await sandbox.rpc("forms.get", {"formId": "form_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="formId")
    assert r.error["message"] == "Form not found"
    r = await sandbox.rpc("requests.get", {"requestId": "req_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="requestId")
    assert r.error["message"] == "Request not found"
    r = await sandbox.rpc("forms.list", {"workspaceId": "ws_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="workspaceId")
    assert r.error["message"] == "Workspace not found"
    r = await sandbox.rpc("webhooks.delete", {"subscriptionId": "int_0000000000000000000000"})
    r.expect("NOT_FOUND", 404, field="subscriptionId")
    assert r.error["message"] == "Webhook subscription not found"
    r = await sandbox.post("/api/v1", {"method": "me.get"}, token="fb_" + "0" * 32)
    r.expect("UNAUTHORIZED", 401, reason="INVALID_TOKEN")
    assert r.error["message"].startswith("Invalid token")
    r = await sandbox.post("/api/v1", {"method": "me.get"}, token="not-a-token")
    r.expect("UNAUTHORIZED", 401, reason="MALFORMED_TOKEN")
    assert r.error["message"].startswith("Bad API token")


async def test_unknown_api_path_is_no_route_in_the_envelope(sandbox):
    """Notes section 5: another path under /api is NOT_FOUND "No route", in the JSON
    envelope; a known path with the wrong HTTP method is still 405 with Allow."""
    for path in ("/api/v2", "/api/v1/forms.list", "/api/nothing"):
        r = await sandbox.post(path, {"method": "forms.list", "params": {}}, token=sandbox.pro.token)
        r.expect("NOT_FOUND", 404, reason="NO_ROUTE")
        assert_failure_shape(r)
        assert r.error["message"].startswith(f"No route: POST {path}") and "/api/v1" in r.error["message"]
    async with sandbox.http.get(sandbox.base_url + "/api/v1") as resp:
        assert resp.status == 405 and resp.headers["Allow"] == "POST"
    async with sandbox.http.post(sandbox.base_url + "/api/uploads/upl_whatever") as resp:
        assert resp.status == 405 and resp.headers["Allow"] == "PUT", "placeholders match too"
    async with sandbox.http.get(sandbox.base_url + "/api/v1/openapi.json") as resp:
        assert resp.status == 200, "the routes before the catch-all still answer"


async def test_methods_list_names_every_registered_method(sandbox):
    r = await sandbox.rpc("methods.list")
    assert r.status == 200
    assert sorted(r.data["methods"]) == sorted(METHODS)
    assert [i["name"] for i in r.data["items"]] == sorted(METHODS)
    assert all(i["summary"] for i in r.data["items"])


async def test_every_listed_method_is_callable(sandbox):
    # a listed name never answers METHOD_NOT_FOUND, whatever its params
    names = (await sandbox.rpc("methods.list")).data["methods"]
    for name in names:
        r = await sandbox.rpc(name, {})
        assert r.status != 404 or r.code != "METHOD_NOT_FOUND", (name, r.body)


async def test_me_get(sandbox):
    r = await sandbox.rpc("me.get", ws="free")
    assert r.status == 200
    assert set(r.data) == {"id", "email", "name"}
    assert r.data["id"] == sandbox.free.user_id
    assert r.data["email"] == "owner@free.example.test"


async def test_workspaces_list_has_exactly_the_token_workspace(sandbox):
    for plan in ("free", "pro", "business"):
        r = await sandbox.rpc("workspaces.list", ws=plan)
        assert r.status == 200
        ws = sandbox.workspaces[plan]
        assert r.data["items"] == [{"id": ws.id, "name": ws.name}]
        assert r.data["hasMore"] is False


# -- params errors -----------------------------------------------------------------------


async def test_unknown_param_names_field_and_valid_keys(sandbox):
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limt": 5})
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_PARAM", field="limt")
    assert r.details["validKeys"] == sorted(["workspaceId", "folderId", "query", "limit", "cursor"])
    assert "Did you mean limit?" in r.error["message"]
    assert_failure_shape(r)


async def test_nested_unknown_param_is_dotted(sandbox):
    form_id = sandbox.pro.forms["Contact"]
    before = (await sandbox.rpc("forms.get", {"formId": form_id})).data
    r = await sandbox.rpc("forms.update", {"formId": form_id, "name": "Renamed",
                                           "cover": {"type": "color", "color": "#112233", "bad": 1}})
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_PARAM", field="cover.bad", validKeys=["color", "type"])
    assert "cover.bad" in r.error["message"]
    after = (await sandbox.rpc("forms.get", {"formId": form_id})).data
    assert after == before, "a refused update changes nothing, not even the name sent with it"


async def test_nested_unknown_param_in_other_union_member(sandbox):
    r = await sandbox.rpc("forms.update", {"formId": sandbox.pro.forms["Contact"],
                                           "logo": {"type": "icon", "name": "HeartIcon", "size": 3}})
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_PARAM", field="logo.size", validKeys=["name", "type"])


async def test_wrong_type_names_expected_type(sandbox):
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": "10"})
    r.expect("VALIDATION_ERROR", 400, field="limit", reason="INVALID_TYPE", expectedType="integer")
    assert "not a string" in r.error["message"]
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": True})
    r.expect("VALIDATION_ERROR", 400, field="limit", expectedType="integer")
    r = await sandbox.rpc("forms.get", {"formId": 12})
    r.expect("VALIDATION_ERROR", 400, field="formId", expectedType="string")
    assert_failure_shape(r)


async def test_wrong_type_in_a_union_field_names_it_once(sandbox):
    # offsetY is int | float: one problem at cover.offsetY, not one per union member
    r = await sandbox.rpc("forms.update", {"formId": sandbox.pro.forms["Contact"],
                                           "cover": {"type": "image", "url": "https://x.test/a.png",
                                                     "offsetY": "top"}})
    r.expect("VALIDATION_ERROR", 400, field="cover.offsetY", expectedType="number")
    assert "more problem" not in r.error["message"]


async def test_wrong_enum_names_valid_values(sandbox):
    r = await sandbox.rpc("forms.update", {"formId": sandbox.pro.forms["Contact"],
                                           "logo": {"type": "icon", "name": "SmileIcon"}})
    r.expect("VALIDATION_ERROR", 400, field="logo.name", reason="INVALID_VALUE")
    assert "HeartIcon" in r.details["validValues"] and len(r.details["validValues"]) == 14
    assert_failure_shape(r)


async def test_wrong_variant_tag_names_valid_values(sandbox):
    r = await sandbox.rpc("forms.update", {"formId": sandbox.pro.forms["Contact"],
                                           "cover": {"type": "gradient"}})
    r.expect("VALIDATION_ERROR", 400, field="cover.type", reason="INVALID_VALUE",
             validValues=["color", "image", "none"])
    r = await sandbox.rpc("forms.update", {"formId": sandbox.pro.forms["Contact"],
                                           "cover": {"color": "#fff"}})
    r.expect("VALIDATION_ERROR", 400, field="cover.type", reason="REQUIRED",
             validValues=["color", "image", "none"])


async def test_out_of_range_is_named(sandbox):
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limit": 101})
    r.expect("VALIDATION_ERROR", 400, field="limit", reason="OUT_OF_RANGE")
    assert "100" in r.error["message"]
    r = await sandbox.rpc("forms.update", {"formId": sandbox.pro.forms["Contact"],
                                           "cover": {"type": "image", "url": "https://x.test/a.png",
                                                     "offsetY": 101}})
    r.expect("VALIDATION_ERROR", 400, field="cover.offsetY", reason="OUT_OF_RANGE")


async def test_unknown_param_reported_before_other_problems(sandbox):
    # a typo explains the rest, so it is named first
    r = await sandbox.rpc("forms.list", {"workspaceID": sandbox.pro.id})
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_PARAM", field="workspaceID")
    assert "Did you mean workspaceId?" in r.error["message"]


async def test_not_found_and_forbidden_follow_the_table(sandbox):
    r = await sandbox.rpc("forms.get", {"formId": "form_doesnotexist0000000000"})
    r.expect("NOT_FOUND", 404, field="formId")
    assert_failure_shape(r)
    r = await sandbox.rpc("forms.get", {"formId": sandbox.free.forms["Contact"]})
    r.expect("FORBIDDEN", 403, field="formId")
    assert_failure_shape(r)


async def test_unauthorized_follows_the_table(sandbox):
    r = await sandbox.post("/api/v1", {"method": "me.get"})
    r.expect("UNAUTHORIZED", 401)
    assert_failure_shape(r)


# -- params errors, at the unit level (nesting the seed's methods do not have) -----------------


class _Doc(Params):
    documentId: str
    name: str | None = None


class _Nested(Params):
    docs: list[_Doc] = []
    covers: list[Cover] = []
    counts: dict[str, int] = {}
    steps: Annotated[list[Literal["1d", "3d"]], Field(max_length=2)] = []
    either: int | list[int] | None = None


@pytest.mark.parametrize(
    ("params", "details"),
    [
        ({"docs": [{"documentId": "d", "bogus": 1}]},
         {"field": "docs.0.bogus", "reason": "UNKNOWN_PARAM", "validKeys": ["documentId", "name"]}),
        ({"docs": [{}]}, {"field": "docs.0.documentId", "reason": "REQUIRED"}),
        ({"covers": [{"type": "none"}, {"type": "image", "url": "https://x.test", "zz": 1}]},
         {"field": "covers.1.zz", "reason": "UNKNOWN_PARAM", "validKeys": ["offsetY", "type", "url"]}),
        ({"covers": [{"type": "q"}]},
         {"field": "covers.0.type", "reason": "INVALID_VALUE", "validValues": ["color", "image", "none"]}),
        ({"counts": {"k": "v"}}, {"field": "counts.k", "expectedType": "integer"}),
        ({"steps": ["2d"]}, {"field": "steps.0", "validValues": ["1d", "3d"]}),
        ({"steps": ["1d", "1d", "3d"]}, {"field": "steps", "reason": "OUT_OF_RANGE"}),
        ({"either": "s"}, {"field": "either", "expectedType": "integer or array"}),
        ({"either": ["s"]}, {"field": "either.0", "expectedType": "integer"}),
    ],
)
def test_parse_params_names_nested_causes(params, details):
    with pytest.raises(ApiError) as caught:
        parse_params(_Nested, params)
    err = caught.value
    assert err.code == "VALIDATION_ERROR" and err.status == 400
    for k, v in details.items():
        assert err.details.get(k) == v, (k, err.details, err.message)
    assert details["field"] in err.message


def test_parse_params_counts_other_problems():
    with pytest.raises(ApiError) as caught:
        parse_params(_Nested, {"docs": [{"documentId": "d", "name": 5}], "counts": []})
    assert "(1 more problem in params.)" in caught.value.message
