"""Property tests of params validation and the envelope: whatever a client sends, the
answer is a well-formed response with a code from the closed set, never INTERNAL_ERROR.

One sandbox serves each whole property test (hypothesis runs many examples per test), with
the rate limit raised so throttling never masks a result."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from formservice.domain.base import METHODS
from tests.conftest import Reply, Sandbox, start_sandbox

SPEC_STATUS = {
    "VALIDATION_ERROR": 400,
    "UNAUTHORIZED": 401,
    "UPGRADE_REQUIRED": 402,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_FOUND": 404,
    "CONFLICT": 409,
    "RATE_LIMITED": 429,
}
PER_METHOD_EXAMPLES = 25
ENVELOPE_EXAMPLES = 150


class Runner:
    """A sandbox driven from synchronous hypothesis tests through its own event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sandbox: Sandbox) -> None:
        self.loop = loop
        self.sandbox = sandbox

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def post(self, raw: bytes) -> Reply:
        return self.run(self.sandbox.post("/api/v1", raw=raw, token=self.sandbox.pro.token))


@contextmanager
def running_sandbox(tmp_path: Path) -> Iterator[Runner]:
    loop = asyncio.new_event_loop()
    server, sb = loop.run_until_complete(start_sandbox(tmp_path / "sandbox"))
    runner = Runner(loop, sb)
    try:
        r = runner.run(sb.helper("limits.set", {"callsPerMinute": 10_000_000, "createsPerMinute": 10_000_000}))
        assert r.status == 200, r.body
        yield runner
    finally:
        loop.run_until_complete(sb.http.close())
        loop.run_until_complete(server.stop())
        loop.close()


def assert_well_formed(reply: Reply, sent: Any) -> None:
    """A success, or a failure from the closed set with its table status; never a 500."""
    body = reply.body
    assert isinstance(body, dict), f"not a JSON envelope: {reply.status} {body!r} for {sent!r}"
    if body.get("ok") is True:
        assert reply.status == 200 and "data" in body, (reply.status, body, sent)
        return
    assert body.get("ok") is False, (body, sent)
    err = body["error"]
    assert err["code"] != "INTERNAL_ERROR", f"INTERNAL_ERROR for {sent!r}: {err}"
    assert err["code"] in SPEC_STATUS, f"{err['code']} is outside the closed set ({sent!r})"
    assert reply.status == SPEC_STATUS[err["code"]], (reply.status, err, sent)
    assert isinstance(err["message"], str) and err["message"], (err, sent)


# -- value strategies ------------------------------------------------------------------------


def model_keys(model: type[BaseModel], seen: set[type] | None = None) -> set[str]:
    """Every field name of ``model`` and of the models nested in it, and every literal
    value they accept (tags such as ``color``): the vocabulary junk dicts draw keys from."""
    seen = seen if seen is not None else set()
    if model in seen:
        return set()
    seen.add(model)
    keys = set(model.model_fields)
    for f in model.model_fields.values():
        stack = [f.annotation]
        while stack:
            tp = stack.pop()
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                keys |= model_keys(tp, seen)
            args = get_args(tp)
            keys |= {a for a in args if isinstance(a, str)}
            stack.extend(a for a in args if not isinstance(a, str))
    return keys


VOCABULARY = sorted(set().union(*(model_keys(m.params) for m in METHODS.values())))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 100, 101, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    # lone UTF-16 surrogates: valid JSON escapes, but not Unicode text
    st.text(st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF,
                                                     exclude_categories=())), min_size=1, max_size=8),
    st.sampled_from(["", " ", "#fff", "https://x.test/a.png", "data:image/png;base64,AA==", "a" * 300,
                     "null", "1d", "en", "\x00", "<script>", "日本語", "😀"]),
)


def ids_of(sandbox: Sandbox) -> list[str]:
    """Real identifiers, so random params also reach past the lookups into the methods."""
    out = [sandbox.pro.id, sandbox.free.id, sandbox.pro.folder_id, sandbox.free.folder_id, sandbox.pro.user_id]
    out += list(sandbox.pro.forms.values()) + [sandbox.free.forms["Contact"]]
    return out


def json_values(ids: list[str]) -> st.SearchStrategy[Any]:
    leaves = st.one_of(scalars, st.sampled_from(ids), st.sampled_from(VOCABULARY))
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.one_of(st.sampled_from(VOCABULARY), st.text(max_size=8)), inner, max_size=4),
        ),
        max_leaves=12,
    )


def params_for(model: type[BaseModel], ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts mixing the method's own keys with junk values, and now and then an unknown key.
    Required keys are usually present and id-like keys usually hold real ids, so many
    examples get past the first check into the method itself."""
    values = json_values(ids)
    real_ids = st.sampled_from(ids)

    def value_for(key: str) -> st.SearchStrategy[Any]:
        return st.one_of(real_ids, real_ids, values) if key.endswith("Id") else values

    fields = model.model_fields
    required = {k: value_for(k) for k, f in fields.items() if f.is_required()}
    optional = {k: value_for(k) for k, f in fields.items() if not f.is_required()}
    shaped = st.fixed_dictionaries(required, optional=optional)
    loose = st.dictionaries(st.sampled_from(sorted(fields) or ["x"]), values, max_size=6)
    junk = st.dictionaries(st.text(min_size=1, max_size=10), values, max_size=2)
    return st.tuples(st.one_of(shaped, shaped, loose), st.one_of(st.just({}), st.just({}), junk)).map(
        lambda ab: {**ab[1], **ab[0]})


# -- the properties ---------------------------------------------------------------------------


def params_property(runner: Runner, name: str, ids: list[str]) -> Any:
    """The hypothesis test of one method: random params never give INTERNAL_ERROR."""

    @settings(max_examples=PER_METHOD_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(params=params_for(METHODS[name].params, ids))
    def check(params: dict[str, Any]) -> None:
        sent = {"method": name, "params": params}
        assert_well_formed(runner.post(json.dumps(sent).encode()), sent)

    return check


def test_random_params_never_internal_error(tmp_path):
    with running_sandbox(tmp_path) as runner:
        ids = ids_of(runner.sandbox)
        for name in sorted(METHODS):
            params_property(runner, name, ids)()


def test_valid_keys_with_each_json_type_never_internal_error(tmp_path):
    """Each param of each method, alone with a real formId/workspaceId, set to one value of
    every JSON type: the cases random search may miss on a big method."""
    with running_sandbox(tmp_path) as runner:
        sb = runner.sandbox
        values: list[Any] = [None, True, 0, -1, 10**30, 1.5, "", "x" * 300, [], ["x"], {}, {"type": "none"}]
        base = {"formId": sb.pro.forms["Contact"], "workspaceId": sb.pro.id}
        for name, m in sorted(METHODS.items()):
            fields = m.params.model_fields
            required = {k: v for k, v in base.items() if k in fields}
            for key in fields:
                for value in values:
                    sent = {"method": name, "params": {**required, key: value}}
                    assert_well_formed(runner.post(json.dumps(sent).encode()), sent)


json_texts = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["method", "params", "x"]), inner, max_size=3)),
    max_leaves=8,
).map(json.dumps)


bodies = st.one_of(
    st.binary(max_size=200),
    json_texts.map(str.encode),
    json_texts.map(lambda t: t[: max(len(t) - 1, 0)].encode()),  # truncated JSON
    st.sampled_from(sorted(METHODS)).map(lambda n: json.dumps({"method": n}).encode()),
    st.text(max_size=50).map(lambda n: json.dumps({"method": n, "params": {}}).encode()),
)


def test_random_bodies_never_internal_error(tmp_path):
    with running_sandbox(tmp_path) as runner:

        @settings(max_examples=ENVELOPE_EXAMPLES, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow])
        @given(raw=bodies)
        def check(raw: bytes) -> None:
            assert_well_formed(runner.post(raw), raw)

        check()
