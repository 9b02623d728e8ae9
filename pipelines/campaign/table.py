"""The campaign table: one row per sheet row of an outreach job, with the sheet's own
cells, its request's status and times, and the answers: "who answered what, who did
not". Built as one Arrow table (pure), the answers typed by the form's table (the data
contract's columns, shaped as the wide export shapes them), and written as CSV, XLSX or
Parquet the way the other exports write their cells (formula text neutralised, typed
UTC times, numbers as numbers, dates as dates)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import xlsxwriter

from connector.store import Column
from connector.store._campaign import CampaignRow

from ..export.wide_json import field_arrays
from ..export.write import TIMESTAMP, XLSX_FORMATS, csv_table, dated_kind, neutralise, xlsx_columns
from ..outreach.counts import row_state
from ..outreach.formats import DATES, NUMBERS, read_as

NOT_SENT = "not sent"  # a sheet row without a request: rejected, or not sent yet
SUPPRESSED = "suppressed"  # a sheet row the contact rule refused
REQUEST_TEXT = ("request_id", "status", "delivery_status", "url")
REQUEST_TIMES = ("created_at", "opened_at", "started_at", "last_activity_at", "completed_at", "expired_at",
                 "canceled_at")
ANSWER_PREFIX = "answer."


# A sheet column's values as a run read them (see ``outreach.checks.typed_columns``), or as a
# workbook's cells held them (``Sheet.kinds``: ISO dates and plain numbers, read with no reading).
SHEET_TYPES: dict[str, tuple[Any, pa.DataType]] = {
    "date": (DATES, pa.date32()), "number": (NUMBERS, pa.float64()), "integer": (NUMBERS, pa.int64())}


def typed_sheet_column(cells: Sequence[str | None], value_type: str, reading: str | None) -> pa.Array:
    """A sheet column's cells as the values a run read from them (pure): dates (ISO in
    CSV, dates in XLSX and Parquet) or numbers, each cell read as its column was
    (``reading``: the day/month order or decimal mark); an empty cell, or one that is not
    such a value (a rejected row's), is null."""
    kind, arrow = SHEET_TYPES[value_type]
    values = [read_as(kind, c, reading) if c and c.strip() else None for c in cells]
    if value_type == "integer":
        values = [int(v) if v is not None and float(v).is_integer() else None for v in values]
    return pa.array(values, arrow)


def campaign_table(sheet_columns: Sequence[str], sheet_rows: Mapping[int, Mapping[str, str]],
                   rows: Sequence[CampaignRow], answers: Mapping[str, Mapping[str, Any]],
                   answer_columns: Sequence[Column] | None = None,
                   sheet_types: Mapping[str, Sequence[str | None]] | None = None) -> pa.Table:
    """The campaign table (pure): one row per sheet row number in ``sheet_rows`` and per
    ledger row of ``rows`` (matched by row number), in row order, with its ``row_state``
    (``outreach.counts.row_state``: sent, changed, rejected, suppressed, not sent). The sheet's columns in
    ``sheet_types`` (column -> ``(value type, reading)``) are typed (``typed_sheet_column``),
    the others text. ``answer_columns`` are the form's columns of its answers (the data
    contract's: ``answer.<name>``, typed and shaped as the wide export's, a column nobody
    answered with its type); without them, one text column ``answer.<key>`` per key of
    the answers in first-seen order (a value that is not text as JSON text)."""
    by_number = {r.row_number: r for r in rows}
    numbers = sorted({*sheet_rows, *by_number})
    columns: dict[str, pa.Array] = {"row": pa.array(numbers, pa.int64())}
    for name in sheet_columns:
        cells = [sheet_rows.get(n, {}).get(name) for n in numbers]
        typed = (sheet_types or {}).get(name)
        columns[_unique(name, columns)] = (pa.array(cells, pa.string()) if typed is None
                                           else typed_sheet_column(cells, str(typed[0]), typed[1]))
    picked = [by_number.get(n) for n in numbers]
    for name, values in _request_arrays(picked):
        columns[_unique(name, columns)] = values
    documents = [answers.get(r.request_id) if r is not None and r.request_id else None for r in picked]
    for name, values in _answer_arrays(documents, answer_columns):
        columns[_unique(ANSWER_PREFIX + name, columns)] = values
    return pa.table(columns)


def _request_arrays(picked: Sequence[CampaignRow | None]) -> list[tuple[str, pa.Array]]:
    """Each sheet row's request: its text columns, times and reminders, typed (null
    where a row has none)."""
    out = []
    for name in REQUEST_TEXT:
        values = [getattr(r, name) if r is not None else None for r in picked]
        if name == "status":
            values = [v if r is not None and r.request_id else SUPPRESSED if r is not None and r.state == SUPPRESSED
                      else NOT_SENT for v, r in zip(values, picked, strict=True)]
        out.append((name, pa.array(values, pa.string())))
    # The sheet row's state in the words the funnel counts it in: a changed row keeps its
    # request (and its status) but is counted changed, here as everywhere.
    out.append(("row_state", pa.array([row_state(r.state if r is not None else None) for r in picked], pa.string())))
    for name in REQUEST_TIMES:
        out.append((name, pa.array([getattr(r, name) if r is not None else None for r in picked],
                                   pa.int64()).cast(TIMESTAMP)))
    out.append(("reminders_sent", pa.array([r.reminders_sent if r is not None else None for r in picked],
                                           pa.int64())))
    return out


def _answer_arrays(documents: Sequence[Mapping[str, Any] | None],
                   answer_columns: Sequence[Column] | None) -> list[tuple[str, pa.Array]]:
    """The answers' columns (see ``campaign_table``) over each row's answers (None: none)."""
    if answer_columns is None:
        return [(key, pa.array([_cell((d or {}).get(key)) for d in documents], pa.string()))
                for key in _first_seen(documents)]
    typed = [c for c in answer_columns if c.source in ("answer", "row")]
    return list(zip([c.name for c in typed], field_arrays(documents, typed) if typed else [], strict=True))


def _first_seen(documents: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """The answers' keys in the order the rows first name them."""
    keys: dict[str, None] = {}
    for d in documents:
        keys.update(dict.fromkeys(d or ()))
    return list(keys)


def _unique(name: str, taken: Mapping[str, Any]) -> str:
    """``name``, or ``name (2)``... when a sheet column already has it."""
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name} ({n})"
    return out


def _cell(value: Any) -> str | None:
    """An answer as text: one type per column, whatever the answers mix."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def write_table(table: pa.Table, fmt: str, out: Path) -> int:
    """Write ``table`` to ``out`` as ``csv``, ``xlsx`` or ``parquet`` (a temporary file
    renamed when complete); returns the rows written."""
    tmp = out.with_name(f".{out.name}.partial")
    try:
        if fmt == "parquet":
            pq.write_table(table, tmp)
        elif fmt == "csv":
            pacsv.write_csv(csv_table(table), tmp)
        elif fmt == "xlsx":
            _write_xlsx(table, tmp)
        else:
            raise ValueError(f"format must be one of csv, xlsx, parquet, got {fmt!r}")
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return table.num_rows


def _write_xlsx(table: pa.Table, out: Path) -> None:
    book = xlsxwriter.Workbook(str(out), {"strings_to_formulas": False, "strings_to_urls": False,
                                          "strings_to_numbers": False})
    try:
        ws = book.add_worksheet("campaign")
        bold = book.add_format({"bold": True})
        formats = {k: book.add_format({"num_format": v}) for k, v in XLSX_FORMATS.items()}
        for i, name in enumerate(table.column_names):
            ws.write_string(0, i, str(neutralise(name)), bold)
            ws.set_column(i, i, min(max(len(name) + 2, 10), 40))
        dated = {i: formats[kind] for i, f in enumerate(table.schema) if (kind := dated_kind(f.type)) is not None}
        row = 1
        for batch in table.to_batches():
            for cells in zip(*xlsx_columns(batch), strict=True):
                for i, cell in enumerate(cells):
                    if cell is not None:
                        ws.write(row, i, cell, dated.get(i))
                row += 1
        ws.freeze_panes(1, 0)
        ws.autofilter(0, 0, table.num_rows, len(table.column_names) - 1)
    finally:
        book.close()
