"""The documentation site (``mkdocs.yml``): its reference pages made from the code, its
front page made from README.md, and the built site as a reader sees it in Chromium."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from connector.config.settings import Settings
from pipelines.cli import app
from pipelines.cli.errors import ExitCode
from pipelines.cli.helptext import summary
from pipelines.cli.reference import (
    command_paths,
    commands_markdown,
    exit_codes_markdown,
    field_comments,
    plain,
    settings_markdown,
)
from tests.pages.test_pages_browser import ARTIFACTS, browser, page  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from mkdocs_hooks import front_page  # noqa: E402


def test_the_commands_page_has_every_command_and_option_as_help_prints_it():
    text = commands_markdown(app)
    root = typer.main.get_command(app)
    paths = command_paths(root)
    assert len(paths) > 20 and "formsync campaign remind" in paths and "formsync subscribe secret" in paths
    for path in paths:
        assert f"## `{path}`" in text, path
    export = root.commands["export"]  # type: ignore[attr-defined]
    for option in export.params:
        assert all(f"`{o}" in text for o in option.opts), option.opts
    assert "[bold]" not in text and "[/bold]" not in text, "no Rich markup left"
    assert "formsync export --format csv" in text or "Example" not in text


def test_the_settings_page_has_every_setting_with_its_type_default_and_variable():
    text = settings_markdown()
    for section, info in Settings.model_fields.items():
        model = info.annotation
        fields = getattr(model, "model_fields", None)
        if fields is None:  # [[jobs]]: a list of JobSettings
            continue
        for name in fields:
            assert f"| `{section}.{name}` |" in text, (section, name)
            assert f"`FORMSYNC_{section.upper()}__{name.upper()}`" in text
    assert "| `jobs.kind` |" in text and "(file only)" in text
    assert "| `store.url` | `str` | `sqlite:///formsync.db` |" in text


def test_field_comments_are_the_lines_just_above_each_field():
    class Example:
        # the first line
        # and the second
        first: int = 1
        second: int = 2  # not above: ignored
        # third's
        third: int = 3

    assert field_comments(Example) == {"first": "the first line and the second", "third": "third's"}


def test_the_exit_codes_page_has_every_code():
    text = exit_codes_markdown()
    for code in ExitCode:
        assert f"| `{code.value}` | `{code.name}` |" in text
    assert "usage or configuration error" in text


def test_plain_drops_rich_markup_and_keeps_brackets_that_are_words():
    assert plain("Example: [bold]formsync run[/bold]") == "Example: formsync run"
    assert plain("Send them to \\[notify] (the same)") == "Send them to [notify] (the same)"


def test_the_front_page_links_into_the_site_and_names_other_files():
    readme = ("See [the events](docs/events.md#headers), [the sheet](pipelines/cli/data/contacts.csv), "
              "[`config/x.toml`](config/x.toml) and [dlt](https://dlthub.com).")
    assert front_page(readme, {"events.md"}) == (
        "See [the events](events.md#headers), the sheet (`pipelines/cli/data/contacts.csv`), "
        "`config/x.toml` and [dlt](https://dlthub.com).")


# -- the built site -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run([str(Path(sys.executable).with_name("mkdocs")), "build", "--strict", "--site-dir", str(out)],
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return out


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.mark.browser
async def test_the_site_reads_in_chromium(served: str, page):  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    for path, heading, name in [("index.html", "formsync", "front"), ("python.html", "Using formsync from Python",
                                                                       "guide"),
                                ("reference/commands.html", "Commands", "reference")]:
        resp = await page.goto(f"{served}/{path}")
        assert resp is not None and resp.status == 200, path
        assert heading in await page.locator("article h1").first.inner_text()
        text = await page.locator("article").inner_text()
        assert len(text) > 1000, f"{path} reads almost empty"
        shot = ARTIFACTS / f"site-{name}.png"
        await page.screenshot(path=str(shot))
        assert shot.stat().st_size > 20_000, f"{path}'s screenshot is blank"
        nav = await page.locator("nav.md-nav--primary").inner_text()
        assert "Reference" in nav and "Guides" in nav
    await page.goto(f"{served}/reference/settings.html")
    assert "FORMSYNC_STORE__URL" in await page.locator("article").inner_text()


def test_no_help_text_holds_brackets_that_rich_would_eat():
    import re

    eaten = re.compile(r"(?<!\\)\[(?!/?(bold|italic|dim|code)\])[^\]\s]+\]")
    for path, cmd in command_paths(typer.main.get_command(app)).items():
        for text in [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]:
            assert not eaten.search(text), f"{path}: escape the brackets in {text[:80]!r}"


def test_a_summary_is_the_first_sentence_up_to_a_period_or_colon_outside_parentheses():
    from rich.text import Text

    def short() -> None:
        """Do the thing ([bold]now[/bold]: at once). Then more."""

    def colon() -> None:
        """Show the state of things: whether a scheduler is alive, the jobs."""

    def bracket() -> None:
        """Run the \\[\\[jobs]] tables. More."""

    assert summary(short) == "Do the thing (now: at once)."
    assert summary(colon) == "Show the state of things."
    assert Text.from_markup(summary(bracket)).plain == "Run the [[jobs]] tables.", "as Rich shows it"
