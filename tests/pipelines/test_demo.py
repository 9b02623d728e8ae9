"""``formsync demo`` end to end in a subprocess (files, figures, a second run that sends
nothing), its option errors, and the pure parts: reading a recipient page's form into
the body a browser posts, and the demo's own helpers."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import openpyxl
import pandas as pd
import pytest
from rich.console import Console
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from formservice.sandbox.recipient import answer_request, fill, form_data, parse_page_form
from pipelines.cli import app
from pipelines.cli.demo import (
    CANCEL_EXTERNAL_ID,
    DEMO_SHEET,
    EXPIRE_EXTERNAL_ID,
    MESSAGES,
    STATE_DIR,
    STATE_FILE,
    TOPICS,
    DemoError,
    OutDirError,
    check_out_dir,
    delivery_counts,
    external_id_of,
    load_state,
    recipient_choices,
    rejected_rows,
    to_answer,
)
from pipelines.outreach import read_sheet
from tests.conftest import Sandbox

FORMSYNC = Path(sys.executable).parent / "formsync"
SEEDED_CONTACT_SUBMISSIONS = 3  # completed public-link responses the seed gives the Contact form
# Sheet rows (header = row 1) the demo sheet gets wrong on purpose, and a word of each reason.
BAD_ROWS = {7: "'Billing' is not an option", 9: "readonly key 'topic' is not prefilled",
            11: "'daniel.kim@' is not an email address", 15: "same row identity as row 5"}
STABLE = ("sheet_rows", "sent", "completed", "canceled", "expired", "pending", "rejected", "callbacks_delivered",
          "webhooks_delivered", "events_stored", "deliveries_refused", "submissions_synced",
          "submissions_from_requests", "form_id")


def run_demo_cli(out: Path) -> subprocess.CompletedProcess[str]:
    assert FORMSYNC.exists(), f"the console script {FORMSYNC} is not installed"
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run([str(FORMSYNC), "demo", "--out", str(out)], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def sandbox_request_count(out: Path) -> int:
    """Requests in the demo sandbox's own database (not what the connector thinks)."""
    engine = create_engine(f"sqlite:///{out / STATE_DIR / 'sandbox' / 'formservice.db'}")
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM request")).scalar_one())
    finally:
        engine.dispose()


def printed_count(stdout: str, label: str) -> int:
    m = re.search(rf"│ {re.escape(label)}\s+│\s+(\d+) │", stdout)
    assert m, f"no {label!r} line in the printed summary:\n{stdout}"
    return int(m.group(1))


@pytest.mark.slow  # formsync demo twice in a subprocess: about 30 s
def test_demo_runs_end_to_end_and_a_second_run_sends_nothing(tmp_path: Path) -> None:
    out = tmp_path / "formsync-demo"
    first = run_demo_cli(out)
    assert first.returncode == 0, first.stderr + first.stdout
    assert "held back" not in first.stderr + first.stdout, "the demo's receiver reads field lists with its token"
    summary = json.loads((out / "summary.json").read_text())

    # the figures: 25 rows, 4 rejected, 21 sent; 19 answered, one canceled, one expired
    sheet = read_sheet(DEMO_SHEET)
    assert summary["sheet_rows"] == len(sheet) == 25
    assert summary["sent"] == 21 and summary["this_run"]["requests_created"] == 21
    assert (summary["completed"], summary["canceled"], summary["expired"], summary["pending"]) == (19, 1, 1, 0)
    assert summary["this_run"]["answered"] == 19
    # one event per request that left pending, each as a callback and as a webhook delivery,
    # all accepted by the receiver (it answers 2xx only after verifying the signature) and
    # stored once
    assert summary["callbacks_delivered"] == summary["webhooks_delivered"] == summary["events_stored"] == 21
    assert summary["deliveries_refused"] == 0 and summary["this_run"]["refused"] == 0
    assert summary["this_run"]["callbacks_received"] == 21 and summary["this_run"]["duplicates"] == 21
    assert summary["submissions_from_requests"] == 19
    assert summary["submissions_synced"] == 19 + SEEDED_CONTACT_SUBMISSIONS

    # rejected rows are listed with their reasons, in the summary, the report and the output
    rejected = {r["row"]: r for r in summary["rejected"]}
    assert set(rejected) == set(BAD_ROWS)
    for row, words in BAD_ROWS.items():
        assert any(words in p for p in rejected[row]["problems"]), rejected[row]
        assert rejected[row]["external_id"] == sheet[row - 2]["externalId"]
        assert words in first.stdout
    with (out / "rejected-rows.csv").open(newline="") as fh:
        assert {int(r["row"]) for r in csv.DictReader(fh)} == set(BAD_ROWS)

    # the printed table shows the same figures
    for label, key in (("requests sent", "sent"), ("completed", "completed"), ("canceled", "canceled"),
                       ("expired", "expired"), ("rejected rows", None), ("callbacks received", "callbacks_delivered"),
                       ("webhook events received", "webhooks_delivered"), ("submissions synced", "submissions_synced")):
        assert printed_count(first.stdout, label) == (len(BAD_ROWS) if key is None else summary[key])

    # the files, read back: one row per completed submission in each format
    wide_csv = pd.read_csv(out / "responses.csv")
    wide_parquet = pd.read_parquet(out / "responses.parquet")
    book = openpyxl.load_workbook(out / "responses.xlsx", read_only=True)
    assert set(book.sheetnames) == {"wide", "long", "requests"}
    xlsx_rows = list(book["wide"].iter_rows(values_only=True))
    requests_sheet = list(book["requests"].iter_rows(values_only=True))
    book.close()
    assert len(wide_csv) == len(wide_parquet) == len(xlsx_rows) - 1 == summary["submissions_synced"]
    assert {f["path"].rsplit("/", 1)[-1] for f in summary["files"]} >= {
        "responses.csv", "responses.xlsx", "responses.parquet", "rejected-rows.csv"}
    # every file the run wrote is listed and counted, the links, the CSV's schema and the summary too
    written = {str(p) for p in out.iterdir() if p.is_file()}
    assert {f["path"] for f in summary["files"]} == written and len(written) == 7
    assert printed_count(first.stdout, "files written") == len(written)
    assert summary["rejected_count"] == len(BAD_ROWS) and summary["sheet_rows"] == summary["sent"] + len(BAD_ROWS)

    # what the recipients typed on their pages reached the exports; prefilled names were kept
    header, *req_rows = requests_sheet
    by_request = {r[header.index("request_id")]: r for r in req_rows}
    assert len(by_request) == 21
    statuses = {r[header.index("external_id")]: r[header.index("status")] for r in req_rows}
    assert statuses[CANCEL_EXTERNAL_ID] == "canceled" and statuses[EXPIRE_EXTERNAL_ID] == "expired"
    names = {r["externalId"]: r["name"] for r in sheet}
    answered = wide_parquet[wide_parquet["request_id"].notna()]
    assert len(answered) == 19
    for _, sub in answered.iterrows():
        ext = by_request[sub["request_id"]][header.index("external_id")]
        assert sub["message"] == recipient_choices(ext)["message"]
        assert sub["name"] == names[ext]
        assert sub["source"]  # the hidden field, from the row's context

    assert sandbox_request_count(out) == 21
    assert summary["seconds"] < 60

    # a second run in the same directory: nothing new is created, the same figures come back
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("responses.*")}
    second = run_demo_cli(out)
    assert second.returncode == 0, second.stderr + second.stdout
    again = json.loads((out / "summary.json").read_text())
    assert {k: again[k] for k in STABLE} == {k: summary[k] for k in STABLE}
    assert again["this_run"]["requests_created"] == 0 and again["this_run"]["answered"] == 0
    assert again["this_run"]["canceled"] == again["this_run"]["expired"] == 0
    assert again["this_run"]["callbacks_received"] == 0  # nothing happened that would send one
    assert sandbox_request_count(out) == 21
    for label in ("requests sent", "completed", "expired", "canceled"):
        assert printed_count(second.stdout, label) == printed_count(first.stdout, label)
    assert all(p.stat().st_mtime_ns > before[p.name] for p in out.glob("responses.*"))  # written again
    assert len(pd.read_csv(out / "responses.csv")) == summary["submissions_synced"]


async def test_an_interrupted_run_is_finished_by_the_next_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    import pipelines.cli.demo as demo

    answered: list[str] = []
    real_answer = demo.answer_request

    async def answer_then_stop(http: aiohttp.ClientSession, url: str, choose: Any) -> Any:
        if len(answered) == 5:
            raise RuntimeError("power cut")  # the process dies while the sixth recipient answers
        answered.append(url)
        return await real_answer(http, url, choose)

    monkeypatch.setattr(demo, "answer_request", answer_then_stop)
    quiet = Console(file=io.StringIO())
    with pytest.raises(RuntimeError, match="power cut"):
        await demo.run_demo(tmp_path, console=quiet, progress=False)
    assert not (tmp_path / "summary.json").exists()

    monkeypatch.setattr(demo, "answer_request", real_answer)
    summary = await demo.run_demo(tmp_path, console=quiet, progress=False)
    assert summary.this_run["requests_created"] == 0 and summary.this_run["answered"] == 14
    assert (summary.sent, summary.completed, summary.canceled, summary.expired, summary.pending) == (21, 19, 1, 1, 0)
    assert summary.callbacks_delivered == summary.webhooks_delivered == summary.events_stored == 21
    assert sandbox_request_count(tmp_path) == 21


# -- option errors ----------------------------------------------------------------------


def test_an_out_that_is_a_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "results.txt"
    target.write_text("keep me")
    result = CliRunner().invoke(app, ["demo", "--out", str(target)], env={"COLUMNS": "400"})
    assert result.exit_code == 2
    assert "--out" in result.output and "is a file; give a directory" in result.output
    assert target.read_text() == "keep me"


def test_a_non_empty_directory_without_demo_state_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("mine")
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path)], env={"COLUMNS": "400"})
    assert result.exit_code == 2
    assert "is not empty and holds no earlier demo run" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]


def test_a_damaged_state_file_is_a_clear_error_and_is_kept(tmp_path: Path) -> None:
    (tmp_path / STATE_DIR).mkdir()
    (tmp_path / STATE_DIR / STATE_FILE).write_text("{not json")
    result = CliRunner().invoke(app, ["demo", "--out", str(tmp_path)], env={"COLUMNS": "400"})
    assert result.exit_code == 1
    assert "is damaged" in result.output and "to start over" in result.output
    assert (tmp_path / STATE_DIR / STATE_FILE).read_text() == "{not json"


def test_check_out_dir_creates_the_state_folder(tmp_path: Path) -> None:
    out = check_out_dir(tmp_path / "a" / "b")
    assert (out / STATE_DIR).is_dir()
    assert check_out_dir(out) == out  # an earlier run's directory is fine
    a_file = out / "x.json"
    a_file.write_text("{}")
    with pytest.raises(OutDirError, match="is a file"):
        check_out_dir(a_file)


# -- the demo's pure helpers ---------------------------------------------------------------


def test_recipient_choices_are_stable_and_valid() -> None:
    a, b = recipient_choices("CUST-1001"), recipient_choices("CUST-1001")
    assert a == b and a["topic"] in TOPICS and a["message"] in MESSAGES
    assert len({recipient_choices(f"CUST-{n}")["message"] for n in range(1000, 1030)}) > 1


def test_to_answer_skips_the_requests_to_cancel_and_expire_and_the_closed_ones() -> None:
    from connector.models import RequestRecord

    records = {rid: RequestRecord(id=rid, status=status) for rid, status in
               (("req_a", "pending"), ("req_b", "pending"), ("req_c", "pending"), ("req_d", "completed"),
                ("req_e", "pending"))}
    ids = {"req_a": "CUST-1", "req_b": CANCEL_EXTERNAL_ID, "req_c": EXPIRE_EXTERNAL_ID, "req_d": "CUST-2",
           "req_e": None}
    assert [(ext, rec.id) for ext, rec in to_answer(records, ids)] == [("CUST-1", "req_a"), ("req_e", "req_e")]


def test_external_id_of_reads_only_external_identities() -> None:
    assert external_id_of("ext:CUST-1") == "CUST-1"
    assert external_id_of("hash:abc") is None


def test_rejected_rows_group_the_report_by_row(tmp_path: Path) -> None:
    report = tmp_path / "r.csv"
    report.write_text("row,column,problem,accepted\n"
                      "3,topic,'X' is not an option of topic,\"Sales (sales)\"\n"
                      "2,,create failed: boom,\n"
                      "3,readonly,readonly key 'topic' is not prefilled in this row,email\n")
    rows = rejected_rows(report, [{"externalId": "A"}, {"externalId": ""}])
    assert [(r.row, r.external_id) for r in rows] == [(2, "A"), (3, None)]
    assert rows[0].problems == ["create failed: boom"]
    assert rows[1].problems == ["topic: 'X' is not an option of topic (accepted: Sales (sales))",
                                "readonly: readonly key 'topic' is not prefilled in this row (accepted: email)"]


def test_delivery_counts_only_count_the_jobs_requests() -> None:
    def delivery(kind: str, state: str, *statuses: int) -> dict[str, Any]:
        return {"kind": kind, "state": state, "attempts": [{"status": s} for s in statuses]}

    events = [
        {"id": "evt_1", "requestId": "req_1", "deliveries": [delivery("callback", "delivered", 503, 200),
                                                            delivery("webhook", "delivered", 200)]},
        {"id": "evt_2", "requestId": "req_2", "deliveries": [delivery("callback", "pending")]},
        {"id": "evt_3", "requestId": "req_other", "deliveries": [delivery("callback", "delivered", 200)]},
    ]
    got = delivery_counts(events, {"req_1", "req_2"})
    assert got == {"event_ids": ["evt_1", "evt_2"], "callbacks": 1, "webhooks": 1, "refused": 1, "waiting": 1}


def test_load_state_makes_a_secret_once_and_refuses_a_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / STATE_FILE
    fresh = load_state(path)
    assert fresh.webhook_secret.startswith("whsec_") and len(fresh.webhook_secret) >= 32
    path.write_text(fresh.model_dump_json())
    assert load_state(path) == fresh
    path.write_text('{"sandbox_port": "x"}')
    with pytest.raises(DemoError, match="damaged"):
        load_state(path)


# -- reading and posting a recipient page ----------------------------------------------------

PAGE = """<!doctype html><html><body>
<form method="post" enctype="multipart/form-data">
  <button type="submit" name="__action" value="submit" class="visually-hidden">Submit</button>
  <input type="text" name="name" value="Ann &amp; Co">
  <input type="email" name="email" value="ann@example.com" readonly>
  <select name="topic"><option value="">Choose…</option><option value="sales">Sales</option>
    <option value="support" >Support</option></select>
  <select name="size" disabled><option value="s" selected>S</option></select>
  <select name="plain"><option>First one</option><option selected> Second  one </option></select>
  <textarea name="message">
Line one</textarea>
  <input type="hidden" name="rating" value="">
  <input type="radio" name="rating" value="1"><input type="radio" name="rating" value="2" checked>
  <input type="hidden" name="tags" value="">
  <input type="checkbox" name="tags" value="a" checked><input type="checkbox" name="tags" value="b">
  <input type="checkbox" name="agree">
  <input type="file" name="attachment">
  <input type="text" value="no name">
  <button type="button" name="noop" value="x">Nothing</button>
  <button type="submit" name="__action" value="save">Save draft</button>
</form>
<form method="post"><input name="other" value="second form"></form>
</body></html>"""


def test_form_data_is_what_a_browser_posts() -> None:
    form = parse_page_form(PAGE, "http://127.0.0.1/r/rq_1")
    assert (form.method, form.action, form.enctype) == ("post", "http://127.0.0.1/r/rq_1", "multipart/form-data")
    assert form_data(form) == [
        ("__action", "submit"), ("name", "Ann & Co"), ("email", "ann@example.com"), ("topic", ""),
        ("plain", "Second one"), ("message", "Line one"), ("rating", ""), ("rating", "2"), ("tags", ""),
        ("tags", "a"),
    ]
    assert ("__action", "save") in form_data(form, ("__action", "save"))
    assert ("__action", "submit") not in form_data(form, ("__action", "save"))
    assert form.blanks() == {"topic", "agree"}


def test_a_relative_form_action_is_resolved_against_the_page() -> None:
    page = '<form method="post" action="/r/rq_1/submit"><input name="a" value="1"></form>'
    assert parse_page_form(page, "http://127.0.0.1:9/r/rq_1").action == "http://127.0.0.1:9/r/rq_1/submit"
    assert parse_page_form(page.replace("/r/rq_1/submit", "https://other.test/x"),
                           "http://127.0.0.1:9/r/rq_1").action == "https://other.test/x"


def test_fill_enters_answers_and_names_what_cannot_be_entered() -> None:
    form = parse_page_form(PAGE)
    filled = fill(form, {"topic": "support", "message": "Hi", "rating": "1", "tags": ["b"], "agree": "on"})
    data = form_data(filled)
    assert ("topic", "support") in data and ("message", "Hi") in data and ("agree", "on") in data
    assert [v for n, v in data if n == "rating"] == ["", "1"]
    assert [v for n, v in data if n == "tags"] == ["", "b"]
    assert form_data(form)[3] == ("topic", "")  # the original is unchanged
    with pytest.raises(ValueError, match="no control named 'colour'.*message"):
        fill(form, {"colour": "red"})
    with pytest.raises(ValueError, match="'email' is readonly"):
        fill(form, {"email": "x@example.com"})
    with pytest.raises(ValueError, match="'size' is readonly"):
        fill(form, {"size": "s"})
    with pytest.raises(ValueError, match="'topic' cannot take \\['billing'\\]; it offers sales, support"):
        fill(form, {"topic": "billing"})
    with pytest.raises(ValueError, match="'rating' cannot take .*one of them"):
        fill(form, {"rating": ["1", "2"]})
    with pytest.raises(ValueError, match="file input"):
        fill(form, {"attachment": "x"})


def test_a_page_without_a_form_or_button_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no <form>"):
        parse_page_form("<h1>Already submitted</h1>")
    form = parse_page_form('<form method="post"><input name="a" value="1"></form>')
    with pytest.raises(ValueError, match="no submit button __action=submit; it has: none"):
        form_data(form)


async def test_answer_request_completes_a_real_request_keeping_the_prefill(sandbox: Sandbox) -> None:
    form_id = sandbox.pro.forms["Contact"]
    created = (await sandbox.rpc("requests.create", {
        "formId": form_id, "recipient": {"email": "ann@example.com", "name": "Ann"},
        "prefill": {"name": "Ann", "email": "ann@example.com"}, "readonly": ["email"],
        "context": {"source": "webinar"}})).data
    async with aiohttp.ClientSession() as http:
        # name and email are prefilled: only the blanks take the recipient's answers
        result = await answer_request(http, created["url"], {"name": "Someone else", "topic": "support",
                                                             "message": "Hello"})
        assert result.status == 200 and result.thanked, result.errors
        record = (await sandbox.rpc("requests.get", {"requestId": created["id"]})).data
        assert record["status"] == "completed"
        assert record["answers"] == {"name": "Ann", "email": "ann@example.com", "topic": "support",
                                     "message": "Hello", "source": "webinar"}
        with pytest.raises(ValueError, match="no <form>"):  # the link now shows "Already submitted"
            await answer_request(http, created["url"], {"message": "again"})
