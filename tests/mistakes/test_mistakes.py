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
Contact form), ``{secret}`` (the Pro signing secret)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from openpyxl import Workbook

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


@pytest.mark.parametrize("path", _cases())
def test_mistake(path: Path, world: World, tmp_path: Path) -> None:
    case = tomllib.loads(path.read_text(encoding="utf-8"))
    _write_files(case, world, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORMSYNC_")}
    env.update({k: world.fill(v, tmp_path) for k, v in case.get("env", {}).items()})
    env["COLUMNS"] = "100"
    args = [world.fill(a, tmp_path) for a in case["args"]]
    before = world.creates()
    done = subprocess.run([str(FORMSYNC), *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          input=world.fill(case.get("stdin", ""), tmp_path), timeout=120)
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
