"""Each package's modules (formservice, connector, pipelines) import each other without a
cycle: the module-level imports, those under ``if TYPE_CHECKING`` included (a cycle that
only the type checker follows still ties the modules' concerns together), form a graph
with no loop."""

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


def top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements at a module's level (not those inside functions), those
    under ``if TYPE_CHECKING`` included."""
    out: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(node)
        elif isinstance(node, ast.If):
            stack.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            stack.extend(node.body + node.orelse + node.finalbody)
    return out


def import_graph(package: str = "formservice") -> dict[str, set[str]]:
    root = ROOTS[package]
    files = {module_name(root, p): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in top_level_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in files else source for a in node.names]
            edges |= {t for t in targets if t in files and t != name}
        graph[name] = edges
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


def test_the_graph_sees_imports_made_for_the_type_checker_only(tmp_path: Path) -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .lease import LeaderLock\n")
    assert [n.module for n in top_level_imports(tree) if isinstance(n, ast.ImportFrom)] == ["lease", "typing"]


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_no_import_cycle(package: str) -> None:
    assert find_cycle(import_graph(package)) is None
