"""The campaign export writes the sheet's dates and numbers as the outreach run read them:
date and number cells in XLSX, typed Parquet columns, ISO dates in CSV. The pure column
on fixed inputs; a whole job (a European CSV sent to a real sandbox over loopback HTTP,
a SQLite store) exported in each format."""

from __future__ import annotations

import csv
from datetime import date, datetime
from pathlib import Path

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq

from connector.client.rpc import FormClient
from connector.store import Store
from formservice.sandbox.recipient import answer_request
from pipelines.campaign import export_campaign
from pipelines.campaign.table import typed_sheet_column
from pipelines.export import export
from pipelines.outreach import SheetOptions, run_outreach
from pipelines.outreach.formats import COMMA, DAY_FIRST, MONTH_FIRST, POINT
from pipelines.sync.poll import poll_once
from tests.conftest import Sandbox


def test_a_sheet_column_is_typed_as_its_run_read_it() -> None:
    cells = ["03/04/2026", "31/12/2026", "", None, "soon", "46053"]
    assert typed_sheet_column(cells, "date", DAY_FIRST).to_pylist() == [
        date(2026, 4, 3), date(2026, 12, 31), None, None, None, date(2026, 1, 31)]
    assert typed_sheet_column(["03/04/2026"], "date", MONTH_FIRST).to_pylist() == [date(2026, 3, 4)]
    prices = typed_sheet_column(["1.234,5", "5,5", "42", "x"], "number", COMMA)
    assert (prices.type, prices.to_pylist()) == (pa.float64(), [1234.5, 5.5, 42.0, None])
    stars = typed_sheet_column(["4", "4.5", ""], "integer", POINT)
    assert (stars.type, stars.to_pylist()) == (pa.int64(), [4, None, None])


async def test_the_export_writes_the_sheets_dates_and_numbers_typed(sandbox: Sandbox, tmp_path: Path) -> None:
    await sandbox.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.migrate()
    sheet = tmp_path / "kunden.csv"
    sheet.write_text("email;Full Name;Start Date;Unit Price;Quantity;Note\n"
                     "a@example.test;Ada;03/04/2026;1.234,50;2;=1+1\n"
                     "b@example.test;Bo;31/12/2026;5,5;;x\n"
                     "c@example.test;Cy;not a date;7;1;y\n", encoding="utf-8")
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        sent = await run_outreach(fc, store, sheet, sandbox.pro.forms["Everything"], job="typed",
                                  mapping={"Note": "metadata.note"}, report_path=tmp_path / "r.csv",
                                  sheet_options=SheetOptions(date_format="dd/mm/yyyy"))
    assert (sent.sent, sent.invalid) == (2, 1)

    export_campaign(store, "typed", "parquet", tmp_path / "t.parquet")
    table = pq.read_table(tmp_path / "t.parquet")
    assert [str(table.schema.field(c).type) for c in ("Start Date", "Unit Price", "Quantity", "Note")] == [
        "date32[day]", "double", "double", "string"]
    assert table.column("Start Date").to_pylist() == [date(2026, 4, 3), date(2026, 12, 31), None]
    assert table.column("Unit Price").to_pylist() == [1234.5, 5.5, 7.0]

    export_campaign(store, "typed", "csv", tmp_path / "t.csv")
    rows = list(csv.DictReader((tmp_path / "t.csv").open(encoding="utf-8")))
    assert [r["Start Date"] for r in rows] == ["2026-04-03", "2026-12-31", ""]
    assert [float(r["Unit Price"]) for r in rows] == [1234.5, 5.5, 7.0] and rows[0]["Note"] == "'=1+1"

    export_campaign(store, "typed", "xlsx", tmp_path / "t.xlsx")
    ws = openpyxl.load_workbook(tmp_path / "t.xlsx").active
    assert ws is not None
    header = [c.value for c in ws[1]]
    start, price, quantity = (header.index(c) for c in ("Start Date", "Unit Price", "Quantity"))
    first = [c for c in ws[2]]
    assert first[start].is_date and first[start].value == datetime(2026, 4, 3)
    assert first[start].number_format == "yyyy-mm-dd"
    assert (first[price].value, first[quantity].value) == (1234.5, 2)
    assert ws.cell(row=4, column=start + 1).value is None  # the rejected row's cell that is no date


async def test_answers_are_typed_as_formsync_export_types_them_and_a_workbooks_cells_stay_typed(
        sandbox: Sandbox, tmp_path: Path) -> None:
    """A workbook sheet whose date and number cells are mapped to ``metadata.*`` (and one
    to a number field's prefill), two rows answered on the recipient page and one not:
    the answers' columns have ``formsync export``'s Parquet types (a column nobody
    answered too), numbers are numbers in XLSX and CSV, the workbook's dates and numbers
    stay typed."""
    await sandbox.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.migrate()
    sheet = tmp_path / "kunden.xlsx"
    book = openpyxl.Workbook()
    ws = book.active
    assert ws is not None
    ws.append(["email", "full_name", "Joined", "Budget", "Quantity"])
    ws.append(["a@example.test", "Ada", datetime(2025, 2, 1), 1500.25, 3])
    ws.append(["b@example.test", "Bo", datetime(2024, 12, 31), 20, None])
    ws.append(["c@example.test", "Cy", None, 7.5, 4])
    book.save(sheet)
    form = sandbox.pro.forms["Everything"]
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        sent = await run_outreach(fc, store, sheet, form, job="typed", report_path=tmp_path / "r.csv",
                                  mapping={"Joined": "metadata.joined", "Budget": "metadata.budget",
                                           "Quantity": "prefill.quantity"})
        assert sent.sent == 3
        by_number = {r.row_number: r for r in store.campaign.rows("typed")}
        for n, price, day in ((2, "12.5", "2026-05-01"), (3, "3", "2026-06-30")):
            got = await answer_request(sandbox.http, by_number[n].url or "", {
                "full_name": "Someone", "email": by_number[n].recipient_email or "", "plan": "basic", "quantity": "2",
                "unit_price": price, "start_date": day, "satisfaction": "4"})
            assert got.thanked, got.errors
        await poll_once(fc, store)

    export(store, "parquet", tmp_path / "wide.parquet", form_id=form)
    wide = pq.read_schema(tmp_path / "wide.parquet")
    export_campaign(store, "typed", "parquet", tmp_path / "c.parquet")
    table = pq.read_table(tmp_path / "c.parquet")
    answered = [n for n in table.column_names if n.startswith("answer.")]
    fields = [c.name for c in store.schema(form).fields() if c.source in ("answer", "row")]
    assert answered == [f"answer.{n}" for n in fields]
    assert {n: str(table.schema.field(f"answer.{n}").type) for n in fields} == {
        n: str(wide.field(n).type) for n in fields}, "the wide export's types"
    assert (str(table.schema.field("answer.unit_price").type), str(table.schema.field("answer.start_date").type),
            str(table.schema.field("answer.bio").type)) == ("double", "date32[day]", "string")
    assert table.column("answer.unit_price").to_pylist() == [12.5, 3.0, None]
    assert table.column("answer.start_date").to_pylist() == [date(2026, 5, 1), date(2026, 6, 30), None]
    assert table.column("answer.satisfaction").to_pylist() == [4, 4, None]
    assert (str(table.schema.field("Joined").type), str(table.schema.field("Budget").type),
            str(table.schema.field("Quantity").type)) == ("date32[day]", "double", "double")
    assert table.column("Joined").to_pylist() == [date(2025, 2, 1), date(2024, 12, 31), None]
    assert table.column("Budget").to_pylist() == [1500.25, 20.0, 7.5]
    assert not any(pa.types.is_null(f.type) for f in table.schema), "every column typed, answered or not"

    export_campaign(store, "typed", "xlsx", tmp_path / "c.xlsx")
    ws = openpyxl.load_workbook(tmp_path / "c.xlsx").active
    assert ws is not None
    header = [c.value for c in ws[1]]
    first = [c for c in ws[2]]
    price, start, joined, budget = (header.index(c) for c in ("answer.unit_price", "answer.start_date", "Joined",
                                                             "Budget"))
    assert (first[price].value, ws.cell(row=3, column=price + 1).value) == (12.5, 3)
    assert first[start].is_date and first[start].value == datetime(2026, 5, 1)
    assert first[joined].is_date and first[joined].value == datetime(2025, 2, 1)
    assert first[budget].value == 1500.25

    export_campaign(store, "typed", "csv", tmp_path / "c.csv")
    rows = list(csv.DictReader((tmp_path / "c.csv").open(encoding="utf-8")))
    assert [r["answer.unit_price"] for r in rows] == ["12.5", "3.0", ""]
    assert [r["answer.start_date"] for r in rows] == ["2026-05-01", "2026-06-30", ""]
    assert [r["Joined"] for r in rows] == ["2025-02-01", "2024-12-31", ""]
