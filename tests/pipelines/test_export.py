"""The export pipeline: every table written as CSV, XLSX and Parquet, read back and
compared cell by cell with what the store holds (SQLite in tmp_path); the wide table
has the columns and types of the form's field list (``connector.store._schema``)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openpyxl
import pandas as pd
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from connector.models import Event
from connector.store import Store
from connector.store._mapping import answer_rows
from connector.store._tables import RequestRow, SubmissionRow
from pipelines.cli import app
from pipelines.export import write as export_mod
from pipelines.export.write import export, neutralise
from tests.stores import migrated_store

# Each test that uses the sandbox runs in both its dialects (tests/conftest.py).
pytestmark = pytest.mark.dialects

T0 = 1_780_000_000_000  # epoch ms, a fixed moment in 2026
DAY = 86_400_000


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


CV = {"name": "cv.pdf", "url": "http://files.example/cv.pdf", "size": 1200, "type": "application/pdf"}
ANSWERS_1 = {
    "name": "=HYPERLINK(\"http://evil\")", "age": 42, "colors": ["red", "blue"],
    "grid": {"speed": "good", "price": "bad"},
    "people": [{"first": "Ann", "last": "Lee"}, {"first": "Bo", "last": "Ng"}],
    "cv": [CV], "agree": True,
}
DISPLAY_1 = {
    "name": "=HYPERLINK(\"http://evil\")", "age": "42", "colors": "Red, Blue", "grid": "Speed: Good, Price: Bad",
    "people": "Ann / Lee, Bo / Ng", "cv": "cv.pdf", "agree": "Yes",
}
ANSWERS_2 = {"name": "-1+2", "age": 7, "colors": ["green"], "note": "@SUM(A1)", "grid": {"speed": "bad"}}
DISPLAY_2 = {"name": "-1+2", "age": "7", "colors": "Green", "note": "@SUM(A1)", "grid": "Speed: Bad"}
OPTIONS = [{"key": k, "label": k.title()} for k in ("red", "blue", "green")]
FIELDS_A = [
    {"key": "name", "type": "text", "title": "Your name"}, {"key": "age", "type": "number", "title": "Age"},
    {"key": "colors", "type": "checkbox", "title": "Colors", "options": OPTIONS},
    {"key": "grid", "type": "matrix", "title": "Rate us", "rows": [{"key": "speed", "label": "Speed"},
                                                                  {"key": "price", "label": "Price"}],
     "columns": [{"key": k, "label": k.title()} for k in ("good", "bad")]},
    {"key": "people", "type": "group", "title": "People", "repeating": True,
     "members": [{"key": "first", "type": "text", "title": "First"}, {"key": "last", "type": "text", "title": "Last"}]},
    {"key": "cv", "type": "file", "title": "CV"}, {"key": "agree", "type": "switch", "title": "Agree"},
    {"key": "note", "type": "textarea", "title": "Note"}, {"key": "intro", "type": "documents", "title": "Read"},
]
FIELDS_B = [{"key": "decision", "type": "decision", "title": "Your decision",
             "options": [{"key": "approve", "label": "Approve"}, {"key": "decline", "label": "Decline"}]},
            {"key": "age", "type": "text", "title": "Age"}]
WIDE_A = ["submission_id", "form_id", "request_id", "external_id", "submitted_at", "updated_at", "respondent_email",
          "language", "completed", "edit_count", "stored_at", "name", "age", "colors", "colors_label", "grid_speed", "grid_price",
          "people", "cv", "cv__archived", "agree", "note"]


def sub_event(eid: str, sid: str, form: str, at: int, answers: dict[str, Any], display: dict[str, Any], *,
              type: str = "submission.completed", request: dict[str, Any] | None = None,
              updated: int | None = None, edits: int = 0) -> Event:
    data: dict[str, Any] = {
        "form": {"id": form, "name": form.title(), "snapshotId": "snap_1"},
        "submission": {"id": sid, "respondentEmail": "ann@example.com", "submittedAt": iso(at),
                       "updatedAt": iso(updated) if updated else None, "editCount": edits, "language": "en"},
        "answers": answers, "display": display,
    }
    if request is not None:
        data["request"] = request
    return Event.model_validate({"id": eid, "type": type, "createdAt": iso(updated or at),
                                 "apiVersion": "2026-09-24", "data": data})


def req_block(rid: str, status: str, at: int, **extra: Any) -> dict[str, Any]:
    block = {"id": rid, "externalId": f"+ext-{rid}", "status": status, "language": "en",
             "recipient": {"email": "bo@example.com", "name": "Bo"}, "createdAt": iso(at - DAY),
             "metadata": {"runId": "run-42", "batch": 3}}
    block[{"completed": "completedAt", "canceled": "canceledAt"}[status]] = iso(at)
    block.update(extra)
    return block


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = migrated_store(f"sqlite:///{tmp_path / 'store.db'}")
    s.record_fields("form_a", FIELDS_A)
    s.record_fields("form_b", FIELDS_B)
    s.store_events([
        sub_event("evt_1", "sub_1", "form_a", T0, ANSWERS_1, DISPLAY_1, updated=T0 + 5000, edits=1),
        sub_event("evt_2", "sub_2", "form_a", T0 + 2 * DAY, ANSWERS_2, DISPLAY_2),
        sub_event("evt_3", "sub_3", "form_b", T0 + DAY, {"decision": "approve", "age": "old"},
                  {"decision": "Approve", "age": "old"}, type="request.completed",
                  request=req_block("req_1", "completed", T0 + DAY, outcome="approve")),
        Event.model_validate({"id": "evt_4", "type": "request.canceled", "createdAt": iso(T0 + 3 * DAY),
                              "data": {"request": req_block("req_2", "canceled", T0 + 3 * DAY,
                                                            cancelReason="=cmd|' /C calc'!A0",
                                                            metadata={"runId": "run-43", "owner": "Cy"})}}),
    ])
    try:
        yield s
    finally:
        s.close()


# -- expected tables, built straight from the stored rows ----------------------------------


def ts(ms: int | None) -> pd.Timestamp | None:
    return None if ms is None else pd.Timestamp(ms, unit="ms", tz=UTC)


def submissions(store: Store) -> list[SubmissionRow]:
    with store.database.reader() as s:
        rows = list(s.execute(select(SubmissionRow).order_by(SubmissionRow.submitted_at)).scalars())
        s.expunge_all()
        return rows


def expected_wide(store: Store, form: str = "form_a", *, display: bool = False) -> list[dict[str, Any]]:
    """The wide table of ``form`` as the contract says, from the stored rows and the
    field lists above (plain Python values: lists, dicts, floats, booleans)."""
    fields = {"form_a": FIELDS_A, "form_b": FIELDS_B}[form]
    external = {r["request_id"]: r["external_id"] for r in expected_requests(store)}
    out = []
    for r in submissions(store):
        if r.form_id != form:
            continue
        a, d = r.answers or {}, r.display or {}
        rec: dict[str, Any] = {"submission_id": r.id, "form_id": r.form_id, "request_id": r.request_id,
                               "external_id": external.get(r.request_id), "submitted_at": ts(r.submitted_at),
                               "updated_at": ts(r.updated_at), "respondent_email": r.respondent_email,
                               "language": r.language, "completed": r.is_completed, "edit_count": r.edit_count,
                               "stored_at": ts(r.stored_at)}
        for f in fields:
            key, t = f["key"], f["type"]
            v = a.get(key)
            if t == "documents":
                continue
            if display and t not in ("text", "textarea", "number", "switch"):
                rec[f["title"]] = d.get(key)
                continue
            name = f["title"] if display else key
            if t == "matrix":
                for row in f["rows"]:
                    rec[f"{key}_{row['key']}"] = (v or {}).get(row["key"])
            elif t == "number":
                rec[name] = None if v is None else float(v)
            elif t == "file":
                rec[name] = None if v is None else [{m: float(c[m]) if m == "size" else c.get(m)
                                                    for m in ("name", "type", "size", "url")} for c in v]
                if not display:  # none archived here: a null beside each file
                    rec[f"{key}__archived"] = None if v is None else [None] * len(v)
            elif t == "group":
                rec[name] = None if v is None else [{m["key"]: i.get(m["key"]) for m in f["members"]} for i in v]
            else:
                rec[name] = v
            if t in ("checkbox", "decision"):
                rec[f"{key}_label"] = d.get(key)
        out.append(rec)
    return out


class AnswerRow:
    """One long-form row (``answer_rows``) with attribute access."""

    def __init__(self, **cols: Any) -> None:
        self.__dict__.update(cols)


def expected_long(store: Store) -> list[dict[str, Any]]:
    forms = {r.id: r.form_id for r in submissions(store)}
    order = {r.id: i for i, r in enumerate(submissions(store))}
    rows = [a for r in submissions(store) for a in (AnswerRow(**d) for d in answer_rows(r.id, r.answers, r.display))]
    rows.sort(key=lambda a: (order[a.submission_id], a.field_key, a.instance, a.row_key, a.member_key))
    return [{"submission_id": a.submission_id, "form_id": forms[a.submission_id], "field_key": a.field_key,
             "instance": None if a.instance == -1 else a.instance, "row_key": a.row_key or None,
             "member_key": a.member_key or None, "value": plain_value(a.value_json),
             "display_text": a.display_text, "archived": nothing_archived(store, forms[a.submission_id], a)}
            for a in rows]


def nothing_archived(store: Store, form: str, a: AnswerRow) -> list[None] | None:
    """The long table's ``archived`` with no file archived: a null beside each file of a
    file field's (or a group's file member's) row, null on any other row."""
    files = store.archive.file_fields([form]).get(form)
    top = files is not None and a.instance == -1 and not a.member_key and a.field_key in files.top
    member = files is not None and a.instance >= 0 and a.member_key in files.groups.get(a.field_key, ())
    return [None] * len(json.loads(a.value_json)) if top or member else None


def plain_value(value_json: str) -> str:
    """The long table's value: text as it is, anything else as its JSON text."""
    value = json.loads(value_json)
    return value if isinstance(value, str) else value_json


def expected_requests(store: Store) -> list[dict[str, Any]]:
    with store.database.reader() as s:
        rows = list(s.execute(select(RequestRow).order_by(RequestRow.created_at)).scalars())
    out = []
    for r in rows:
        rec: dict[str, Any] = {
            "request_id": r.id, "form_id": r.form_id, "status": r.status, "outcome": r.outcome,
            "delivery_status": r.delivery_status, "external_id": r.external_id,
            "recipient_email": r.recipient_email, "recipient_name": r.recipient_name,
            "submission_id": r.submission_id, "cancel_reason": r.cancel_reason}
        for c in ("created_at", "expires_at", "completed_at", "expired_at", "canceled_at", "updated_at"):
            rec[c] = ts(getattr(r, c))
        rec["metadata"] = json.dumps(r.metadata_, ensure_ascii=False) if r.metadata_ else None
        out.append(rec)
    return out


# -- reading files back ---------------------------------------------------------------------


def norm(v: Any) -> Any:
    """One comparable form for a cell from any reader: empty is None, whole floats are
    ints, times are UTC timestamps."""
    if v is None or v is pd.NaT or (isinstance(v, float) and math.isnan(v)) or v == "":
        return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, datetime):
        t = pd.Timestamp(v)
        return t.tz_localize(UTC) if t.tzinfo is None else t.tz_convert(UTC)
    return v


def guard(v: Any) -> Any:
    """What a CSV or XLSX cell holds for ``v``: text that starts a formula gets a quote."""
    return "'" + v if isinstance(v, str) and v[:1] in ("=", "+", "-", "@", "\t", "\r") else v


def read_csv(path: Path) -> list[dict[str, Any]]:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    return df.to_dict("records")


def read_parquet(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


def cell_text(v: Any) -> Any:
    """What a CSV or XLSX cell holds for a list or an object: its JSON text, whole
    numbers without a fraction."""
    def whole(x: Any) -> Any:
        if isinstance(x, float) and x.is_integer():
            return int(x)
        if isinstance(x, list):
            return [whole(i) for i in x]
        if isinstance(x, dict):
            return {k: whole(i) for k, i in x.items() if i is not None}
        return x
    return json.dumps(whole(v), ensure_ascii=False) if isinstance(v, list | dict) else v


def read_sheet(path: Path, sheet: str) -> list[dict[str, Any]]:
    ws = openpyxl.load_workbook(path)[sheet]
    rows = list(ws.iter_rows(values_only=True))
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def as_csv_text(v: Any) -> str:
    """How the CSV export writes an expected value: booleans ``true``/``false``, a
    number always with a decimal point."""
    if v is None:
        return ""
    if isinstance(v, pd.Timestamp):
        return str(v)
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)  # a float's shortest text with its point: 2.0, 2.5


def assert_table(got: list[dict[str, Any]], want: list[dict[str, Any]], *, kind: str) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert set(w) <= set(g), f"row {i}: missing columns {set(w) - set(g)}"
        for c in g:
            expected = w.get(c)
            if kind == "csv":
                assert g[c] == as_csv_text(guard(cell_text(expected))), (i, c)
            elif kind == "xlsx":
                assert norm(g[c]) == norm(guard(cell_text(expected))), (i, c)
            else:
                assert norm(g[c]) == norm(expected), (i, c)


# -- tests ----------------------------------------------------------------------------------


def test_neutralise_fixed_inputs() -> None:
    assert neutralise("=1+2") == "'=1+2"
    assert neutralise("+33 6 12") == "'+33 6 12"
    assert neutralise("-5") == "'-5"
    assert neutralise("@SUM(A1)") == "'@SUM(A1)"
    assert neutralise("\tx") == "'\tx"
    assert neutralise("\rx") == "'\rx"
    assert neutralise("a=b") == "a=b"
    assert neutralise("") == ""
    assert neutralise(-5) == -5
    assert neutralise(None) is None
    assert neutralise(True) is True


@pytest.mark.parametrize("fmt", ["csv", "parquet", "xlsx"])
@pytest.mark.parametrize("display", [False, True])
def test_wide_round_trip(store: Store, tmp_path: Path, fmt: str, display: bool) -> None:
    out = tmp_path / f"wide.{fmt}"
    report = export(store, fmt, out, form_id="form_a", display=display)  # type: ignore[arg-type]
    want = expected_wide(store, display=display)
    assert report.rows == {"wide": 2}
    # the submission's own columns, then the field list's, answered or not (note: only in sub_2)
    assert report.columns["wide"] == (WIDE_A if not display else WIDE_A[:11] + [
        "Your name", "Age", "Colors", "Rate us", "People", "CV", "Agree", "Note"])
    got = {"csv": read_csv, "parquet": read_parquet, "xlsx": lambda p: read_sheet(p, "wide")}[fmt](out)
    assert list(got[0]) == report.columns["wide"]
    if fmt == "csv":
        for row in got:  # times come back as text; parse them for the comparison
            for c in ("submitted_at", "updated_at", "stored_at"):
                row[c] = str(pd.Timestamp(row[c])) if row[c] else ""
    assert_table(got, want, kind=fmt)
    assert [r["submission_id"] for r in got] == ["sub_1", "sub_2"]


def test_wide_cells_are_typed_by_the_field_list(store: Store, tmp_path: Path) -> None:
    export(store, "parquet", tmp_path / "w.parquet", form_id="form_a")
    t = pq.read_table(tmp_path / "w.parquet")
    types = {f.name: str(f.type) for f in t.schema}
    assert (types["age"], types["colors"], types["agree"], types["completed"]) == (
        "double", "list<element: string>", "bool", "bool")
    assert types["people"] == "list<element: struct<first: string, last: string>>"
    assert types["cv"] == "list<element: struct<name: string, type: string, size: double, url: string>>"
    row = {r["submission_id"]: r for r in t.to_pylist()}["sub_1"]
    assert row["people"] == ANSWERS_1["people"] and row["cv"] == [{**CV, "size": 1200.0}]
    assert (row["colors"], row["colors_label"], row["grid_speed"], row["age"]) == (["red", "blue"], "Red, Blue",
                                                                                    "good", 42.0)
    assert row["name"] == ANSWERS_1["name"]  # Parquet is never neutralised
    assert row["note"] is None  # not answered: a column all the same
    # "age" is a number in form_a and text in form_b: each form's table has its own type
    export(store, "parquet", tmp_path / "b.parquet", form_id="form_b")
    b = pq.read_table(tmp_path / "b.parquet")
    assert str(b.schema.field("age").type) == "string" and b.column("age").to_pylist() == ["old"]
    assert b.column("decision_label").to_pylist() == ["Approve"]
    assert b.column("external_id").to_pylist() == ["+ext-req_1"]
    export(store, "parquet", tmp_path / "d.parquet", form_id="form_a", display=True)
    shown = {r["submission_id"]: r for r in read_parquet(tmp_path / "d.parquet")}["sub_1"]
    assert (shown["CV"], shown["People"], shown["Rate us"], shown["Age"]) == (
        "cv.pdf", "Ann / Lee, Bo / Ng", "Speed: Good, Price: Bad", 42.0)


def test_several_forms_write_one_wide_file_each(store: Store, tmp_path: Path) -> None:
    report = export(store, "csv", tmp_path / "w.csv")
    assert report.files == {"form_a": str(tmp_path / "w.form_a.csv"), "form_b": str(tmp_path / "w.form_b.csv")}
    assert report.rows == {"form_a": 2, "form_b": 1}
    assert not (tmp_path / "w.csv").exists()
    assert list(read_csv(tmp_path / "w.form_a.csv")[0]) == WIDE_A
    assert list(read_csv(tmp_path / "w.form_b.csv")[0])[11:] == ["decision", "decision_label", "age"]
    report = export(store, "xlsx", tmp_path / "w.xlsx", table="all")
    assert openpyxl.load_workbook(tmp_path / "w.xlsx").sheetnames == ["form_a", "form_b", "long", "requests"]
    assert read_sheet(tmp_path / "w.xlsx", "form_b")[0]["decision"] == "approve"


@pytest.mark.parametrize("fmt", ["csv", "parquet", "xlsx"])
def test_long_round_trip(store: Store, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"long.{fmt}"
    report = export(store, fmt, out, table="long")  # type: ignore[arg-type]
    want = expected_long(store)
    assert report.rows == {"long": len(want)}
    # the matrix gives one row per row, the group one per instance and member
    assert sum(1 for w in want if w["submission_id"] == "sub_1" and w["field_key"] == "people") == 4
    got = {"csv": read_csv, "parquet": read_parquet, "xlsx": lambda p: read_sheet(p, "long")}[fmt](out)
    assert list(got[0]) == report.columns["long"]
    assert_table(got, want, kind=fmt)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "xlsx"])
def test_requests_round_trip(store: Store, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"req.{fmt}"
    report = export(store, fmt, out, table="requests")  # type: ignore[arg-type]
    want = expected_requests(store)
    assert report.rows == {"requests": 2}
    assert report.columns["requests"][-2:] == ["updated_at", "metadata"]  # the caller's metadata: one JSON column
    got = {"csv": read_csv, "parquet": read_parquet, "xlsx": lambda p: read_sheet(p, "requests")}[fmt](out)
    assert list(got[0]) == report.columns["requests"]
    if fmt == "csv":
        for row in got:
            for c in ("created_at", "expires_at", "completed_at", "expired_at", "canceled_at", "updated_at"):
                row[c] = str(pd.Timestamp(row[c])) if row[c] else ""
    assert_table(got, want, kind=fmt)
    by_id = {r["request_id"]: r for r in got}
    assert norm(by_id["req_1"]["status"]) == "completed" and norm(by_id["req_1"]["outcome"]) == "approve"
    assert norm(by_id["req_2"]["status"]) == "canceled"


def test_display_headers_stay_unique(tmp_path: Path) -> None:
    s = Store(f"sqlite:///{tmp_path / 'u.db'}")
    s.migrate()
    s.record_fields("form_u", [{"key": "form_id", "type": "text", "title": "form_id"},
                               {"key": "a", "type": "text", "title": "Same"}, {"key": "b", "type": "text", "title": "Same"}])
    s.store_events([sub_event("evt_u", "sub_u", "form_u", T0, {"form_id": "mine", "a": "x", "b": "y"},
                              {"form_id": "mine", "a": "x", "b": "y"})])
    report = export(s, "parquet", tmp_path / "u.parquet", display=True)
    assert report.columns["wide"][11:] == ["form_id [form_id_3d1c9253]", "Same [a]", "Same [b]"]
    row = pd.read_parquet(tmp_path / "u.parquet").iloc[0]
    assert (row["form_id"], row["form_id [form_id_3d1c9253]"], row["Same [a]"], row["Same [b]"]) == (
        "form_u", "mine", "x", "y")
    s.close()


def test_long_values_are_plain_and_fields_filter(store: Store, tmp_path: Path) -> None:
    report = export(store, "parquet", tmp_path / "l.parquet", table="long", fields=["grid", "name", "age"])
    assert report.columns["long"] == ["submission_id", "form_id", "field_key", "instance", "row_key", "member_key",
                                      "value", "display_text", "archived"]
    rows = read_parquet(tmp_path / "l.parquet")
    assert {r["field_key"] for r in rows} == {"grid", "name", "age"}
    got = {(r["submission_id"], r["field_key"], r["row_key"]): (r["instance"], r["value"]) for r in rows}
    assert got[("sub_1", "grid", "price")] == (None, "bad")  # a matrix row: no instance, its row key
    assert got[("sub_1", "name", None)] == (None, ANSWERS_1["name"])  # text without JSON quotes
    assert got[("sub_1", "age", None)] == (None, "42") and got[("sub_3", "age", None)] == (None, "old")
    export(store, "parquet", tmp_path / "g.parquet", table="long", fields=["people"])
    people = read_parquet(tmp_path / "g.parquet")
    assert [(r["instance"], r["member_key"], r["value"]) for r in people] == [
        (0, "first", "Ann"), (0, "last", "Lee"), (1, "first", "Bo"), (1, "last", "Ng")]


def test_formulas_neutralised_in_csv_and_xlsx_not_parquet(store: Store, tmp_path: Path) -> None:
    export(store, "csv", tmp_path / "r.csv", table="requests")
    export(store, "xlsx", tmp_path / "r.xlsx", table="requests")
    export(store, "parquet", tmp_path / "r.parquet", table="requests")
    reason = "=cmd|' /C calc'!A0"
    csv_rows = {r["request_id"]: r for r in read_csv(tmp_path / "r.csv")}
    assert csv_rows["req_2"]["cancel_reason"] == "'" + reason
    assert csv_rows["req_1"]["external_id"] == "'+ext-req_1"
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["requests"]
    cells = [c for row in ws.iter_rows() for c in row]
    assert all(c.data_type != "f" for c in cells)  # nothing became a formula
    assert "'" + reason in [c.value for c in cells]
    pq = pd.read_parquet(tmp_path / "r.parquet").set_index("request_id")
    assert pq.loc["req_2", "cancel_reason"] == reason


def test_xlsx_all_sheets_header_bold_frozen_autofilter(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "all.xlsx"
    report = export(store, "xlsx", out, table="all", form_id="form_a")
    assert report.rows == {"wide": 2, "long": len([r for r in expected_long(store) if r["form_id"] == "form_a"]),
                           "requests": 0}
    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames == ["wide", "long", "requests"]
    for name in wb.sheetnames:
        ws = wb[name]
        assert all(c.font.bold for c in ws[1])
        assert all(not c.font.bold for c in ws[2])
        assert ws.freeze_panes == "A2"
        assert ws.auto_filter.ref == f"A1:{ws.cell(1, ws.max_column).column_letter}{report.rows[name] + 1}"
        assert [c.value for c in ws[1]] == report.columns[name]
        widths = [ws.column_dimensions[ws.cell(1, i).column_letter].width for i in range(1, ws.max_column + 1)]
        assert all(8 <= w <= 61 for w in widths)
    assert_table(read_sheet(out, "wide"), expected_wide(store), kind="xlsx")


def test_xlsx_refuses_a_table_over_the_sheet_limit(store: Store, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_mod, "XLSX_MAX_ROWS", 2)  # the real limit, 1,048,576, scaled down
    out = tmp_path / "big.xlsx"
    with pytest.raises(ValueError, match=r"table 'wide' has 2 rows; an XLSX sheet holds at most 1 rows"):
        export(store, "xlsx", out, form_id="form_a")
    assert not out.exists()
    export(store, "xlsx", out, form_id="form_b")  # one row fits
    assert out.exists()


def test_filters(store: Store, tmp_path: Path) -> None:
    export(store, "parquet", tmp_path / "a.parquet", form_id="form_a")
    assert list(pd.read_parquet(tmp_path / "a.parquet")["submission_id"]) == ["sub_1", "sub_2"]
    since = datetime.fromtimestamp((T0 + DAY) / 1000, tz=UTC)
    export(store, "parquet", tmp_path / "s.parquet", since=since, form_id="form_a")
    assert list(pd.read_parquet(tmp_path / "s.parquet")["submission_id"]) == ["sub_2"]
    export(store, "parquet", tmp_path / "l.parquet", table="long", form_id="form_b")
    assert set(pd.read_parquet(tmp_path / "l.parquet")["submission_id"]) == {"sub_3"}
    export(store, "parquet", tmp_path / "r.parquet", table="requests", status="canceled")
    assert list(pd.read_parquet(tmp_path / "r.parquet")["request_id"]) == ["req_2"]
    export(store, "parquet", tmp_path / "f.parquet", table="requests", form_id="form_b")
    assert list(pd.read_parquet(tmp_path / "f.parquet")["request_id"]) == ["req_1"]
    report = export(store, "csv", tmp_path / "none.csv", form_id="form_zzz")
    assert report.rows == {"wide": 0}
    assert list(pd.read_csv(tmp_path / "none.csv").columns) == WIDE_A[:11]  # a form the store does not know


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"fmt": "json"}, "format must be one of csv, xlsx, parquet, got 'json'"),
    ({"table": "rows"}, "table must be one of wide, long, requests or all, got 'rows'"),
    ({"fmt": "csv", "table": "all"}, "table 'all' writes one sheet per table and needs format xlsx"),
    ({"table": "requests", "status": "done"}, "status must be one of pending, completed, expired, canceled"),
    ({"status": "pending"}, "status filters requests: use it with table requests or all"),
])
def test_bad_arguments_are_refused(store: Store, tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    out = tmp_path / "x.out"
    args = {"fmt": "parquet", **kwargs}
    with pytest.raises(ValueError, match=message):
        export(store, args.pop("fmt"), out, **args)
    assert not out.exists()


def test_missing_directory_is_refused(store: Store, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="directory .*nowhere does not exist"):
        export(store, "csv", tmp_path / "nowhere" / "x.csv")


def test_cli_export(store: Store, tmp_path: Path) -> None:
    env = {"FORMSYNC_STORE__URL": store.url}
    out = tmp_path / "cli.xlsx"
    result = CliRunner().invoke(app, ["export", "--format", "xlsx", "--out", str(out), "--table", "all",
                                      "--form", "form_a", "--since", "2026-01-01"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["rows"]["wide"] == 2 and report["rows"]["requests"] == 0
    assert [r["submission_id"] for r in read_sheet(out, "wide")] == ["sub_1", "sub_2"]
    out2 = tmp_path / "cli.csv"
    result = CliRunner().invoke(app, ["export", "--format", "csv", "--out", str(out2), "--table", "requests",
                                      "--status", "completed"], env=env)
    assert result.exit_code == 0, result.output
    assert [r["request_id"] for r in read_csv(out2)] == ["req_1"]
    bad = CliRunner().invoke(app, ["export", "--format", "csv", "--out", str(out2), "--since", "yesterday"], env=env)
    assert bad.exit_code == 2 and "expected an ISO date or time" in bad.output
    bad = CliRunner().invoke(app, ["export", "--format", "doc", "--out", str(tmp_path / "x.doc")], env=env)
    assert bad.exit_code == 2 and "error: --format: expected 'csv', 'xlsx' or 'parquet', got 'doc'" in bad.output
    assert not (tmp_path / "x.doc").exists()


def read_excel_pandas(path: Path, sheet: str) -> list[dict[str, Any]]:
    return pd.read_excel(path, sheet_name=sheet, dtype=object).to_dict("records")


async def test_export_of_a_store_synced_from_the_sandbox_reads_back_cell_by_cell(
        sandbox: Any, tmp_path: Path) -> None:
    """The store filled by the sync and poll pipelines over loopback HTTP (not by hand),
    exported as XLSX and CSV, read back with openpyxl and pandas, compared with the store."""
    from connector.client.rpc import FormClient
    from pipelines.sync.submissions import sync_form

    form = sandbox.pro.forms["Contact"]
    for i, name in enumerate(["=1+1", "+33 6 12 34 56 78", "Ann", "@home", "-5"]):
        answers = {"name": name, "email": f"x{i}@example.test", "topic": ["sales", "support", "other"][i % 3]}
        if i % 2:
            answers["message"] = f"line one\nline two, \"quoted\" {i}"
        assert (await sandbox.helper("submissions.create", {"formId": form, "answers": answers})).ok
    store = Store(f"sqlite:///{tmp_path / 'synced.db'}")
    store.migrate()
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        assert (await sync_form(fc, store, form)).fetched == 8  # 3 seeded + 5
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        store.record_fields(form, (await fc.list_fields(form)).items)
    want = expected_synced(store, form)
    assert len(want) == 8
    export(store, "xlsx", tmp_path / "all.xlsx", table="all")
    export(store, "csv", tmp_path / "wide.csv")
    export(store, "csv", tmp_path / "long.csv", table="long")
    for got in (read_sheet(tmp_path / "all.xlsx", "wide"), read_excel_pandas(tmp_path / "all.xlsx", "wide")):
        assert_table(got, want, kind="xlsx")
    for got in (read_sheet(tmp_path / "all.xlsx", "long"), read_excel_pandas(tmp_path / "all.xlsx", "long")):
        assert_table(got, [{k: guard(v) for k, v in r.items()} for r in expected_long(store)], kind="parquet")
    wide_csv = read_csv(tmp_path / "wide.csv")
    for row in wide_csv:
        for c in ("submitted_at", "updated_at", "stored_at"):
            row[c] = str(pd.Timestamp(row[c])) if row[c] else ""
    assert_table(wide_csv, want, kind="csv")
    assert_table(read_csv(tmp_path / "long.csv"), expected_long(store), kind="csv")
    store.close()


def expected_synced(store: Store, form: str) -> list[dict[str, Any]]:
    """The wide table of the sandbox's Contact form: text fields, a choice with its label."""
    out = []
    for r in submissions(store):
        a, d = r.answers or {}, r.display or {}
        out.append({"submission_id": r.id, "form_id": form, "request_id": r.request_id,
                    "submitted_at": ts(r.submitted_at), "updated_at": ts(r.updated_at),
                    "respondent_email": r.respondent_email, "completed": r.is_completed, "edit_count": r.edit_count,
                    "stored_at": ts(r.stored_at), "name": a.get("name"), "email": a.get("email"), "topic": a.get("topic"),
                    "topic_label": d.get("topic"), "message": a.get("message")})
    return out


async def test_cli_export_display_has_titles_and_labels_from_the_store(sandbox: Any, tmp_path: Path) -> None:
    from connector.client.rpc import FormClient
    from pipelines.sync.submissions import sync_form

    form = sandbox.pro.forms["Contact"]
    store = Store(f"sqlite:///{tmp_path / 'labels.db'}")
    store.migrate()
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await sync_form(fc, store, form)
        store.record_fields(form, (await fc.list_fields(form)).items)
    store.close()
    # no service at all: titles and labels come from the store
    env = {"FORMSYNC_STORE__URL": f"sqlite:///{tmp_path / 'labels.db'}"}
    out = tmp_path / "labels.xlsx"
    result = await asyncio.to_thread(lambda: CliRunner().invoke(
        app, ["export", "--format", "xlsx", "--out", str(out), "--form", form, "--display"], env=env))
    assert result.exit_code == 0, result.output
    rows = read_sheet(out, "wide")
    assert list(rows[0])[11:] == ["Name", "Email", "Topic", "Message", "Source"], "titles, in fields.list order"
    assert sorted(r["Name"] for r in rows) == ["Ada Lovelace", "Alan Turing", "Grace Hopper"]
    assert {r["Topic"] for r in rows} <= {"Sales", "Support", "Other", None}  # labels, not keys
    assert any(r["Topic"] for r in rows)
