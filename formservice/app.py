"""aiohttp application factory: the routes of the service."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from email.utils import formatdate
from pathlib import Path

from aiohttp import hdrs, web

from . import mcp, oauth, openapi, pages, rpc, uploads
from .delivery import DeliveryWorker
from .sandbox import binding as sandbox_binding
from .service import Limits, Service


def create_app(service: Service | None = None, *, data_dir: Path | str | None = None,
               limits: Limits | None = None) -> web.Application:
    """The service as an aiohttp app. ``service.base_url`` should be set to the address
    the app is reachable at once it is bound (links and upload URLs use it)."""
    service = service or Service(data_dir, limits=limits)
    app = web.Application(client_max_size=32 * 1024 * 1024)
    app[rpc.SERVICE_KEY] = service
    service.worker = DeliveryWorker(service)
    app.cleanup_ctx.append(_background_worker)
    app.on_response_prepare.append(_service_date)
    app.router.add_post("/api/v1", rpc.handle)
    app.router.add_route("*", mcp.PATH, mcp.handle)  # POST only; other methods answer 405
    app.router.add_get("/api/v1/openapi.json", openapi.handle)
    app.router.add_post(sandbox_binding.PATH, sandbox_binding.handle)
    app.router.add_get("/api/storage/{file_id}", _storage)
    app.router.add_get("/healthz", _healthz)
    pages.register(app)
    uploads.register(app)
    oauth.register(app)
    app.router.add_route("*", "/api/{tail:.*}", rpc.no_route)  # last: only unmatched /api paths
    return app


async def _service_date(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer's ``Date`` is the service's clock (the test clock), as the hosted
    service's is its own: a client reads the service's time from it."""
    now = request.app[rpc.SERVICE_KEY].now() / 1000
    response.headers[hdrs.DATE] = formatdate(now, usegmt=True)


async def _background_worker(app: web.Application) -> AsyncIterator[None]:
    """Run time-driven work and deliveries while the app serves."""
    worker = app[rpc.SERVICE_KEY].worker
    task = asyncio.create_task(worker.run())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await worker.close()


async def _storage(request: web.Request) -> web.Response:
    """Stored bytes (retained PDFs, uploaded documents); the id is the credential."""
    from .tables import StoredFile

    service = request.app[rpc.SERVICE_KEY]
    with service.session() as s:
        row = s.get(StoredFile, request.match_info["file_id"])
    if row is None:
        raise web.HTTPNotFound(text="No such file")
    return web.Response(body=row.data, content_type=row.content_type)


async def _healthz(_request: web.Request) -> web.Response:
    return web.json_response({"ok": True})
