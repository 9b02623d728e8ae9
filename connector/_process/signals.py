"""Stopping on SIGINT and SIGTERM: the one way the receiver, the scheduler and an
outreach run learn that they are asked to stop, and which signal asked."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["stop_on_signals"]


@contextmanager
def stop_on_signals(stop: asyncio.Event, caught: list[signal.Signals] | None = None) -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM set ``stop`` and are appended to
    ``caught`` when given. Only the main thread's event loop can take signals: elsewhere
    they keep their default handling."""
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        def on_signal(sig: signal.Signals = sig) -> None:
            if caught is not None:
                caught.append(sig)
            stop.set()
        try:
            loop.add_signal_handler(sig, on_signal)
            handled.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            pass
    try:
        yield
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
