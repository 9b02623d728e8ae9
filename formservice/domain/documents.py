"""Documents a request hands to its recipient: ``documents.create`` reserves one and
returns a presigned upload URL; the upload (a raw ``PUT`` of the bytes) is checked
against what was declared (type, exact size, sha256, and the bytes really being that
kind of file) before it is stored. One upload may be attached to many requests."""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from typing import Annotated

from pydantic import Field
from sqlalchemy import update
from sqlmodel import Session, col, select

from ..clock import HOUR_MS, iso
from ..errors import ApiError, conflict, forbidden, not_found, validation
from ..ids import BASE62, new_id
from ..tables import Document, StoredFile
from .base import Ctx, Params, Result, method

ALLOWED_TYPES = (
    "application/pdf",
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/gif",
    "image/svg+xml",
    "image/avif",
    "image/bmp",
    "image/tiff",
)
MB = 1024 * 1024
MAX_DOCUMENT_BYTES = 25 * MB
UPLOAD_TTL_MS = HOUR_MS
UPLOAD_PATH = "/api/uploads/"


class CreateParams(Params):
    formId: str
    name: Annotated[str, Field(min_length=1, max_length=255)]
    contentType: str
    size: int
    sha256: Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")] | None = None


class DocumentCreated(Result):
    id: str
    name: str
    contentType: str
    size: int
    uploadUrl: str
    expiresAt: int


class Uploaded(Result):
    id: str
    name: str
    contentType: str
    size: int
    sha256: str
    uploadedAt: int


def upload_url(base_url: str, doc: Document) -> str:
    return f"{base_url}{UPLOAD_PATH}{doc.upload_token}"


@method("documents.create", bucket="create")
def documents_create(ctx: Ctx, p: CreateParams) -> DocumentCreated:
    """Reserve a document for a form and get its upload URL (PUT the raw bytes within one hour)."""
    form = ctx.form(p.formId)
    content_type = p.contentType.strip().lower()
    if content_type not in ALLOWED_TYPES:
        raise validation(f"contentType {p.contentType!r} is not accepted: documents are PDF or images, one of "
                         f"{', '.join(ALLOWED_TYPES)}.", field="contentType", reason="DOCUMENT_TYPE_NOT_ALLOWED",
                         validValues=list(ALLOWED_TYPES))
    if p.size <= 0:
        raise validation(f"size is the exact number of bytes of the file, more than 0; got {p.size}.",
                         field="size", reason="OUT_OF_RANGE")
    if p.size > MAX_DOCUMENT_BYTES:
        raise validation(f"A document may be at most 25 MB ({MAX_DOCUMENT_BYTES} bytes); this one declares "
                         f"{p.size} bytes.", field="size", reason="DOCUMENT_TOO_LARGE")
    doc = Document(
        id=new_id("doc"), workspace_id=ctx.workspace.id, form_id=form.id, name=p.name, content_type=content_type,
        size=p.size, sha256=p.sha256.lower() if p.sha256 else None,
        upload_token="up_" + "".join(secrets.choice(BASE62) for _ in range(40)),
        upload_expires_at=ctx.now + UPLOAD_TTL_MS, created_at=ctx.now,
    )
    ctx.session.add(doc)
    return DocumentCreated(id=doc.id, name=doc.name, contentType=doc.content_type, size=doc.size,
                           uploadUrl=upload_url(ctx.base_url, doc), expiresAt=doc.upload_expires_at)


# -- the upload ----------------------------------------------------------------------------


def open_upload(session: Session, token: str, now: int) -> Document:
    """The document an upload URL reserves, while it can still take its bytes: 404 for a
    URL never issued, 409 once the bytes are in, 403 ``Signature expired`` past its hour."""
    doc = session.exec(select(Document).where(Document.upload_token == token)).first()
    if doc is None:
        raise not_found("Upload URL", reason="UNKNOWN_UPLOAD")
    if doc.uploaded_at is not None:
        raise conflict(f"Document {doc.id} is already uploaded; an upload URL takes its bytes once. Reserve "
                       "another document with documents.create to upload a different file.",
                       reason="DOCUMENT_ALREADY_UPLOADED", documentId=doc.id)
    if now >= doc.upload_expires_at:
        raise forbidden(f"Signature expired: this upload URL was valid until {iso(doc.upload_expires_at)}; "
                        "reserve the document again with documents.create.", reason="UPLOAD_EXPIRED",
                        documentId=doc.id)
    return doc


def check_content_type(doc: Document, content_type: str) -> None:
    """The PUT's media type (parameters aside) must be the one declared at reservation."""
    if content_type.lower() != doc.content_type:
        shown = content_type or "none"
        raise validation(f"Content-Type {shown} does not match the declared type {doc.content_type}; send the "
                         "PUT with Content-Type equal to the contentType given to documents.create.",
                         field="Content-Type", reason="CONTENT_TYPE_MISMATCH", validValues=[doc.content_type],
                         documentId=doc.id)


def wrong_size(doc: Document, got: str) -> ApiError:
    return validation(f"The body is {got}, but document {doc.id} was declared as exactly {doc.size} bytes.",
                      field="size", reason="DOCUMENT_INVALID", documentId=doc.id)


def accept_upload(session: Session, doc: Document, data: bytes, now: int) -> Uploaded:
    """Check the bytes against the declaration (exact size, really the declared kind of
    file, sha256 when declared), then store them and mark the document uploaded. Every
    refusal raises before anything is written."""
    if len(data) != doc.size:
        raise wrong_size(doc, f"{len(data)} bytes")
    if not looks_like(doc.content_type, data):
        raise validation(f"The bytes are not a {KIND_NAMES[doc.content_type]} file, the declared type "
                         f"{doc.content_type}; upload the file itself, or reserve it with its real type.",
                         field="contentType", reason="DOCUMENT_INVALID", documentId=doc.id)
    digest = hashlib.sha256(data).hexdigest()
    if doc.sha256 is not None and digest != doc.sha256:
        raise validation(f"The bytes hash to sha256 {digest}, not the declared {doc.sha256}; the file changed "
                         "since it was hashed, or the wrong file was sent.", field="sha256",
                         reason="DOCUMENT_INVALID", documentId=doc.id)
    stored = StoredFile(id=str(uuid.uuid4()), content_type=doc.content_type, data=data, created_at=now)
    session.add(stored)
    # Claim the document only if no concurrent PUT got there first.
    claimed = session.exec(
        update(Document).where(col(Document.id) == doc.id, col(Document.uploaded_at).is_(None))
        # Without a declared hash the content's own hash is recorded, so requests.create
        # still counts a re-uploaded file by its bytes for idempotency.
        .values(uploaded_at=now, file_id=stored.id, sha256=digest)
    ).rowcount
    if claimed != 1:
        raise conflict(f"Document {doc.id} is already uploaded; an upload URL takes its bytes once.",
                       reason="DOCUMENT_ALREADY_UPLOADED", documentId=doc.id)
    return Uploaded(id=doc.id, name=doc.name, contentType=doc.content_type, size=doc.size, sha256=digest,
                    uploadedAt=now)


# -- content sniffing ------------------------------------------------------------------------

KIND_NAMES = {
    "application/pdf": "PDF", "image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WebP",
    "image/gif": "GIF", "image/svg+xml": "SVG", "image/avif": "AVIF", "image/bmp": "BMP", "image/tiff": "TIFF",
}
_SVG_PROLOG = re.compile(rb"\A(?:\s+|<\?xml[^>]*\?>|<!--.*?-->|<!DOCTYPE[^>[]*(?:\[[^\]]*\])?\s*>)*", re.S | re.I)
_SVG_ROOT = re.compile(rb"<svg[\s>/]")


def looks_like(content_type: str, data: bytes) -> bool:
    """Whether ``data`` starts as a file of ``content_type`` does (its magic bytes); an SVG
    must be UTF-8 text whose root element is ``<svg`` and that holds no ``<script``."""
    if content_type == "application/pdf":
        return data.startswith(b"%PDF-")
    if content_type == "image/png":
        return data.startswith(b"\x89PNG\r\n\x1a\n")
    if content_type == "image/jpeg":
        return data.startswith(b"\xff\xd8\xff")
    if content_type == "image/gif":
        return data[:6] in (b"GIF87a", b"GIF89a")
    if content_type == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    if content_type == "image/bmp":
        return data.startswith(b"BM")
    if content_type == "image/tiff":
        return data[:4] in (b"II*\x00", b"MM\x00*")
    if content_type == "image/avif":
        return data[4:12] in (b"ftypavif", b"ftypavis")
    if content_type == "image/svg+xml":
        return _is_svg(data)
    return False


def _is_svg(data: bytes) -> bool:
    body = data.removeprefix(b"\xef\xbb\xbf")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    start = _SVG_PROLOG.match(body)
    rest = body[start.end():] if start else body
    return bool(_SVG_ROOT.match(rest)) and b"<script" not in body.lower()
