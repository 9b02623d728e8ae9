"""``formsync outreach`` on sheets as spreadsheet programs save them, against a sandbox on
loopback: a workbook with a title above a header written as people write headers, and
the CSV a European-locale Excel saves (BOM or cp1252, ``;``, dd/mm/yyyy, decimal comma).
Every count of a run (estimate, summary, report file, last line, JSON, ``formsync
status``, a scheduled run's record) is the same, also after an already-sent row is edited."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from openpyxl import Workbook
from sqlmodel import col, select

from connector.config.settings import load_settings
from connector.store import Store
from connector.store._tables import JobRun
from pipelines.operate.scheduler import serve
from tests.conftest import Sandbox

FORMSYNC = Path(sys.executable).parent / "formsync"
FAST = {"callsPerMinute": 10000, "createsPerMinute": 10000}
# Each test runs the command several times as a child process (about 2 s of start-up each).
pytestmark = pytest.mark.slow
ROWS = 30


def config(tmp_path: Path, sandbox: Sandbox, extra: str = "") -> Path:
    path = tmp_path / "formsync.toml"
    path.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{sandbox.pro.token}"\n'
                    f'calls_per_minute = 10000\ncreates_per_minute = 10000\n'
                    f'[store]\nurl = "sqlite:///{tmp_path}/store.db"\n'
                    f'[outreach]\nreport_dir = "{tmp_path / "reports"}"\n{extra}')
    return path


def formsync(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, without a terminal (so progress is log lines)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORMSYNC_")}
    return subprocess.run([str(FORMSYNC), *args], cwd=cwd, env={**env, "COLUMNS": "200"}, capture_output=True,
                          text=True, timeout=120)


def workbook(path: Path, *, edited: bool = False) -> Path:
    """A workbook as Excel users make one: a title and a blank row above the header,
    headers in their own words, real dates and numbers, one row repeating an id."""
    wb = Workbook()
    ws = wb.active
    assert ws is not None
    ws.title = "Spring 2026"
    ws.append(["Spring campaign: customers to invite"])
    ws.append([])
    ws.append(["ID", "Full Name", "E-mail", "Start Date", "Unit price", "Quantity", "Country"])
    for i in range(ROWS):
        price = 12.5 + i + (1 if edited and i == 7 else 0)
        ws.append([f"c-{i}", f"Person {i}", f"p{i}@example.test", date(2026, 4, 1 + i % 28), price, i % 5,
                   "Germany"])
    ws.append(["c-3", "Person 3 again", "again@example.test", date(2026, 4, 3), 1.0, 1, "France"])
    wb.save(path)
    return path


def status_line(tmp_path: Path, cfg: Path, job: str) -> str:
    done = formsync("status", "--config", str(cfg), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"{job} ("))
    return lines[at + 1].strip()


def last_json(out: str) -> dict[str, object]:
    return json.loads(out.strip().splitlines()[-1])


async def test_a_workbook_then_an_edited_sent_row_every_output_says_the_same_counts(
        sandbox: Sandbox, tmp_path: Path) -> None:
    assert (await sandbox.helper("limits.set", FAST, ws="pro")).ok
    form = sandbox.pro.forms["Everything"]
    cfg = config(tmp_path, sandbox)
    book = workbook(tmp_path / "spring.xlsx")
    report = tmp_path / "reports" / "spring-report.csv"
    run = await asyncio.to_thread(formsync, "outreach", str(book), "--form", form, "--config", str(cfg),
                                  cwd=tmp_path)
    err = run.stderr.strip().splitlines()
    assert run.returncode == 3, run.stderr
    assert err[0] == f"sending {ROWS} of {ROWS + 1} rows to {form} (1 rejected): under a minute at 10000 creates " \
                     "per minute (service.creates_per_minute)"
    assert err[1] == f"outreach: 1 of {ROWS} rows, measuring the rate", err
    assert err[-1] == f"done: sent {ROWS} of {ROWS + 1} rows; 1 rejected (see {report})"
    assert "Traceback" not in run.stderr
    assert f"spring.xlsx (sheet 'Spring 2026', header on row 3): {ROWS + 1} rows, {ROWS} valid, 1 rejected" \
        in run.stdout
    out = last_json(run.stdout)
    assert (out["rows"], out["sent"], out["invalid"], out["skipped_existing"], out["changed"]) == (ROWS + 1, ROWS, 1, 0, 0)
    lines = list(csv.DictReader(report.open()))
    assert [(ln["row"], ln["column"]) for ln in lines] == [(str(ROWS + 4), "externalId")]
    assert status_line(tmp_path, cfg, "spring").startswith(f"sent {ROWS} of {ROWS + 1} rows; 1 rejected (see {report})")
    listed = (await sandbox.rpc("requests.list", {"formId": form, "externalId": "c-9"})).data["items"]
    got = (await sandbox.rpc("requests.get", {"requestId": listed[0]["id"]})).data
    assert got["recipient"]["name"] == "Person 9"  # a Full Name column greets the recipient
    assert {k: got["prefill"][k] for k in ("email", "start_date", "unit_price", "quantity", "country")} \
        == {"email": "p9@example.test", "start_date": "2026-04-10", "unit_price": 21.5, "quantity": 4, "country": "de"}

    # One already-sent row edited: the dry run, the run and status agree on what happens to it.
    workbook(book, edited=True)
    dry = await asyncio.to_thread(formsync, "outreach", str(book), "--form", form, "--config", str(cfg),
                                  "--dry-run", cwd=tmp_path)
    assert f"dry run: would send 0 of {ROWS + 1} rows; 1 rejected, 1 changed since sent, not sent again" in dry.stdout
    run = await asyncio.to_thread(formsync, "outreach", str(book), "--form", form, "--config", str(cfg),
                                  cwd=tmp_path)
    said = f"sent {ROWS - 1} of {ROWS + 1} rows (0 now, {ROWS - 1} before); 1 rejected, 1 changed since sent, " \
           f"not sent again (see {report})"
    assert run.returncode == 3 and run.stderr.strip().splitlines() == [f"done: {said}"], run.stderr
    assert "report: 2 rows, 2 problems (the first 2 here;" in run.stdout
    out = last_json(run.stdout)
    assert (out["rows"], out["sent"], out["invalid"], out["skipped_existing"], out["changed"]) == (ROWS + 1, 0, 1, ROWS - 1, 1)
    assert len(list(csv.DictReader(report.open()))) == 2
    assert status_line(tmp_path, cfg, "spring").startswith(said + ", done")
    listed = (await sandbox.rpc("requests.list", {"formId": form, "limit": 100})).data["items"]
    assert len(listed) == ROWS, "each row sent once"


def european_csv(path: Path, encoding: str, *, days: range) -> Path:
    """The bytes Excel in a European locale saves: ``;``, dd/mm/yyyy, a decimal comma
    with dots for thousands, a title row above the header; UTF-8 with a BOM ("CSV UTF-8")
    or cp1252 ("CSV")."""
    lines = ["Kundenliste für März;;;;", ";;;;", "E-Mail;Full name;Start-Date;Unit Price;Quantity"]
    lines += [f"p{i}@example.test;Zoë Müller {i};{day:02d}/03/2026;{i}.234,5{i % 10};{i % 3}"
              for i, day in enumerate(days, start=1)]
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode(encoding))
    return path


async def test_a_european_excel_csv_is_read_as_written(sandbox: Sandbox, tmp_path: Path) -> None:
    assert (await sandbox.helper("limits.set", FAST, ws="pro")).ok
    form = sandbox.pro.forms["Everything"]
    cfg = config(tmp_path, sandbox)
    for encoding, days in (("utf-8-sig", range(1, 21)), ("cp1252", range(21, 29))):
        sheet = european_csv(tmp_path / f"kunden-{encoding}.csv", encoding, days=days)
        run = await asyncio.to_thread(formsync, "outreach", str(sheet), "--form", form, "--config", str(cfg),
                                      cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        assert run.stderr.strip().splitlines()[-1] == f"done: sent {len(days)} of {len(days)} rows"
        assert f"kunden-{encoding}.csv ({encoding}, semicolon, header on row 3)" in run.stdout
    listed = (await sandbox.rpc("requests.list", {"formId": form, "limit": 100})).data["items"]
    got = [(await sandbox.rpc("requests.get", {"requestId": r["id"]})).data for r in listed]
    prefills = [{**g["prefill"], "name": g["recipient"]["name"]} for g in got]
    assert sorted((p["name"], p["start_date"], p["unit_price"], p["quantity"]) for p in prefills) == sorted(
        [(f"Zoë Müller {i}", f"2026-03-{day:02d}", float(f"{i}234.5{i % 10}"), i % 3)
         for days in (range(1, 21), range(21, 29)) for i, day in enumerate(days, start=1)])


async def test_an_ambiguous_date_column_is_one_line_and_the_option_or_job_param_settles_it(
        sandbox: Sandbox, tmp_path: Path) -> None:
    assert (await sandbox.helper("limits.set", FAST, ws="pro")).ok
    form = sandbox.pro.forms["Everything"]
    sheet = european_csv(tmp_path / "early.csv", "cp1252", days=range(1, 13))  # every day could be a month
    job = f'[[jobs]]\nid = "early"\nkind = "outreach"\ninterval_seconds = 1\n' \
          f'params = {{ sheet = "{sheet}", form = "{form}", date_format = "dd/mm/yyyy" }}\n'
    cfg = config(tmp_path, sandbox, job)
    run = await asyncio.to_thread(formsync, "outreach", str(sheet), "--form", form, "--config", str(cfg),
                                  cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"error: {sheet}: column `Start-Date`: dates such as '01/03/2026' (row 4) read as 2026-03-01 or 2026-01-03; "
        "say which with --date-format dd/mm/yyyy or --date-format mm/dd/yyyy (job param date_format)"]
    assert not (await sandbox.rpc("requests.list", {"formId": form})).data["items"], "nothing sent"

    # The scheduled job declares the order; a row that is no date is that row's problem,
    # and the run is recorded as done with it rejected, the words status shows too.
    with sheet.open("ab") as fh:
        fh.write("late@example.test;Late;soon;1,5;1\r\n".encode("cp1252"))
    store = Store(f"sqlite:///{tmp_path}/store.db")
    store.migrate()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(load_settings(cfg), store, stop=stop))
    try:
        for _ in range(300):
            with store.database.reader() as s:
                ran = [r for r in s.exec(select(JobRun).order_by(col(JobRun.id))) if r.outcome != "running"][:1]
            if ran:
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    report = tmp_path / "reports" / "early-report.csv"
    assert [(r.outcome, r.summary) for r in ran] == [("ok", f"done: sent 12 of 13 rows; 1 rejected (see {report})")]
    assert [ln["problem"] for ln in csv.DictReader(report.open())] == ["'soon' is not a date"]
    assert status_line(tmp_path, cfg, "early").startswith(f"sent 12 of 13 rows; 1 rejected (see {report}), done ")
    listed = (await sandbox.rpc("requests.list", {"formId": form, "limit": 100})).data["items"]
    got = (await sandbox.rpc("requests.get", {"requestId": listed[0]["id"]})).data["prefill"]
    assert re.fullmatch(r"2026-03-(0[1-9]|1[0-2])", got["start_date"]), got
    assert len(listed) == 12
