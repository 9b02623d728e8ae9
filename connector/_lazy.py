"""Names a package re-exports from its modules, each imported on first use: how
``connector`` and ``pipelines`` offer their public names without loading every library
their modules need when the package alone is imported."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, sources: Mapping[str, str], namespace: dict[str, Any],
                 modules: Mapping[str, str] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``: ``sources`` maps each public name to
    the module (relative to ``package``) that defines it; a name is imported on its first
    look-up and kept in ``namespace`` (the package's globals) so later look-ups are plain.
    ``modules`` maps a name to a module (relative to ``package``) that the name is: a
    module's former place kept for ``from package import name`` after the module moved
    into a subpackage."""
    aliases = dict(modules or {})

    def getattr_(name: str) -> Any:
        module = sources.get(name)
        if module is not None:
            value = getattr(importlib.import_module(f".{module}", package), name)
        elif name in aliases:
            value = importlib.import_module(f".{aliases[name]}", package)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(sources) | set(aliases))

    return getattr_, dir_
