"""Every code block of README.md and of every page under docs/ (subfolders included) is
checked. Shell, Python and SQL blocks run as printed, in the site's reading order (the
README, then the pages of the nav, then any other page), against the one sandbox the
README's own `formsync sandbox` block starts; SQL runs on the SQLite store the blocks before
it filled. A block that cannot run here (a cloud, systemd, a person at a browser) is marked
just above with ``<!-- not run here: REASON -->``; it and every TOML, YAML, JSON and INI
block are parsed instead (``bash -n`` for shell). Placeholders (``fb_...``, ``form_123``,
``/tmp/fs``, the sandbox's default address, the Contact form's example view) are filled from
that sandbox, and the shell has FORMSYNC_SERVICE__TOKEN and FORMSYNC_SERVICE__BASE_URL
exported; commands that serve until stopped are stopped with Ctrl-C once they listen, and
must end with 0."""

from __future__ import annotations

import ast
import configparser
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from openpyxl import Workbook

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SHELL, PYTHON, SQL = {"bash", "sh", "shell", "console"}, {"python", "py"}, {"sql"}
PARSED = {"toml", "yaml", "yml", "json", "ini"}
OUTPUT = {"text"}  # what a command prints, or a tree: nothing to run
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARK = re.compile(r"^<!--\s*not run here:\s*(.*?)\s*-->$")
SERVER = re.compile(r"^\s*formsync (receive|run)\b", re.M)
UP = re.compile(r"listening on|scheduler leading")
# Runs a block as a script with top-level await allowed, as the asyncio REPL does.
RUN_PYTHON = """
import ast, asyncio, os, sys
source = open(sys.argv[1]).read()
scope = {"token": os.environ["FORMSYNC_SERVICE__TOKEN"], "form_id": os.environ["FORM_ID"]}
code = compile(source, sys.argv[1], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, scope)
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str
    illustrative: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def reading_order() -> list[Path]:
    """README.md, the pages in the site's nav order, then every other page under docs/."""
    def pages(nav: object) -> Iterator[str]:
        items = nav if isinstance(nav, list) else list(nav.values()) if isinstance(nav, dict) else [nav]
        for item in items:
            if isinstance(item, str):
                yield item
            else:
                yield from pages(item)

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = [ROOT / "docs" / page for page in pages(config["nav"]) if (ROOT / "docs" / page).is_file()]
    rest = sorted(p for p in (ROOT / "docs").rglob("*.md") if p not in in_nav)
    return [ROOT / "README.md", *in_nav, *rest]


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of a page, indented ones (in a list item) included, unindented."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent = m.group(1)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        before = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
        mark = MARK.match(before.strip())
        text = "\n".join(ln.removeprefix(indent) for ln in lines[i + 1:end]) + "\n"
        yield Block(path, i + 1, m.group(2), text, mark.group(1) if mark else None)
        i = end + 1


DOCS = reading_order()
ALL = [b for p in DOCS for b in blocks(p)]
RUNNABLE = [b for b in ALL if b.lang in SHELL | PYTHON | SQL]


def test_every_block_says_what_it_holds() -> None:
    unknown = [f"{b.where} ({b.lang or 'no language'})" for b in ALL if b.lang not in SHELL | PYTHON | SQL | PARSED | OUTPUT]
    assert not unknown, f"give these blocks a language this test knows (text for output or a tree): {unknown}"
    assert all(b.illustrative for b in ALL if b.illustrative is not None), "a mark needs its reason"
    old = [str(p.relative_to(ROOT)) for p in DOCS if "<!-- illustrative:" in p.read_text(encoding="utf-8")]
    assert not old, f"mark a block that cannot run here with <!-- not run here: why -->: {old}"


def parse_error(block: Block) -> str | None:
    """Why a block does not parse as its language (None when it does, or holds output)."""
    text = block.text
    try:
        if block.lang in SHELL:
            done = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30)
            return done.stderr.strip() or None if done.returncode else None
        if block.lang in PYTHON:
            compile(text, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        elif block.lang == "toml":
            tomllib.loads(text)
        elif block.lang in ("yaml", "yml"):
            yaml.safe_load(text)
        elif block.lang == "json":
            json.loads(text)
        elif block.lang == "ini":
            configparser.ConfigParser(strict=False, interpolation=None).read_string(text)
        elif block.lang in SQL and not sqlite3.complete_statement(text):
            return "not a complete SQL statement"
    except (SyntaxError, tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError, configparser.Error) as e:
        return str(e)
    return None


def test_every_block_parses_as_its_language() -> None:
    """Fast, and the only check of a block marked not run here."""
    broken = [f"{b.where} ({b.lang}): {err}" for b in ALL if (err := parse_error(b)) is not None]
    assert not broken, "\n".join(broken)


@dataclass
class Sandbox:
    proc: subprocess.Popen[str]
    creds: dict[str, object]
    token: str
    form: str


def start_sandbox(block: Block, env: dict[str, str], cwd: Path, fs: Path) -> Sandbox:
    proc = subprocess.Popen(["bash", "-c", "exec " + fill_paths(block.text, fs).strip()], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening" in line:
            break
    else:
        raise AssertionError(f"{block.where}: the sandbox did not start")
    creds = json.loads((fs / "creds.json").read_text())
    pro = next(w for w in creds["workspaces"] if w["plan"] == "pro")  # type: ignore[union-attr]
    return Sandbox(proc, creds, pro["token"], pro["forms"]["Contact"])


def fill_paths(text: str, fs: Path) -> str:
    return text.replace("/tmp/fs", str(fs))


def fill(text: str, sb: Sandbox, fs: Path) -> str:
    from connector.store._schema import view_name

    text = fill_paths(text, fs).replace("fb_...", sb.token).replace("http://127.0.0.1:8787", str(sb.creds["baseUrl"]))
    text = text.replace("formsync_contact_6aff95", view_name(sb.form, "Contact")).replace("frm_Contact", sb.form)
    return re.sub(r"\bform_(123|\.\.\.)", sb.form, text)


def prepare_work_dir(work: Path, sb: Sandbox, fs: Path) -> None:
    """What the blocks expect to find: a formsync.toml for this sandbox (with the README's
    example jobs), the repository's config/, and a contacts sheet."""
    shutil.copytree(ROOT / "config", work / "config")
    toml = next(b for b in ALL if b.lang == "toml" and 'id = "sync-contact"' in b.text)
    (work / "formsync.toml").write_text(
        f'[service]\nbase_url = "{sb.creds["baseUrl"]}"\ntoken = "{sb.token}"\n'
        f'[store]\nurl = "sqlite:///{work}/formsync.db"\n' + fill(toml.text, sb, fs))
    wb = Workbook()
    sheet = wb.active
    assert sheet is not None
    sheet.append(["email", "name", "externalId"])
    for n in range(3):
        sheet.append([f"reader{n}@example.com", f"Reader {n}", f"R-{n}"])
    wb.save(work / "contacts.xlsx")


def run_server_block(script: str, env: dict[str, str], cwd: Path, log: Path) -> tuple[int, str]:
    """A block whose command serves: stopped with Ctrl-C once it listens."""
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline and not UP.search(log.read_text()):
            time.sleep(0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    out = log.read_text()
    return (proc.returncode if UP.search(out) else -1), out


def run_block(block: Block, sb: Sandbox, fs: Path, work: Path, env: dict[str, str], n: int) -> str | None:
    """The block's failure, or None when it ran."""
    text = fill(block.text, sb, fs)
    if block.lang in SQL:  # on the store the blocks before it filled
        try:
            with sqlite3.connect(work / "formsync.db") as db:
                for statement in filter(str.strip, text.split(";")):
                    db.execute(statement).fetchall()
        except sqlite3.Error as e:
            return f"{block.where}: {e}\n{text}"
        return None
    if block.lang in PYTHON:
        script = work / f"block_{n}.py"
        if re.search(r"^async def test_|^def test_", text, re.M):  # a pytest file: run by pytest
            script = work / f"test_block_{n}.py"
            script.write_text(text)
            args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script),
                    "-o", "asyncio_mode=strict", "-o", "asyncio_default_fixture_loop_scope=function"]
        else:
            script.write_text(text)
            args = [sys.executable, "-c", RUN_PYTHON, str(script)]
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        code, out = done.returncode, done.stdout + done.stderr
    elif SERVER.search(text):
        code, out = run_server_block("set -euo pipefail\n" + text, env, work, work / f"block_{n}.log")
    else:
        done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + text], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)
        code, out = done.returncode, done.stdout + done.stderr
    return None if code == 0 else f"{block.where}: exit {code}\n{text}\n{out[-3000:]}"


@pytest.mark.slow
def test_every_shell_and_python_block_runs(tmp_path: Path) -> None:
    fs, work = tmp_path / "fs", tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORMSYNC_")}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", COLUMNS="100", FORMSYNC_RECEIVER__PORT="0")
    runnable = [b for b in RUNNABLE if b.illustrative is None]
    first = next(b for b in runnable if b.text.lstrip().startswith("formsync sandbox"))
    # A page showing the same command again means the sandbox already running.
    runnable = [b for b in runnable if b.text != first.text]
    sb = start_sandbox(first, env, work, fs)
    try:
        # A user's shell with the service exported, as the receive block shows for the token.
        env.update(FORMSYNC_SERVICE__TOKEN=sb.token, FORMSYNC_SERVICE__BASE_URL=str(sb.creds["baseUrl"]),
                   FORM_ID=sb.form)
        prepare_work_dir(work, sb, fs)
        failures = [f for n, b in enumerate(runnable) if (f := run_block(b, sb, fs, work, env, n)) is not None]
    finally:
        sb.proc.send_signal(signal.SIGINT)
        sb.proc.wait(30)
    assert not failures, "\n\n".join(failures)
