"""The archived locations beside a file field's URLs in the wide table (the data
contract's ``<name>__archived`` columns, ``connector.store.schema``): pure functions over
a shaped record batch and the archived-files rows of its submissions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from connector.store.schema import Column

Located = Mapping[tuple[str, str, int], tuple[str, str]]  # (submission, field, index) -> (url, location)


def archived_fields(columns: Sequence[Column]) -> list[str]:
    """The field keys of the ``archived`` columns among ``columns``."""
    return [c.field_key for c in columns if c.source == "archived" and c.field_key is not None]


def locations(sid: str, key: str, files: list[dict[str, object]] | None, located: Located) -> list[str | None] | None:
    """Where each file of one answer is archived, item for item (None for one not archived,
    or archived from another URL than the answer's now); None when there is no answer."""
    if files is None:
        return None
    out: list[str | None] = []
    for i, f in enumerate(files):
        kept = located.get((sid, key, i))
        out.append(kept[1] if kept is not None and isinstance(f, dict) and f.get("url") == kept[0] else None)
    return out


def with_archived(batch: pa.RecordBatch, columns: Sequence[Column], located: Located) -> pa.RecordBatch:
    """``batch`` (of ``columns``, its first column the submission id) with each
    ``archived`` column filled in from its field's file list."""
    names = batch.schema.names
    answer = {c.field_key: i for i, c in enumerate(columns) if c.source == "answer" and c.type == "records"}
    ids = batch.column(0).to_pylist() if located else []
    arrays = list(batch.columns)
    for i, c in enumerate(columns):
        key = c.field_key
        if c.source != "archived" or key is None or key not in answer:
            continue
        records = batch.column(answer[key])
        if not located:  # nothing archived: a null beside each file, made in Arrow
            offsets = pc.subtract(records.offsets, records.offsets[0])
            arrays[i] = pa.ListArray.from_arrays(offsets, pa.nulls(len(records.flatten()), pa.string()),
                                                 mask=records.is_null())
            continue
        files = records.to_pylist()
        arrays[i] = pa.array([locations(sid, key, f, located) for sid, f in zip(ids, files, strict=True)],
                             batch.schema.field(i).type)
    return pa.RecordBatch.from_arrays(arrays, names=names)
