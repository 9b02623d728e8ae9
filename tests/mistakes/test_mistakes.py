"""Every ordinary mistake a user can make at the command line, one case file each.

A case (``cases/<name>.toml``) names a `formsync` command, the files it finds, the
environment it runs in, the exit code it must end with and a pattern its message must
contain. Every case is also held to what the README promises of every mistake: no
traceback, a short message on stderr, no secret in any output, and nothing sent to the
service or stored.

Case keys: ``about`` (what the user did), ``args`` (the command line), ``exit``,
``message`` (a regular expression searched in stderr), optional ``max_lines`` (stderr
lines allowed, default 2), ``secrets`` (more strings no output may hold: a database
password), ``stdin``, ``[env]``, ``[files]`` (relative path -> UTF-8 text),
``[[encoded]]`` (``path``, ``text``, ``encoding``: a text file in another encoding, a BOM
included where the codec writes one), ``[[workbooks]]`` (``path`` and ``sheets``, a table
of sheet name -> rows: an XLSX file). Values may hold placeholders filled from the
running sandbox: ``{dir}`` (the case's own directory, the working directory too),
``{base_url}``, ``{port}`` (its port: one in use), ``{token}``, ``{ws}``, ``{form}`` (the Pro
workspace's Contact form),
``{unpublished_form}`` (its Draft survey), ``{other_form}`` (the Business workspace's
Contact form), ``{secret}`` (the Pro signing secret).

Each case's command runs in a child forked from a server that has the CLI's modules
imported (``tests/forkserver.py``): a fresh process for the command, without an interpreter start
and the imports per case. ``FORMSYNC_TESTS_SUBPROCESS=1`` runs every case as its own
``formsync`` process instead, and one test runs cases both ways and compares the outcomes."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tomllib
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from openpyxl import Workbook

from tests.forkserver import FORMSYNC_ENTRY, FORMSYNC_MODULES, ForkServer, forking

CASES = Path(__file__).parent / "cases"
FORMSYNC = Path(sys.executable).parent / "formsync"
STORE_TABLES = ("formsync_events", "formsync_requests", "formsync_submissions", "formsync_outreach_rows")


@dataclass(frozen=True)
class World:
    """The running sandbox a case's placeholders are filled from."""

    values: dict[str, str]
    secrets: tuple[str, ...]

    def fill(self, text: str, case_dir: Path) -> str:
        return text.format_map({**self.values, "dir": str(case_dir)})

    def creates(self) -> int:
        """Creates the service counted for the Pro token: what 'nothing sent' is checked by."""
        body = json.dumps({"method": "calls.list", "params": {"method": "requests.create"}}).encode()
        req = urllib.request.Request(self.values["base_url"] + "/api/sandbox", data=body, headers={
            "Authorization": f"Bearer {self.values['token']}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(json.load(resp)["data"]["count"])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("sandbox")
    creds_file = base / "creds.json"
    proc = subprocess.Popen(
        [str(FORMSYNC), "sandbox", "--port", "0", "--data-dir", str(base / "data"),
         "--credentials-file", str(creds_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "listening" in line:
                break
        else:
            raise AssertionError(f"the sandbox did not start: {proc.stderr.read() if proc.stderr else ''}")
        creds = json.loads(creds_file.read_text())
        by_plan = {ws["plan"]: ws for ws in creds["workspaces"]}
        pro = by_plan["pro"]
        values = {
            "base_url": creds["baseUrl"], "port": str(urlsplit(creds["baseUrl"]).port), "token": pro["token"], "ws": pro["id"], "secret": pro["signingSecret"],
            "form": pro["forms"]["Contact"], "unpublished_form": pro["forms"]["Draft survey"],
            "other_form": by_plan["business"]["forms"]["Contact"],
        }
        secrets = tuple(s for ws in creds["workspaces"] for s in (ws["token"], ws["signingSecret"]))
        yield World(values, secrets)
    finally:
        proc.terminate()
        proc.wait(30)


def _write_files(case: dict[str, Any], world: World, case_dir: Path) -> None:
    for rel, text in case.get("files", {}).items():
        path = case_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(world.fill(text, case_dir), encoding="utf-8")
    for item in case.get("encoded", []):
        (case_dir / item["path"]).write_bytes(world.fill(item["text"], case_dir).encode(item["encoding"]))
    for item in case.get("workbooks", []):
        wb = Workbook()
        assert wb.active is not None
        wb.remove(wb.active)
        for name, rows in item["sheets"].items():
            sheet = wb.create_sheet(name)
            for row in rows:
                sheet.append([world.fill(v, case_dir) if isinstance(v, str) else v for v in row])
        wb.save(case_dir / item["path"])


def _stored_rows(case_dir: Path) -> int:
    """Rows in the connector's tables of every SQLite store the case left behind."""
    total = 0
    for db in case_dir.rglob("*.db"):
        with sqlite3.connect(db) as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            total += sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in STORE_TABLES if t in names)
    return total


def _cases() -> list[Any]:
    return [pytest.param(p, id=p.stem) for p in sorted(CASES.glob("*.toml"))]


def test_the_corpus_is_large_enough() -> None:
    assert len(_cases()) >= 40, "issue: at least 40 mistakes are covered"


def _base_env() -> dict[str, str]:
    """The environment every case starts from: the tests' own, without formsync's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORMSYNC_")}
    env["COLUMNS"] = "100"
    return env


Run = Callable[[list[str], Path, dict[str, str], str], subprocess.CompletedProcess[str]]


def _subprocess(argv: list[str], cwd: Path, env: dict[str, str], stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, input=stdin, timeout=120)


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """Runs a command in a child of the fork server, as :func:`_subprocess` runs it."""
    with ForkServer(FORMSYNC_ENTRY, FORMSYNC_MODULES, _base_env(), tmp_path_factory.mktemp("forkserver")) as server:
        yield lambda argv, cwd, env, stdin: server.run(argv, cwd=cwd, env=env, input=stdin, timeout=120)


@pytest.fixture(scope="module")
def run(request: pytest.FixtureRequest) -> Run:
    if not forking():
        return _subprocess
    forked_run: Run = request.getfixturevalue("forked")
    return forked_run


@dataclass(frozen=True)
class Command:
    """A case's command line, environment and stdin, its placeholders filled."""

    argv: list[str]
    env: dict[str, str]
    stdin: str


def _prepare(case: dict[str, Any], world: World, case_dir: Path) -> Command:
    """Write the case's files into ``case_dir`` and fill in its command."""
    _write_files(case, world, case_dir)
    env = _base_env()
    env.update({k: world.fill(v, case_dir) for k, v in case.get("env", {}).items()})
    env["COLUMNS"] = "100"
    args = [world.fill(a, case_dir) for a in case["args"]]
    return Command([str(FORMSYNC), *args], env, world.fill(case.get("stdin", ""), case_dir))


@pytest.mark.parametrize("path", _cases())
def test_mistake(path: Path, world: World, run: Run, tmp_path: Path) -> None:
    case = tomllib.loads(path.read_text(encoding="utf-8"))
    command = _prepare(case, world, tmp_path)
    before = world.creates()
    done = run(command.argv, tmp_path, command.env, command.stdin)
    out = done.stdout + done.stderr
    where = f"{path.name}: {case['about']}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert done.returncode == case["exit"], f"exit {done.returncode}, want {case['exit']}; {where}"
    assert re.search(case["message"], done.stderr), f"stderr lacks /{case['message']}/; {where}"
    assert "Traceback" not in out, where
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) <= case.get("max_lines", 2), f"{len(lines)} lines on stderr; {where}"
    for secret in (*world.secrets, *case.get("secrets", [])):
        assert secret not in out, f"a secret was printed; {where}"
    assert world.creates() == before, f"a request was created; {where}"
    assert _stored_rows(tmp_path) == 0, f"something was stored; {where}"


# A usage mistake (Click's path), a settings file read, the store and the service reached,
# a spreadsheet read, and dlt's configuration read from the working directory.
@pytest.mark.parametrize("name", ["unknown_command", "config_not_utf8", "campaign_unknown_job",
                                  "outreach_xlsx_data_on_second_sheet", "load_postgres_without_credentials"])
def test_a_forked_case_ends_as_its_own_process_does(name: str, world: World, forked: Run, tmp_path: Path) -> None:
    """The same case run as a `formsync` process and in a forked child, in the same
    directory made afresh: the same exit code, stdout and stderr."""
    case = tomllib.loads((CASES / f"{name}.toml").read_text(encoding="utf-8"))
    case_dir = tmp_path / "case"
    outcomes = []
    for how in (_subprocess, forked):
        shutil.rmtree(case_dir, ignore_errors=True)
        case_dir.mkdir()
        command = _prepare(case, world, case_dir)
        done = how(command.argv, case_dir, command.env, command.stdin)
        outcomes.append((done.returncode, done.stdout, done.stderr))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == case["exit"]
