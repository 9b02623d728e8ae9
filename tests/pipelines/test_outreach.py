"""The outreach pipeline against a real sandbox over loopback HTTP, with a SQLite store:
validation report, sends counted by the server, re-runs, changed rows, XLSX, dry run."""

from __future__ import annotations

import asyncio
import csv
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlmodel import select
from typer.testing import CliRunner

from connector.client.rpc import FormClient
from connector.models import FieldDescriptor, Option
from connector.store import Store
from connector.store._tables import OutreachRow, RequestRow
from pipelines.cli import app
from pipelines.outreach import (
    Documents,
    DocumentUnreadable,
    OutreachRefused,
    RowParams,
    idempotency_key,
    row_identity,
    run_outreach,
    validate_row,
)
from pipelines.sync.poll import poll_once
from tests.conftest import Sandbox

# Each test that uses the sandbox runs in both its dialects (tests/conftest.py).
pytestmark = pytest.mark.dialects

FAST = {"callsPerMinute": 10000, "createsPerMinute": 10000}
HEADER = ["externalId", "name", "email", "topic", "message", "source", "readonly"]


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[FormClient]:
    assert (await sandbox.helper("limits.set", FAST, ws="pro")).ok
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        yield fc


def sheet_rows(n: int = 60, *, bad: bool = True) -> list[dict[str, str]]:
    rows = []
    for i in range(n):
        rows.append({"externalId": f"c-{i}", "name": f"Person {i}", "email": f"p{i}@example.test",
                     "topic": ["Sales", "support", "OTHER"][i % 3], "message": f"hello {i}" if i % 2 else "",
                     "source": "sheet", "readonly": "name" if i % 4 == 0 else ""})
    if bad:
        rows[5]["topic"] = "Billing"
        rows[17]["message"], rows[17]["readonly"] = "", "message"
    return rows


def write_csv(path: Path, rows: list[dict[str, str]], extra: dict[int, dict[str, str]] | None = None) -> Path:
    cols = list(HEADER) + (["colour"] if extra else [])
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for i, r in enumerate(rows):
            w.writerow({**r, **({"colour": ""} if extra else {}), **(extra or {}).get(i, {})})
    return path


async def count_requests(client: FormClient, form_id: str) -> int:
    return len([r async for r in client.iter_requests(form_id=form_id)])


@pytest.mark.full_dialect_only(reason="reads back what was sent through record fields the spec leaves 'not shown' (prefill, context)")
async def test_bad_rows_reported_good_rows_sent_once_and_rerun_sends_nothing(
        sandbox: Sandbox, client: FormClient, store: Store, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    before = await count_requests(client, form)
    sheet = write_csv(tmp_path / "contacts.csv", sheet_rows())
    report_path = tmp_path / "report.csv"
    rep = await run_outreach(client, store, sheet, form, job="spring", report_path=report_path)
    assert (rep.rows, rep.sent, rep.invalid, rep.skipped_existing, rep.changed, rep.failed) == (60, 58, 2, 0, 0, 0)
    with report_path.open() as fh:
        lines = list(csv.DictReader(fh))
    assert [(ln["row"], ln["column"]) for ln in lines] == [("7", "topic"), ("19", "readonly")]
    assert "Sales (sales), Support (support), Other (other)" == lines[0]["accepted"]
    assert "'Billing' is not an option of topic" in lines[0]["problem"]
    assert "not prefilled" in lines[1]["problem"]
    assert await count_requests(client, form) == before + 58
    # A label in any case was sent as the option key; the hidden field went to context.
    got = [r async for r in client.iter_requests(form_id=form, external_id="c-2")]
    assert len(got) == 1
    full = await client.get_request(got[0].id)
    assert full.prefill and full.prefill["topic"] == "other" and full.context == {"source": "sheet"}
    with store.database.session() as s:
        states = [r.state for r in s.exec(select(OutreachRow).where(OutreachRow.job_name == "spring"))]
    assert states.count("sent") == 58 and len(states) == 58

    creates = int((await sandbox.helper("calls.list", {"method": "requests.create"}, ws="pro")).data["count"])
    again = await run_outreach(client, store, sheet, form, job="spring", report_path=report_path)
    assert (again.sent, again.skipped_existing, again.invalid) == (0, 58, 2)
    assert await count_requests(client, form) == before + 58
    assert int((await sandbox.helper("calls.list", {"method": "requests.create"}, ws="pro")).data["count"]) == creates

    # The fixed sheet sends only the two fixed rows.
    fixed = write_csv(tmp_path / "fixed.csv", sheet_rows(bad=False))
    third = await run_outreach(client, store, fixed, form, job="spring", report_path=report_path)
    assert (third.sent, third.skipped_existing, third.invalid, third.changed) == (2, 58, 0, 0)
    assert await count_requests(client, form) == before + 60

    # A row changed under the same externalId is reported as changed and not sent again.
    changed_rows = sheet_rows(bad=False)
    changed_rows[10]["message"] = "a different message"
    changed = write_csv(tmp_path / "changed.csv", changed_rows)
    fourth = await run_outreach(client, store, changed, form, job="spring", report_path=report_path)
    assert (fourth.sent, fourth.changed, fourth.skipped_existing) == (0, 1, 59)
    with report_path.open() as fh:
        lines = list(csv.DictReader(fh))
    assert [(ln["row"], ln["column"]) for ln in lines] == [("12", "externalId")]
    assert "changed since it was recorded (ext:c-10); not sent again" in lines[0]["problem"]
    assert await count_requests(client, form) == before + 60
    with store.database.session() as s:
        row = s.exec(select(OutreachRow).where(OutreachRow.row_key == "ext:c-10")).one()
        assert row.state == "changed" and row.request_id is not None


async def test_an_unknown_column_is_said_once_for_the_sheet_and_nothing_is_sent(
        sandbox: Sandbox, client: FormClient, store: Store, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    before = await count_requests(client, form)
    sheet = write_csv(tmp_path / "c.csv", sheet_rows(4, bad=False), extra={1: {"colour": "red"}})
    with pytest.raises(OutreachRefused, match=r"`colour` is not a column formsync knows; map it: "
                                              r"\[outreach\] mapping = \{ \"colour\" = \"metadata.colour\" \}"):
        await run_outreach(client, store, sheet, form, job="colours", report_path=tmp_path / "r.csv")
    rows = sheet_rows(2, bad=False)
    typo = tmp_path / "typo.csv"
    pd.DataFrame(rows).rename(columns={"email": "e-mial"}).to_csv(typo, index=False)
    with pytest.raises(OutreachRefused, match=r"`e-mial` is not a column formsync knows; did you mean `email`\? "
                                              r"or map it: \[outreach\] mapping = \{ \"e-mial\" = \"email\" \}"):
        await run_outreach(client, store, typo, form, job="typo", report_path=tmp_path / "r.csv")
    rep = await run_outreach(client, store, typo, form, job="typo", report_path=tmp_path / "r.csv",
                             mapping={"e-mial": "email"})
    assert (rep.sent, rep.invalid) == (2, 0), "the mapping the message gives fixes it"
    assert await count_requests(client, form) == before + 2
    with store.database.session() as s:
        assert not s.exec(select(OutreachRow).where(OutreachRow.job_name == "colours")).all()


async def test_crash_between_record_and_send_resends_with_same_key(
        sandbox: Sandbox, client: FormClient, store: Store, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    before = await count_requests(client, form)
    sheet = write_csv(tmp_path / "c.csv", sheet_rows(3, bad=False))
    await run_outreach(client, store, sheet, form, job="crash", report_path=tmp_path / "r.csv")
    # Simulate a crash after the create but before "sent" was stored: forget the request id.
    with store.database.session() as s:
        row = s.exec(select(OutreachRow).where(OutreachRow.row_key == "ext:c-1")).one()
        row.state, row.request_id = "pending", None
        s.add(row)
    rep = await run_outreach(client, store, sheet, form, job="crash", report_path=tmp_path / "r.csv")
    assert (rep.sent, rep.skipped_existing) == (1, 2)
    assert await count_requests(client, form) == before + 3  # the service deduplicated the resend
    with store.database.session() as s:
        row = s.exec(select(OutreachRow).where(OutreachRow.row_key == "ext:c-1")).one()
        assert row.state == "sent" and row.request_id is not None and row.attempts == 2


@pytest.mark.full_dialect_only(reason="tells test requests by the record's isTest, which the spec does not show")
async def test_xlsx_input_and_test_requests(sandbox: Sandbox, client: FormClient, store: Store,
                                            tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    path = tmp_path / "c.xlsx"
    pd.DataFrame(sheet_rows(5, bad=False), columns=HEADER).to_excel(path, index=False)
    rep = await run_outreach(client, store, path, form, job="x", test=True, report_path=tmp_path / "r.csv")
    assert (rep.rows, rep.sent, rep.invalid) == (5, 5, 0)
    got = [r async for r in client.iter_requests(form_id=form, include_test=True) if r.externalId == "c-3"]
    assert len(got) == 1 and got[0].isTest


async def test_sent_requests_are_stored_with_their_form_so_a_poll_of_that_form_follows_them(
        sandbox: Sandbox, client: FormClient, store: Store, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    path = write_csv(tmp_path / "c.csv", sheet_rows(3, bad=False))
    rep = await run_outreach(client, store, path, form, job="p", report_path=tmp_path / "r.csv")
    assert rep.sent == 3
    with store.database.reader() as s:
        stored = {r.id: r for r in s.exec(select(RequestRow))}
    assert len(stored) == 3 and {(r.form_id, r.status) for r in stored.values()} == {(form, "pending")}
    first = sorted(stored)[0]
    # The recipient submits what the sheet prefilled (a readonly key keeps its prefilled value).
    done = await sandbox.helper("requests.complete", {"requestId": first, "answers": {}})
    assert done.ok, done.body
    report = await poll_once(client, store, form_id=form)
    assert (report.completed, report.still_pending) == (1, 2)
    with store.database.reader() as s:
        assert s.get(RequestRow, first).status == "completed"


async def test_dry_run_makes_no_create_call(sandbox: Sandbox, client: FormClient, store: Store,
                                            tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    rows = sheet_rows(6, bad=False)
    rows[2]["topic"] = "Billing"
    rows[4]["externalId"] = "c-0"
    sheet = write_csv(tmp_path / "c.csv", rows)
    start = (await sandbox.helper("clock.get")).data["now"]
    rep = await run_outreach(client, store, sheet, form, job="dry", dry_run=True, report_path=tmp_path / "r.csv")
    assert (rep.rows, rep.invalid, rep.sent) == (6, 2, 0)
    with (tmp_path / "r.csv").open() as fh:
        lines = [(ln["row"], ln["column"], ln["problem"]) for ln in csv.DictReader(fh)]
    assert lines[0][:2] == ("4", "topic")
    assert lines[1] == ("6", "externalId", "same row identity as row 2")
    calls = (await sandbox.helper("calls.list", {"since": start}, ws="pro")).data["items"]
    assert [c["method"] for c in calls] == ["fields.list"]
    with store.database.session() as s:
        assert s.exec(select(OutreachRow).where(OutreachRow.job_name == "dry")).first() is None


CONTACT = [
    FieldDescriptor(key="name", type="text"), FieldDescriptor(key="email", type="email"),
    FieldDescriptor(key="topic", type="select", options=[Option(key="sales", label="Sales"),
                                                         Option(key="support", label="Support")]),
    FieldDescriptor(key="n", type="number"), FieldDescriptor(key="ok", type="switch"),
    FieldDescriptor(key="tags", type="checkbox", options=[Option(key="a", label="Alpha"),
                                                          Option(key="b", label="Beta")]),
    FieldDescriptor(key="grid", type="matrix", rows=[Option(key="r1", label="R1")],
                    columns=[Option(key="c1", label="C1")]),
    FieldDescriptor(key="day", type="date"), FieldDescriptor(key="up", type="file", prefillable=False),
    FieldDescriptor(key="source", type="hidden", prefillable=False, context=True),
]


def test_validate_row_maps_every_type() -> None:
    params, problems = validate_row(CONTACT, {
        "email": "a@x.test", "topic": "SUPPORT", "n": "4.5", "ok": "yes", "tags": "beta, a",
        "grid": '{"r1": "c1"}', "day": "2026-03-01", "source": "web", "metadata.crm": "42",
        "expiresAt": "2030-01-01", "readonly": "topic", "plan": "gold"}, mapping={"plan": "name"})
    assert problems == []
    assert params == RowParams(recipient={"email": "a@x.test", "name": "gold"},
                               prefill={"email": "a@x.test", "topic": "support", "n": 4.5, "ok": True, "tags": ["b", "a"],
                                        "grid": {"r1": "c1"}, "day": "2026-03-01"},
                               context={"source": "web"}, metadata={"crm": "42"}, readonly=["topic"],
                               expiresAt=1893456000000)


def test_validate_row_names_each_problem_and_what_is_accepted() -> None:
    params, problems = validate_row(CONTACT, {
        "topic": "Billing", "n": "many", "ok": "maybe", "tags": "Gamma", "grid": "{", "day": "soon",
        "up": "f.pdf", "readonly": "name", "expiresAt": "later", "what": "x"}, delivery="email")
    assert params is None
    got = {p.column: (p.problem, p.accepted) for p in problems}
    assert got["topic"] == ("'Billing' is not an option of topic", "Sales (sales), Support (support)")
    assert got["n"][1] == "a number, e.g. 42"
    assert got["ok"][1] == "true/false/yes/no/1/0"
    assert "Alpha (a)" in got["tags"][1]
    assert got["grid"][0] == "'{' is not valid JSON"
    assert got["day"][1] == "YYYY-MM-DD, dd/mm/yyyy, mm/dd/yyyy, dd.mm.yyyy or an Excel serial"
    assert "cannot be prefilled" in got["up"][0]
    assert "not prefilled" in got["readonly"][0]
    assert got["expiresAt"][1] == "an ISO date or datetime, epoch milliseconds, dd/mm/yyyy, mm/dd/yyyy or dd.mm.yyyy"
    assert got["what"][0] == "unknown column"
    assert got["email"][0] == "missing email with email delivery"


def test_email_url_and_time_cells_are_checked_before_any_call() -> None:
    fields = [FieldDescriptor(key="email", type="email"), FieldDescriptor(key="site", type="url"),
              FieldDescriptor(key="at", type="time")]
    params, problems = validate_row(fields, {"email": "daniel.kim@", "site": "example.com", "at": "25:00"})
    assert params is None
    got = {p.column: (p.problem, p.accepted) for p in problems}
    assert got == {
        "email": ("'daniel.kim@' is not an email address", "an email address, e.g. ada@example.com"),
        "site": ("'example.com' is not an http(s) URL", "an http:// or https:// URL"),
        "at": ("'25:00' is not a time", "HH:MM, e.g. 09:30"),
    }, "one problem per bad cell, the recipient email reported once"
    params, problems = validate_row(fields, {"email": " ada@example.com ", "site": "https://example.com/x",
                                             "at": "09:30"})
    assert problems == [] and params is not None
    assert params.recipient == {"email": "ada@example.com"}
    assert params.prefill == {"email": "ada@example.com", "site": "https://example.com/x", "at": "09:30"}


def test_idempotency_key_is_a_pure_function_of_job_form_and_identity() -> None:
    a = RowParams(prefill={"name": "A"})
    assert row_identity(a) == row_identity(RowParams(prefill={"name": "A"}))
    assert row_identity(RowParams(externalId="x", prefill={"name": "B"})) == "ext:x"
    k = idempotency_key("j", "f", row_identity(a))
    assert k == idempotency_key("j", "f", row_identity(a))
    assert k != idempotency_key("j2", "f", row_identity(a)) and k != idempotency_key("j", "f2", row_identity(a))
    assert len(k) <= 255


# -- the formsync outreach command ----------------------------------------------------------


async def formsync(*args: str) -> Any:
    """Run the formsync command in a worker thread (it runs its own event loop)."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "400"})


async def test_cli_outreach_dry_run_then_send_then_rerun(sandbox: Sandbox, client: FormClient,
                                                         tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    before = await count_requests(client, form)
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{sandbox.pro.token}"\n'
                   f'calls_per_minute = 10000\ncreates_per_minute = 10000\n'
                   f'[store]\nurl = "sqlite:///{tmp_path}/cli.db"\n')
    rows = sheet_rows(4, bad=False)
    rows[3]["topic"] = "Billing"
    sheet = write_csv(tmp_path / "c.csv", rows)
    bad = tmp_path / "bad.csv"
    res = await formsync("outreach", str(sheet), "--form", form, "--config", str(cfg), "--dry-run",
                         "--report", str(bad))
    assert res.exit_code == 3, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert (out["rows"], out["invalid"], out["sent"]) == (4, 1, 0)
    assert "dry run: would send 3 of 4 rows; 1 rejected" in res.stdout
    assert "row 5: topic: 'Billing' is not an option of topic" in res.stdout
    assert "dry run: " + str(sheet) + ": would send 3 of 4 rows; 1 rejected; first: row 5" in res.stderr
    assert "error:" not in res.stderr
    assert await count_requests(client, form) == before
    assert "Billing" in bad.read_text()

    res = await formsync("outreach", str(sheet), "--form", form, "--config", str(cfg), "--job", "cli",
                         "--report", str(bad))
    assert res.exit_code == 3, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])["sent"] == 3
    assert "sending 3 of 4 rows to " + form + " (1 rejected)" in res.stderr
    assert res.stderr.strip().splitlines()[-1] == f"done: sent 3 of 4 rows; 1 rejected (see {bad})"
    links = list(csv.DictReader((tmp_path / "cli-links.csv").open()))
    assert [(ln["externalId"], ln["email"]) for ln in links] == [(f"c-{i}", f"p{i}@example.test") for i in range(3)]
    assert all(ln["url"].startswith(sandbox.base_url) for ln in links), links
    res = await formsync("outreach", str(sheet), "--form", form, "--config", str(cfg), "--job", "cli",
                         "--report", str(bad))
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert (out["sent"], out["skipped_existing"]) == (0, 3)
    assert await count_requests(client, form) == before + 3
    # With delivery "none" the links are in the requests export too.
    res = await formsync("export", "--table", "requests", "--format", "csv", "--out", str(tmp_path / "req.csv"),
                         "--config", str(cfg))
    assert res.exit_code == 0, res.output
    exported = {r["external_id"]: r["url"] for r in csv.DictReader((tmp_path / "req.csv").open())}
    assert {k: exported[k] for k in ("c-0", "c-1", "c-2")} == {ln["externalId"]: ln["url"] for ln in links}


async def test_cli_outreach_refuses_a_missing_or_unsupported_sheet(tmp_path: Path) -> None:
    res = await formsync("outreach", str(tmp_path / "none.csv"), "--form", "form_x")
    assert res.exit_code == 2 and "does not exist" in res.output
    odd = tmp_path / "c.txt"
    odd.write_text("email\n")
    res = await formsync("outreach", str(odd), "--form", "form_x")
    assert res.exit_code == 2 and "unsupported sheet type" in res.output


async def test_a_create_refused_by_the_service_is_failed_reported_and_retried_next_run(
        sandbox: Sandbox, client: FormClient, store: Store, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    before = await count_requests(client, form)
    rows = sheet_rows(3, bad=False)
    for r in rows:
        r["expiresAt"] = ""
    rows[1]["expiresAt"] = "2000-01-01"  # valid syntax, but in the past: only the service can tell
    sheet = tmp_path / "c.csv"
    pd.DataFrame(rows).to_csv(sheet, index=False)
    rep = await run_outreach(client, store, sheet, form, job="f", report_path=tmp_path / "r.csv")
    assert (rep.sent, rep.failed, rep.invalid) == (2, 1, 0)
    with (tmp_path / "r.csv").open() as fh:
        lines = list(csv.DictReader(fh))
    assert len(lines) == 1 and lines[0]["row"] == "3" and "expiresAt" in lines[0]["problem"]
    with store.database.session() as s:
        row = s.exec(select(OutreachRow).where(OutreachRow.row_key == "ext:c-1")).one()
        assert row.state == "failed" and row.request_id is None and "expiresAt" in (row.error or "")
    assert await count_requests(client, form) == before + 2

    rows[1]["expiresAt"] = "2099-01-01T00:00:00Z"
    pd.DataFrame(rows).to_csv(sheet, index=False)
    again = await run_outreach(client, store, sheet, form, job="f", report_path=tmp_path / "r.csv")
    assert (again.sent, again.failed, again.skipped_existing, again.changed) == (0, 1, 2, 0)
    assert "expiresAt" in (tmp_path / "r.csv").read_text()  # over 365 days: refused again, still not sent
    rows[1]["expiresAt"] = ""
    pd.DataFrame(rows).to_csv(sheet, index=False)
    third = await run_outreach(client, store, sheet, form, job="f", report_path=tmp_path / "r.csv")
    assert (third.sent, third.failed, third.skipped_existing) == (1, 0, 2)
    assert await count_requests(client, form) == before + 3


PDF = b"%PDF-1.4\n" + bytes(range(200)) + b"\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(120))


async def test_a_document_file_gone_since_validation_fails_its_row_with_a_clear_error(
        sandbox: Sandbox, client: FormClient, store: Store, tmp_path: Path) -> None:
    docs = Documents(client, store.ledger, "gone", sandbox.pro.forms["Approval"], tmp_path)
    with pytest.raises(DocumentUnreadable, match="gone.pdf' cannot be read"):
        await docs.refs(RowParams(documents={"": "gone.pdf"}))
    assert docs.uploads == 0 and docs.ids == {} and docs.digests == {}


@pytest.mark.full_dialect_only(reason="reads back the record's documents, a field the spec does not show")
async def test_document_column_uploads_each_distinct_file_once_and_reuses_it(
        sandbox: Sandbox, client: FormClient, store: Store, tmp_path: Path) -> None:
    form = sandbox.pro.forms["Approval"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "terms.pdf").write_bytes(PDF)
    (tmp_path / "docs" / "copy-of-terms.pdf").write_bytes(PDF)  # the same content under another name
    (tmp_path / "plan.png").write_bytes(PNG)
    (tmp_path / "notes.txt").write_text("not a document")
    docs = ["docs/terms.pdf", "plan.png", "docs/terms.pdf", "docs/copy-of-terms.pdf", str(tmp_path / "plan.png"),
            "docs/missing.pdf", "notes.txt", ""]
    sheet = tmp_path / "approvals.csv"
    pd.DataFrame([{"externalId": f"a-{i}", "email": f"r{i}@example.test", "reviewer": f"R {i}", "document": d}
                  for i, d in enumerate(docs)]).to_csv(sheet, index=False)
    since = (await sandbox.helper("clock.get")).data["now"]
    rep = await run_outreach(client, store, sheet, form, job="docs", report_path=tmp_path / "r.csv")
    assert (rep.sent, rep.invalid, rep.documents_uploaded) == (6, 2, 2)
    with (tmp_path / "r.csv").open() as fh:
        lines = {ln["row"]: ln for ln in csv.DictReader(fh)}
    assert set(lines) == {"7", "8"} and {ln["column"] for ln in lines.values()} == {"document"}
    assert "does not exist" in lines["7"]["problem"] and "not a PDF or an image" in lines["8"]["problem"]
    calls = (await sandbox.helper("calls.list", {"since": since}, ws="pro")).data["items"]
    assert [c["method"] for c in calls].count("documents.create") == 2, "one upload per distinct file content"
    sizes = {}
    async for r in client.iter_requests(form_id=form, include_test=True):
        if r.externalId and r.externalId.startswith("a-"):
            full = await client.get_request(r.id)
            sizes[r.externalId] = [(d.field, d.size) for d in full.documents]
    assert sizes == {"a-0": [("review_docs", len(PDF))], "a-1": [("review_docs", len(PNG))],
                     "a-2": [("review_docs", len(PDF))], "a-3": [("review_docs", len(PDF))],
                     "a-4": [("review_docs", len(PNG))], "a-7": []}

    # A re-run with a new row reuses the recorded uploads: no documents.create at all.
    docs.append("docs/copy-of-terms.pdf")
    pd.DataFrame([{"externalId": f"a-{i}", "email": f"r{i}@example.test", "reviewer": f"R {i}", "document": d}
                  for i, d in enumerate(docs)]).to_csv(sheet, index=False)
    since = (await sandbox.helper("clock.get")).data["now"]
    again = await run_outreach(client, store, sheet, form, job="docs", report_path=tmp_path / "r.csv")
    assert (again.sent, again.skipped_existing, again.documents_uploaded) == (1, 6, 0)
    calls = (await sandbox.helper("calls.list", {"since": since}, ws="pro")).data["items"]
    assert "documents.create" not in [c["method"] for c in calls]


def test_a_document_column_naming_a_field_that_is_not_a_documents_block_is_refused() -> None:
    fields = [FieldDescriptor(key="name", type="text"), FieldDescriptor(key="nda", type="documents",
                                                                         prefillable=False)]
    params, problems = validate_row(fields, {"document.name": "a.pdf", "document.nda": "b.pdf"})
    assert params is None
    assert [(p.column, p.problem, p.accepted) for p in problems] == [
        ("document.name", "'name' is not a documents field of this form", "nda")]
    params, problems = validate_row(fields, {"document.nda": "b.pdf"})
    assert problems == [] and params is not None and params.documents == {"nda": "b.pdf"}
