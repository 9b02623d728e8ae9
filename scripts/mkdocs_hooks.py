"""Hooks of the documentation site's build (``mkdocs.yml``): the front page from
README.md, and a check that the committed reference pages are what the code makes
(``pipelines.cli.reference``)."""

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
    """The front page from README.md. The reference pages are committed under
    docs/reference/ (so links work in a checkout too): the build only checks that they are
    what the code makes now."""
    from mkdocs.exceptions import PluginError

    from pipelines.cli.reference import stale_pages

    if stale := stale_pages(ROOT):
        raise PluginError(f"docs/reference/ is stale ({', '.join(stale)}): run `python -m pipelines.cli.reference` "
                          "and commit the pages")
    docs = {f.src_uri for f in files}
    files.append(File.generated(config, "index.md", content=front_page((ROOT / "README.md").read_text(encoding="utf-8"),
                                                                       docs)))
    return files
