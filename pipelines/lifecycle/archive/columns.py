"""The archived locations beside a file answer's URLs: the wide table's ``<name>__archived``
columns and the long table's ``archived`` column (the data contract,
``connector.store._schema``). Pure functions over a shaped record batch and the
archived-files rows of its submissions."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.store._archive import FileFields
from connector.store._schema import Column

from ...export.json_text import read_typed

# (submission, field, instance, member, index) -> (url, location): the archive table's key
# (instance -1 and member "" outside a repeating group)
Located = Mapping[tuple[str, str, int, str, int], tuple[str, str]]
Answer = tuple[str, str, int, str]  # where one file list is: submission, field, instance, member
LOCATIONS = pa.list_(pa.string())
_URLS = pa.schema([("f", pa.list_(pa.struct([("url", pa.string())])))])


def archived_fields(columns: Sequence[Column]) -> list[str]:
    """The field keys of the ``archived`` columns among ``columns``."""
    return [c.field_key for c in columns if c.source == "archived" and c.field_key is not None]


def locations(answer: Answer, files: Sequence[Mapping[str, object]] | None, located: Located) -> list[str | None] | None:
    """Where each file of one file list is archived, item for item (None for one not
    archived, or archived from another URL than the answer's now); None when there is no
    answer."""
    if files is None:
        return None
    out: list[str | None] = []
    for i, f in enumerate(files):
        kept = located.get((*answer, i))
        out.append(kept[1] if kept is not None and isinstance(f, Mapping) and f.get("url") == kept[0] else None)
    return out


def _nulls_beside(records: pa.ListArray) -> pa.ListArray:
    """A null location beside each item of ``records`` (nothing archived), made in Arrow."""
    offsets = pc.subtract(records.offsets, records.offsets[0])
    return pa.ListArray.from_arrays(offsets, pa.nulls(len(records.flatten()), pa.string()), mask=records.is_null())


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
        records, kind = batch.column(answer[key]), batch.schema.field(i).type
        if c.type == "records":  # a group's file members
            arrays[i] = _group_nulls(records, kind) if not located else pa.array(
                [_group_locations(sid, key, g, c.members, located) for sid, g in zip(ids, records.to_pylist(),
                                                                                     strict=True)], kind)
        elif not located:  # nothing archived: a null beside each file, made in Arrow
            arrays[i] = _nulls_beside(records)
        else:
            arrays[i] = pa.array([locations((sid, key, -1, ""), f, located)
                                  for sid, f in zip(ids, records.to_pylist(), strict=True)], kind)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _group_locations(sid: str, key: str, instances: list[dict[str, Any]] | None, members: Sequence[Column],
                     located: Located) -> list[dict[str, list[str | None] | None] | None] | None:
    """A group answer's ``<name>__archived``: per instance, its file members' ``locations``."""
    if instances is None:
        return None
    # a group member's file list is JSON text in the wide table (a member that is not a scalar is)
    return [{m.name: locations((sid, key, n, m.name), _urls_of(v) if isinstance(v := inst.get(m.name), str) else None,
                               located) for m in members} if isinstance(inst, dict) else None
            for n, inst in enumerate(instances)]


def _group_nulls(records: pa.ListArray, kind: pa.DataType) -> pa.ListArray:
    """A group's ``<name>__archived`` with nothing archived (a null beside each file of
    each file member), made in Arrow."""
    items = records.values.slice(records.offsets[0].as_py(), len(records.flatten()))
    fields = list(kind.value_type)
    children = [_nulls_beside(_file_lists(items.field(f.name))) for f in fields]  # each member's JSON text
    made = pa.StructArray.from_arrays(children, fields=fields, mask=items.is_null())
    return pa.ListArray.from_arrays(pc.subtract(records.offsets, records.offsets[0]), made, mask=records.is_null())


def _file_rows(batch: pa.RecordBatch, files: Mapping[str, FileFields]) -> np.ndarray:
    """Where a long row (``ROWS_SCHEMA``) holds a file list: a top-level file field's row
    (no instance, no member), or a file member's row of a group instance."""
    field, member = batch.column("field_key"), batch.column("member_key")
    outside = np.asarray(pc.and_(pc.is_null(batch.column("instance")), pc.is_null(member)))
    one_form = len(files) == 1
    found = np.zeros(batch.num_rows, dtype=bool)
    for form, where in files.items():
        of_form = True if one_form and pc.all(pc.equal(batch.column("form_id"), form)).as_py() \
            else np.asarray(pc.equal(batch.column("form_id"), form).fill_null(False))
        if where.top:
            found |= of_form & outside & np.asarray(pc.is_in(field, pa.array(where.top, pa.string())).fill_null(False))
        for group, members in where.groups.items():
            found |= of_form & np.asarray(pc.and_(pc.equal(field, group), pc.is_in(member, pa.array(members,
                                                                                                    pa.string())))
                                          .fill_null(False))
    return found


def _file_lists(values: pa.Array) -> pa.ListArray:
    """The file lists of long rows' values (JSON text) as lists of ``{url}``: read by
    Arrow at once; a value that is not such a list (stored out of shape) is null."""
    texts = pc.binary_join_element_wise(pa.scalar('{"f":'), values, pa.scalar("}"), "")
    table = read_typed(texts, _URLS) if len(values) else None
    if table is not None:
        return table.column("f").combine_chunks()
    # one of them is not a list of objects: each on its own
    return pa.array([_urls_of(text) for text in values.to_pylist()], _URLS.field("f").type)


def _urls_of(text: str | None) -> list[dict[str, str | None]] | None:
    """A file list's JSON text as its files' ``{url}``; None when it is not a list of objects."""
    try:
        v = json.loads(text) if text is not None else None
    except ValueError:
        return None
    if not isinstance(v, list) or not all(isinstance(f, dict) for f in v):
        return None
    return [{"url": u if isinstance(u := f.get("url"), str) else None} for f in v]


def long_archived(batch: pa.RecordBatch, files: Mapping[str, FileFields], located: Located) -> pa.Array:
    """The long table's ``archived`` column of ``batch`` (rows of ``ROWS_SCHEMA``):
    beside each file list (``files``: each form's file fields), where its files are
    archived, item for item (``locations``); null on any other row. Made in Arrow but
    for the rows of files archived."""
    n = batch.num_rows
    rows = np.flatnonzero(_file_rows(batch, files)) if files else np.zeros(0, dtype=np.int64)
    if not len(rows):
        return pa.nulls(n, LOCATIONS)
    at = pa.array(rows)
    lists = _file_lists(batch.column("value").take(at))
    if not located:
        made: pa.Array = _nulls_beside(lists)
    else:
        sub = batch.take(at)
        places = zip(*(sub.column(c).to_pylist() for c in ("submission_id", "field_key", "instance", "member_key")),
                     strict=True)
        made = pa.array([locations((sid, key, -1 if inst is None else inst, member or ""), fl, located)
                         for (sid, key, inst, member), fl in zip(places, lists.to_pylist(), strict=True)], LOCATIONS)
    index = np.full(n, -1, dtype=np.int64)
    index[rows] = np.arange(len(rows))
    return made.take(pa.array(index, mask=index < 0))
