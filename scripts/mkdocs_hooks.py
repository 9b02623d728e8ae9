"""Hooks of the documentation site's build (``mkdocs.yml``): the front page from
README.md, and the reference pages made from the code (``pipelines.cli.reference``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s#]+)(#[^)\s]*)?\)")


def front_page(readme: str, docs: set[str]) -> str:
    """README.md as the site's front page. A link into docs/ points at that page of the
    site; a link to another file of the repository (which the site does not hold) keeps
    its words and names the file's path in code type."""
    def link(m: re.Match[str]) -> str:
        text, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        if "://" in target or target.startswith("mailto:"):
            return m.group(0)
        if target.startswith("docs/") and target[5:] in docs:
            return f"[{text}]({target[5:]}{anchor})"
        return text if target.rstrip("/").rsplit("/", 1)[-1] in text else f"{text} (`{target}`)"

    return _LINK.sub(link, readme)


def on_files(files: Files, config: Any) -> Files:
    from pipelines.cli import app
    from pipelines.cli.reference import (
        commands_markdown,
        data_types_markdown,
        events_markdown,
        exit_codes_markdown,
        settings_markdown,
    )

    pages = {
        "reference/commands.md": commands_markdown(app),
        "reference/settings.md": settings_markdown(),
        "reference/exit-codes.md": exit_codes_markdown(),
        "reference/events.md": events_markdown(),
        "reference/data-types.md": data_types_markdown(),
    }
    docs = {f.src_uri for f in files} | set(pages)  # the front page links to generated pages too
    pages["index.md"] = front_page((ROOT / "README.md").read_text(encoding="utf-8"), docs)
    for uri, content in pages.items():
        files.append(File.generated(config, uri, content=content))
    return files
