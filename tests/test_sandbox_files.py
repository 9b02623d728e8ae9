"""The ``files.create`` helper: a file answer made without a page, served by the storage
URL it names, taken by ``submissions.create`` and ``requests.complete``."""

from __future__ import annotations

import base64


async def test_files_create_answers_a_file_object_that_file_answers_take(sandbox):
    content = b"%PDF-1.4\n" + bytes(range(256)) * 40
    made = await sandbox.helpers.files_create("invoice.pdf", content, "application/pdf")
    assert (made.name, made.type, made.size) == ("invoice.pdf", "application/pdf", len(content))
    async with sandbox.http.get(made.url) as resp:
        assert resp.status == 200 and await resp.read() == content
        assert resp.headers["Content-Type"] == "application/pdf"

    form = sandbox.pro.forms["Everything"]
    answer = [made.model_dump()]
    await sandbox.helpers.submissions_create(form, {"attachment": answer}, completed=False)
    listed = (await sandbox.rpc("submissions.list", {"formId": form})).data["items"]
    assert listed[0]["answers"]["attachment"] == answer and listed[0]["display"]["attachment"] == "invoice.pdf"

    made = (await sandbox.rpc("requests.create", {"formId": form, "test": True})).data
    sig = await sandbox.helpers.files_create("sig.png", b"\x89PNG\r\n\x1a\n", "image/png")
    done = await sandbox.helpers.requests_complete(made["id"], {
        "signature": [sig.model_dump()], "plan": "basic", "full_name": "Ada", "email": "ada@example.com"})
    assert done.answers["signature"] == [sig.model_dump()]


async def test_files_create_refuses_what_is_not_base64_and_stores_nothing(sandbox):
    r = await sandbox.helper("files.create", {"name": "a.bin", "contentBase64": "not base64!"})
    r.expect("VALIDATION_ERROR", 400, field="contentBase64", reason="INVALID_FORMAT")
    r = await sandbox.helper("files.create", {"name": "", "contentBase64": base64.b64encode(b"x").decode()})
    r.expect("VALIDATION_ERROR", 400, field="name")
    r = await sandbox.helper("files.create", {"name": "a", "type": "pdf", "contentBase64": "eA=="})
    r.expect("VALIDATION_ERROR", 400, field="type")
