"""The HTTP binding of document uploads: ``PUT /api/uploads/{token}``. The URL is its own
credential (no bearer token); the rules live in :mod:`formservice.domain.documents`.
Answers use the JSON-RPC envelope, ``{ok, data}`` or ``{ok: false, error}``."""

from __future__ import annotations

from aiohttp import web

from . import rpc
from .domain import documents
from .errors import ApiError, forbidden


def register(app: web.Application) -> None:
    app.router.add_put(documents.UPLOAD_PATH + "{token}", handle)


async def handle(request: web.Request) -> web.Response:
    service = request.app[rpc.SERVICE_KEY]
    token = request.match_info["token"]
    try:
        if "Authorization" in request.headers:
            raise forbidden("An upload URL is its own credential: send the PUT without an Authorization header.",
                            reason="AUTHORIZATION_NOT_ALLOWED")
        with service.session() as s:
            doc = documents.open_upload(s, token, service.now())
        documents.check_content_type(doc, _media_type(request))
        declared = request.content_length
        if declared is not None and declared != doc.size:
            raise documents.wrong_size(doc, f"{declared} bytes (Content-Length)")
        data = await _read_at_most(request, doc.size + 1)
        if len(data) > doc.size:
            raise documents.wrong_size(doc, f"over {doc.size} bytes")
        with service.session() as s:
            # The state is read again: the URL may have expired, or another PUT may have
            # landed, while the body was arriving.
            doc = documents.open_upload(s, token, service.now())
            try:
                result = documents.accept_upload(s, doc, data, service.now())
                s.commit()
            except Exception:
                s.rollback()
                raise
        return rpc.ok(result.model_dump(mode="json"))
    except ApiError as err:
        return rpc.fail(err)
    except Exception as exc:
        return rpc.internal(exc)


def _media_type(request: web.Request) -> str:
    """The Content-Type header without parameters ("" when absent); aiohttp's own
    ``content_type`` would report a missing header as application/octet-stream."""
    return request.headers.get("Content-Type", "").split(";", 1)[0].strip()


async def _read_at_most(request: web.Request, limit: int) -> bytes:
    """At most ``limit`` bytes of the body: an oversized body is never read whole."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await request.content.read(min(64 * 1024, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)

