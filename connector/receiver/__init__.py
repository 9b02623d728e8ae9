"""The receiving side: the service's signed deliveries into the store.

``app.py`` is the aiohttp receiver (verify, persist by group commit, acknowledge);
``delivery.py`` says what a verified body holds, ``committer.py`` where bodies are read
and group commits run, ``refusals.py`` which refusals are logged and the advice for a
signature refused, ``replay.py`` the dead letters exported and replayed, ``secrets.py`` the
webhook secrets re-read from the secrets file, ``tls.py`` the receiver's TLS context. ``connector.receiver`` offers what its single module offered
before (``from connector.receiver import run_receiver``), each name imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector.lazy import lazy_exports

if TYPE_CHECKING:
    from .app import DEFAULT_MAX_BATCH as DEFAULT_MAX_BATCH
    from .app import Receiver as Receiver
    from .app import ReceiverMetrics as ReceiverMetrics
    from .app import create_receiver_app as create_receiver_app
    from .app import event_paths as event_paths
    from .app import run_receiver as run_receiver
    from .delivery import MAX_JSON_DEPTH as MAX_JSON_DEPTH
    from .delivery import parse_event as parse_event
    from .refusals import Channel as Channel

_SOURCES: dict[str, str] = {
    "DEFAULT_MAX_BATCH": "app", "Receiver": "app", "ReceiverMetrics": "app", "create_receiver_app": "app",
    "event_paths": "app", "run_receiver": "app",
    "MAX_JSON_DEPTH": "delivery", "parse_event": "delivery",
    "Channel": "refusals",
}

__all__ = [
    "Channel", "DEFAULT_MAX_BATCH", "MAX_JSON_DEPTH", "Receiver", "ReceiverMetrics", "create_receiver_app",
    "event_paths", "parse_event", "run_receiver",
]

__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())
