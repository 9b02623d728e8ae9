"""connector.client.agent against the sandbox's agent endpoint over loopback."""

from __future__ import annotations

import zlib

import pytest

from connector.client._pacing import DEFAULT_MARGIN
from connector.client.agent import AgentClient, AgentToolError
from connector.client.rpc import FormClient


def tiny_pdf() -> bytes:
    return b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


async def test_upload_then_attach_to_a_request_and_see_it_on_the_page(sandbox, tmp_path):
    form = sandbox.pro.forms["Approval"]
    pdf = tmp_path / "terms.pdf"
    pdf.write_bytes(tiny_pdf())
    async with AgentClient(sandbox.base_url, sandbox.pro.token) as agent:
        assert "request_create" in await agent.list_tools()
        doc_id = await agent.upload_document(form, pdf)
        assert doc_id.startswith("doc_")
        created = await agent.call("request_create", {"formId": form, "documents": [{"documentId": doc_id}]})
    req = created.get("request", created)
    record = (await sandbox.rpc("requests.get", {"requestId": req["id"]})).data
    assert record["documents"][0]["name"] == "terms.pdf"
    async with sandbox.http.get(record["url"]) as page:
        html = await page.text()
    assert page.status == 200 and "terms.pdf" in html


async def test_failure_result_raises_with_code_reason_and_suggestion(sandbox):
    async with AgentClient(sandbox.base_url, sandbox.pro.token) as agent:
        with pytest.raises(AgentToolError) as err:
            await agent.call("request_create", {"formId": sandbox.pro.forms["Contact"], "prefill": {"nope": "x"}})
    assert err.value.code == "VALIDATION_ERROR"
    assert err.value.reason == "UNKNOWN_FIELD_KEY"
    assert err.value.suggestion
    assert sandbox.pro.token not in str(err.value) and sandbox.pro.token not in repr(err.value)


async def test_a_file_that_is_not_what_it_claims_is_refused_and_not_uploaded(sandbox, tmp_path):
    fake = tmp_path / "fake.pdf"
    fake.write_bytes(b"\x89PNG\r\n\x1a\n" + zlib.compress(b"x" * 40))
    async with AgentClient(sandbox.base_url, sandbox.pro.token) as agent:
        with pytest.raises(Exception, match="HTTP 400"):
            await agent.upload_document(sandbox.pro.forms["Approval"], fake)
    assert sandbox.pro.token not in repr(AgentClient(sandbox.base_url, sandbox.pro.token))


async def test_agent_and_rpc_clients_of_one_token_share_one_pacer(sandbox):
    """Both endpoints spend one per-token budget: tool calls and JSON-RPC calls wait for
    the same windows, and document_create counts as a create like requests.create."""
    now = [0.0]
    slept: list[float] = []

    def clock() -> float:
        return now[0]

    async def sleep(seconds: float) -> None:  # a minute of waiting takes no real time
        slept.append(seconds)
        now[0] += seconds

    limits = {"calls_per_minute": 3, "creates_per_minute": 1, "clock": clock, "sleep": sleep}
    token = sandbox.pro.token
    async with FormClient(sandbox.base_url, token, **limits) as fc, \
            AgentClient(sandbox.base_url + "/", token, **limits) as agent:
        assert agent.pacer is not None and agent.pacer is fc.pacer
        pdf = tiny_pdf()
        await agent.call("document_create", {"formId": sandbox.pro.forms["Approval"], "name": "a.pdf",
                                             "contentType": "application/pdf", "size": len(pdf)})
        await fc.me()
        assert slept == []
        await fc.create_request(sandbox.pro.forms["Contact"])  # the creates window is full: it waits
        assert slept == [pytest.approx(60 + DEFAULT_MARGIN)]
        await agent.call("fields_list", {"formId": sandbox.pro.forms["Contact"]})
        await fc.me()
        assert len(slept) == 1
        await agent.call("fields_list", {"formId": sandbox.pro.forms["Contact"]})  # the 4th call in the window
        assert slept == [pytest.approx(60 + DEFAULT_MARGIN), pytest.approx(60 + DEFAULT_MARGIN)]
    assert token not in repr(agent)


async def test_an_agent_client_keeps_the_limits_and_window_a_form_client_set(sandbox):
    token = sandbox.pro.token
    async with FormClient(sandbox.base_url, token, calls_per_minute=7, creates_per_minute=3,
                          rate_window=5.0) as fc, AgentClient(sandbox.base_url, token) as agent:
        assert agent.pacer is fc.pacer
        assert (fc.pacer.calls.limit, fc.pacer.creates.limit, fc.pacer.calls.seconds) == (7, 3, 5.0)
        async with AgentClient(sandbox.base_url, token, creates_per_minute=2) as stricter:
            assert stricter.pacer is fc.pacer and fc.pacer.creates.limit == 2, "a limit it sets applies"
            assert (fc.pacer.calls.limit, fc.pacer.calls.seconds) == (7, 5.0), "the others stay"
