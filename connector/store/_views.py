"""The typed view of each form, ``formsync_<form name>_<hash>``: the form's table (``schema``)
as SQL over ``formsync_submissions`` (``answers`` and ``display``) and the request's
external id, built by each database's JSON functions. One small mapper per database
turns each logical type into that database's column (``SQL_TYPES``, ``_cell``).

Everything here is pure (the statement text); ``Store`` runs it. A view is rebuilt when
the form's field list changes (a new form or field, ``fields.list`` read again), never
per event."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ._schema import Column, FormSchema

# The view of a form is its schema: the names below are kept for the store's callers.
FormView = FormSchema
ViewColumn = Column

# Each logical type as each database's view column holds it (docs/your-data.md's table).
SQL_TYPES: dict[str, dict[str, str]] = {
    "sqlite": {"text": "TEXT", "number": "REAL", "integer": "INTEGER", "boolean": "INTEGER 0/1",
               "date": "TEXT YYYY-MM-DD", "time": "TEXT HH:MM:SS", "timestamp": "TEXT YYYY-MM-DD HH:MM:SS.SSS (UTC)",
               "keys": "TEXT (JSON array)", "records": "TEXT (JSON array)", "json": "TEXT (JSON)"},
    "postgresql": {"text": "text", "number": "double precision", "integer": "bigint", "boolean": "boolean",
                   "date": "date", "time": "time", "timestamp": "timestamptz", "keys": "jsonb", "records": "jsonb",
                   "json": "jsonb"},
    "mysql": {"text": "text", "number": "double", "integer": "bigint", "boolean": "boolean (0/1)",
              "date": "date", "time": "time", "timestamp": "datetime(3) (UTC)", "keys": "json", "records": "json",
              "json": "json"},
}

# The submission's own columns as SQL over ``s`` (the submission) and ``r`` (its request).
_OWN_SQL = {"submission_id": "s.id", "form_id": "s.form_id", "request_id": "s.request_id",
            "external_id": "r.external_id", "submitted_at": "s.submitted_at", "updated_at": "s.updated_at",
            "respondent_email": "s.respondent_email", "language": "s.language", "completed": "s.is_completed",
            "edit_count": "s.edit_count", "stored_at": "s.stored_at"}


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _path(*keys: str, tail: str = "") -> str:
    """A JSON path literal to ``keys`` (each quoted), then ``tail`` (``[*]``: every item)."""
    return _lit("$" + "".join('."' + k.replace("\\", "\\\\").replace('"', '\\"') + '"' for k in keys) + tail)


@dataclass(frozen=True)
class _Dialect:
    quote: str
    timestamp: Callable[[str], str]
    flag: Callable[[str], str]
    cell: Callable[[str, tuple[str, ...], str], str]  # (document column, key path, logical type) -> SQL


def _sqlite_cell(doc: str, keys: tuple[str, ...], kind: str) -> str:
    p, t = _path(*keys), f"json_type({doc}, {_path(*keys)})"
    v = f"{doc} ->> {p}"
    return {
        "text": f"CASE WHEN {t} = 'text' THEN {v} END",
        "number": f"CASE WHEN {t} IN ('integer', 'real') THEN CAST({v} AS REAL) END",
        "integer": f"CASE WHEN {t} IN ('integer', 'real') AND {v} = CAST({v} AS INTEGER) THEN CAST({v} AS INTEGER) END",
        "boolean": f"CASE WHEN {t} IN ('true', 'false') THEN {v} END",
        "date": f"CASE WHEN {t} = 'text' THEN date({v}) END",
        "time": f"CASE WHEN {t} = 'text' THEN time({v}) END",
        "keys": f"CASE WHEN {t} = 'array' THEN {doc} -> {p} END",
        "records": f"CASE WHEN {t} = 'array' THEN {doc} -> {p} END",
        "json": f"CASE WHEN {t} <> 'null' THEN {doc} -> {p} END",
    }[kind]


def _pg_cell(doc: str, keys: tuple[str, ...], kind: str) -> str:
    *outer, last = keys
    base = doc + "".join(f" -> {_lit(k)}" for k in outer)
    j, v = f"{base} -> {_lit(last)}", f"{base} ->> {_lit(last)}"
    t = f"json_typeof({j})"
    return {
        "text": f"CASE WHEN {t} = 'string' THEN {v} END",
        "number": f"CASE WHEN {t} = 'number' THEN ({v})::double precision END",
        "integer": f"CASE WHEN {t} = 'number' AND ({v})::numeric = round(({v})::numeric) THEN ({v})::numeric::bigint END",
        "boolean": f"CASE WHEN {t} = 'boolean' THEN ({v})::boolean END",
        "date": f"CASE WHEN {v} ~ '^\\d{{4}}-\\d{{2}}-\\d{{2}}$' THEN ({v})::date END",
        "time": f"CASE WHEN {v} ~ '^\\d{{2}}:\\d{{2}}(:\\d{{2}})?$' THEN ({v})::time END",
        # jsonb, not json: jsonb has equality, so GROUP BY, DISTINCT and = work on these columns
        "keys": f"CASE WHEN {t} = 'array' THEN ({j})::jsonb END",
        "records": f"CASE WHEN {t} = 'array' THEN ({j})::jsonb END",
        "json": f"CASE WHEN {t} <> 'null' THEN ({j})::jsonb END",
    }[kind]


def _mysql_cell(doc: str, keys: tuple[str, ...], kind: str) -> str:
    p = _path(*keys)
    v, t = f"JSON_VALUE({doc}, {p})", f"JSON_TYPE(JSON_EXTRACT({doc}, {p}))"
    numeric = "('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL')"
    return {
        "text": f"CASE WHEN {t} = 'STRING' THEN {v} END",
        "number": f"CASE WHEN {t} IN {numeric} THEN CAST({v} AS DOUBLE) END",
        "integer": f"CASE WHEN {t} IN {numeric} AND CAST({v} AS DOUBLE) = ROUND(CAST({v} AS DOUBLE)) "
                   f"THEN CAST(CAST({v} AS DOUBLE) AS SIGNED) END",
        "boolean": f"CASE WHEN {t} = 'BOOLEAN' THEN {v} IN ('1', 'true') END",
        "date": f"CASE WHEN {t} = 'STRING' THEN CAST({v} AS DATE) END",
        "time": f"CASE WHEN {t} = 'STRING' THEN CAST({v} AS TIME) END",
        "keys": f"CASE WHEN {t} = 'ARRAY' THEN JSON_EXTRACT({doc}, {p}) END",
        "records": f"CASE WHEN {t} = 'ARRAY' THEN JSON_EXTRACT({doc}, {p}) END",
        "json": f"CASE WHEN {t} <> 'NULL' THEN JSON_EXTRACT({doc}, {p}) END",
    }[kind]


# Archived locations (``<name>__archived``), item for item over a file list: the archived
# file at the same place (field, group instance and member, index) from the same URL, else
# null. A top-level file field's list is in ``s.answers``; a group member's in an instance.


def _archive_join(key: str, instance: str, member: str, idx: str, url: str) -> str:
    return (f"formsync_archived_files a ON a.submission_id = s.id AND a.field_key = {_lit(key)} "
            f"AND a.instance = {instance} AND a.member = {_lit(member)} AND a.idx = {idx} AND a.url = {url}")


def _files_sql(dialect: str, doc: str, key: str, member: str = "", instance: str = "-1") -> str:
    """The locations of the file list at ``member`` (else ``key``) of the JSON ``doc`` (a
    submission's answers, or a group instance), as a JSON array; null when no list is there."""
    at = member or key
    if dialect == "sqlite":  # json_group_array takes its rows in the order the inner query gives them
        return (f"CASE WHEN json_type({doc}, {_path(at)}) = 'array' THEN (SELECT json_group_array(o.loc) FROM ("
                f"SELECT a.location AS loc FROM json_each({doc}, {_path(at)}) j LEFT JOIN "
                + _archive_join(key, instance, member, "j.key", "json_extract(j.value, '$.url')")
                + " ORDER BY j.key) o) END")
    if dialect == "postgresql":
        items = f"{doc} -> {_lit(at)}"
        return (f"CASE WHEN json_typeof({items}) = 'array' THEN (SELECT COALESCE(jsonb_agg(a.location ORDER BY j.i), "
                f"'[]'::jsonb) FROM json_array_elements({items}) WITH ORDINALITY j(v, i) LEFT JOIN "
                + _archive_join(key, instance, member, "j.i - 1", "j.v ->> 'url'") + ") END")
    return (f"CASE WHEN JSON_TYPE(JSON_EXTRACT({doc}, {_path(at)})) = 'ARRAY' THEN (SELECT COALESCE(JSON_ARRAYAGG("
            f"a.location ORDER BY j.i), JSON_ARRAY()) FROM JSON_TABLE({doc}, {_path(at, tail='[*]')} COLUMNS ("
            "i FOR ORDINALITY, url TEXT PATH '$.url')) j LEFT JOIN " + _archive_join(key, instance, member, "j.i - 1", "j.url") + ") END")


def _group_files_sql(dialect: str, key: str, members: tuple[str, ...]) -> str:
    """A repeating group's ``<name>__archived``: per instance, an object of its file
    members' locations (``_files_sql``); null for an instance that is not an object."""
    if dialect == "sqlite":
        obj = "json_object(" + ", ".join(f"{_lit(m)}, json({_files_sql(dialect, 'g.value', key, m, 'g.key')})"
                                         for m in members) + ")"
        return (f"CASE WHEN json_type(s.answers, {_path(key)}) = 'array' THEN (SELECT json_group_array(json(o.inst)) "
                f"FROM (SELECT CASE WHEN g.type = 'object' THEN {obj} END AS inst FROM json_each(s.answers, "
                f"{_path(key)}) g ORDER BY g.key) o) END")
    if dialect == "postgresql":
        obj = "jsonb_build_object(" + ", ".join(f"{_lit(m)}, {_files_sql(dialect, 'g.v', key, m, 'g.i - 1')}"
                                                for m in members) + ")"
        return (f"CASE WHEN json_typeof(s.answers -> {_lit(key)}) = 'array' THEN (SELECT COALESCE(jsonb_agg(CASE "
                f"WHEN json_typeof(g.v) = 'object' THEN {obj} END ORDER BY g.i), '[]'::jsonb) FROM "
                f"json_array_elements(s.answers -> {_lit(key)}) WITH ORDINALITY g(v, i)) END")
    inst = f"JSON_EXTRACT(s.answers, CONCAT({_path(key)}, '[', g.i - 1, ']'))"
    # a JSON value from a subquery or a CASE is text to MariaDB: JSON_EXTRACT(.., '$') makes it JSON again
    obj = "JSON_OBJECT(" + ", ".join(f"{_lit(m)}, JSON_EXTRACT({_files_sql(dialect, inst, key, m, 'g.i - 1')}, '$')"
                                     for m in members) + ")"
    return (f"CASE WHEN JSON_TYPE(JSON_EXTRACT(s.answers, {_path(key)})) = 'ARRAY' THEN (SELECT COALESCE("
            f"JSON_ARRAYAGG(JSON_EXTRACT(CASE WHEN JSON_TYPE({inst}) = 'OBJECT' THEN {obj} END, '$') ORDER BY g.i), "
            f"JSON_ARRAY()) FROM JSON_TABLE(s.answers, {_path(key, tail='[*]')} COLUMNS (i FOR ORDINALITY)) g) END")


def _archived_sql(dialect: str, col: Column) -> str:
    assert col.field_key is not None
    if col.type == "records":  # a group's file members
        return _group_files_sql(dialect, col.field_key, tuple(m.name for m in col.members))
    return _files_sql(dialect, "s.answers", col.field_key)


DIALECTS: dict[str, _Dialect] = {
    "sqlite": _Dialect('"', lambda c: f"strftime('%Y-%m-%d %H:%M:%f', {c} / 1000.0, 'unixepoch')",
                       lambda c: c, _sqlite_cell),
    "postgresql": _Dialect('"', lambda c: f"to_timestamp({c} / 1000.0)", lambda c: c, _pg_cell),
    "mysql": _Dialect("`", lambda c: f"TIMESTAMPADD(MICROSECOND, {c} * 1000, TIMESTAMP '1970-01-01 00:00:00')",
                      lambda c: f"({c} <> 0)", _mysql_cell),
}


def column_sql(dialect: str, col: Column) -> str:
    """The SQL giving one column of a form's table on ``dialect`` (over ``s`` and ``r``)."""
    d = DIALECTS[dialect]
    if col.source == "own":
        sql = _OWN_SQL[col.name]
        return d.timestamp(sql) if col.type == "timestamp" else d.flag(sql) if col.type == "boolean" else sql
    assert col.field_key is not None
    if col.source == "archived":
        return _archived_sql(dialect, col)
    if col.source == "label":
        return d.cell("s.display", (col.field_key,), "text")
    keys = (col.field_key,) if col.row_key is None else (col.field_key, col.row_key)
    return d.cell("s.answers", keys, col.type)


def select_sql(dialect: str, view: FormSchema, *, where: str = "") -> str:
    """The ``SELECT`` a view is made of (``where``, SQL over ``s``, narrows it further)."""
    q = DIALECTS[dialect].quote
    parts = [f"{column_sql(dialect, c)} AS {q}{c.name}{q}" for c in view.columns]
    # A submission the service no longer has (``formsync sync --reconcile``) is left out.
    cond = f"s.form_id = {_lit(view.form_id)} AND s.gone_at IS NULL" + (f" AND ({where})" if where else "")
    return (f"SELECT {', '.join(parts)} FROM formsync_submissions s "
            f"LEFT JOIN formsync_requests r ON r.id = s.request_id WHERE {cond}")
