"""The receiver under a multi-process server: gunicorn's aiohttp worker runs one
receiver per worker process, each with its own event loop, database connections and
group-commit writer, all on one database (the store's writes are safe from many
processes: an event id is stored once, newest wins).

Run (two workers; the settings come from ``FORMSYNC_CONFIG``, a TOML file, and the
``FORMSYNC_*`` variables over it, as ``formsync receive`` reads them)::

    FORMSYNC_CONFIG=formsync.toml gunicorn 'connector.serving:receiver_app' \\
        --worker-class aiohttp.GunicornWebWorker --workers 2 --bind 0.0.0.0:8788

Each worker migrates the database when it starts (migrations are serialised), and on
SIGTERM commits every queued event before it exits."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from .client.grant import stored_grant
from .config.keyfile import key_path
from .config.settings import load_settings
from .receiver.app import create_receiver_app
from .store import Store

__all__ = ["CONFIG_ENV", "receiver_app"]

CONFIG_ENV = "FORMSYNC_CONFIG"
"""The environment variable naming the TOML settings file (optional)."""

log = logging.getLogger("connector.serving")


async def receiver_app() -> web.Application:
    """A receiver application for one server worker: settings from ``FORMSYNC_CONFIG``
    and the ``FORMSYNC_*`` variables, the store at ``store.url`` migrated, and closed
    when the application stops."""
    config = os.environ.get(CONFIG_ENV) or None
    settings = load_settings(config)
    store = Store(settings.store.url, key_file=key_path(settings.store, Path(config) if config else None))
    store.migrate()
    store.check_key()  # tombstones kept: no delivery is checked with another key
    tokens = stored_grant(store, settings, Path(config) if config else None)
    app = create_receiver_app(store, settings.receiver, service=settings.service, tokens=tokens)

    async def close_store(_app: web.Application) -> AsyncIterator[None]:
        yield
        store.close()

    # Registered first, so it runs last: after the receiver's writer has committed.
    app.cleanup_ctx.insert(0, close_store)
    log.info("receiver worker %d ready on database %s", os.getpid(), store.backend)
    return app
