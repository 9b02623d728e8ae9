"""Reading an outreach sheet: the rows of a CSV or XLSX file as text cells, as people have
them. A CSV may be UTF-8 (with or without a BOM), UTF-16 with a BOM or Windows-1252 /
Latin-1 (detected, or named), with ``,`` ``;`` tab or ``|`` between cells (sniffed from
the first lines, or named). A workbook may have several sheets (the first with data, or
the one named) and a title above its header (see ``find_header``, or the row named). What cannot be read is a ``SheetError``
that says what, where and how to fix it."""

from __future__ import annotations

import codecs
import csv
import io
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from .formats import date_format_name, decimal_name

CSV_SUFFIXES = (".csv",)
EXCEL_SUFFIXES = (".xlsx", ".xlsm")
SHEET_SUFFIXES = CSV_SUFFIXES + EXCEL_SUFFIXES
DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
DELIMITER_NAMES = {"comma": ",", "semicolon": ";", "tab": "\t", "pipe": "|", "\\t": "\t"}
HEADER_SCAN = 20  # rows looked at to find the header when it is not named
BINARY_SCAN = 8192  # bytes looked at to tell a binary file from text
# The first bytes of files people name .csv by mistake.
SIGNATURES = ((b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
              (b"%PDF", "a PDF document"), (b"PK\x03\x04", "a ZIP file: an .xlsx workbook? name it .xlsx"),
              (b"\xd0\xcf\x11\xe0", "an old Excel .xls workbook: save it as .xlsx or CSV"))
OTHER_SEPARATORS = ":^~#!/\\*"  # characters some exports put between cells, never in an address or name
BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


class SheetError(ValueError):
    """A sheet that cannot be read as rows; the text names the file, what is wrong and
    how to fix it."""


@dataclass(frozen=True)
class SheetOptions:
    """How to read a sheet where the defaults guess wrong: the CSV's ``encoding`` and
    ``delimiter``, the workbook's ``sheet`` (a name, or a number from 1), the
    ``header_row`` (from 1), and how its dates and numbers are written: ``date_format``
    (``dd/mm/yyyy``, ``mm/dd/yyyy``, ``dd.mm.yyyy``) and ``decimal`` (``point``,
    ``comma``). None means detect."""

    encoding: str | None = None
    delimiter: str | None = None
    sheet: str | None = None
    header_row: int | None = None
    date_format: str | None = None
    decimal: str | None = None

    def date_order(self) -> str | None:
        """The day/month order ``date_format`` names (a ``SheetError`` when it names none)."""
        return _named_option("--date-format", self.date_format, date_format_name)

    def decimal_mark(self) -> str | None:
        """The decimal mark ``decimal`` names (a ``SheetError`` when it names none)."""
        return _named_option("--decimal", self.decimal, decimal_name)


def _named_option(option: str, given: str | None, name: Callable[[str], str]) -> str | None:
    try:
        return name(given) if given is not None else None
    except ValueError as e:
        raise SheetError(f"{option}: {e}") from None


@dataclass
class Sheet:
    """A sheet's rows (column -> text cell, '' when empty) with each row's number as the
    user sees it in the file (the header's row + 1 for the first), and how it was read.
    ``kinds``: a workbook's columns whose every filled cell below the header is a date
    (``date``, written ISO in ``rows``) or a number (``number``): the types its cells had."""

    path: Path
    columns: list[str]
    rows: list[dict[str, str]] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    header_row: int = 1
    encoding: str | None = None
    delimiter: str | None = None
    sheet_name: str | None = None
    kinds: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """How the file was read, in a few words (for the run's summary)."""
        parts = [f"sheet {self.sheet_name!r}"] if self.sheet_name else []
        parts += [self.encoding] if self.encoding not in (None, "utf-8") else []
        parts += [DELIMITERS[self.delimiter]] if self.delimiter in DELIMITERS and self.delimiter != "," else []
        parts += [f"header on row {self.header_row}"] if self.header_row != 1 else []
        return ", ".join(parts)


def read_sheet(path: Path, options: SheetOptions | None = None) -> list[dict[str, str]]:
    """The rows of a CSV or XLSX file, every cell as a string ('' when empty), column
    names stripped (see ``load_sheet``)."""
    return load_sheet(path, options).rows


def load_sheet(path: Path, options: SheetOptions | None = None) -> Sheet:
    """Read ``path`` (see the module's docstring). Rows whose cells are all empty are left
    out (their numbers are skipped). A ``SheetError`` when the file is empty, has a header
    only, cannot be decoded or split, or a named sheet, row or encoding does not exist."""
    options = options or SheetOptions()
    check_sheet_path(path)
    if path.suffix.lower() in EXCEL_SUFFIXES:
        return _load_workbook(path, options)
    return _load_csv(path, options)


def check_sheet_path(path: Path) -> None:
    """A ``SheetError`` when ``path`` cannot be a sheet: a directory (with the sheets in
    it, if any), missing, or not a .csv or .xlsx file."""
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.suffix.lower() in SHEET_SUFFIXES)[:3]
        such = f" such as {inside[0]}" if inside else ""
        raise SheetError(f"{path} is a directory, not a sheet; give a .csv or .xlsx file{such}")
    if not path.is_file():
        raise SheetError(f"sheet {path} does not exist; check the path (a relative one is from the directory "
                         "formsync runs in)")
    if path.suffix.lower() not in SHEET_SUFFIXES:
        raise SheetError(f"{path}: unsupported sheet type {path.suffix.lower()!r}; use .csv or .xlsx")


# -- CSV --------------------------------------------------------------------------------------


def decode(data: bytes, encoding: str | None, path: Path) -> tuple[str, str]:
    """The text of a CSV file and the encoding it was read with: ``encoding`` when given,
    else the one its BOM names, else UTF-8, else Windows-1252 (Latin-1 for the few bytes
    Windows-1252 leaves undefined)."""
    if encoding is not None:
        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            raise SheetError(f"--encoding: {encoding!r} is not an encoding Python knows; "
                             "use utf-8, utf-16, cp1252 or latin-1") from None
        try:
            return data.decode("utf-8-sig" if name == "utf-8" else name), name
        except UnicodeDecodeError as e:
            line = data[:e.start].count(b"\n") + 1
            raise SheetError(f"{path}: line {line} is not {name} (byte 0x{data[e.start]:02x}); "
                             "give the file's encoding with --encoding, or leave it out to detect it") from None
    for bom, name in BOMS:
        if data.startswith(bom):
            try:
                return data.decode(name), name
            except UnicodeDecodeError:
                raise SheetError(f"{path}: starts with a {name} byte order mark but is not {name}; "
                                 "save it again as UTF-8 or give --encoding") from None
    for name in ("utf-8", "cp1252", "latin-1"):
        try:
            return data.decode(name), name
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 decodes every byte")


def _scanned(text: str) -> list[str]:
    return [ln for ln in text.splitlines()[:HEADER_SCAN] if ln.strip()]


def _steady(lines: Sequence[str], sep: str) -> tuple[int, int]:
    """(lines, cells) when more than half of ``lines`` split at ``sep`` into the same
    number of cells, more than one; (0, 0) when they do not."""
    counts = Counter(len(row) for row in csv.reader(lines, delimiter=sep))
    cells, agree = max(counts.items(), key=lambda kv: (kv[1], kv[0]), default=(0, 0))
    return (agree, cells) if cells > 1 and agree * 2 > len(lines) else (0, 0)


def fitting_delimiter(text: str) -> str | None:
    """Of ``,`` ``;`` tab and ``|``, the one that splits most of a CSV's first lines into
    the same number of cells (a title line aside); None when none does."""
    lines = _scanned(text)
    found = max(((_steady(lines, sep), sep) for sep in DELIMITERS), key=lambda f: f[0])
    return found[1] if found[0][0] else None


def sniff_delimiter(text: str) -> str:
    """The delimiter of a CSV's first lines: the ``fitting_delimiter``, else of ``,`` ``;``
    tab and ``|`` the one that splits some line (its header, under any title) into the
    most cells (a comma when none splits any)."""
    fits = fitting_delimiter(text)
    if fits is not None:
        return fits
    lines = _scanned(text)
    best, most = ",", 1
    for sep in DELIMITERS:
        cells = max((len(row) for row in csv.reader(lines, delimiter=sep)), default=0)
        if cells > most:
            best, most = sep, cells
    return best


def _shown(sep: str) -> str:
    return "tab" if sep == "\t" else f"'{sep}'"


def delimiter_problem(text: str, given: str | None) -> str | None:
    """Why a CSV's cells cannot be split as asked, naming the delimiter that fits (None
    when they can): ``given`` splits none of its first lines steadily while another of
    ``,`` ``;`` tab ``|`` does; or none of those splits them while another character
    (``:``, ``^``...) does, which formsync does not read."""
    lines = _scanned(text)
    fits = fitting_delimiter(text)
    if given is not None and fits is not None and fits != given and not _steady(lines, given)[0]:
        return (f"--delimiter {_shown(given)} does not split its lines into columns, {_shown(fits)} "
                f"({DELIMITERS[fits]}) does: give --delimiter {_shown(fits)}, or leave --delimiter out to detect it")
    if given is not None and fits is not None and fits != given and not _splits_header(lines, fits, given):
        # e.g. ';' cells holding decimal commas (12,50): ',' splits the rows steadily, never the header
        return (f"--delimiter {_shown(given)} leaves its header line whole; the delimiter looks like "
                f"{_shown(fits)} ({DELIMITERS[fits]}): give --delimiter {_shown(fits)}, or leave --delimiter out "
                "to detect it")
    if fits is None and lines and not any(_steady(lines, sep)[0] for sep in DELIMITERS):
        other = _other_separator(lines)
        if other is not None:
            return (f"its cells are separated by {other!r}, which formsync does not read; save it again "
                    "with , ; tab or | between cells (or as .xlsx)")
    return None


def _splits_header(lines: Sequence[str], fits: str, given: str) -> bool:
    """Whether ``given`` splits the header (the first line ``fits`` splits into its steady
    number of cells) into more than one cell."""
    cells = _steady(lines, fits)[1]
    header = next((ln for ln, row in zip(lines, csv.reader(lines, delimiter=fits), strict=False)
                   if len(row) == cells), lines[0])
    return len(next(csv.reader([header], delimiter=given))) > 1


def _other_separator(lines: Sequence[str]) -> str | None:
    """A punctuation character every line holds the same number of times (one or more),
    and none a name or address holds: what splits the lines when no delimiter does."""
    common = set(lines[0]).intersection(*lines[1:]) & set(OTHER_SEPARATORS)
    for char in sorted(common):
        if len({ln.count(char) for ln in lines}) == 1:
            return char
    return None


def _delimiter(given: str | None) -> str | None:
    if given is None:
        return None
    sep = DELIMITER_NAMES.get(given.lower(), given)
    if sep not in DELIMITERS:
        raise SheetError(f"--delimiter: {given!r} is not a delimiter formsync reads; "
                         "use one of , ; | tab (or comma, semicolon, pipe)")
    return sep


def _load_csv(path: Path, options: SheetOptions) -> Sheet:
    sep = _delimiter(options.delimiter)
    data = path.read_bytes()
    if (kind := binary_kind(data, encoding_given=options.encoding is not None)) is not None:
        raise SheetError(f"{path} is not a text sheet ({kind}); give a CSV file (text) or an .xlsx workbook")
    text, encoding = decode(data, options.encoding, path)
    if not text.strip():
        raise SheetError(f"{path}: the file is empty; put a header row (e.g. email,name) "
                         "and one row per recipient in it")
    problem = delimiter_problem(text, sep)
    if problem is not None:
        raise SheetError(f"{path}: {problem}")
    if sep is None:
        lines = text.splitlines()
        header = options.header_row
        sep = sniff_delimiter(lines[header - 1] if header is not None and 0 < header <= len(lines) else text)
    records = list(csv.reader(io.StringIO(text, newline=""), delimiter=sep))
    return _sheet(path, records, options.header_row, encoding=encoding, delimiter=sep)


def binary_kind(data: bytes, *, encoding_given: bool = False) -> str | None:
    """What a file that is no text is, in words (None for text): a known signature (an
    image, a PDF, a ZIP such as an .xlsx renamed), or NUL and control bytes (unless its
    encoding was given: UTF-16 without a byte order mark has NULs). Text with a UTF-16 or
    UTF-32 byte order mark is text."""
    head = data[:BINARY_SCAN]
    if any(head.startswith(bom) for bom, _ in BOMS):
        return None
    for magic, kind in SIGNATURES:
        if head.startswith(magic):
            return kind
    if encoding_given:
        return None
    controls = sum(1 for b in head if b < 0x20 and b not in b"\t\n\r\x0b\x0c\x1a")
    return "binary data" if b"\0" in head or controls * 100 > len(head) else None


# -- XLSX -------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time(0) else value.isoformat()
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _kind(value: Any) -> str:
    """A workbook cell's type as ``Sheet.kinds`` names it: ``date`` (a date, or a
    date-time at midnight), ``number``, ``""`` when empty, else ``text``."""
    if value is None or value == "":
        return ""
    if isinstance(value, datetime):
        return "date" if value.time() == time(0) else "text"
    if isinstance(value, date):
        return "date"
    return "number" if isinstance(value, int | float) and not isinstance(value, bool) else "text"


def _load_workbook(path: Path, options: SheetOptions) -> Sheet:
    from openpyxl import load_workbook  # type: ignore[import-untyped]

    try:
        wb = load_workbook(path, read_only=True, data_only=True)
    except Exception as e:  # openpyxl refuses a broken file with several exception types
        raise SheetError(f"{path}: cannot be read as an XLSX workbook ({e}); save it again from your "
                         "spreadsheet as .xlsx, or export it as CSV") from None
    try:
        raw = {ws.title: list(ws.iter_rows(values_only=True)) for ws in wb.worksheets}
    finally:
        wb.close()
    sheets = {title: [[_cell(v) for v in row] for row in rows] for title, rows in raw.items()}
    name = _pick_sheet(path, sheets, options.sheet)
    pasted = _pasted_csv(sheets[name])
    if pasted is not None:
        raise SheetError(f"{path}: sheet {name!r} holds whole lines in one column, separated by {_shown(pasted)} "
                         f"({DELIMITERS[pasted]}): split them into columns (Data > Text to Columns), or give the "
                         "CSV file itself")
    read = _sheet(path, sheets[name], options.header_row, sheet_name=name, sheets=sheets)
    read.kinds = _column_kinds(read, raw[name])
    return read


def _column_kinds(sheet: Sheet, raw: Sequence[Sequence[Any]]) -> dict[str, str]:
    """The columns of ``sheet`` whose filled cells (in ``raw``, the workbook's values)
    are all dates, or all numbers: ``Sheet.kinds``."""
    header = [_cell(v).strip() for v in raw[sheet.header_row - 1]]
    found: dict[str, set[str]] = {}
    for number in sheet.numbers:
        for i, value in enumerate(raw[number - 1]):
            if i < len(header) and header[i] and (kind := _kind(value)):
                found.setdefault(header[i], set()).add(kind)
    return {c: k for c, ks in found.items() if len(ks) == 1 and (k := next(iter(ks))) in ("date", "number")}


def _pasted_csv(records: Sequence[Sequence[str]]) -> str | None:
    """The delimiter a one-column sheet's cells are split by: CSV lines pasted into a
    workbook's first column (None when the sheet has other columns, or none fits)."""
    first = records[:HEADER_SCAN]
    if any(sum(1 for c in r if c.strip()) > 1 for r in first):
        return None
    lines = [c for r in first for c in r if c.strip()]
    sep = fitting_delimiter("\n".join(lines))
    # the first line (the header) splits too: a column of "Last, First" names is no pasted CSV
    return sep if sep is not None and lines and sep in lines[0] else None


def _has_data(records: Sequence[Sequence[str]]) -> bool:
    return any(c.strip() for r in records for c in r)


def _sheets_text(sheets: dict[str, list[list[str]]]) -> str:
    return ", ".join(f"{i}. {n!r} ({'has data' if _has_data(r) else 'empty'})"
                     for i, (n, r) in enumerate(sheets.items(), start=1))


def _pick_sheet(path: Path, sheets: dict[str, list[list[str]]], wanted: str | None) -> str:
    """The sheet named (by name, or by number from 1), else the first that has data."""
    names = list(sheets)
    if wanted is not None:
        if wanted in sheets:
            return wanted
        if wanted.isdigit() and 1 <= int(wanted) <= len(names):
            return names[int(wanted) - 1]
        raise SheetError(f"--sheet: {path.name} has no sheet {wanted!r}; its sheets: {_sheets_text(sheets)}")
    for name in names:
        if _has_data(sheets[name]):
            return name
    raise SheetError(f"{path}: the workbook is empty (sheets: {', '.join(map(repr, names))}); "
                     "put a header row and one row per recipient on a sheet")


# -- rows -------------------------------------------------------------------------------------


def find_header(records: Sequence[Sequence[str]]) -> int:
    """The index of the header among ``records``: of the first ``HEADER_SCAN`` rows that
    hold no email address (a header names columns; recipients' rows hold addresses), the
    first as wide in non-empty cells as the widest, so a title above it is passed."""
    widths = [sum(1 for c in r if c.strip()) for r in records[:HEADER_SCAN]]
    names = [i for i, r in enumerate(records[:HEADER_SCAN]) if widths[i] and not any("@" in c for c in r)]
    candidates = names or [i for i, w in enumerate(widths) if w]
    widest = max((widths[i] for i in candidates), default=0)
    return next((i for i in candidates if widths[i] == widest), 0)


def _header_index(path: Path, records: Sequence[Sequence[str]], header_row: int | None,
                  sheets: dict[str, list[list[str]]] | None) -> int:
    if header_row is None:
        return find_header(records)
    if header_row < 1 or header_row > len(records) or not any(c.strip() for c in records[header_row - 1]):
        where = f"sheet has {len(records)} rows" if header_row >= 1 else "rows are numbered from 1"
        found = find_header(records) + 1
        also = f"; its sheets: {_sheets_text(sheets)}" if sheets and len(sheets) > 1 else ""
        raise SheetError(f"--header-row: row {header_row} of {path.name} is not a header ({where}); "
                         f"the header looks like row {found}: give --header-row {found} or leave it out{also}")
    return header_row - 1


def _columns(path: Path, header: Sequence[str], records: Sequence[Sequence[str]]) -> list[str]:
    columns = [c.strip() for c in header]
    seen: dict[str, int] = {}
    for i, name in enumerate(columns, start=1):
        if not name:
            if any(len(r) >= i and r[i - 1].strip() for r in records):
                raise SheetError(f"{path}: column {i} has cells but no header; name it in the header row")
            continue
        if name in seen:
            raise SheetError(f"{path}: column {name!r} appears twice (columns {seen[name]} and {i}); "
                             "keep one, or rename the other")
        seen[name] = i
    return columns


def _sheet(path: Path, records: list[list[str]], header_row: int | None, *, encoding: str | None = None,
           delimiter: str | None = None, sheet_name: str | None = None,
           sheets: dict[str, list[list[str]]] | None = None) -> Sheet:
    if not _has_data(records):
        if sheets is not None:
            raise SheetError(f"--sheet: sheet {sheet_name!r} of {path.name} is empty, so it has no header; "
                             f"its sheets: {_sheets_text(sheets)}")
        raise SheetError(f"{path}: the file is empty; put a header row (e.g. email,name) "
                         "and one row per recipient in it")
    at = _header_index(path, records, header_row, sheets)
    body = records[at + 1:]
    columns = _columns(path, records[at], body)
    out = Sheet(path, [c for c in columns if c], header_row=at + 1, encoding=encoding, delimiter=delimiter,
                sheet_name=sheet_name)
    for number, record in enumerate(body, start=at + 2):
        if not any(c.strip() for c in record):
            continue
        out.rows.append({c: (record[i] if i < len(record) else "") for i, c in enumerate(columns) if c})
        out.numbers.append(number)
    if not out.rows:
        where = f" (sheet {sheet_name!r})" if sheet_name else ""
        raise SheetError(f"{path}{where}: has a header (row {at + 1}: {', '.join(out.columns)}) but no rows "
                         "under it; add one row per recipient")
    return out
