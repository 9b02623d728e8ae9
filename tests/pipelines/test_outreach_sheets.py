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

from connector.client.rpc import FormClient
from connector.store import Store
from pipelines.outreach import SheetError, SheetOptions, load_sheet, run_outreach
from pipelines.outreach.sheet import binary_kind, delimiter_problem, fitting_delimiter, sniff_delimiter
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


# -- sheets that cannot be read, said in one line --------------------------------------------------


SEMI_WITH_COMMAS = "email;name;topic\n;Smith, Ada;sales\nbo@example.test;Bo;sales\n"


def test_the_delimiter_that_fits_is_the_one_that_splits_most_lines_alike() -> None:
    assert fitting_delimiter(SEMI_WITH_COMMAS) == ";"
    assert fitting_delimiter("email,name,note\na@example.test,Ada,x;y;z;w\n") == ",", "one odd cell is no delimiter"
    assert sniff_delimiter("email,name,note\na@example.test,Ada,x;y;z;w\n") == ","
    assert fitting_delimiter("Spring contacts\n\nemail;name\na@example.test;A\n") == ";", "a title aside"
    assert fitting_delimiter("email\na@example.test\n") is None and fitting_delimiter("a:b\nc:d\n") is None


@pytest.mark.parametrize(("text", "given", "said"), [
    (SEMI_WITH_COMMAS, ",", "--delimiter ',' does not split its lines into columns, ';' (semicolon) does"),
    ("email|name\na@example.test|A\n", ";", "--delimiter ';' does not split its lines into columns, '|' (pipe)"),
    ("email,name\na@example.test,A\n", "\t", "--delimiter tab does not split"),
    ("email:name:topic\na@example.test:A:sales\n", None, "its cells are separated by ':', which formsync does not"),
    ("email^name\na@example.test^A\n", ",", "its cells are separated by '^'"),
])
def test_a_delimiter_that_does_not_fit_is_named_with_the_one_that_does(text: str, given: str | None,
                                                                        said: str) -> None:
    problem = delimiter_problem(text, given)
    assert problem is not None and problem.startswith(said), problem
    assert "Smith" not in problem and "example.test" not in problem, "no data row is quoted"


@pytest.mark.parametrize(("text", "given"), [
    ("email,name,note\na@example.test,Ada,x;y;z;w\n", ","), ("email;name\na@example.test;A\n", ";"),
    ("email\na@example.test\n", ","), ("email\na@example.test\n", None), (SEMI_WITH_COMMAS, None),
    ("email,name\na@example.test,Smith: Ada\n", None),
])
def test_a_delimiter_that_fits_is_no_problem(text: str, given: str | None) -> None:
    assert delimiter_problem(text, given) is None


def test_a_wrong_delimiter_is_refused_before_any_row_is_read(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", SEMI_WITH_COMMAS, "utf-8")
    with pytest.raises(SheetError, match=r"give --delimiter ';', or leave --delimiter out") as e:
        load_sheet(path, SheetOptions(delimiter=","))
    assert "Smith" not in str(e.value)
    assert load_sheet(path).rows[1] == {"email": "bo@example.test", "name": "Bo", "topic": "sales"}


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10"


@pytest.mark.parametrize(("data", "kind"), [
    (PNG, "a PNG image"), (b"%PDF-1.7\n", "a PDF document"), (b"PK\x03\x04\x14\x00", "a ZIP file"),
    (b"\xff\xd8\xff\xe0", "a JPEG image"), (b"email,name\x00\x01\x02\n", "binary data"),
    (b"\x01\x02\x03\x04" + b"x" * 200, "binary data"),
])
def test_a_binary_file_is_named_by_its_kind(data: bytes, kind: str) -> None:
    found = binary_kind(data)
    assert found is not None and found.startswith(kind)


def test_text_is_not_binary() -> None:
    assert binary_kind("email,name\r\nx@example.test,“Zoë” – €5\t\n".encode("cp1252")) is None
    assert binary_kind(codecs.BOM_UTF16_LE + "email,name\n".encode("utf-16-le")) is None
    assert binary_kind("email,name\n".encode("utf-16-le"), encoding_given=True) is None
    assert binary_kind(PNG, encoding_given=True) == "a PNG image"


def test_a_png_named_csv_is_one_line_without_its_bytes(tmp_path: Path) -> None:
    (tmp_path / "logo.csv").write_bytes(PNG + b"email,name\n" * 3)
    with pytest.raises(SheetError) as e:
        load_sheet(tmp_path / "logo.csv")
    said = str(e.value)
    assert said == f"{tmp_path / 'logo.csv'} is not a text sheet (a PNG image); give a CSV file (text) or an .xlsx workbook"


def test_a_directory_says_it_is_one_and_names_a_sheet_in_it(tmp_path: Path) -> None:
    with pytest.raises(SheetError, match=r"is a directory, not a sheet; give a \.csv or \.xlsx file$"):
        load_sheet(tmp_path)
    write(tmp_path / "b.csv", csv_text(), "utf-8")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SheetError, match=r"is a directory, not a sheet; give a \.csv or \.xlsx file such as b\.csv"):
        load_sheet(tmp_path)
    with pytest.raises(SheetError, match=r"does not exist"):
        load_sheet(tmp_path / "gone.csv")


def test_csv_lines_pasted_into_one_workbook_column_are_named(tmp_path: Path) -> None:
    path = workbook(tmp_path / "a.xlsx", {"S": [["email;name;topic"], ["a@example.test;Ada;sales"]]})
    with pytest.raises(SheetError, match=r"sheet 'S' holds whole lines in one column, separated by ';' \(semicolon\)"):
        load_sheet(path)
    names = workbook(tmp_path / "b.xlsx", {"S": [["email"], ["a@example.test"], ["b@example.test"]]})
    assert len(load_sheet(names).rows) == 2


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
