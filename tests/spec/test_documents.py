"""Spec "Agent endpoint" rule 3 and notes sections 5 and 7: ``documents.create`` reserves
a document and returns a presigned upload URL; the raw ``PUT`` is checked (no bearer
token, within one hour, declared Content-Type, exact size, real content of that kind,
sha256 when declared, once); ``requests.create`` takes uploaded documents only, and one
upload serves many requests."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import struct
import zlib
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlmodel import func, select

from formservice.tables import Document, StoredFile

from ..conftest import Reply

HOUR_MS = 3_600_000
MB = 1024 * 1024
TYPES = ["application/pdf", "image/png", "image/jpeg", "image/webp", "image/gif", "image/svg+xml", "image/avif",
         "image/bmp", "image/tiff"]


# -- real files, made here ------------------------------------------------------------------


def make_pdf(text: str = "Terms") -> bytes:
    """A minimal valid one-page PDF with a correct cross-reference table."""
    stream = f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def make_png(width: int = 4, height: int = 3) -> bytes:
    """A valid RGB PNG: signature, IHDR, one zlib IDAT of filtered rows, IEND."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"".join(bytes((x * 60 % 256, y * 80 % 256, 200)) for x in range(width))
                   for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


SVG = b'<?xml version="1.0" encoding="UTF-8"?>\n<!-- logo -->\n<svg xmlns="http://www.w3.org/2000/svg" ' \
      b'width="10" height="10"><rect width="10" height="10" fill="teal"/></svg>\n'

# A sample of each accepted kind: its magic bytes and some body.
SAMPLES = {
    "application/pdf": make_pdf(),
    "image/png": make_png(),
    "image/jpeg": b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 40 + b"\xff\xd9",
    "image/webp": b"RIFF" + struct.pack("<I", 30) + b"WEBPVP8 " + b"\x00" * 26,
    "image/gif": b"GIF89a\x01\x00\x01\x00\x00\x00\x00;" + b"\x00" * 8,
    "image/svg+xml": SVG,
    "image/avif": b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf" + b"\x00" * 16,
    "image/bmp": b"BM" + b"\x00" * 60,
    "image/tiff": b"II*\x00\x08\x00\x00\x00" + b"\x00" * 30,
}


# -- helpers --------------------------------------------------------------------------------


async def reserve(sandbox: Any, data: bytes, content_type: str = "application/pdf", *, form: str = "Approval",
                  ws: str = "pro", name: str = "Terms.pdf", **extra: Any) -> dict[str, Any]:
    params = {"formId": sandbox.workspaces[ws].forms[form], "name": name, "contentType": content_type,
              "size": len(data), **extra}
    r = await sandbox.rpc("documents.create", params, ws=ws)
    assert r.status == 200, r.body
    return r.data


async def put(sandbox: Any, url: str, data: Any, content_type: str | None = "application/pdf",
              headers: dict[str, str] | None = None) -> Reply:
    h = dict(headers or {})
    if content_type is not None:
        h["Content-Type"] = content_type
    async with sandbox.http.put(url, data=data, headers=h) as resp:
        return Reply(resp.status, await resp.json(content_type=None), resp.headers)


def stored(sandbox: Any, doc_id: str) -> tuple[Document, int]:
    """The document row and how many stored files exist."""
    with sandbox.service.session() as s:
        doc = s.get(Document, doc_id)
        files = s.exec(select(func.count()).select_from(StoredFile)).one()
    return doc, files


def file_count(sandbox: Any) -> int:
    with sandbox.service.session() as s:
        return s.exec(select(func.count()).select_from(StoredFile)).one()


def assert_untouched(sandbox: Any, doc_id: str, files_before: int) -> None:
    doc, files = stored(sandbox, doc_id)
    assert doc.uploaded_at is None and doc.file_id is None, "a refused upload marks nothing uploaded"
    assert files == files_before, "a refused upload stores no file"


async def uploaded(sandbox: Any, data: bytes, content_type: str = "application/pdf", **kw: Any) -> dict[str, Any]:
    doc = await reserve(sandbox, data, content_type, **kw)
    r = await put(sandbox, doc["uploadUrl"], data, content_type)
    assert r.status == 200, r.body
    return doc


async def now(sandbox: Any) -> int:
    return (await sandbox.helper("clock.get")).data["now"]


# -- documents.create ------------------------------------------------------------------------


async def test_create_returns_an_upload_url_valid_one_hour(sandbox):
    data = make_pdf()
    before = await now(sandbox)
    doc = await reserve(sandbox, data, sha256=hashlib.sha256(data).hexdigest())
    after = await now(sandbox)
    assert set(doc) == {"id", "name", "contentType", "size", "uploadUrl", "expiresAt"}
    assert re.fullmatch(r"doc_[0-9A-Za-z]{22}", doc["id"])
    assert (doc["name"], doc["contentType"], doc["size"]) == ("Terms.pdf", "application/pdf", len(data))
    assert doc["uploadUrl"].startswith(sandbox.base_url + "/api/uploads/")
    assert before + HOUR_MS <= doc["expiresAt"] <= after + HOUR_MS
    row, _ = stored(sandbox, doc["id"])
    assert row.uploaded_at is None and row.workspace_id == sandbox.pro.id


@pytest.mark.parametrize("content_type", TYPES)
async def test_every_listed_type_is_accepted(sandbox, content_type):
    doc = await reserve(sandbox, b"x" * 10, content_type)
    assert doc["contentType"] == content_type


@pytest.mark.parametrize("content_type", ["text/plain", "application/zip", "image/x-icon", "text/html",
                                          "application/octet-stream", ""])
async def test_other_types_are_refused(sandbox, content_type):
    before = file_count(sandbox)
    params = {"formId": sandbox.pro.forms["Approval"], "name": "x", "contentType": content_type, "size": 10}
    r = await sandbox.rpc("documents.create", params)
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_TYPE_NOT_ALLOWED", field="contentType", validValues=TYPES)
    with sandbox.service.session() as s:
        assert s.exec(select(func.count()).select_from(Document)).one() == 0
    assert file_count(sandbox) == before


@pytest.mark.parametrize(("size", "reason"), [(0, "OUT_OF_RANGE"), (-1, "OUT_OF_RANGE"),
                                              (25 * MB + 1, "DOCUMENT_TOO_LARGE"),
                                              (10**12, "DOCUMENT_TOO_LARGE")])
async def test_size_must_be_positive_and_at_most_25_mb(sandbox, size, reason):
    params = {"formId": sandbox.pro.forms["Approval"], "name": "big.pdf", "contentType": "application/pdf",
              "size": size}
    r = await sandbox.rpc("documents.create", params)
    r.expect("VALIDATION_ERROR", 400, reason=reason, field="size")
    with sandbox.service.session() as s:
        assert s.exec(select(func.count()).select_from(Document)).one() == 0


async def test_exactly_25_mb_is_accepted(sandbox):
    params = {"formId": sandbox.pro.forms["Approval"], "name": "big.pdf", "contentType": "application/pdf",
              "size": 25 * MB}
    r = await sandbox.rpc("documents.create", params)
    assert r.status == 200 and r.data["size"] == 25 * MB


@pytest.mark.parametrize(("patch", "field", "reason"), [
    ({"name": ""}, "name", "OUT_OF_RANGE"),
    ({"name": "n" * 256}, "name", "OUT_OF_RANGE"),
    ({"size": "10"}, "size", "INVALID_TYPE"),
    ({"size": 10.5}, "size", "INVALID_TYPE"),
    ({"sha256": "abc"}, "sha256", "INVALID_FORMAT"),
    ({"sha256": "g" * 64}, "sha256", "INVALID_FORMAT"),
    ({"contentType": None}, "contentType", "INVALID_TYPE"),
    ({"extra": 1}, "extra", "UNKNOWN_PARAM"),
])
async def test_bad_params_are_named(sandbox, patch, field, reason):
    params = {"formId": sandbox.pro.forms["Approval"], "name": "a.pdf", "contentType": "application/pdf",
              "size": 10, **patch}
    r = await sandbox.rpc("documents.create", params)
    r.expect("VALIDATION_ERROR", 400, field=field, reason=reason)


@pytest.mark.parametrize("missing", ["formId", "name", "contentType", "size"])
async def test_required_params(sandbox, missing):
    params = {"formId": sandbox.pro.forms["Approval"], "name": "a.pdf", "contentType": "application/pdf", "size": 10}
    del params[missing]
    r = await sandbox.rpc("documents.create", params)
    r.expect("VALIDATION_ERROR", 400, field=missing, reason="REQUIRED")


async def test_name_of_255_characters_is_accepted(sandbox):
    doc = await reserve(sandbox, b"%PDF-1", name="n" * 255)
    assert doc["name"] == "n" * 255


async def test_form_must_be_in_the_callers_workspace(sandbox):
    params = {"formId": sandbox.free.forms["Approval"], "name": "a.pdf", "contentType": "application/pdf",
              "size": 10}
    (await sandbox.rpc("documents.create", params, ws="pro")).expect("FORBIDDEN", 403, field="formId")
    params["formId"] = "form_" + "0" * 22
    (await sandbox.rpc("documents.create", params, ws="pro")).expect("NOT_FOUND", 404, field="formId")
    with sandbox.service.session() as s:
        assert s.exec(select(func.count()).select_from(Document)).one() == 0


async def test_create_shares_the_request_creation_limit(sandbox):
    r = await sandbox.helper("limits.set", {"createsPerMinute": 3})
    assert r.status == 200, r.body
    await reserve(sandbox, b"%PDF-1")
    await reserve(sandbox, b"%PDF-1")
    r = await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Contact"]})
    assert r.status == 200, r.body
    r = await sandbox.rpc("documents.create", {"formId": sandbox.pro.forms["Approval"], "name": "a.pdf",
                                               "contentType": "application/pdf", "size": 6})
    r.expect("RATE_LIMITED", 429)
    assert r.details["retryAfterMs"] > 0
    r = await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Contact"]})
    r.expect("RATE_LIMITED", 429)
    # other calls are not in that bucket
    assert (await sandbox.rpc("forms.get", {"formId": sandbox.pro.forms["Approval"]})).status == 200


# -- the upload ------------------------------------------------------------------------------


async def test_put_a_pdf_stores_it(sandbox):
    data = make_pdf("Contract")
    doc = await reserve(sandbox, data)
    r = await put(sandbox, doc["uploadUrl"], data)
    assert r.status == 200, r.body
    assert r.body["ok"] is True
    assert r.data["id"] == doc["id"] and r.data["size"] == len(data)
    assert r.data["sha256"] == hashlib.sha256(data).hexdigest()
    row, files = stored(sandbox, doc["id"])
    assert row.uploaded_at is not None and row.file_id is not None and files == 1
    async with sandbox.http.get(f"{sandbox.base_url}/api/storage/{row.file_id}") as resp:
        assert resp.status == 200
        assert resp.content_type == "application/pdf"
        assert await resp.read() == data


async def test_put_a_png_with_declared_sha256(sandbox):
    data = make_png(8, 5)
    doc = await reserve(sandbox, data, "image/png", name="chart.png", sha256=hashlib.sha256(data).hexdigest().upper())
    r = await put(sandbox, doc["uploadUrl"], data, "image/png")
    assert r.status == 200, r.body
    row, _ = stored(sandbox, doc["id"])
    async with sandbox.http.get(f"{sandbox.base_url}/api/storage/{row.file_id}") as resp:
        assert resp.content_type == "image/png"
        assert await resp.read() == data


@pytest.mark.parametrize("content_type", TYPES)
async def test_each_kind_is_checked_by_its_magic_bytes(sandbox, content_type):
    good = SAMPLES[content_type]
    doc = await reserve(sandbox, good, content_type)
    assert (await put(sandbox, doc["uploadUrl"], good, content_type)).status == 200
    # bytes of another kind, declared as this one
    wrong = SAMPLES["image/png"] if content_type != "image/png" else SAMPLES["application/pdf"]
    doc = await reserve(sandbox, wrong, content_type)
    files = file_count(sandbox)
    r = await put(sandbox, doc["uploadUrl"], wrong, content_type)
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_INVALID", documentId=doc["id"])
    assert_untouched(sandbox, doc["id"], files)


async def test_a_png_declared_as_pdf_is_refused(sandbox):
    data = make_png()
    doc = await reserve(sandbox, data, "application/pdf")
    files = file_count(sandbox)
    r = await put(sandbox, doc["uploadUrl"], data, "application/pdf")
    err = r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_INVALID", field="contentType")
    assert "PDF" in err["message"]
    assert_untouched(sandbox, doc["id"], files)


@pytest.mark.parametrize("body", [
    b"<html><svg></svg></html>",
    b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
    b'<svg xmlns="http://www.w3.org/2000/svg"><SCRIPT href="x.js"/></svg>',
    b"\xff\xfe<\x00s\x00v\x00g\x00>\x00",
    b"just text",
])
async def test_svg_must_be_utf8_with_an_svg_root_and_no_script(sandbox, body):
    doc = await reserve(sandbox, body, "image/svg+xml", name="logo.svg")
    files = file_count(sandbox)
    r = await put(sandbox, doc["uploadUrl"], body, "image/svg+xml")
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_INVALID")
    assert_untouched(sandbox, doc["id"], files)


async def test_content_type_must_equal_the_declared_type(sandbox):
    data = make_pdf()
    doc = await reserve(sandbox, data)
    files = file_count(sandbox)
    for wrong in ("image/png", "application/octet-stream", "text/plain"):
        r = await put(sandbox, doc["uploadUrl"], data, wrong)
        r.expect("VALIDATION_ERROR", 400, reason="CONTENT_TYPE_MISMATCH", validValues=["application/pdf"])
        assert "application/pdf" in r.error["message"]
    assert_untouched(sandbox, doc["id"], files)
    # parameters aside, the same media type is the declared type; the URL still works
    r = await put(sandbox, doc["uploadUrl"], data, "application/PDF; charset=binary")
    assert r.status == 200, r.body


@pytest.mark.parametrize("delta", [-1, 1, 1000])
async def test_body_must_be_exactly_the_declared_size(sandbox, delta):
    data = make_pdf()
    doc = await reserve(sandbox, data)
    files = file_count(sandbox)
    body = data[:delta] if delta < 0 else data + b"\n" * delta
    r = await put(sandbox, doc["uploadUrl"], body)
    err = r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_INVALID", field="size")
    assert str(len(data)) in err["message"]
    assert_untouched(sandbox, doc["id"], files)
    assert (await put(sandbox, doc["uploadUrl"], data)).status == 200


async def test_an_oversized_body_is_refused_before_it_ends(sandbox):
    """A chunked body that runs past the declared size is refused once size + 1 bytes
    arrived: the answer comes while the body is still unfinished, and nothing is stored."""
    data = make_pdf()
    doc = await reserve(sandbox, data)
    files = file_count(sandbox)
    url = urlsplit(doc["uploadUrl"])
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        first = data + b"\0" * 4096
        writer.write(f"PUT {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/pdf\r\n"
                     f"Transfer-Encoding: chunked\r\n\r\n{len(first):x}\r\n".encode() + first + b"\r\n")
        await writer.drain()  # and never the last chunk
        head, _, body = (await asyncio.wait_for(reader.read(64 * 1024), 10)).partition(b"\r\n\r\n")
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 400 ")
    err = json.loads(body)["error"]
    assert (err["code"], err["details"]["reason"], err["details"]["field"]) == ("VALIDATION_ERROR",
                                                                               "DOCUMENT_INVALID", "size")
    assert_untouched(sandbox, doc["id"], files)


async def test_an_authorization_header_is_refused(sandbox):
    data = make_pdf()
    doc = await reserve(sandbox, data)
    files = file_count(sandbox)
    r = await put(sandbox, doc["uploadUrl"], data, headers={"Authorization": f"Bearer {sandbox.pro.token}"})
    r.expect("FORBIDDEN", 403, reason="AUTHORIZATION_NOT_ALLOWED")
    assert_untouched(sandbox, doc["id"], files)


async def test_an_expired_upload_url_is_refused(sandbox):
    data = make_pdf()
    early, late = await reserve(sandbox, data), await reserve(sandbox, data)
    assert (await sandbox.helper("clock.advance", {"ms": HOUR_MS - 60_000})).status == 200
    assert (await put(sandbox, early["uploadUrl"], data)).status == 200, "still valid a minute before the hour"
    assert (await sandbox.helper("clock.advance", {"ms": 60_000})).status == 200
    files = file_count(sandbox)
    r = await put(sandbox, late["uploadUrl"], data)
    err = r.expect("FORBIDDEN", 403, reason="UPLOAD_EXPIRED")
    assert err["message"].startswith("Signature expired")
    assert_untouched(sandbox, late["id"], files)


async def test_a_second_put_is_a_conflict(sandbox):
    data = make_pdf("first")
    doc = await reserve(sandbox, data)
    assert (await put(sandbox, doc["uploadUrl"], data)).status == 200
    row, files = stored(sandbox, doc["id"])
    other = make_pdf("other")[: len(data)]
    r = await put(sandbox, doc["uploadUrl"], other)
    r.expect("CONFLICT", 409, reason="DOCUMENT_ALREADY_UPLOADED", documentId=doc["id"])
    again, files_after = stored(sandbox, doc["id"])
    assert (again.file_id, again.uploaded_at, files_after) == (row.file_id, row.uploaded_at, files)
    async with sandbox.http.get(f"{sandbox.base_url}/api/storage/{row.file_id}") as resp:
        assert await resp.read() == data


async def test_sha256_must_match_when_declared(sandbox):
    data = make_pdf()
    doc = await reserve(sandbox, data, sha256=hashlib.sha256(b"another file").hexdigest())
    files = file_count(sandbox)
    r = await put(sandbox, doc["uploadUrl"], data)
    err = r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_INVALID", field="sha256")
    assert hashlib.sha256(data).hexdigest() in err["message"]
    assert_untouched(sandbox, doc["id"], files)


async def test_unknown_upload_url(sandbox):
    r = await put(sandbox, f"{sandbox.base_url}/api/uploads/up_{'x' * 40}", make_pdf())
    r.expect("NOT_FOUND", 404, reason="UNKNOWN_UPLOAD")


# -- documents on requests ---------------------------------------------------------------------


async def test_request_with_an_uploaded_document(sandbox):
    data = make_pdf("Offer")
    doc = await uploaded(sandbox, data, name="Offer.pdf")
    r = await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Approval"],
                                              "documents": [{"documentId": doc["id"]}]})
    assert r.status == 200, r.body
    got = (await sandbox.rpc("requests.get", {"requestId": r.data["id"]})).data
    assert got["documents"] == [{"field": "review_docs", "name": "Offer.pdf", "size": len(data),
                                 "contentType": "application/pdf"}]
    # the recipient's page links the stored bytes
    row, _ = stored(sandbox, doc["id"])
    file_url = f"{sandbox.base_url}/api/storage/{row.file_id}"
    async with sandbox.http.get(r.data["url"]) as resp:
        assert resp.status == 200
        assert file_url in await resp.text()
    async with sandbox.http.get(file_url) as resp:
        assert await resp.read() == data


async def test_request_with_a_never_uploaded_document(sandbox):
    doc = await reserve(sandbox, make_pdf())
    r = await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Approval"],
                                              "documents": [{"documentId": doc["id"]}]})
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_NOT_UPLOADED", documentId=doc["id"])
    listed = await sandbox.rpc("requests.list", {"formId": sandbox.pro.forms["Approval"]})
    assert listed.data["items"] == []


async def test_a_refused_upload_leaves_the_document_unusable(sandbox):
    data = make_pdf()
    doc = await reserve(sandbox, data)
    (await put(sandbox, doc["uploadUrl"], make_png()[: len(data)])).expect("VALIDATION_ERROR", 400)
    r = await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Approval"],
                                              "documents": [{"documentId": doc["id"]}]})
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_NOT_UPLOADED", documentId=doc["id"])


async def test_one_upload_serves_many_requests(sandbox):
    data = make_png()
    doc = await uploaded(sandbox, data, "image/png", name="map.png")
    ids = []
    for _ in range(2):
        r = await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Approval"],
                                                  "documents": [{"documentId": doc["id"], "name": "Site map"}]})
        assert r.status == 200, r.body
        ids.append(r.data["id"])
    assert ids[0] != ids[1]
    for rid in ids:
        got = (await sandbox.rpc("requests.get", {"requestId": rid})).data
        assert got["documents"] == [{"field": "review_docs", "name": "Site map", "size": len(data),
                                     "contentType": "image/png"}]
    assert file_count(sandbox) == 1


async def test_a_retry_that_uploads_the_same_bytes_again_is_deduplicated(sandbox):
    """Idempotency counts a document by its bytes, block and name: a retry with a fresh
    upload of the same file (no sha256 declared) returns the original request."""
    data = make_pdf("retry")
    first = await uploaded(sandbox, data)
    second = await uploaded(sandbox, data)
    assert first["id"] != second["id"]
    params = {"formId": sandbox.pro.forms["Approval"], "idempotencyKey": "run-7"}
    a = await sandbox.rpc("requests.create", {**params, "documents": [{"documentId": first["id"]}]})
    b = await sandbox.rpc("requests.create", {**params, "documents": [{"documentId": second["id"]}]})
    assert a.status == 200 and b.status == 200, (a.body, b.body)
    assert b.data["id"] == a.data["id"] and b.data["deduplicated"] is True
    third = await uploaded(sandbox, make_pdf("other"))
    c = await sandbox.rpc("requests.create", {**params, "documents": [{"documentId": third["id"]}]})
    c.expect("CONFLICT", 409, reason="IDEMPOTENCY_CONFLICT")


async def test_a_document_of_another_workspace_is_not_found(sandbox):
    doc = await uploaded(sandbox, make_pdf(), ws="free")
    r = await sandbox.rpc("requests.create", {"formId": sandbox.pro.forms["Approval"],
                                              "documents": [{"documentId": doc["id"]}]})
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_NOT_FOUND", documentId=doc["id"])


async def test_a_stored_file_that_no_longer_matches_is_document_invalid(sandbox):
    """requests.create re-checks an uploaded document's bytes: a stored file whose size
    no longer matches its declaration is refused with DOCUMENT_INVALID, nothing created."""
    from formservice.tables import Document, StoredFile

    form = sandbox.pro.forms["Approval"]
    pdf = b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n"
    doc = (await sandbox.rpc("documents.create", {"formId": form, "name": "a.pdf", "contentType": "application/pdf",
                                                  "size": len(pdf)})).data
    async with sandbox.http.put(doc["uploadUrl"], data=pdf, headers={"Content-Type": "application/pdf"}) as resp:
        assert resp.status == 200
    with sandbox.service.session() as s:
        row = s.get(StoredFile, s.get(Document, doc["id"]).file_id)
        row.data = pdf + b"tampered"
        s.commit()
    before = (await sandbox.rpc("requests.list", {"formId": form})).data["items"]
    r = await sandbox.rpc("requests.create", {"formId": form, "documents": [{"documentId": doc["id"]}]})
    r.expect("VALIDATION_ERROR", 400, reason="DOCUMENT_INVALID", documentId=doc["id"])
    assert (await sandbox.rpc("requests.list", {"formId": form})).data["items"] == before
