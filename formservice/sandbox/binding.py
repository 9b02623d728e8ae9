"""The HTTP binding of the test helpers: ``POST /api/sandbox``, the same envelope and
bearer token as ``/api/v1``, no rate budget spent. A token past its lifetime still works
here (a deleted one does not): a test that moves the clock past every token's expiry
keeps its control of the sandbox, and mints a fresh token with ``tokens.create``."""

from __future__ import annotations

from aiohttp import web

from .. import rpc
from ..errors import ApiError
from .helpers import HELPERS

PATH = "/api/sandbox"


async def handle(request: web.Request) -> web.Response:
    """Run one helper for the bearer token's person and workspace."""
    service = request.app[rpc.SERVICE_KEY]
    try:
        body = await rpc.read_limited(request)
        caller = service.authenticate(request.headers.get("Authorization"), rpc.client_ip(request),
                                      allow_expired=True)
        name, params = rpc.parse_envelope(body)
        return rpc.ok(await service.invoke_async(caller, name, params, registry=HELPERS, throttle=False))
    except ApiError as err:
        return rpc.fail(err)
    except Exception as exc:
        return rpc.internal(exc)
