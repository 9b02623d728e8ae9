"""The documentation site (``mkdocs.yml``): its reference pages made from the code, its
front page made from README.md, and the built site as a reader sees it in Chromium."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

from connector.config.settings import Settings
from pipelines.cli import app
from pipelines.cli.errors import ExitCode
from pipelines.cli.helptext import summary
from pipelines.cli.reference import (
    _NOTES,
    command_paths,
    commands_markdown,
    data_types_markdown,
    events_markdown,
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
            assert f"| `{section}.{name}`<br>`FORMSYNC_{section.upper()}__{name.upper()}` |" in text, (section, name)
            assert f"`FORMSYNC_{section.upper()}__{name.upper()}`" in text
    assert "| `jobs.kind`<br>(file only) |" in text
    assert "| `store.url`<br>`FORMSYNC_STORE__URL` | `str`<br>default: `sqlite:///formsync.db` |" in text


def test_every_setting_says_what_it_is_and_no_note_names_a_setting_that_is_gone():
    text = settings_markdown()
    blank = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| `") and line.endswith("|  |")]
    assert not blank, f"say what these are (a comment above the field, or pipelines/cli/reference.py's notes): {blank}"
    settings = {f"{section}.{name}" for section, info in Settings.model_fields.items()
                for name in getattr(info.annotation, "model_fields", None)
                or next(a for a in typing.get_args(info.annotation) if isinstance(a, type)).model_fields}
    assert set(_NOTES) <= settings, f"notes of settings that are gone: {set(_NOTES) - settings}"


def test_the_events_page_has_every_type_and_every_field_the_guides_bodies_hold():
    from connector.client.webhooks import EVENT_TYPES
    from tests.test_events_doc import DOC

    text = events_markdown()
    for event_type, delivered in EVENT_TYPES.items():
        assert f"| `{event_type}` | `{delivered}` |" in text
    documented: dict[str, set[str]] = {}
    for block in re.split(r"^### ", text, flags=re.M)[1:]:
        path = block.split("`")[1]
        documented[path] = set(re.findall(r"^\| `(\w+)` \|", block, re.M))

    def walk(path: str, value: object) -> list[str]:
        if not isinstance(value, dict) or path.endswith((".answers", ".display", ".metadata", ".context")):
            return []
        missing = [f"{path}.{k}" for k in value if k not in documented.get(path, set())]
        return missing + [m for k, v in value.items() for m in walk(f"{path}.{k}", v)]

    bodies = re.findall(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(bodies) == 7
    missing = [m for body in bodies for m in walk("event", json.loads(body))]
    assert not missing, f"fields a real body holds that connector.models does not read: {sorted(set(missing))}"


def test_the_data_types_page_has_every_field_type_and_each_type_in_every_destination():
    from connector.store._schema import LOGICAL_TYPES
    from connector.store._views import SQL_TYPES
    from formservice.domain.fieldtypes import FIELD_TYPES
    from pipelines.export.load import DLT_TYPES

    text = data_types_markdown()
    for field_type in FIELD_TYPES:
        assert f"`{field_type}`" in text, field_type
    for t in LOGICAL_TYPES:
        sql = [line for line in text.splitlines() if line.startswith(f"| `{t}` | {SQL_TYPES['sqlite'][t]} |")]
        assert sql and all(SQL_TYPES[db][t] in sql[0] for db in SQL_TYPES), t
        files = [line for line in text.splitlines() if line.startswith(f"| `{t}` | `")]
        assert files and f"| `{DLT_TYPES[t]}` |" in files[0], t
    assert "| `matrix` | `f_r1` text, `f_r2` text |" in text
    assert "`documents` | none" in text


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
    for code in ExitCode:
        assert f"- **`{code.value}`**: " in text, f"say when {code.name} ends a command"


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
    await page.set_viewport_size({"width": 1400, "height": 1000})  # wide enough for the nav beside the page
    for path, heading, name in [("index.html", "formsync", "front"), ("python.html", "Using formsync from Python",
                                                                       "guide"),
                                ("reference/commands.html", "Commands", "reference"),
                                ("reference/settings.html", "Settings", "settings"),
                                ("reference/data-types.html", "Data types", "data-types")]:
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


@pytest.mark.browser
async def test_long_code_lines_wrap_and_the_nav_title_lies_over_no_entry(served: str, page):  # noqa: F811
    """Debian's chromium: no code block runs its text under its edge (the quick start's
    one-liner read "...formsync d"), and with the sidebar scrolled the sticky "formsync"
    title covers none of the nav's entries ("Home")."""
    ARTIFACTS.mkdir(exist_ok=True)
    await page.set_viewport_size({"width": 1400, "height": 700})
    await page.goto(f"{served}/getting-started.html")
    cut = await page.evaluate("""() => [...document.querySelectorAll('article pre > code')]
        .filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText.slice(0, 60))""")
    assert cut == [], f"code lines cut off: {cut}"
    await page.goto(f"{served}/reference/commands.html")
    sidebar = page.locator(".md-sidebar--primary .md-sidebar__scrollwrap")
    await sidebar.evaluate("el => { el.scrollTop = 60; }")
    await page.screenshot(path=str(ARTIFACTS / "site-nav-scrolled.png"))
    covered = await page.evaluate("""() => [...document.querySelectorAll('.md-nav--primary .md-nav__link')]
        .filter(a => a.offsetParent !== null).filter(a => {
            const r = a.getBoundingClientRect();
            if (r.height === 0 || r.bottom < 60 || r.top > window.innerHeight) return false;
            const top = document.elementFromPoint(r.left + 5, r.top + r.height / 2);
            return top !== null && !a.contains(top) && top.closest('.md-nav__title') !== null;
        }).map(a => a.innerText.trim())""")
    assert covered == [], f"nav entries under the nav's title: {covered}"
    titles = await page.locator(".md-nav--primary > .md-nav__title").evaluate_all(
        "els => els.map(e => getComputedStyle(e).display)")
    assert titles == ["none"], "on a wide screen the header names the site; the nav starts with its entries"


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
