"""The public surface of the two library packages: ``connector`` and ``pipelines`` each
list in ``__all__`` what a user imports, every listed name resolves, nothing private is
listed, and importing a package alone stays light (the CLI imports it on every start)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

PACKAGES = ["connector", "pipelines"]
# Libraries only some names need: a bare ``import connector`` must not load them.
HEAVY = ["aiohttp", "httpx", "mcp", "sqlalchemy", "sqlmodel", "pyarrow", "pandas", "apscheduler"]


def package(name: str) -> ModuleType:
    return importlib.import_module(name)


def type_checking_imports(module: ModuleType) -> set[str]:
    """The names the module imports under ``if TYPE_CHECKING:`` (what a type checker sees)."""
    tree = ast.parse(Path(module.__file__ or "").read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                names.update(a.asname or a.name for a in imp.names)
    return names


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_public_and_without_repeats(name: str) -> None:
    names = package(name).__all__
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert not [n for n in names if n.startswith("_")]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_listed_name_resolves_to_the_packages_own_object(name: str) -> None:
    pkg = package(name)
    for attr in pkg.__all__:
        value = getattr(pkg, attr)
        assert value.__module__.startswith(f"{name}."), (attr, value.__module__)
    star: dict[str, object] = {}
    exec(f"from {name} import *", star)
    assert set(star) - {"__builtins__"} == set(pkg.__all__)
    assert set(pkg.__all__) <= set(dir(pkg))


@pytest.mark.parametrize("name", PACKAGES)
def test_type_checkers_see_the_same_names(name: str) -> None:
    assert type_checking_imports(package(name)) == set(package(name).__all__)


@pytest.mark.parametrize("name", PACKAGES)
def test_an_unknown_name_is_an_attribute_error(name: str) -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = package(name).no_such_name


@pytest.mark.parametrize("name", PACKAGES)
def test_importing_the_package_loads_no_heavy_library(name: str) -> None:
    probe = f"import sys, {name}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
