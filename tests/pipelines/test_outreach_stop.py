"""``formsync outreach`` stopped by Ctrl-C or SIGTERM while it waits for the rate limit:
the rows sent so far are kept, one line says how far it got and the exact command that
resumes, the exit code is the shell's (130 / 143), and that command sends the rest once."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.conftest import Sandbox

FORMSYNC = Path(sys.executable).parent / "formsync"


def sent_rows(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "formsync_outreach_rows" not in names:
            return 0
        return int(conn.execute("SELECT count(*) FROM formsync_outreach_rows WHERE state = 'sent'").fetchone()[0])


async def wait_until(check: object, seconds: float) -> None:
    for _ in range(int(seconds * 10)):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError("timed out")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
async def test_a_stopped_outreach_says_how_to_resume_and_the_command_sends_the_rest(
        sig: signal.Signals, code: int, sandbox: Sandbox, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    db = tmp_path / "s.db"
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{sandbox.pro.token}"\n'
                   f'creates_per_minute = 2\n[store]\nurl = "sqlite:///{db}"\n'
                   f'[outreach]\nreport_dir = "{tmp_path / "reports"}"\n')
    sheet = tmp_path / "people.csv"
    sheet.write_text("externalId,email,name\n" + "".join(f"p-{i},p{i}@example.test,P {i}\n" for i in range(5)))
    env = {**os.environ, "COLUMNS": "400"}
    proc = await asyncio.create_subprocess_exec(
        str(FORMSYNC), "outreach", str(sheet), "--form", form, "--config", str(cfg), "--delimiter", ",",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        await wait_until(lambda: sent_rows(db) == 2, 60)  # the third waits a minute for the limit
        await asyncio.sleep(0.5)
        proc.send_signal(sig)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = err.decode()
    assert proc.returncode == code, text
    assert "sending 5 of 5 rows to" in text and "about 2 min at 2 creates per minute" in text
    last = text.strip().splitlines()[-1]
    assert last.startswith("error: interrupted: sent 2 of 5 rows, 3 left; run again to continue: formsync outreach "), text
    assert "outreach: 1 of 5 rows, measuring the rate" in text, "without a terminal, progress is a log line"
    assert "Traceback" not in text
    report = json.loads(out.decode().strip().splitlines()[-1])
    assert (report["sent"], report["stopped"], report["left"]) == (2, True, 3)

    resume = shlex.split(last.split("run again to continue: ", 1)[1])
    assert resume[:2] == ["formsync", "outreach"] and "--delimiter" in resume
    done = await asyncio.create_subprocess_exec(
        str(FORMSYNC), *resume[1:], stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**env, "FORMSYNC_SERVICE__CREATES_PER_MINUTE": "1000"})
    out, err = await asyncio.wait_for(done.communicate(), 60)
    assert done.returncode == 0, err.decode()
    again = json.loads(out.decode().strip().splitlines()[-1])
    assert (again["sent"], again["skipped_existing"]) == (3, 2)
    listed = (await sandbox.rpc("requests.list", {"formId": form})).data["items"]
    assert sorted(r["externalId"] for r in listed if r.get("externalId", "").startswith("p-")) == [
        f"p-{i}" for i in range(5)], "each row sent once"
