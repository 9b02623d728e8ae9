"""Contract fuzzing: schemathesis generates calls of every method from the OpenAPI document
a running sandbox (``formsync sandbox``, a subprocess) publishes at /api/v1/openapi.json,
valid ones and invalid ones, and checks every answer: never a 5xx, always the published
schema (the method's own result on success, the Error shape otherwise), and an error code
from the closed set whose HTTP status is that code's, INTERNAL_ERROR never.

The document has one operation (POST /api/v1) whose body is one of the per-method
envelopes (``method`` is the discriminator, ``x-result`` names each method's result). To
reach every method with a bounded number of examples each, the test derives one
single-method document per method from it. Generated ids rarely exist, so some calls get
the ids of the seeded workspace's real objects instead, to reach the success paths."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from formservice.errors import CODES, HTTP_STATUS

FORMSYNC = Path(sys.executable).parent / "formsync"
EXAMPLES = {GenerationMode.POSITIVE: 20, GenerationMode.NEGATIVE: 10}  # per method
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
STATS: Counter[str] = Counter()  # across the module: calls made, by outcome
REFUSED: Counter[str] = Counter()  # valid-by-schema calls refused, by method and reason
SHAPE_REASONS = frozenset({"REQUIRED", "INVALID_TYPE", "UNKNOWN_PARAM"})


class LiveSandbox:
    def __init__(self, base_url: str, token: str, ids: dict[str, list[str]]) -> None:
        self.base_url = base_url
        self.token = token
        self.ids = ids
        self.http = requests.Session()

    def call(self, path: str, method: str, params: dict[str, Any]) -> Any:
        resp = self.http.post(self.base_url + path, json={"method": method, "params": params},
                              headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        body = resp.json()
        assert body["ok"], f"{method}: {body}"
        return body["data"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSandbox]:
    """``formsync sandbox`` on a free port, its rate limits raised so that no 429 hides an
    answer, and a few real objects to aim calls at."""
    root = tmp_path_factory.mktemp("contract")
    creds_file = root / "creds.json"
    proc = subprocess.Popen([str(FORMSYNC), "sandbox", "--port", "0", "--data-dir", str(root / "data"),
                             "--credentials-file", str(creds_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not creds_file.exists() or not creds_file.read_text().strip().endswith("}"):
            assert proc.poll() is None, f"the sandbox exited: {proc.stderr.read().decode() if proc.stderr else ''}"
            assert time.monotonic() < deadline, "the sandbox did not start within 60 s"
            time.sleep(0.1)
        creds = json.loads(creds_file.read_text())
        ws = next(w for w in creds["workspaces"] if w["plan"] == "business")
        sb = LiveSandbox(creds["baseUrl"], ws["token"], {})
        sb.call("/api/sandbox", "limits.set", {"callsPerMinute": 1_000_000, "createsPerMinute": 1_000_000,
                                                "failedAuth": 1_000_000})
        sb.ids = seed_objects(sb, ws)
        yield sb
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        print("contract fuzzing:", dict(STATS))
        print("refused by rules the schema cannot state:", dict(REFUSED.most_common()))


def seed_objects(sb: LiveSandbox, ws: dict[str, Any]) -> dict[str, list[str]]:
    """Real ids by param name: the workspace, its folder, its forms, and a request, a
    submission, a share link and a webhook of a published form."""
    forms = sb.call("/api/v1", "forms.list", {"workspaceId": ws["id"]})["items"]
    published = [f["id"] for f in forms if f.get("isPublished")]
    subs = [s["id"] for f in published for s in sb.call("/api/v1", "submissions.list", {"formId": f})["items"]]
    request = sb.call("/api/v1", "requests.create", {"formId": published[0], "idempotencyKey": "contract"})
    link = sb.call("/api/v1", "shareLinks.create", {"formId": published[0]})
    hook = sb.call("/api/v1", "webhooks.create", {"formId": published[0], "targetUrl": "https://example.test/hook",
                                                  "provider": "zapier"})
    ids = {"workspaceId": [ws["id"]], "folderId": [ws["folderId"]], "formId": [*published, *ws["forms"].values()],
           "requestId": [request["id"]], "submissionId": subs[:5],
           "shareLinkId": [link["id"]], "subscriptionId": [hook["subscriptionId"]]}
    return {k: v for k, v in ids.items() if v}


def method_names(doc: dict[str, Any]) -> list[str]:
    body = doc["paths"]["/api/v1"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return sorted(body["discriminator"]["mapping"])


def method_document(doc: dict[str, Any], method: str) -> dict[str, Any]:
    """``doc`` narrowed to one method: its envelope as the body, and on 200 its own result."""
    out = copy.deepcopy(doc)
    op = out["paths"]["/api/v1"]["post"]
    body = op["requestBody"]["content"]["application/json"]
    ref = body["schema"]["discriminator"]["mapping"][method]
    body["schema"] = {"$ref": ref}
    envelope = out["components"]["schemas"][ref.rsplit("/", 1)[1]]
    result = envelope.pop("x-result", {})
    op["operationId"] = method
    op["responses"]["200"]["content"]["application/json"]["schema"] = {
        "type": "object", "properties": {"ok": {"const": True}, "data": result}, "required": ["ok", "data"]}
    return out


@pytest.fixture(scope="module")
def document(live: LiveSandbox) -> dict[str, Any]:
    resp = requests.get(live.base_url + "/api/v1/openapi.json", timeout=30)
    assert resp.status_code == 200
    return resp.json()


def check_error_code(response: requests.Response) -> None:
    """A failure's code is in the closed set, its status is the code's, and it is never
    INTERNAL_ERROR (the sandbox has no failure it cannot name)."""
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("ok"), bool), body
    if body["ok"]:
        assert response.status_code == 200, body
        return
    code = body["error"]["code"]
    assert code in CODES, f"code {code} is outside the closed set"
    assert HTTP_STATUS[code] == response.status_code, f"{code} answered with HTTP {response.status_code}"
    assert code != "INTERNAL_ERROR", body
    assert body["error"]["message"], body


def aim(params: Any, ids: dict[str, list[str]], draw: Any) -> Any:
    """``params`` with, now and then, a real id where it names one."""
    if not isinstance(params, dict):
        return params
    out = dict(params)
    for key, value in params.items():
        if key in ids and isinstance(value, str) and draw(st.booleans()):
            out[key] = draw(st.sampled_from(ids[key]))
    return out


def fuzz(live: LiveSandbox, document: dict[str, Any], method: str, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_dict(method_document(document, method))
    operation = schema["/api/v1"]["POST"]
    headers = {"Authorization": f"Bearer {live.token}"}

    @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
    @settings(max_examples=EXAMPLES[mode], deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def run(case: Any, data: st.DataObject) -> None:
        if mode is GenerationMode.POSITIVE and isinstance(case.body, dict):
            case.body = {**case.body, "params": aim(case.body.get("params"), live.ids, data.draw)}
        response = case.call(base_url=live.base_url, session=live.http, headers=headers, timeout=30)
        checks = CHECKS + ([negative_data_rejection] if mode is GenerationMode.NEGATIVE else [])
        case.validate_response(response, checks=checks, headers=headers)
        check_error_code(response)
        body = response.json()
        STATS[f"{mode.value} calls"] += 1
        STATS[f"{mode.value} {'ok' if body['ok'] else body['error']['code']}"] += 1
        if mode is GenerationMode.POSITIVE and not body["ok"] and body["error"]["code"] == "VALIDATION_ERROR":
            reason = body["error"].get("details", {}).get("reason")
            # The schema allowed these params: a refusal may name a rule it cannot state
            # (a pattern, a pair of params, the time), never a type or a key it published.
            assert reason not in SHAPE_REASONS, f"{method} refused params its schema allows: {body['error']}"
            REFUSED[f"{method} {reason}"] += 1

    run()


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
def test_every_method_answers_within_the_contract(live: LiveSandbox, document: dict[str, Any],
                                                  mode: GenerationMode) -> None:
    names = method_names(document)
    assert len(names) >= 30  # the whole API, not a stub
    failures = []
    for method in names:
        try:
            fuzz(live, document, method, mode)
        except Exception as exc:  # collect every method's first failure, then report them all
            failures.append(f"{method}: {type(exc).__name__}: {str(exc)[:1500]}")
    assert not failures, "\n\n".join(failures)
