"""pandas DataFrames of the store: the wide, long and requests tables, built from the
very record batches the file export writes (``pipelines.export.table_batches``), typed
for analysis:

* times (``submitted_at``, ``created_at``, …) are timezone-aware datetimes (UTC);
* numbers are nullable ``Int64`` / ``Float64``, booleans nullable ``boolean``, text
  ``string``;
* in the wide table, a choice answer is its option key (``display=True`` gives the
  labels instead), a matrix is one column per row (``key.row``), and lists and objects
  (multi-choice, files, groups, payments) are Python lists and dicts.

``wide``, ``long`` and ``requests`` return one frame; ``iter_wide``, ``iter_long`` and
``iter_requests`` yield one frame per batch of ``pipelines.export.CHUNK_ROWS`` rows, for
stores larger than memory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

import pandas as pd
import pyarrow as pa

from connector.store import Store

from .export import Table, table_batches

_NULLABLE: dict[pa.DataType, Any] = {
    pa.int64(): pd.Int64Dtype(), pa.float64(): pd.Float64Dtype(), pa.bool_(): pd.BooleanDtype(),
    pa.string(): pd.StringDtype(),
}


def _json_columns(store: Store, form: str | None) -> set[str]:
    """The wide columns holding JSON text: the fields whose kind is JSON in the views of
    every form (of ``form``) that has them."""
    kinds: dict[str, set[str]] = {}
    for v in store.views():
        if form is None or v.form_id == form:
            for c in v.columns:
                if c.field_key and c.kind != "label":
                    kinds.setdefault(c.field_key, set()).add(c.kind)
    return {k for k, ks in kinds.items() if ks == {"json"}}


Since = datetime | date | str | None


def _since(since: Since) -> datetime | date | None:
    """``since`` as the export takes it: an ISO date or time string is parsed (naive is UTC)."""
    if isinstance(since, str):
        try:
            return datetime.fromisoformat(since)
        except ValueError:
            raise ValueError(f"since: expected an ISO date or time such as 2026-01-31, got {since!r}") from None
    return since


def _frame(batch: pa.RecordBatch, json_cols: set[str]) -> pd.DataFrame:
    df = batch.to_pandas(types_mapper=_NULLABLE.get)
    for col in json_cols & set(df.columns):
        df[col] = pd.Series([None if v is None or v is pd.NA else json.loads(v) for v in df[col]],
                            index=df.index, dtype=object)
    return df


def _frames(store: Store, table: Table, json_cols: set[str], **kwargs: Any) -> Iterator[pd.DataFrame]:
    with table_batches(store, table, **kwargs) as (schema, batches):
        empty = True
        for batch in batches:
            empty = False
            yield _frame(batch, json_cols)
        if empty:  # no rows: one empty frame, with the columns and dtypes all the same
            yield _frame(pa.RecordBatch.from_pylist([], schema=schema), json_cols)


def _one(frames: Iterator[pd.DataFrame]) -> pd.DataFrame:
    parts = list(frames)
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def iter_wide(store: Store, *, form: str | None = None, since: Since = None,
              display: bool = False, fields: list[str] | None = None,
              order: list[str] | None = None) -> Iterator[pd.DataFrame]:
    """The wide table (one row per submission) as frames of at most ``CHUNK_ROWS`` rows,
    every frame with the same columns and dtypes. Arguments as ``pipelines.export.export``:
    ``form`` (a form id), ``since`` (submitted at or after: a date, a datetime or an ISO
    string; naive is UTC), ``display``
    (display text instead of raw answers), ``fields`` (pick and order field columns),
    ``order`` (the form's field keys first, in that order)."""
    json_cols = set() if display else _json_columns(store, form)
    yield from _frames(store, "wide", json_cols, form_id=form, since=_since(since), display=display, fields=fields,
                       order=order)


def wide(store: Store, *, form: str | None = None, since: Since = None, display: bool = False,
         fields: list[str] | None = None, order: list[str] | None = None) -> pd.DataFrame:
    """The wide table as one frame (see ``iter_wide``)."""
    return _one(iter_wide(store, form=form, since=since, display=display, fields=fields, order=order))


def iter_long(store: Store, *, form: str | None = None, since: Since = None,
              fields: list[str] | None = None) -> Iterator[pd.DataFrame]:
    """The long table (one row per answer: field key, group instance, matrix row, group
    member, the value as JSON text and its display text) as frames of at most
    ``CHUNK_ROWS`` rows."""
    yield from _frames(store, "long", set(), form_id=form, since=_since(since), fields=fields)


def long(store: Store, *, form: str | None = None, since: Since = None,
         fields: list[str] | None = None) -> pd.DataFrame:
    """The long table as one frame (see ``iter_long``)."""
    return _one(iter_long(store, form=form, since=since, fields=fields))


def iter_requests(store: Store, *, form: str | None = None, since: Since = None,
                  status: str | None = None) -> Iterator[pd.DataFrame]:
    """The requests (status, outcome, recipient, times, ``metadata.<key>`` columns) as
    frames of at most ``CHUNK_ROWS`` rows; ``since`` filters on the creation time."""
    yield from _frames(store, "requests", set(), form_id=form, since=_since(since), status=status)


def requests(store: Store, *, form: str | None = None, since: Since = None,
             status: str | None = None) -> pd.DataFrame:
    """The requests as one frame (see ``iter_requests``)."""
    return _one(iter_requests(store, form=form, since=since, status=status))
