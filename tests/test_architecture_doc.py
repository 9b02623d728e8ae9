"""docs/architecture.md's tree of folders is the code's: every entry names a file or
folder that exists, every folder of the three packages is there, and every module of the
library's and the pipelines' folders (the store's and the CLI's, described in prose, aside)
has its own line, so the page cannot fall behind a move."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
PACKAGES = ("connector", "pipelines", "formservice")
# An entry: two spaces per level, then one or more names ending in .py or / (comma-separated).
ENTRY = re.compile(r"^((?:  )*)([a-z_0-9]+(?:\.py|/)(?:, [a-z_0-9]+(?:\.py|/))*)(?:\s|$)")
# Folders whose modules each have a line (the others are described together).
EVERY_MODULE = ("connector", "connector/client", "connector/receiver", "connector/process", "connector/config",
                "pipelines", "pipelines/export", "pipelines/sync", "pipelines/lifecycle", "pipelines/operate",
                "pipelines/connect", "pipelines/jobs", "pipelines/rules")


def folders_block(text: str) -> list[str]:
    """The lines of the text block under "## The folders"."""
    section = text.split("## The folders", 1)[1]
    return section.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()


def tree_entries(lines: list[str]) -> set[str]:
    """The paths the tree names, each as ``folder/`` or ``folder/module.py``."""
    found: set[str] = set()
    parents: list[str] = []
    for line in lines:
        m = ENTRY.match(line)
        if m is None:
            continue  # a description carried on
        depth = len(m.group(1)) // 2
        names = m.group(2).split(", ")
        parents = parents[:depth]
        found |= {"".join(parents) + n for n in names}
        if names[-1].endswith("/"):
            parents.append(names[-1])
    return found


def test_the_tree_parser_follows_indentation() -> None:
    lines = ["a/       x", "  b.py     y", "           more about b", "  c/", "    d.py, e.py  z", "f/"]
    assert tree_entries(lines) == {"a/", "a/b.py", "a/c/", "a/c/d.py", "a/c/e.py", "f/"}


def test_every_entry_exists() -> None:
    entries = tree_entries(folders_block(PAGE.read_text(encoding="utf-8")))
    assert {e for e in entries if e.count("/") <= 1 and e.endswith("/")} >= {f"{p}/" for p in PACKAGES}
    missing = sorted(e for e in entries if not (ROOT / e).exists())
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_every_folder_and_module_is_in_the_tree() -> None:
    entries = tree_entries(folders_block(PAGE.read_text(encoding="utf-8")))
    folders = {f"{d.relative_to(ROOT)}/" for p in PACKAGES for d in (ROOT / p).rglob("*")
               if d.is_dir() and (d / "__init__.py").exists() and "versions" not in d.parts}
    assert not sorted(folders - entries), f"folders missing from docs/architecture.md: {sorted(folders - entries)}"
    modules = {str(f.relative_to(ROOT)) for d in EVERY_MODULE for f in (ROOT / d).glob("*.py")
               if f.name != "__init__.py" and f.name != "lazy.py"}
    assert not sorted(modules - entries), f"modules missing from docs/architecture.md: {sorted(modules - entries)}"
