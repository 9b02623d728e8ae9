"""The public surface of the two library packages: ``connector`` and ``pipelines`` each
list in ``__all__`` what a user imports, every listed name resolves, nothing private is
listed, and importing a package alone stays light (the CLI imports it on every start).
The folders that took a module's place (``connector.client``, ``connector.receiver``,
``pipelines.export``, ``pipelines.sync``) offer what the module offered, the same way, and
the paths the documentation and a deployment name keep working."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

PACKAGES = ["connector", "pipelines"]
# Folders named as the module they replaced: each re-exports that module's names.
SUBPACKAGES = ["connector.client", "connector.receiver", "pipelines.export", "pipelines.sync"]
# Libraries only some names need: a bare ``import connector`` must not load them.
HEAVY = ["aiohttp", "httpx", "mcp", "sqlalchemy", "sqlmodel", "pyarrow", "pandas", "apscheduler"]


def package(name: str) -> ModuleType:
    return importlib.import_module(name)


def type_checking_sources(module: ModuleType) -> dict[str, str]:
    """Each name the module imports under ``if TYPE_CHECKING:`` (what a type checker
    sees) and the module it comes from, absolute."""
    tree = ast.parse(Path(module.__file__ or "").read_text())
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.level == 1
                names.update({a.asname or a.name: f"{module.__name__}.{imp.module}" for a in imp.names})
    return names


def type_checking_imports(module: ModuleType) -> set[str]:
    return set(type_checking_sources(module))


@pytest.mark.parametrize("name", PACKAGES + SUBPACKAGES)
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


@pytest.mark.parametrize("name", PACKAGES + SUBPACKAGES)
def test_type_checkers_see_the_same_names(name: str) -> None:
    assert type_checking_imports(package(name)) == set(package(name).__all__)


@pytest.mark.parametrize("name", PACKAGES + SUBPACKAGES)
def test_an_unknown_name_is_an_attribute_error(name: str) -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = package(name).no_such_name


@pytest.mark.parametrize("name", PACKAGES + SUBPACKAGES)
def test_importing_the_package_loads_no_heavy_library(name: str) -> None:
    probe = f"import sys, {name}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_a_folders_names_are_its_modules_objects(name: str) -> None:
    pkg = package(name)
    for attr, source in type_checking_sources(pkg).items():
        assert getattr(pkg, attr) is getattr(importlib.import_module(source), attr), (attr, source)
    star: dict[str, object] = {}
    exec(f"from {name} import *", star)
    assert set(star) - {"__builtins__"} == set(pkg.__all__)


def test_the_documented_paths_keep_working() -> None:
    """What README.md, docs/ and a deployment name, after the modules moved into folders."""
    from connector.client import FormClient
    from connector.receiver import parse_event
    from pipelines import frames, poll
    from pipelines.export import export
    from pipelines.sync import sync_form

    assert export.__module__ == "pipelines.export.write" and callable(export)
    assert package("pipelines.export").export is export  # the function, not a module
    assert frames.__name__ == "pipelines.export.frames" and callable(frames.iter_wide)
    assert poll.poll_once is package("pipelines.sync.poll").poll_once
    assert package("pipelines").status.collect_status is package("pipelines.operate.status").collect_status
    assert sync_form.__module__ == "pipelines.sync.submissions"
    assert FormClient.__module__ == "connector.client.rpc"
    assert parse_event.__module__ == "connector.receiver._delivery"
    assert package("connector.signing").verify is package("connector").verify
    from formservice.sandbox.runner import SandboxServer

    assert SandboxServer.__module__ == "formservice.sandbox.runner"
    assert package("formservice.sandbox").SandboxServer is SandboxServer


def test_gunicorns_paths_keep_working() -> None:
    """``gunicorn -c python:connector.gunicorn_conf 'connector.serving:receiver_app'``, as
    docs/deploy.md and the units people wrote from it name them."""
    probe = "import connector.gunicorn_conf, connector.serving; print(callable(connector.serving.receiver_app))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_the_store_offers_what_its_documented_methods_take_and_give() -> None:
    """``connector.store.__all__`` is the Store and the types of its documented methods;
    every other module of the store is private (``_name``) and none is listed."""
    store = package("connector.store")
    assert store.__all__ == sorted(store.__all__)
    star: dict[str, object] = {}
    exec("from connector.store import *", star)
    assert set(star) - {"__builtins__"} == set(store.__all__)
    for name in store.__all__:
        assert getattr(store, name).__module__.startswith("connector.store._"), name
    modules = {p.stem for p in Path(store.__file__ or "").parent.glob("*.py")} - {"__init__"}
    assert modules and all(m.startswith("_") for m in modules), sorted(m for m in modules if not m.startswith("_"))


def public_import_problems(source: str) -> list[str]:
    """What a guide's Python imports from formsync's packages that is not public: a module
    path with a private part, or a name outside its module's ``__all__`` (a public
    submodule, as ``from pipelines import frames``, is public too)."""
    ours = {"connector", "formservice", "pipelines"}
    problems: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            paths = [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            paths = [(node.module, [a.name for a in node.names])]
        else:
            continue
        for path, names in paths:
            if path.split(".")[0] not in ours:
                continue
            if any(part.startswith("_") for part in path.split(".")):
                problems.append(f"{path} is private")
                continue
            module = importlib.import_module(path)
            listed = set(getattr(module, "__all__", ()))
            for name in names:
                value = getattr(module, name)
                is_module = isinstance(value, ModuleType) and not any(
                    part.startswith("_") for part in value.__name__.split("."))
                if name not in listed and not is_module:
                    problems.append(f"{name} is not in {path}.__all__")
    return problems


def test_a_private_path_or_an_unlisted_name_is_found() -> None:
    assert public_import_problems("from connector.store._schema import Column") == ["connector.store._schema is private"]
    assert public_import_problems("import connector._lazy") == ["connector._lazy is private"]
    assert public_import_problems("from connector import Store, lazy_exports") == ["lazy_exports is not in connector.__all__"]
    assert public_import_problems("from pipelines import frames\nimport json") == []


def test_the_guides_import_only_public_names() -> None:
    from tests.test_readme_blocks import ALL, PYTHON

    found = [f"{b.where}: {problem}" for b in ALL if b.lang in PYTHON for problem in public_import_problems(b.text)]
    assert not found, found
