"""The registry of the sandbox's test helpers: the domain methods' registry mechanism
(``method_registry``), with a table of its own so ``/api/v1`` never serves a helper."""

from __future__ import annotations

from ...domain.base import Method, method_registry

HELPERS: dict[str, Method] = {}
helper = method_registry(HELPERS)
