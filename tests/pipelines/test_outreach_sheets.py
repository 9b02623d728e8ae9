"""Sheets as people have them: every supported encoding, delimiter, workbook layout and
header position is read into the same rows (accents intact, row numbers as the user sees
them), and sent."""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import pytest
from openpyxl import Workbook

from connector.client import FormClient
from connector.store import Store
from pipelines.outreach import SheetError, SheetOptions, load_sheet, run_outreach
from pipelines.outreach.sheet import sniff_delimiter
from tests.conftest import Sandbox

ROWS = [("c-1", "José Müller", "jose@example.test", "Sales"), ("c-2", "Zoë Ñúñez", "zoe@example.test", "support")]
HEADER = ("externalId", "name", "email", "topic")
WANT = [dict(zip(HEADER, r, strict=True)) for r in ROWS]


def csv_text(sep: str = ",", title: str | None = None) -> str:
    lines = ([title, ""] if title else []) + [sep.join(HEADER)] + [sep.join(r) for r in ROWS]
    return "\r\n".join(lines) + "\r\n"


def write(path: Path, text: str, encoding: str, bom: bytes = b"") -> Path:
    path.write_bytes(bom + text.encode(encoding))
    return path


def workbook(path: Path, sheets: dict[str, list[list[object]]]) -> Path:
    wb = Workbook()
    assert wb.active is not None
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    wb.save(path)
    return path


DATA = [list(HEADER), *map(list, ROWS)]
# name -> (write the file, options, header row, encoding and delimiter read)
LAYOUTS: dict[str, Callable[[Path], tuple[Path, SheetOptions, int]]] = {
    "utf-8": lambda d: (write(d / "a.csv", csv_text(), "utf-8"), SheetOptions(), 1),
    "utf-8 with BOM": lambda d: (write(d / "a.csv", csv_text(), "utf-8", codecs.BOM_UTF8), SheetOptions(), 1),
    "utf-16 with BOM": lambda d: (write(d / "a.csv", csv_text(), "utf-16"), SheetOptions(), 1),
    "utf-16-be with BOM": lambda d: (write(d / "a.csv", csv_text(), "utf-16-be", codecs.BOM_UTF16_BE),
                                     SheetOptions(), 1),
    "windows-1252": lambda d: (write(d / "a.csv", csv_text(), "cp1252"), SheetOptions(), 1),
    "latin-1 given": lambda d: (write(d / "a.csv", csv_text(), "latin-1"), SheetOptions(encoding="latin-1"), 1),
    "semicolon": lambda d: (write(d / "a.csv", csv_text(";"), "utf-8"), SheetOptions(), 1),
    "tab": lambda d: (write(d / "a.csv", csv_text("\t"), "utf-8"), SheetOptions(), 1),
    "pipe": lambda d: (write(d / "a.csv", csv_text("|"), "utf-8"), SheetOptions(), 1),
    "semicolon given": lambda d: (write(d / "a.csv", csv_text(";"), "utf-8"), SheetOptions(delimiter=";"), 1),
    "semicolon under a title": lambda d: (write(d / "a.csv", csv_text(";", title="Spring contacts"), "utf-8"),
                                          SheetOptions(), 3),
    "tab given by name": lambda d: (write(d / "a.csv", csv_text("\t"), "utf-8"), SheetOptions(delimiter="tab"), 1),
    "csv title above the header": lambda d: (write(d / "a.csv", csv_text(title="Spring contacts"), "utf-8"),
                                             SheetOptions(), 3),
    "csv header row given": lambda d: (write(d / "a.csv", csv_text(title="Spring contacts"), "utf-8"),
                                       SheetOptions(header_row=3), 3),
    "xlsx": lambda d: (workbook(d / "a.xlsx", {"Contacts": DATA}), SheetOptions(), 1),
    "xlsx data on the second sheet": lambda d: (workbook(d / "a.xlsx", {"Notes": [], "Contacts": DATA}),
                                                SheetOptions(), 1),
    "xlsx sheet by name": lambda d: (workbook(d / "a.xlsx", {"Old": [["email"], ["x@example.test"]],
                                                             "Contacts": DATA}), SheetOptions(sheet="Contacts"), 1),
    "xlsx sheet by number": lambda d: (workbook(d / "a.xlsx", {"Old": [["email"], ["x@example.test"]],
                                                               "Contacts": DATA}), SheetOptions(sheet="2"), 1),
    "xlsx title and a blank row above the header": lambda d: (
        workbook(d / "a.xlsx", {"Contacts": [["Spring contacts"], [], *DATA]}), SheetOptions(), 3),
    "xlsx header row given": lambda d: (workbook(d / "a.xlsx", {"Contacts": [["Spring contacts"], [], *DATA]}),
                                        SheetOptions(header_row=3), 3),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_layout_reads_the_same_rows(layout: str, tmp_path: Path) -> None:
    path, options, header = LAYOUTS[layout](tmp_path)
    sheet = load_sheet(path, options)
    assert sheet.rows == WANT, layout
    assert sheet.header_row == header and sheet.numbers == [header + 1, header + 2]


def test_what_was_detected_is_said() -> None:
    assert sniff_delimiter("email;name;topic") == ";" and sniff_delimiter("email") == ","
    assert sniff_delimiter('"a,b";c;d') == ";", "a quoted delimiter does not count"
    assert sniff_delimiter("Spring contacts, 2026\n\nemail|name|topic\n") == "|"


def test_windows_1252_and_its_undefined_bytes(tmp_path: Path) -> None:
    sheet = load_sheet(write(tmp_path / "a.csv", "email,name\nx@example.test,“Ada” – €5\n", "cp1252"))
    assert sheet.encoding == "cp1252" and sheet.rows[0]["name"] == "“Ada” – €5"
    odd = tmp_path / "b.csv"
    odd.write_bytes(b"email,name\nx@example.test,A\x81\xe9\n")  # 0x81 is not Windows-1252: Latin-1
    sheet = load_sheet(odd)
    assert sheet.encoding == "latin-1" and sheet.rows[0]["name"] == "A\x81é"


def test_blank_rows_are_skipped_and_numbers_kept(tmp_path: Path) -> None:
    sheet = load_sheet(write(tmp_path / "a.csv", "email,name\n\na@example.test,A\n,\nb@example.test,B\n", "utf-8"))
    assert [r["email"] for r in sheet.rows] == ["a@example.test", "b@example.test"] and sheet.numbers == [3, 5]


def test_xlsx_cells_read_as_people_typed_them(tmp_path: Path) -> None:
    path = workbook(tmp_path / "a.xlsx", {"S": [["email", "n", "day", "at", "ok"],
                                                ["a@example.test", 42, datetime(2026, 3, 1), datetime(2026, 3, 1, 9, 30),
                                                 True]]})
    assert load_sheet(path).rows == [{"email": "a@example.test", "n": "42", "day": "2026-03-01",
                                      "at": "2026-03-01T09:30:00", "ok": "True"}]


def test_a_column_without_a_header_but_with_cells_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SheetError, match="column 2 has cells but no header"):
        load_sheet(write(tmp_path / "a.csv", "email,\na@example.test,x\n", "utf-8"))
    assert load_sheet(write(tmp_path / "b.csv", "email,\na@example.test,\n", "utf-8")).columns == ["email"]


# -- sent ------------------------------------------------------------------------------------------


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[FormClient]:
    fast = {"callsPerMinute": 10000, "createsPerMinute": 10000}
    assert (await sandbox.helper("limits.set", fast, ws="pro")).ok
    async with FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000,
                          creates_per_minute=10000) as fc:
        yield fc


async def test_every_layout_is_sent_with_its_accents(sandbox: Sandbox, client: FormClient, store: Store,
                                                     tmp_path: Path) -> None:
    form = sandbox.pro.forms["Contact"]
    for i, layout in enumerate(LAYOUTS):
        folder = tmp_path / f"l{i}"
        folder.mkdir()
        path, options, _ = LAYOUTS[layout](folder)
        rep = await run_outreach(client, store, path, form, job=f"layout-{i}", sheet_options=options,
                                 report_path=folder / "r.csv")
        assert (rep.sent, rep.invalid, rep.failed) == (2, 0, 0), layout
        assert rep.links_path is not None and "José Müller" not in rep.links_path.read_text()
        assert [ln.split(",")[0] for ln in rep.links_path.read_text().splitlines()] == ["externalId", "c-1", "c-2"]
    names = {r.recipient.name for r in [x async for x in client.iter_requests(form_id=form)] if r.recipient}
    assert {"José Müller", "Zoë Ñúñez"} <= names


async def test_the_sender_says_when_it_waits_for_the_rate_limit(sandbox: Sandbox, store: Store,
                                                                tmp_path: Path) -> None:
    import asyncio

    from pipelines.outreach import SendProgress

    form = sandbox.pro.forms["Contact"]
    sheet = write(tmp_path / "a.csv", csv_text() + "c-3,Third,third@example.test,Other\r\n", "utf-8")
    heard: list[SendProgress] = []
    stop = asyncio.Event()

    def progress(at: SendProgress) -> None:
        heard.append(at)
        if at.waiting:
            stop.set()  # the third create waits for the window: stop there

    async with FormClient(sandbox.base_url, sandbox.pro.token, creates_per_minute=2) as fc:
        rep = await run_outreach(fc, store, sheet, form, job="paced", report_path=tmp_path / "r.csv",
                                 progress=progress, stop=stop)
    assert (rep.sent, rep.stopped, rep.left) == (2, True, 1)
    assert [(p.done, p.sent) for p in heard if not p.waiting] == [(1, 1), (2, 2)]
    waits = [p for p in heard if p.waiting]
    assert len(waits) == 1 and waits[0].done == 2 and 50 < waits[0].waiting <= 61
