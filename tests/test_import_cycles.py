"""The three packages (formservice, connector, pipelines) import each other without a
cycle: every import statement, those inside functions and under ``if TYPE_CHECKING``
included, forms one graph across the packages and their subpackages with no loop. An
import deferred into a function still ties the two modules' concerns together (and
only hides the loop until that function runs), and a cycle that only the type checker
follows ties them together too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import connector
import formservice
import pipelines

ROOTS = {p.__name__: Path(p.__file__).parent for p in (formservice, connector, pipelines)}


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module: at its level, under ``if TYPE_CHECKING``, in
    ``try`` blocks, and inside functions, methods and classes."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def modules() -> dict[str, Path]:
    """Every module of the three packages, by dotted name."""
    return {module_name(root, p): p for root in ROOTS.values() for p in root.rglob("*.py")}


def imported(node: ast.Import | ast.ImportFrom, package: str, files: dict[str, Path]) -> set[str]:
    """The modules of ``files`` that one import statement, in a module of ``package``, names:
    ``from a import b`` names the module ``a.b`` when there is one, else ``a``."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        base = package.split(".")
        if node.level > 1:
            base = base[: len(base) - node.level + 1]
        source = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
        targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in files else source for a in node.names]
    return {t for t in targets if t in files}


def import_graph(files: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module -> the modules it imports, over the three packages together (an edge from
    connector to pipelines and back is a cycle too)."""
    files = modules() if files is None else files
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in all_imports(ast.parse(path.read_text())):
            edges |= imported(node, package, files)
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (as the list of modules around it), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_checker_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_the_sandbox_binding_imported_by_the_app() -> None:
    graph = import_graph()
    assert "formservice.sandbox.binding" in graph["formservice.app"]
    assert "formservice.app" in graph["formservice.sandbox.runner"]


def test_the_graph_sees_imports_made_for_the_type_checker_only() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .lease import LeaderLock\n")
    assert sorted(n.module or "" for n in all_imports(tree) if isinstance(n, ast.ImportFrom)) == ["lease", "typing"]


def test_the_graph_sees_imports_inside_functions_and_methods() -> None:
    tree = ast.parse("def f():\n    from .metrics import render\n"
                     "class C:\n    def m(self):\n        import connector.receiver\n")
    assert [n.module for n in all_imports(tree) if isinstance(n, ast.ImportFrom)] == ["metrics"]
    assert [a.name for n in all_imports(tree) if isinstance(n, ast.Import) for a in n.names] == ["connector.receiver"]
    # the scheduler starts the receiver and its metrics only when asked to, inside serve()
    graph = import_graph()
    assert {"connector.receiver.app", "pipelines.operate.metrics"} <= graph["pipelines.operate.scheduler"]


def test_the_graph_spans_the_packages_and_their_subpackages() -> None:
    graph = import_graph()
    assert "connector.client.rpc" in graph["pipelines.sync.poll"]  # pipelines -> connector
    assert "pipelines.sync.poll" in graph["pipelines.campaign.actions"]  # subpackage -> subpackage
    assert "connector.client.rpc" in graph["formservice.pytest_plugin"]  # formservice -> connector


def test_a_cycle_through_a_function_level_import_across_packages_is_found(tmp_path: Path) -> None:
    """A loop closed only by an import inside a function, from one package into another."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = {"a": tmp_path / "a" / "__init__.py", "a.x": tmp_path / "a" / "x.py",
             "b": tmp_path / "b" / "__init__.py", "b.y": tmp_path / "b" / "y.py"}
    files["a"].write_text("")
    files["b"].write_text("")
    files["a.x"].write_text("from b.y import g\n")
    files["b.y"].write_text("def g():\n    from a import x\n    return x\n")
    assert find_cycle(import_graph(files)) == ["a.x", "b.y", "a.x"]


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_no_import_cycle_within_a_package(package: str) -> None:
    graph = import_graph()
    inside = {m: {t for t in e if t.split(".")[0] == package} for m, e in graph.items() if m.split(".")[0] == package}
    assert find_cycle(inside) is None


def test_no_import_cycle_across_the_packages() -> None:
    assert find_cycle(import_graph()) is None
