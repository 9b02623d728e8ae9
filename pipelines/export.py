"""Export the store to CSV, XLSX or Parquet: submissions wide (one row per submission,
one column per field), answers long (one row per ``AnswerRow``) and requests.

Text cells a spreadsheet would run as a formula are neutralised in CSV and XLSX (see
``neutralise``); Parquet keeps every value as stored."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel
from sqlalchemy import Select, select

from connector.store import (
    AnswerRow,
    RequestRow,
    Store,
    SubmissionRow,
    _is_file,
    _is_group,
    _is_matrix,
    _text,
    answer_rows,
    epoch_ms,
)

Format = Literal["csv", "xlsx", "parquet"]
Table = Literal["wide", "long", "requests"]
FORMATS: tuple[str, ...] = ("csv", "xlsx", "parquet")
TABLES: tuple[str, ...] = ("wide", "long", "requests")
REQUEST_STATUSES: tuple[str, ...] = ("pending", "completed", "expired", "canceled")
XLSX_MAX_ROWS = 1_048_576  # rows in one worksheet, the header row included
CHUNK_ROWS = 50_000
# A text cell starting with one of these is run as a formula (or starts one) by spreadsheets.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

WIDE_FIXED = ["submission_id", "form_id", "request_id", "submitted_at", "updated_at", "edit_count"]
LONG_COLUMNS = ["submission_id", "form_id", "field_key", "instance", "row_key", "member_key", "value_json",
                "display_text"]
REQUEST_COLUMNS = ["request_id", "form_id", "status", "outcome", "delivery_status", "external_id",
                   "recipient_email", "recipient_name", "submission_id", "created_at", "expires_at",
                   "completed_at", "expired_at", "canceled_at", "cancel_reason", "updated_at"]


class ExportReport(BaseModel):
    """What ``export`` wrote: the file, its format, and the rows and columns of each table
    (each a sheet in XLSX)."""

    path: str
    format: Format
    rows: dict[str, int]
    columns: dict[str, list[str]]


def neutralise(value: Any) -> Any:
    """``value`` made safe for a spreadsheet: a string starting with ``=``, ``+``, ``-``,
    ``@``, a tab or a carriage return gets a leading ``'`` so it is shown as text and
    never run as a formula. Anything else is returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _ts(ms: int | None) -> pd.Timestamp | None:
    return None if ms is None else pd.Timestamp(ms, unit="ms", tz=UTC)


def _since_ms(since: datetime | date | None) -> int | None:
    if since is None:
        return None
    if not isinstance(since, datetime):
        since = datetime(since.year, since.month, since.day)
    return epoch_ms(since)  # a naive datetime is taken as UTC


def _chunks(store: Store, stmt: Select[Any]) -> Iterator[Sequence[Any]]:
    """The rows of ``stmt`` in chunks of ``CHUNK_ROWS``, streamed from one read."""
    with store.reader() as s:
        result = s.execute(stmt.execution_options(yield_per=CHUNK_ROWS))
        yield from result.partitions()


# ---------------------------------------------------------------------------------------
# Wide
# ---------------------------------------------------------------------------------------


def _raw_cell(value: Any) -> Any:
    """A raw answer as one cell: scalars as they are, anything else (multi-choice lists,
    files, groups, payment objects) as JSON text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, ensure_ascii=False)


def _wide_cells(row: SubmissionRow, display: bool) -> dict[str, Any]:
    """The field cells of one submission, keyed by column key (``key`` or ``key.row``)."""
    answers, shown = row.answers or {}, row.display or {}
    cells: dict[str, Any] = {}
    matrix_parts: dict[tuple[str, str], dict[str, Any]] = {}
    if display and any(_is_matrix(v) for v in answers.values()):  # the per-row display segments
        for a in answer_rows(row.id, answers, shown):
            if a["instance"] == -1 and a["row_key"]:
                matrix_parts[(a["field_key"], a["row_key"])] = a
    for key, value in answers.items():
        if _is_matrix(value):
            for row_key, col in value.items():
                cells[f"{key}.{row_key}"] = matrix_parts[(key, row_key)]["display_text"] if display else col
        elif display:
            text = shown.get(key)
            cells[key] = text if isinstance(text, str) else _text(value if text is None else text)
        elif _is_group(value) or (isinstance(value, list) and value and all(_is_file(v) for v in value)):
            cells[key] = json.dumps(value, ensure_ascii=False)
        else:
            cells[key] = _raw_cell(value)
    return cells


def _uniform(series: pd.Series) -> pd.Series:
    """A column of one kind: when its cells mix kinds (text and numbers, say, when one key
    holds different fields across forms), every value becomes text, so Parquet can
    store it."""
    kinds = {("bool" if isinstance(v, bool) else "number" if isinstance(v, int | float) else type(v).__name__)
             for v in series if v is not None and not (isinstance(v, float) and pd.isna(v))}
    if len(kinds) <= 1:
        return series
    return pd.Series([v if v is None or isinstance(v, str) else json.dumps(v) for v in series],
                     index=series.index, dtype=object)


def _headers(field_cols: dict[str, tuple[str, str | None]], labels: dict[str, str] | None) -> list[str]:
    """Column headers: question titles in place of field keys when ``labels`` are given
    (``Title.row`` for a matrix row); a header used twice (a title shared by two fields,
    or a field named like a fixed column) keeps its key in brackets, so every header
    is unique."""
    fields: list[str] = []
    for c, (key, row_key) in field_cols.items():
        if not labels:
            fields.append(c)
            continue
        title = labels.get(key, key)
        fields.append(title if row_key is None else f"{title}.{row_key}")
    seen: dict[str, int] = {}
    for h in WIDE_FIXED + fields:
        seen[h] = seen.get(h, 0) + 1
    return WIDE_FIXED + [f"{h} [{c}]" if seen[h] > 1 else h for h, c in zip(fields, field_cols, strict=True)]


def wide_frame(store: Store, *, form_id: str | None = None, since: datetime | date | None = None,
               display: bool = False, labels: dict[str, str] | None = None,
               fields: list[str] | None = None) -> pd.DataFrame:
    """One row per submission (ordered by submission time, then id): the fixed columns
    ``WIDE_FIXED``, then one column per field key, in ``fields`` order when given (only
    those fields), else in first-seen order. A matrix gives one ``key.row`` column per
    row; groups and files are JSON text (raw) or their display text (``display``)."""
    stmt = select(SubmissionRow)
    if form_id is not None:
        stmt = stmt.where(SubmissionRow.form_id == form_id)
    if (ms := _since_ms(since)) is not None:
        stmt = stmt.where(SubmissionRow.submitted_at >= ms)
    stmt = stmt.order_by(SubmissionRow.submitted_at, SubmissionRow.id)
    records: list[dict[str, Any]] = []
    field_cols: dict[str, tuple[str, str | None]] = {}  # column key -> (field key, matrix row)
    for part in _chunks(store, stmt):
        for (row,) in part:
            cells = _wide_cells(row, display)
            for c, v in (row.answers or {}).items():
                if fields is not None and c not in fields:
                    continue
                if _is_matrix(v):
                    for rk in v:
                        field_cols.setdefault(f"{c}.{rk}", (c, rk))
                else:
                    field_cols.setdefault(c, (c, None))
            records.append({
                "submission_id": row.id, "form_id": row.form_id, "request_id": row.request_id,
                "submitted_at": _ts(row.submitted_at), "updated_at": _ts(row.updated_at),
                "edit_count": row.edit_count, **{f"\0{k}": v for k, v in cells.items()}})
    if fields is not None:
        order = {k: i for i, k in enumerate(fields)}
        for k in fields:  # a requested field no submission answered is still a column
            if not any(fk == k for fk, _ in field_cols.values()):
                field_cols[k] = (k, None)
        field_cols = dict(sorted(field_cols.items(), key=lambda kv: order[kv[1][0]]))
    n = len(WIDE_FIXED)
    df = pd.DataFrame([[r[c] for c in WIDE_FIXED] + [r.get(f"\0{c}") for c in field_cols] for r in records],
                      columns=range(n + len(field_cols)), dtype=object)
    for i in range(n, n + len(field_cols)):
        df[i] = _uniform(df[i])
    df.columns = _headers(field_cols, labels)
    df["submitted_at"] = pd.to_datetime(df["submitted_at"], utc=True)
    df["updated_at"] = pd.to_datetime(df["updated_at"], utc=True)
    df["edit_count"] = df["edit_count"].astype("int64")
    return df


# ---------------------------------------------------------------------------------------
# Long and requests
# ---------------------------------------------------------------------------------------


def long_frame(store: Store, *, form_id: str | None = None, since: datetime | date | None = None,
               labels: dict[str, str] | None = None, fields: list[str] | None = None) -> pd.DataFrame:
    """One row per stored ``AnswerRow`` (``LONG_COLUMNS``, plus ``field_label`` when
    ``labels`` are given), filtered by the form and submission time of its submission."""
    stmt = select(AnswerRow, SubmissionRow.form_id).join(SubmissionRow, SubmissionRow.id == AnswerRow.submission_id)
    if form_id is not None:
        stmt = stmt.where(SubmissionRow.form_id == form_id)
    if (ms := _since_ms(since)) is not None:
        stmt = stmt.where(SubmissionRow.submitted_at >= ms)
    if fields is not None:
        stmt = stmt.where(AnswerRow.field_key.in_(fields))
    stmt = stmt.order_by(SubmissionRow.submitted_at, AnswerRow.submission_id, AnswerRow.field_key,
                         AnswerRow.instance, AnswerRow.row_key, AnswerRow.member_key)
    rows = [[a.submission_id, fid, a.field_key, a.instance, a.row_key, a.member_key, a.value_json, a.display_text]
            for part in _chunks(store, stmt) for a, fid in part]
    df = pd.DataFrame(rows, columns=LONG_COLUMNS, dtype=object)
    df["instance"] = df["instance"].astype("int64")
    if labels:
        df.insert(3, "field_label", df["field_key"].map(lambda k: labels.get(k, k)))
    return df


def requests_frame(store: Store, *, form_id: str | None = None, since: datetime | date | None = None,
                   status: str | None = None) -> pd.DataFrame:
    """One row per request (ordered by creation, then id): ``REQUEST_COLUMNS`` then one
    ``metadata.<key>`` column per metadata key, in first-seen order. ``since`` keeps
    requests created at or after it."""
    stmt = select(RequestRow)
    if form_id is not None:
        stmt = stmt.where(RequestRow.form_id == form_id)
    if status is not None:
        stmt = stmt.where(RequestRow.status == status)
    if (ms := _since_ms(since)) is not None:
        stmt = stmt.where(RequestRow.created_at >= ms)
    stmt = stmt.order_by(RequestRow.created_at, RequestRow.id)
    records: list[dict[str, Any]] = []
    meta_keys: dict[str, None] = {}
    for part in _chunks(store, stmt):
        for (r,) in part:
            rec = {c: getattr(r, c) for c in REQUEST_COLUMNS if c != "request_id"}
            rec["request_id"] = r.id
            for c in ("created_at", "expires_at", "completed_at", "expired_at", "canceled_at", "updated_at"):
                rec[c] = _ts(rec[c])
            for k, v in (r.metadata_ or {}).items():
                meta_keys.setdefault(k)
                rec[f"\0{k}"] = _raw_cell(v)
            records.append(rec)
    columns = REQUEST_COLUMNS + [f"metadata.{k}" for k in meta_keys]
    df = pd.DataFrame([[r.get(c) for c in REQUEST_COLUMNS] + [r.get(f"\0{k}") for k in meta_keys] for r in records],
                      columns=columns, dtype=object)
    for c in ("created_at", "expires_at", "completed_at", "expired_at", "canceled_at", "updated_at"):
        df[c] = pd.to_datetime(df[c], utc=True)
    for k in meta_keys:
        df[f"metadata.{k}"] = _uniform(df[f"metadata.{k}"])
    return df


# ---------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------


def _neutralised(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object:
            # built as a list: Series.map would turn a column of ints and None into floats
            out[c] = pd.Series([neutralise(v) for v in out[c]], index=out.index, dtype=object)
    out.columns = [neutralise(c) for c in out.columns]
    return out


def _write_xlsx(frames: dict[str, pd.DataFrame], out: Path) -> None:
    options = {"strings_to_formulas": False, "strings_to_urls": False, "strings_to_numbers": False}
    with pd.ExcelWriter(out, engine="xlsxwriter", engine_kwargs={"options": options}) as writer:
        bold = writer.book.add_format({"bold": True})
        for name, df in frames.items():
            df = _neutralised(df)
            for c in df.columns:  # Excel has no time zones: times are written as naive UTC
                if isinstance(df[c].dtype, pd.DatetimeTZDtype):
                    df[c] = df[c].dt.tz_localize(None)
            df.to_excel(writer, sheet_name=name, index=False, header=False, startrow=1)
            ws = writer.sheets[name]
            for i, c in enumerate(df.columns):
                ws.write_string(0, i, str(c), bold)
                cells = df[c].head(1000).map(lambda v: "" if v is None or v is pd.NaT else str(v))
                width = max([len(str(c)), *cells.map(len).tolist()]) + 2
                ws.set_column(i, i, min(max(width, 8), 60))
            ws.freeze_panes(1, 0)
            ws.autofilter(0, 0, len(df), max(len(df.columns) - 1, 0))


def export(store: Store, fmt: Format, out: Path, *, table: Table | Literal["all"] = "wide",
           form_id: str | None = None, since: datetime | date | None = None, status: str | None = None,
           display: bool = False, labels: dict[str, str] | None = None,
           fields: list[str] | None = None) -> ExportReport:
    """Write one table of the store (``table``: ``wide``, ``long`` or ``requests``; ``all``
    writes the three as sheets of one XLSX workbook) to ``out`` as ``fmt``.

    Filters: ``form_id``; ``since`` (submissions submitted, requests created, at or after
    it; a naive datetime or a date is UTC); ``status`` (requests only). ``display`` puts
    display text in the wide table instead of raw answers; ``labels`` (field key ->
    question title) become its headers; ``fields`` picks and orders its field columns.

    A bad argument, or a table too long for one worksheet, is a ``ValueError`` and no
    file is written."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if table not in (*TABLES, "all"):
        raise ValueError(f"table must be one of {', '.join(TABLES)} or all, got {table!r}")
    if table == "all" and fmt != "xlsx":
        raise ValueError(f"table 'all' writes one sheet per table and needs format xlsx, got {fmt!r}")
    if status is not None and status not in REQUEST_STATUSES:
        raise ValueError(f"status must be one of {', '.join(REQUEST_STATUSES)}, got {status!r}")
    if status is not None and table not in ("requests", "all"):
        raise ValueError(f"status filters requests: use it with table requests or all, not {table!r}")
    out = Path(out)
    if not out.parent.is_dir():
        raise ValueError(f"cannot write {out}: directory {out.parent} does not exist")
    names = list(TABLES) if table == "all" else [table]
    frames: dict[str, pd.DataFrame] = {}
    for name in names:
        if name == "wide":
            frames[name] = wide_frame(store, form_id=form_id, since=since, display=display, labels=labels,
                                      fields=fields)
        elif name == "long":
            frames[name] = long_frame(store, form_id=form_id, since=since, labels=labels, fields=fields)
        else:
            frames[name] = requests_frame(store, form_id=form_id, since=since, status=status)
    if fmt == "xlsx":
        for name, df in frames.items():
            if len(df) + 1 > XLSX_MAX_ROWS:
                raise ValueError(f"table {name!r} has {len(df):,} rows; an XLSX sheet holds at most "
                                 f"{XLSX_MAX_ROWS - 1:,} rows under its header: export it as csv or parquet, "
                                 f"or narrow it with --form / --since")
        _write_xlsx(frames, out)
    elif fmt == "csv":
        _neutralised(frames[names[0]]).to_csv(out, index=False)
    else:
        frames[names[0]].to_parquet(out, engine="pyarrow", index=False)
    return ExportReport(path=str(out), format=fmt, rows={n: len(df) for n, df in frames.items()},
                        columns={n: [str(c) for c in df.columns] for n, df in frames.items()})
