"""pandas DataFrames of the store: the wide, long and requests tables, built from the
very record batches the file export writes (``pipelines.export.table_batches``), so a
frame has the columns, order and types of the export for the same arguments. The wide
table is one form's table (``connector.store._schema``), typed from its field list as
``pipelines.export.columns.PANDAS_TYPES`` says:

* times (``submitted_at``, ``created_at``, ...) are timezone-aware datetimes (UTC);
* numbers are nullable ``Float64`` (``Int64`` for rating and scale), booleans nullable
  ``boolean``, text ``string``; dates ``datetime.date`` and times ``datetime.time``;
* a choice is its option key beside ``<key>_label``; a checkbox or ranking answer a
  Python list of keys; a matrix one column per row; a group or a file list a Python list
  of dicts; payments and bookings their parsed JSON.

``wide``, ``long`` and ``requests`` return one frame; ``iter_wide``, ``iter_long`` and
``iter_requests`` yield one frame per batch of ``pipelines.export.write.CHUNK_ROWS`` rows, for
stores larger than memory."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from typing import Any

import pandas as pd
import pyarrow as pa

from connector.store import Store

from .columns import frame
from .write import Table, table_batches

Since = datetime | date | str | None


def _since(since: Since) -> datetime | date | None:
    """``since`` as the export takes it: an ISO date or time string is parsed (naive is UTC)."""
    if isinstance(since, str):
        try:
            return datetime.fromisoformat(since)
        except ValueError:
            raise ValueError(f"since: expected an ISO date or time such as 2026-01-31, got {since!r}") from None
    return since


def _frames(store: Store, table: Table, **kwargs: Any) -> Iterator[pd.DataFrame]:
    with table_batches(store, table, **kwargs) as (schema, columns, batches):
        empty = True
        for batch in batches:
            empty = False
            yield frame(batch, columns)
        if empty:  # no rows: one empty frame, with the columns and dtypes all the same
            yield frame(pa.RecordBatch.from_pylist([], schema=schema), columns)


def _one(frames: Iterator[pd.DataFrame]) -> pd.DataFrame:
    parts = list(frames)
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)


def iter_wide(store: Store, *, form: str | None = None, since: Since = None,
              display: bool = False, include_gone: bool = False) -> Iterator[pd.DataFrame]:
    """The wide table (one row per submission) of one form as frames of at most
    ``CHUNK_ROWS`` rows, every frame with the same columns and dtypes. Arguments as
    ``pipelines.export.export``: ``form`` (a form id; may be left out when the store
    holds one form), ``since`` (submitted at or after: a date, a datetime or an ISO
    string; naive is UTC), ``display`` (the human-readable variant), ``include_gone``
    (the submissions the service no longer has, left out unless given)."""
    yield from _frames(store, "wide", form_id=form, since=_since(since), display=display, include_gone=include_gone)


def wide(store: Store, *, form: str | None = None, since: Since = None, display: bool = False,
         include_gone: bool = False) -> pd.DataFrame:
    """The wide table as one frame (see ``iter_wide``)."""
    return _one(iter_wide(store, form=form, since=since, display=display, include_gone=include_gone))


def iter_long(store: Store, *, form: str | None = None, since: Since = None,
              fields: list[str] | None = None, include_gone: bool = False) -> Iterator[pd.DataFrame]:
    """The long table (one row per answer: field key, group instance, matrix row, group
    member, the value as plain text and its display text) as frames of at most
    ``CHUNK_ROWS`` rows; ``include_gone`` as ``iter_wide``."""
    yield from _frames(store, "long", form_id=form, since=_since(since), fields=fields, include_gone=include_gone)


def long(store: Store, *, form: str | None = None, since: Since = None,
         fields: list[str] | None = None, include_gone: bool = False) -> pd.DataFrame:
    """The long table as one frame (see ``iter_long``)."""
    return _one(iter_long(store, form=form, since=since, fields=fields, include_gone=include_gone))


def iter_requests(store: Store, *, form: str | None = None, since: Since = None,
                  status: str | None = None) -> Iterator[pd.DataFrame]:
    """The requests (status, outcome, recipient, times, ``metadata`` as JSON text) as
    frames of at most ``CHUNK_ROWS`` rows; ``since`` filters on the creation time."""
    yield from _frames(store, "requests", form_id=form, since=_since(since), status=status)


def requests(store: Store, *, form: str | None = None, since: Since = None,
             status: str | None = None) -> pd.DataFrame:
    """The requests as one frame (see ``iter_requests``)."""
    return _one(iter_requests(store, form=form, since=since, status=status))
