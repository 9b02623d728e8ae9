"""Names a package re-exports from its modules, each imported on first use: how
``connector`` and ``pipelines`` offer their public names without loading every library
their modules need when the package alone is imported."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, sources: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``: ``sources`` maps each public name to
    the module (relative to ``package``) that defines it; a name is imported on its first
    look-up and kept in ``namespace`` (the package's globals) so later look-ups are plain."""

    def getattr_(name: str) -> Any:
        module = sources.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(sources))

    return getattr_, dir_
