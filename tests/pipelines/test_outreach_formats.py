"""Dates, numbers and headers as people's sheets have them: the pure detection of
``pipelines.outreach.formats`` and ``columns``, on fixed inputs and with hypothesis."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.models import FieldDescriptor
from pipelines.outreach.checks import column_problem, mapping_problem
from pipelines.outreach.columns import column_targets, header_key, mapping_target
from pipelines.outreach.formats import (
    COMMA,
    DATES,
    DAY_FIRST,
    MONTH_FIRST,
    NUMBERS,
    POINT,
    date_readings,
    number_readings,
    settle,
)

EVERYTHING = [FieldDescriptor(key="full_name", type="text", title="Full name", prefillable=True),
              FieldDescriptor(key="email", type="email", title="Email", prefillable=True),
              FieldDescriptor(key="start_date", type="date", title="Start date", prefillable=True),
              FieldDescriptor(key="unit_price", type="number", title="Unit price", prefillable=True),
              FieldDescriptor(key="crm_id", type="hidden", title="CRM id", context=True),
              FieldDescriptor(key="id", type="text", title="Id", prefillable=True)]
BY_KEY = {f.key: f for f in EVERYTHING}


@pytest.mark.parametrize(("text", "readings"), [
    ("2026-01-31", {DAY_FIRST: date(2026, 1, 31), MONTH_FIRST: date(2026, 1, 31)}),
    ("2026-01-31T08:00:00", {DAY_FIRST: date(2026, 1, 31), MONTH_FIRST: date(2026, 1, 31)}),
    ("31/01/2026", {DAY_FIRST: date(2026, 1, 31)}),
    ("01/31/2026", {MONTH_FIRST: date(2026, 1, 31)}),
    ("03/04/2026", {DAY_FIRST: date(2026, 4, 3), MONTH_FIRST: date(2026, 3, 4)}),
    ("05/05/2026", {DAY_FIRST: date(2026, 5, 5), MONTH_FIRST: date(2026, 5, 5)}),
    ("3.4.2026", {DAY_FIRST: date(2026, 4, 3), MONTH_FIRST: date(2026, 4, 3)}),  # dots: day first
    ("46053", {DAY_FIRST: date(2026, 1, 31), MONTH_FIRST: date(2026, 1, 31)}),  # an Excel serial
    ("31/02/2026", {}), ("13/13/2026", {}), ("soon", {}), ("46053.5", {}), ("", {}),
])
def test_date_readings(text: str, readings: dict[str, date]) -> None:
    assert date_readings(text) == readings


@pytest.mark.parametrize(("text", "readings"), [
    ("42", {POINT: 42, COMMA: 42}),
    ("5.5", {POINT: 5.5}), ("5,5", {COMMA: 5.5}),
    ("1,234.5", {POINT: 1234.5}), ("1.234,5", {COMMA: 1234.5}),
    ("1,234", {POINT: 1234, COMMA: 1.234}), ("1.234", {POINT: 1.234, COMMA: 1234}),
    ("1 234,5", {COMMA: 1234.5}), ("1\u202f234,5", {COMMA: 1234.5}), ("1'234.5", {POINT: 1234.5}),
    ("1.234.567", {COMMA: 1234567}), ("-0,25", {COMMA: -0.25}),
    ("12,34.5", {}), ("ten", {}), ("", {}), ("1,2,3", {}),
])
def test_number_readings(text: str, readings: dict[str, float]) -> None:
    assert number_readings(text) == readings


def rows(*cells: str) -> list[tuple[int, str]]:
    return list(enumerate(cells, start=2))


def test_a_date_column_is_read_in_the_one_order_its_cells_allow() -> None:
    assert settle(DATES, "Start", rows("03/04/2026", "", "31/01/2026", "46053"), None).choice == DAY_FIRST
    assert settle(DATES, "Start", rows("03/04/2026", "01/31/2026"), None).choice == MONTH_FIRST
    assert settle(DATES, "Start", rows("2026-01-31", "05/05/2026"), None).problem is None
    # A wrong cell among good ones, or a few wrong cells in a column mostly empty, are their
    # rows' problems, not the column's.
    assert settle(DATES, "Start", rows("31/01/2026", "soon"), None).choice == DAY_FIRST
    assert settle(DATES, "Start", rows("soon", "", "later", "", ""), None).problem is None


def test_an_ambiguous_or_wholly_wrong_column_is_one_problem_naming_the_option() -> None:
    unclear = settle(DATES, "Start", rows("03/04/2026", "05/06/2026"), None).problem
    assert unclear == ("column `Start`: dates such as '03/04/2026' (row 2) read as 2026-04-03 or 2026-03-04; "
                       "say which with --date-format dd/mm/yyyy or --date-format mm/dd/yyyy (job param date_format)")
    mixed = settle(DATES, "Start", rows("31/01/2026", "01/31/2026"), None).problem
    assert mixed is not None and mixed.startswith("column `Start` mixes dates written two ways (row 2: '31/01/2026' "
                                                  "as dd/mm/yyyy and row 3: '01/31/2026' as mm/dd/yyyy)")
    wrong = settle(NUMBERS, "Price", rows("ten", "eleven", ""), None).problem
    assert wrong is not None and wrong.startswith("column `Price`: none of its 2 cells is a number (row 2: 'ten')")
    price = settle(NUMBERS, "Price", rows("1,234", "12"), None).problem
    assert price is not None and "--decimal point or --decimal comma (job param decimal)" in price
    # Declared, the same columns read; one that the declaration does not fit is one problem too.
    assert settle(DATES, "Start", rows("03/04/2026", "05/06/2026"), MONTH_FIRST).choice == MONTH_FIRST
    assert settle(NUMBERS, "Price", rows("1,234", "12"), COMMA).choice == COMMA
    declared = settle(DATES, "Start", rows("31/01/2026", "30/01/2026"), MONTH_FIRST).problem
    assert declared is not None and "none of its 2 cells is a date as mm/dd/yyyy (--date-format)" in declared


@given(st.dates(min_value=date(1900, 3, 1), max_value=date(9999, 12, 31)))
def test_every_date_reads_back_in_each_way_a_sheet_writes_it(d: date) -> None:
    serial = (d - date(1899, 12, 30)).days
    assert date_readings(d.isoformat())[DAY_FIRST] == d
    assert date_readings(f"{d.day:02d}/{d.month:02d}/{d.year}")[DAY_FIRST] == d
    assert date_readings(f"{d.month:02d}/{d.day:02d}/{d.year}")[MONTH_FIRST] == d
    assert date_readings(f"{d.day}.{d.month}.{d.year}")[MONTH_FIRST] == d
    assert date_readings(str(serial))[DAY_FIRST] == d


@given(st.integers(min_value=-10**9, max_value=10**9), st.integers(min_value=0, max_value=99))
def test_every_number_reads_back_with_its_decimal_mark_and_thousands(whole: int, cents: int) -> None:
    sign = "-" if whole < 0 else ""
    grouped = f"{abs(whole):,}"
    want = float(f"{sign}{abs(whole)}.{cents:02d}")
    assert number_readings(f"{sign}{grouped}.{cents:02d}")[POINT] == want
    assert number_readings(f"{sign}{grouped.replace(',', '.')},{cents:02d}")[COMMA] == want
    assert number_readings(f"{sign}{grouped.replace(',', ' ')},{cents:02d}")[COMMA] == want


def test_headers_match_whatever_their_case_spaces_and_punctuation() -> None:
    assert header_key(" Full-Name ") == header_key("full_name") == header_key("FULL NAME") == "fullname"
    targets = {h: column_targets(h, BY_KEY, {}) for h in
               ("E-mail", "Email address", "Mail", "EMAIL", "Full Name", "Start Date", "unit-price", "CRM id",
                "Name", "External ID", "ref", "id", "Expires At", "Colour")}
    assert {h: t[0] if t else None for h, t in targets.items()} == {
        "E-mail": "email", "Email address": "email", "Mail": "email", "EMAIL": "email",
        # the recipient's name wins a name column over a field key; a field key wins over an id's synonym
        "Full Name": "name", "id": "prefill.id",
        "Start Date": "prefill.start_date", "unit-price": "prefill.unit_price",
        "CRM id": "context.crm_id", "Name": "name", "External ID": "externalId",
        "ref": "externalId", "Expires At": "expiresAt", "Colour": None}
    assert all(len(t) <= 1 for t in targets.values())  # matched by its header, a column feeds one target


def test_a_mapping_target_may_be_a_bare_field_key_and_an_unknown_one_is_one_line() -> None:
    assert mapping_target("full_name", BY_KEY) == "prefill.full_name"
    assert mapping_target("crm_id", BY_KEY) == "context.crm_id"
    assert mapping_target("prefill.unit_price", BY_KEY) == "prefill.unit_price"
    assert mapping_target("metadata.region", BY_KEY) == "metadata.region"
    sign = {**BY_KEY, "sign": FieldDescriptor(key="sign", type="signature", title="Sign", prefillable=False)}
    assert [mapping_target(t, sign) for t in ("full_nam", "prefill.nope", "context.email", "bogus.x", "sign",
                                              "prefill.sign")] == [None] * 6
    assert column_targets("Nom complet", BY_KEY, {"nom complet": "full_name"}) == ("prefill.full_name",)
    line = mapping_problem({"Nom": "full_nam"}, EVERYTHING, "outreach.mapping (f.toml:7)")
    assert line is not None and "\n" not in line
    assert line.startswith("outreach.mapping (f.toml:7): 'Nom' = 'full_nam': 'full_nam' is not a mapping target "
                           "of this form; accepted: email, name, externalId")
    assert line.endswith("this form's field keys: full_name, email, start_date, unit_price, crm_id, id")


def test_the_unknown_column_hint_suggests_a_target_that_works() -> None:
    fields = [f for f in EVERYTHING if f.key != "id"]
    said = column_problem(["Ful Name"], fields, {})
    assert said is not None and 'mapping = { "Ful Name" = "full_name" }' in said
    said = column_problem(["Customer ID"], fields, {})
    assert said is not None and 'mapping = { "Customer ID" = "externalId" }' in said
    said = column_problem(["Colour"], fields, {})
    assert said is not None and 'mapping = { "Colour" = "metadata.Colour" }' in said
    for hint in ("full_name", "externalId", "metadata.Colour"):
        assert mapping_target(hint, {f.key: f for f in fields}) is not None


def test_an_xlsxwriter_workbook_with_formatted_dates_serials_and_prices_plans_as_written(tmp_path: Path) -> None:
    import xlsxwriter

    from pipelines.outreach.checks import column_readings
    from pipelines.outreach.plan import plan_rows
    from pipelines.outreach.sheet import load_sheet

    path = tmp_path / "book.xlsx"
    wb = xlsxwriter.Workbook(str(path))
    ws = wb.add_worksheet("Invitations")
    day, money = wb.add_format({"num_format": "dd/mm/yyyy"}), wb.add_format({"num_format": "#,##0.00 €"})
    ws.write_row(0, 0, ["Invitations, spring 2026"])
    ws.write_row(2, 0, ["Ref", "Full Name", "E-Mail", "Start date", "Unit Price", "Expires at"])
    for i in range(3):
        ws.write_string(3 + i, 0, f"r-{i}")
        ws.write_string(3 + i, 1, f"Person {i}")
        ws.write_string(3 + i, 2, f"p{i}@example.test")
        ws.write_datetime(3 + i, 3, datetime(2026, 5, 10 + i), day)
        ws.write_number(3 + i, 4, 1.234 + i, money)  # a workbook's number: 1.234 is not 1234
        ws.write_number(3 + i, 5, 46204 + i)  # a date column saved without its date format: serials
    wb.close()
    sheet = load_sheet(path)
    assert (sheet.header_row, sheet.columns[:3]) == (3, ["Ref", "Full Name", "E-Mail"])
    fields = [*EVERYTHING, FieldDescriptor(key="deadline", type="date", title="Deadline", prefillable=True)]
    mapping = {"Expires at": "deadline"}
    targets = {c: t for c in sheet.columns if (t := column_targets(c, {f.key: f for f in fields}, mapping))}
    readings = column_readings(sheet, targets, fields)
    plan = plan_rows(sheet.rows, fields, job="j", form_id="f", mapping=targets, readings=readings,
                     numbers=sheet.numbers)
    assert plan.rejected == []
    first = plan.valid[0].params
    assert (first.externalId, first.recipient, first.prefill) == (
        "r-0", {"email": "p0@example.test", "name": "Person 0"},
        {"email": "p0@example.test", "start_date": "2026-05-10", "unit_price": 1.234, "deadline": "2026-07-01"})
