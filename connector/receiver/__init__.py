"""The receiving side: the service's signed deliveries into the store.

``app.py`` is the aiohttp receiver (verify, persist by group commit, acknowledge) and
``tls.py`` the receiver's TLS context; the private modules hold the rest: ``_delivery``
says what a verified body holds, ``_committer`` where bodies are read and group commits
run, ``_refusals`` which refusals are logged and the advice for a signature refused,
``_replay`` the dead letters exported and replayed, ``_secrets`` the webhook secrets re-read
from the secrets file. ``connector.receiver`` offers what its single module offered
before (``from connector.receiver import run_receiver``), each name imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector._lazy import lazy_exports

if TYPE_CHECKING:
    from ._delivery import MAX_JSON_DEPTH as MAX_JSON_DEPTH
    from ._delivery import parse_event as parse_event
    from ._refusals import Channel as Channel
    from .app import DEFAULT_MAX_BATCH as DEFAULT_MAX_BATCH
    from .app import Receiver as Receiver
    from .app import ReceiverMetrics as ReceiverMetrics
    from .app import create_receiver_app as create_receiver_app
    from .app import event_paths as event_paths
    from .app import run_receiver as run_receiver

_SOURCES: dict[str, str] = {
    "DEFAULT_MAX_BATCH": "app", "Receiver": "app", "ReceiverMetrics": "app", "create_receiver_app": "app",
    "event_paths": "app", "run_receiver": "app",
    "MAX_JSON_DEPTH": "_delivery", "parse_event": "_delivery",
    "Channel": "_refusals",
}

__all__ = [
    "Channel", "DEFAULT_MAX_BATCH", "MAX_JSON_DEPTH", "Receiver", "ReceiverMetrics", "create_receiver_app",
    "event_paths", "parse_event", "run_receiver",
]

__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())
