"""The sandbox: the service run locally with test helpers.

``seed`` creates and keeps the credentials, ``helpers`` holds the test helpers (state
and rules, registered like the domain methods), ``binding`` serves them at
``POST /api/sandbox``, ``runner`` starts and stops a sandbox (``SandboxServer``) and
``client`` calls the helpers over HTTP (``SandboxHelpers``); ``recipient`` answers a
request page as its recipient does (the demo and the tests). This package module imports
none of them until a name is asked for (``from formservice.sandbox import SandboxServer``),
so the app can import the binding without importing the runner."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector._lazy import lazy_exports

if TYPE_CHECKING:
    from .client import SandboxHelpers as SandboxHelpers
    from .runner import SandboxServer as SandboxServer

__all__ = ["SandboxHelpers", "SandboxServer"]

__getattr__, __dir__ = lazy_exports(__name__, {"SandboxHelpers": "client", "SandboxServer": "runner"}, globals())
