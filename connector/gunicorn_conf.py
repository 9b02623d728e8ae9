"""gunicorn's settings taken from formsync's, for the receiver under gunicorn::

    FORMSYNC_CONFIG=formsync.toml gunicorn -c python:connector.gunicorn_conf \\
        'connector.serving:receiver_app' --workers 2

binds ``receiver.host``:``receiver.port``, runs aiohttp's worker, and serves https when
``receiver.tls_cert`` and ``receiver.tls_key`` are set (each worker's server context made
from them by gunicorn). Options on gunicorn's command line win over these. A setting that
cannot work ends gunicorn before it starts, with one line and exit code 2."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

from .config.settings import load_settings
from .receiver.tls import server_context
from .serving import CONFIG_ENV

__all__ = ["bind", "certfile", "keyfile", "worker_class"]


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)  # not an Exception: gunicorn lets it end the process


try:
    _receiver = load_settings(os.environ.get(CONFIG_ENV) or None).receiver
    server_context(_receiver.tls_cert, _receiver.tls_key)  # checked here: gunicorn would only say "ssl error"
except Exception as e:  # a settings or TLS mistake, in one line
    _fail(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)

_host = f"[{_receiver.host}]" if ":" in _receiver.host else _receiver.host
bind = [f"{_host}:{_receiver.port}"]
worker_class = "aiohttp.GunicornWebWorker"
certfile = str(_receiver.tls_cert) if _receiver.tls_cert else None
keyfile = str(_receiver.tls_key) if _receiver.tls_key else None
