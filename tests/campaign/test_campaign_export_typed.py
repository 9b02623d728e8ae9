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
from pipelines.campaign import export_campaign
from pipelines.campaign.table import typed_sheet_column
from pipelines.outreach import SheetOptions, run_outreach
from pipelines.outreach.formats import COMMA, DAY_FIRST, MONTH_FIRST, POINT
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
