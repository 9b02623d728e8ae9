"""The reference pages are committed under docs/reference/ (links to them work in a checkout,
on the code host and on the site) and are exactly what the code makes now: a change that adds
a flag or a setting regenerates them with ``python -m pipelines.cli.reference``."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from pipelines.cli import app
from pipelines.cli.reference import JOURNEY, PAGES_DIR, reference_pages, stale_pages

ROOT = Path(__file__).resolve().parent.parent
_LINK = re.compile(r"\]\(([^)\s#:]+)(?:#[^)\s]*)?\)")


def test_the_committed_reference_pages_are_what_the_code_makes() -> None:
    for name, text in reference_pages().items():
        committed = (ROOT / PAGES_DIR / name).read_bytes()
        assert committed == text.encode("utf-8"), (
            f"{PAGES_DIR}/{name} is stale: run `python -m pipelines.cli.reference` and commit it")
    assert stale_pages(ROOT) == []


def test_stale_pages_names_a_page_that_differs_or_is_missing(tmp_path: Path) -> None:
    (tmp_path / PAGES_DIR).mkdir(parents=True)
    pages = reference_pages()
    for name, text in pages.items():
        (tmp_path / PAGES_DIR / name).write_text(text, encoding="utf-8")
    (tmp_path / PAGES_DIR / "settings.md").write_text(pages["settings.md"] + " ", encoding="utf-8")
    (tmp_path / PAGES_DIR / "events.md").unlink()
    assert sorted(stale_pages(tmp_path)) == ["events.md", "settings.md"]


def test_the_commands_reference_follows_the_journey_and_names_every_command() -> None:
    top = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert set(JOURNEY) == top, f"place these in JOURNEY: {top - set(JOURNEY)}; gone: {set(JOURNEY) - top}"
    text = reference_pages()["commands.md"]
    headings = [m.group(1).split()[0] for m in re.finditer(r"^## `formsync ([^`\s]+)", text, re.M)]
    assert list(dict.fromkeys(headings)) == list(JOURNEY)
    assert headings[0] == "demo"


def test_links_from_the_readme_and_the_guides_to_docs_resolve_in_a_checkout() -> None:
    dead = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if target.endswith(".md") and not (page.parent / target).resolve().is_file():
                dead.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not dead, f"links to pages that are not in the checkout: {dead}"
