"""The destinations' mappers of the data contract (``connector.store._schema``): each
logical type as an Arrow (Parquet) type, as CSV and XLSX cells and as a pandas dtype,
and the one table (``type_table``) docs/your-data.md shows for every field type, made
from these mappers and the views' (``connector.store._views.SQL_TYPES``), so the docs
and the code cannot drift apart."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from connector.store import Column, StoredField
from connector.store._schema import field_columns
from connector.store._views import SQL_TYPES

from .json_text import json_texts, list_items

TIMESTAMP = pa.timestamp("ms", tz="UTC")
_ARROW: dict[str, pa.DataType] = {
    "text": pa.string(), "number": pa.float64(), "integer": pa.int64(), "boolean": pa.bool_(),
    "date": pa.date32(), "time": pa.time32("s"), "timestamp": TIMESTAMP, "keys": pa.list_(pa.string()),
    "json": pa.string(),
}
# How each logical type reads in each file format and in pandas (docs/your-data.md's table).
PARQUET_TYPES = {"text": "string", "number": "double", "integer": "int64", "boolean": "bool", "date": "date32",
                 "time": "time32[s]", "timestamp": "timestamp[ms, UTC]", "keys": "list<string>",
                 "records": "list<struct>", "json": "string (JSON)"}
CSV_FORMS = {"text": "text", "number": "decimal with a point (5000.0)", "integer": "integer",
             "boolean": "true/false",
             "date": "YYYY-MM-DD", "time": "HH:MM:SS", "timestamp": "YYYY-MM-DD HH:MM:SS.SSSZ",
             "keys": "JSON array text", "records": "JSON array text", "json": "JSON text"}
XLSX_FORMS = {"text": "text", "number": "number", "integer": "number", "boolean": "TRUE/FALSE",
              "date": "date (yyyy-mm-dd)", "time": "time (hh:mm:ss)", "timestamp": "date-time (UTC)",
              "keys": "JSON array text", "records": "JSON array text", "json": "JSON text"}
PANDAS_TYPES = {"text": "string", "number": "Float64", "integer": "Int64", "boolean": "boolean",
                "date": "object (date)", "time": "object (time)", "timestamp": "datetime64[ms, UTC]",
                "keys": "object (list of str)", "records": "object (list of dict)", "json": "object (parsed JSON)"}
_PANDAS: dict[pa.DataType, Any] = {
    pa.int64(): pd.Int64Dtype(), pa.float64(): pd.Float64Dtype(), pa.bool_(): pd.BooleanDtype(),
    pa.string(): pd.StringDtype(),
}


def arrow_type(col: Column) -> pa.DataType:
    """The Arrow (Parquet) type of a column: ``records`` are lists of structs of their
    members' types."""
    if col.type == "records":
        return pa.list_(pa.struct([(m.name, arrow_type(m)) for m in col.members]))
    return _ARROW[col.type]


def arrow_schema(columns: Sequence[Column], headers: Sequence[str] | None = None) -> pa.Schema:
    """The Arrow schema of ``columns`` (named ``headers`` when given)."""
    names = headers if headers is not None else [c.name for c in columns]
    return pa.schema([(n, arrow_type(c)) for n, c in zip(names, columns, strict=True)])


def own_array(column: Column, values: Sequence[Any]) -> pa.Array:
    """A column of a row's own values as stored (times in epoch ms, booleans as stored
    integers or booleans) as its Arrow type."""
    if column.type == "timestamp":
        return pa.array(values, pa.int64()).cast(TIMESTAMP)
    if column.type == "boolean":
        return pa.array([None if v is None else bool(v) for v in values], pa.bool_())
    return pa.array(values, arrow_type(column))


def own_batch(values: Sequence[Sequence[Any]], columns: Sequence[Column], schema: pa.Schema | None = None,
              ) -> pa.RecordBatch:
    """A record batch of ``columns`` (each of a row's own values, ``own_array``) from
    their values, column by column: a column with no row is empty, never untyped."""
    schema = schema if schema is not None else arrow_schema(columns)
    return pa.RecordBatch.from_arrays([own_array(c, v) for c, v in zip(columns, values, strict=True)],
                                      schema=schema)


_to_json = json.JSONEncoder(ensure_ascii=False).encode


def _whole(value: Any) -> Any:
    """A value with each whole float as an integer and each null member left out, as
    ``json_cells`` writes it."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    if isinstance(value, list):
        return [_whole(v) for v in value]
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items() if v is not None}
    return value


def _whole_floats(col: pa.Array) -> pa.Array:
    """``col`` with every float column inside it as integers when all its values are
    whole (their JSON text is then made in Arrow; a fraction leaves it to Python)."""
    t = col.type
    if pa.types.is_floating(t):
        valid = col.drop_null()
        whole = not len(valid) or bool(pc.all(pc.equal(pc.floor(valid), valid)).as_py()
                                       and pc.max(pc.abs(valid)).as_py() < 2 ** 53)
        return col.cast(pa.int64()) if whole else col
    if pa.types.is_list(t):  # a slice's offsets start past 0: its items are taken from there
        return pa.ListArray.from_arrays(pc.subtract(col.offsets, col.offsets[0]), _whole_floats(list_items(col)),
                                        mask=col.is_null())
    if pa.types.is_struct(t):
        children = [_whole_floats(col.field(j)) for j in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=[pa.field(f.name, c.type) for f, c in zip(t, children,
                                                                                                    strict=True)],
                                          mask=col.is_null())
    return col


def json_cells(col: pa.Array) -> pa.Array:
    """A list or struct column as JSON text (``json.dumps``, ensure_ascii off; a whole
    number without a fraction, a null member left out): the CSV and XLSX cells of
    ``keys`` and ``records``. Made in Arrow; the cells it cannot write exactly, in Python."""
    if col.null_count == len(col):  # no value in the batch (a column of files none archived yet)
        return pa.nulls(len(col), pa.string())
    texts = json_texts(_whole_floats(col))
    missing = pc.and_(pc.is_valid(col), pc.is_null(texts))
    if not pc.any(missing).as_py():
        return texts
    cells = texts.to_pylist()
    for i in pc.indices_nonzero(missing).to_pylist():
        cells[i] = _to_json(_whole(col[i].as_py()))
    return pa.array(cells, pa.string())


def text_cells(col: pa.Array) -> pa.Array:
    """A column as the CSV writer takes it: lists and structs as JSON text (see
    ``json_cells``), numbers as ``decimal_cells``, anything else as it is (booleans
    ``true``/``false``, dates and times ISO)."""
    if pa.types.is_list(col.type) or pa.types.is_struct(col.type):
        return json_cells(col)
    if pa.types.is_floating(col.type):
        return decimal_cells(col)
    return col


def decimal_cells(col: pa.Array) -> pa.Array:
    """A ``number`` column as text that always reads back as a floating number: a
    whole value with ``.0`` (``5000.0``, never ``5000``, which a reader would take for
    an integer one night and a decimal the next)."""
    texts = col.cast(pa.string())
    whole = pc.match_substring_regex(texts, r"^-?[0-9]+$")
    return pc.if_else(whole, pc.binary_join_element_wise(texts, ".0", ""), texts)


# How each column of a CSV export reads back, by its logical type: DuckDB's type and the
# pandas dtype to give (dates, times and timestamps: parse them, see docs/your-data.md).
CSV_READ_TYPES: dict[str, tuple[str, str]] = {
    "text": ("VARCHAR", "string"), "number": ("DOUBLE", "Float64"), "integer": ("BIGINT", "Int64"),
    "boolean": ("BOOLEAN", "boolean"), "date": ("DATE", "string"), "time": ("TIME", "string"),
    "timestamp": ("TIMESTAMPTZ", "string"), "json": ("VARCHAR", "string"),
}


def csv_type(t: pa.DataType) -> str:
    """The logical type a CSV column of Arrow type ``t`` holds (lists and records: ``json`` text)."""
    if pa.types.is_timestamp(t):
        return "timestamp"
    named = [name for name in ("text", "number", "integer", "boolean", "date", "time") if _ARROW[name] == t]
    return named[0] if named else "text" if pa.types.is_string(t) or pa.types.is_large_string(t) else "json"


def csv_schema(names: Sequence[str], schema: pa.Schema) -> dict[str, Any]:
    """The schema file beside a CSV export: each column's name (as its header), logical
    type, DuckDB type and pandas dtype, in order."""
    cols = []
    for name, f in zip(names, schema, strict=True):
        kind = csv_type(f.type)
        duck, dtype = CSV_READ_TYPES[kind]
        cols.append({"name": name, "type": kind, "duckdb": duck, "pandas": dtype})
    return {"format": "csv", "columns": cols}


def frame_column(col: pa.Array, column: Column | None) -> Any:
    """A column as its frame holds it when its nullable dtype does not: lists and
    records as Python lists, JSON as its parsed value (None when nothing to change)."""
    if pa.types.is_list(col.type):
        return col.to_pylist()
    if column is not None and column.type == "json" and column.source != "label":
        return [None if v is None else json.loads(v) for v in col.to_pylist()]
    return None


def frame(batch: pa.RecordBatch, columns: Sequence[Column] | None) -> pd.DataFrame:
    """A record batch as a pandas frame with the dtypes of ``PANDAS_TYPES``."""
    df = batch.to_pandas(types_mapper=_PANDAS.get)
    for i, name in enumerate(batch.schema.names):
        values = frame_column(batch.column(i), None if columns is None else columns[i])
        if values is not None:
            df[name] = pd.Series(values, index=df.index, dtype=object)
    return df


# The field types of the docs' table, with a field of each (shape included where it matters).
_EXAMPLES: tuple[tuple[str, StoredField], ...] = (
    ("text, textarea, email, phone, url, hidden", StoredField("f", "text")),
    ("number, calculated", StoredField("f", "number")),
    ("rating, scale", StoredField("f", "rating")),
    ("switch", StoredField("f", "switch")),
    ("date", StoredField("f", "date")),
    ("time", StoredField("f", "time")),
    ("select, radio, decision, picture-choice", StoredField("f", "select")),
    ("checkbox, ranking", StoredField("f", "checkbox")),
    ("matrix (rows r1, r2)", StoredField("f", "matrix", shape=({"key": "r1"}, {"key": "r2"}))),
    ("group (repeating)", StoredField("f", "group", shape=({"key": "m", "type": "text"},))),
    ("file, signature", StoredField("f", "file")),
    ("payment, schedule-appointment, unknown types", StoredField("f", "payment")),
)


def type_table() -> list[str]:
    """docs/your-data.md's table of column types per field type (Markdown lines)."""
    head = ["Field type (key `f`)", "Columns", "SQLite", "PostgreSQL", "MySQL/MariaDB", "Parquet", "CSV", "XLSX",
            "pandas"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, f in _EXAMPLES:
        cols = field_columns(f)
        cells = [label, ", ".join(f"`{c.name}`" for c in cols)]
        for where in (SQL_TYPES["sqlite"], SQL_TYPES["postgresql"], SQL_TYPES["mysql"], PARQUET_TYPES, CSV_FORMS,
                      XLSX_FORMS, PANDAS_TYPES):
            cells.append("; ".join(dict.fromkeys(where[c.type] for c in cols)))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("| documents | none | | | | | | | |")
    return lines
