"""The export pipeline: every table written as CSV, XLSX and Parquet, read back and
compared cell by cell with what the store holds (SQLite in tmp_path)."""

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
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from connector.models import Event
from connector.store import RequestRow, Store, SubmissionRow, answer_rows
from pipelines import export as export_mod
from pipelines.cli import app
from pipelines.export import export, neutralise

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
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    s.migrate()
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


def expected_wide(store: Store, *, display: bool = False) -> list[dict[str, Any]]:
    out = []
    for r in submissions(store):
        rec: dict[str, Any] = {"submission_id": r.id, "form_id": r.form_id, "request_id": r.request_id,
                               "submitted_at": ts(r.submitted_at), "updated_at": ts(r.updated_at),
                               "edit_count": r.edit_count}
        for key, value in (r.answers or {}).items():
            shown = (r.display or {})[key]
            if key == "grid":
                parts = dict(zip(value, shown.split(", "), strict=True))
                for row_key, col in value.items():
                    rec[f"grid.{row_key}"] = parts[row_key] if display else col
            elif display:
                rec[key] = shown
            elif isinstance(value, list | dict):
                rec[key] = json.dumps(value, ensure_ascii=False)
            else:
                rec[key] = value
        out.append(rec)
    for c in {c for rec in out for c in rec}:  # a column mixing text and numbers is all text
        kinds = {type(rec[c]) for rec in out if rec.get(c) is not None}
        if len(kinds) > 1:
            for rec in out:
                if rec.get(c) is not None and not isinstance(rec[c], str):
                    rec[c] = json.dumps(rec[c])
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
             "instance": a.instance, "row_key": a.row_key, "member_key": a.member_key, "value_json": a.value_json,
             "display_text": a.display_text} for a in rows]


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
        for k, v in (r.metadata_ or {}).items():
            rec[f"metadata.{k}"] = v
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
    return pd.read_parquet(path).to_dict("records")


def read_sheet(path: Path, sheet: str) -> list[dict[str, Any]]:
    ws = openpyxl.load_workbook(path)[sheet]
    rows = list(ws.iter_rows(values_only=True))
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def as_csv_text(v: Any) -> str:
    """How pandas writes an expected value into CSV text."""
    if v is None:
        return ""
    if isinstance(v, pd.Timestamp):
        return str(v)
    if isinstance(v, bool):
        return str(v)
    return str(v)


def assert_table(got: list[dict[str, Any]], want: list[dict[str, Any]], *, kind: str) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert set(w) <= set(g), f"row {i}: missing columns {set(w) - set(g)}"
        for c in g:
            expected = w.get(c)
            if kind == "csv":
                assert g[c] == as_csv_text(guard(expected)), (i, c)
            elif kind == "xlsx":
                assert norm(g[c]) == norm(guard(expected)), (i, c)
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
    report = export(store, fmt, out, display=display)  # type: ignore[arg-type]
    want = expected_wide(store, display=display)
    assert report.rows == {"wide": 3}
    # fixed columns first, then field columns in first-seen order, a matrix as key.row columns
    assert report.columns["wide"] == ["submission_id", "form_id", "request_id", "submitted_at", "updated_at",
                                      "edit_count", "name", "age", "colors", "grid.speed", "grid.price", "people",
                                      "cv", "agree", "decision", "note"]
    got = {"csv": read_csv, "parquet": read_parquet, "xlsx": lambda p: read_sheet(p, "wide")}[fmt](out)
    assert list(got[0]) == report.columns["wide"]
    if fmt == "csv":
        for row in got:  # times come back as text; parse them for the comparison
            for c in ("submitted_at", "updated_at"):
                row[c] = str(pd.Timestamp(row[c])) if row[c] else ""
    assert_table(got, want, kind=fmt)
    assert [r["submission_id"] for r in got] == ["sub_1", "sub_3", "sub_2"]


def test_wide_raw_cells_are_json_for_groups_files_and_lists(store: Store, tmp_path: Path) -> None:
    export(store, "parquet", tmp_path / "w.parquet")
    row = pd.read_parquet(tmp_path / "w.parquet").set_index("submission_id").loc["sub_1"]
    assert json.loads(row["people"]) == ANSWERS_1["people"]
    assert json.loads(row["cv"]) == [CV]
    assert json.loads(row["colors"]) == ["red", "blue"]
    assert row["grid.speed"] == "good"
    assert row["name"] == ANSWERS_1["name"]  # Parquet is never neutralised
    # "age" holds a number in form_a and text in form_b: the column becomes text
    assert row["age"] == "42"
    export(store, "parquet", tmp_path / "d.parquet", display=True)
    shown = pd.read_parquet(tmp_path / "d.parquet").set_index("submission_id").loc["sub_1"]
    assert (shown["cv"], shown["people"], shown["grid.speed"]) == ("cv.pdf", "Ann / Lee, Bo / Ng", "Speed: Good")


def test_wide_labels_and_fields(store: Store, tmp_path: Path) -> None:
    report = export(store, "csv", tmp_path / "w.csv", fields=["grid", "name", "missing"],
                    labels={"name": "Your name", "grid": "Rate us"})
    assert report.columns["wide"][6:] == ["Rate us.speed", "Rate us.price", "Your name", "missing"]
    df = pd.read_csv(tmp_path / "w.csv", dtype=str, keep_default_na=False).set_index("submission_id")
    assert df.loc["sub_2", "Rate us.speed"] == "bad"
    assert df.loc["sub_2", "Rate us.price"] == ""
    assert df.loc["sub_1", "Your name"] == "'" + ANSWERS_1["name"]
    assert (df["missing"] == "").all()


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
    assert report.columns["requests"][-3:] == ["metadata.runId", "metadata.batch", "metadata.owner"]
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


def test_wide_headers_stay_unique(tmp_path: Path) -> None:
    s = Store(f"sqlite:///{tmp_path / 'u.db'}")
    s.migrate()
    s.store_events([sub_event("evt_u", "sub_u", "form_u", T0, {"form_id": "mine", "a": "x", "b": "y"},
                              {"form_id": "mine", "a": "x", "b": "y"})])
    report = export(s, "parquet", tmp_path / "u.parquet", labels={"a": "Same", "b": "Same"})
    assert report.columns["wide"][6:] == ["form_id [form_id]", "Same [a]", "Same [b]"]
    row = pd.read_parquet(tmp_path / "u.parquet").iloc[0]
    assert (row["form_id"], row["form_id [form_id]"], row["Same [a]"], row["Same [b]"]) == ("form_u", "mine", "x", "y")
    s.close()


def test_long_labels_and_fields(store: Store, tmp_path: Path) -> None:
    report = export(store, "parquet", tmp_path / "l.parquet", table="long", fields=["grid"],
                    labels={"grid": "Rate us"})
    df = pd.read_parquet(tmp_path / "l.parquet")
    assert report.columns["long"][:4] == ["submission_id", "form_id", "field_key", "field_label"]
    assert set(df["field_key"]) == {"grid"} and set(df["field_label"]) == {"Rate us"}
    assert sorted(zip(df["submission_id"], df["row_key"], df["display_text"], strict=True)) == [
        ("sub_1", "price", "Price: Bad"), ("sub_1", "speed", "Speed: Good"), ("sub_2", "speed", "Speed: Bad")]


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
    report = export(store, "xlsx", out, table="all")
    assert report.rows == {"wide": 3, "long": len(expected_long(store)), "requests": 2}
    wb = openpyxl.load_workbook(out)
    assert wb.sheetnames == ["wide", "long", "requests"]
    for name in wb.sheetnames:
        ws = wb[name]
        assert all(c.font.bold for c in ws[1])
        assert all(not c.font.bold for c in ws[2])
        assert ws.freeze_panes == "A2"
        assert ws.auto_filter.ref == f"A1:{ws.cell(1, ws.max_column).column_letter}{ws.max_row}"
        assert [c.value for c in ws[1]] == report.columns[name]
        widths = [ws.column_dimensions[ws.cell(1, i).column_letter].width for i in range(1, ws.max_column + 1)]
        assert all(8 <= w <= 61 for w in widths)
    assert_table(read_sheet(out, "wide"), expected_wide(store), kind="xlsx")


def test_xlsx_refuses_a_table_over_the_sheet_limit(store: Store, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export_mod, "XLSX_MAX_ROWS", 3)  # the real limit, 1,048,576, scaled down
    out = tmp_path / "big.xlsx"
    with pytest.raises(ValueError, match=r"table 'wide' has 3 rows; an XLSX sheet holds at most 2 rows"):
        export(store, "xlsx", out)
    assert not out.exists()
    export(store, "xlsx", out, table="requests")  # two rows fit
    assert out.exists()


def test_filters(store: Store, tmp_path: Path) -> None:
    export(store, "parquet", tmp_path / "a.parquet", form_id="form_a")
    assert list(pd.read_parquet(tmp_path / "a.parquet")["submission_id"]) == ["sub_1", "sub_2"]
    since = datetime.fromtimestamp((T0 + DAY) / 1000, tz=UTC)
    export(store, "parquet", tmp_path / "s.parquet", since=since)
    assert list(pd.read_parquet(tmp_path / "s.parquet")["submission_id"]) == ["sub_3", "sub_2"]
    export(store, "parquet", tmp_path / "l.parquet", table="long", form_id="form_b")
    assert set(pd.read_parquet(tmp_path / "l.parquet")["submission_id"]) == {"sub_3"}
    export(store, "parquet", tmp_path / "r.parquet", table="requests", status="canceled")
    assert list(pd.read_parquet(tmp_path / "r.parquet")["request_id"]) == ["req_2"]
    export(store, "parquet", tmp_path / "f.parquet", table="requests", form_id="form_b")
    assert list(pd.read_parquet(tmp_path / "f.parquet")["request_id"]) == ["req_1"]
    report = export(store, "csv", tmp_path / "none.csv", form_id="form_zzz")
    assert report.rows == {"wide": 0}
    assert list(pd.read_csv(tmp_path / "none.csv").columns)[:2] == ["submission_id", "form_id"]


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
                                      "--status", "completed", "--display"], env=env)
    assert result.exit_code == 0, result.output
    assert [r["request_id"] for r in read_csv(out2)] == ["req_1"]
    bad = CliRunner().invoke(app, ["export", "--format", "csv", "--out", str(out2), "--since", "yesterday"], env=env)
    assert bad.exit_code == 2 and "expected an ISO date or time" in bad.output
    bad = CliRunner().invoke(app, ["export", "--format", "doc", "--out", str(tmp_path / "x.doc")], env=env)
    assert bad.exit_code == 2 and "format must be one of csv, xlsx, parquet" in bad.output
    assert not (tmp_path / "x.doc").exists()


def read_excel_pandas(path: Path, sheet: str) -> list[dict[str, Any]]:
    return pd.read_excel(path, sheet_name=sheet, dtype=object).to_dict("records")


async def test_export_of_a_store_synced_from_the_sandbox_reads_back_cell_by_cell(
        sandbox: Any, tmp_path: Path) -> None:
    """The store filled by the sync and poll pipelines over loopback HTTP (not by hand),
    exported as XLSX and CSV, read back with openpyxl and pandas, compared with the store."""
    from connector.client import FormClient
    from pipelines.sync import sync_form

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
    want = expected_wide(store)
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
        for c in ("submitted_at", "updated_at"):
            row[c] = str(pd.Timestamp(row[c])) if row[c] else ""
    assert_table(wide_csv, want, kind="csv")
    assert_table(read_csv(tmp_path / "long.csv"), expected_long(store), kind="csv")
    store.close()


async def test_cli_export_labels_uses_the_forms_titles_and_field_order(sandbox: Any, tmp_path: Path) -> None:
    from connector.client import FormClient
    from pipelines.sync import sync_form

    form = sandbox.pro.forms["Contact"]
    store = Store(f"sqlite:///{tmp_path / 'labels.db'}")
    store.migrate()
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await sync_form(fc, store, form)
    store.close()
    env = {"FORMSYNC_STORE__URL": f"sqlite:///{tmp_path / 'labels.db'}", "FORMSYNC_SERVICE__BASE_URL": sandbox.base_url,
           "FORMSYNC_SERVICE__TOKEN": sandbox.pro.token}
    out = tmp_path / "labels.csv"

    def run(*args: str) -> Any:
        return CliRunner().invoke(app, ["export", "--format", "csv", "--out", str(out), *args], env=env)

    result = await asyncio.to_thread(run, "--form", form, "--labels")
    assert result.exit_code == 0, result.output
    header = list(pd.read_csv(out, dtype=str, keep_default_na=False).columns)
    assert header == ["submission_id", "form_id", "request_id", "submitted_at", "updated_at", "edit_count",
                      "Name", "Email", "Topic", "Message", "Source"], "titles, in fields.list order"
    rows = read_csv(out)
    assert sorted(r["Name"] for r in rows) == ["Ada Lovelace", "Alan Turing", "Grace Hopper"]
    result = await asyncio.to_thread(run, "--labels")
    assert result.exit_code == 2 and "give --form" in result.output
    result = await asyncio.to_thread(run, "--form", "form_nope", "--labels")
    assert result.exit_code == 1 and "form_nope" in result.output
