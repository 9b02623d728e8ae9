"""The typed view of each form: ``formsync_form_<slug>``, one row per submission, its
own columns then one column per field, typed from the field's type, built by each
database's JSON functions over ``formsync_submissions`` (``answers`` and ``display``).

Everything here is pure (names, kinds, the statement text); ``Store`` runs it. A view is
rebuilt when the form's field list changes (a new form or field, ``fields.list`` read
again), never per event."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

VIEW_PREFIX = "formsync_form_"
MAX_NAME = 63  # PostgreSQL's identifier limit (MySQL's is 64)

# The column kind of each field type of fields.list; types it does not name are JSON.
KINDS: dict[str, str] = {
    **dict.fromkeys(("text", "textarea", "email", "phone", "url", "hidden", "time"), "text"),
    **dict.fromkeys(("number", "calculated"), "number"),
    **dict.fromkeys(("rating", "scale"), "integer"),
    "switch": "boolean",
    "date": "date",
    **dict.fromkeys(("select", "radio", "decision", "picture-choice"), "choice"),
    # lists (checkbox, ranking), matrices, groups, files, signatures, payments, bookings
    "json": "json", "boolean": "boolean",
}
NOT_ANSWERED = frozenset({"documents"})  # field types that never hold an answer

# The submission's own columns, first in every view: (name, SQL building it, kind).
FIXED: tuple[tuple[str, str, str], ...] = (
    ("submission_id", "s.id", "text"),
    ("form_id", "s.form_id", "text"),
    ("request_id", "s.request_id", "text"),
    ("external_id", "r.external_id", "text"),
    ("submitted_at", "s.submitted_at", "timestamp"),
    ("updated_at", "s.updated_at", "timestamp"),
    ("respondent_email", "s.respondent_email", "text"),
    ("language", "s.language", "text"),
    ("completed", "s.is_completed", "flag"),
    ("edit_count", "s.edit_count", "plain"),
)
FIXED_NAMES = frozenset(name for name, _, _ in FIXED)


@dataclass(frozen=True)
class ViewField:
    """A field as its view sees it: its key, its type (from fields.list, or the kind of
    a learnt value), its title, and whether the last fields.list read listed it."""

    key: str
    type: str
    title: str | None = None
    listed: bool = True


@dataclass(frozen=True)
class ViewColumn:
    """A column of a form's view: its name, its kind (text, number, integer, boolean,
    date, timestamp, json) and the field key it comes from (None for the submission's own)."""

    name: str
    kind: str
    field_key: str | None = None


@dataclass(frozen=True)
class FormView:
    """A form's view: its name, the form, and its columns in order."""

    name: str
    form_id: str
    columns: tuple[ViewColumn, ...]


def kind_of(field_type: str) -> str:
    """The column kind of a field type (JSON for a type this distribution does not know)."""
    return KINDS.get(field_type, "json")


def value_type(value: Any) -> str:
    """The type a field learnt from one answer value gets: ``boolean``, ``number``,
    ``text`` or ``json``."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "text"
    return "json"


def _slug(text: str, limit: int) -> str:
    """``text`` as a lower-case SQL name part; a hash of ``text`` is appended when the
    name had to change it (case, punctuation, length), so two texts never meet."""
    slug = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_") or "x"
    if slug[0].isdigit():
        slug = "f_" + slug
    if slug == text and len(slug) <= limit:
        return slug
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{slug[:limit - 9]}_{digest}"


def view_name(form_id: str) -> str:
    """The view of ``form_id``: ``formsync_form_`` then the id in lower case (with a short
    hash of the id when lower-casing or shortening changed it): stable and collision-safe."""
    return VIEW_PREFIX + _slug(form_id, MAX_NAME - len(VIEW_PREFIX))


def view_columns(form_id: str, fields: Sequence[ViewField]) -> FormView:
    """The columns of ``form_id``'s view over ``fields`` (in their order): the fixed ones,
    then one per field named after its key (``<name>_label`` beside a choice)."""
    columns = [ViewColumn(n, "timestamp" if k == "timestamp" else "boolean" if k == "flag" else
                          "integer" if k == "plain" else k) for n, _, k in FIXED]
    taken = set(FIXED_NAMES)
    for f in fields:
        if f.type in NOT_ANSWERED:
            continue
        name = _slug(f.key, MAX_NAME - len("_label"))
        while name in taken or f"{name}_label" in taken:
            name = _slug(name + "_", MAX_NAME - len("_label"))
        kind = kind_of(f.type)
        columns.append(ViewColumn(name, "text" if kind == "choice" else kind, f.key))
        taken.add(name)
        if kind == "choice":
            columns.append(ViewColumn(f"{name}_label", "label", f.key))
            taken.add(f"{name}_label")
    return FormView(view_name(form_id), form_id, tuple(columns))


# -- each database's JSON functions ---------------------------------------------------------


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _path(key: str) -> str:
    return _lit('$."' + key.replace("\\", "\\\\").replace('"', '\\"') + '"')


@dataclass(frozen=True)
class _Dialect:
    quote: str
    timestamp: Callable[[str], str]
    flag: Callable[[str], str]
    cell: Callable[[str, str, str], str]  # (document column, key, kind) -> SQL


def _sqlite_cell(doc: str, key: str, kind: str) -> str:
    p, t = _path(key), f"json_type({doc}, {_path(key)})"
    return {
        "text": f"CASE WHEN {t} = 'text' THEN {doc} ->> {p} END",
        "label": f"{doc} ->> {p}",
        "number": f"CASE WHEN {t} IN ('integer', 'real') THEN CAST({doc} ->> {p} AS REAL) END",
        "integer": f"CASE WHEN {t} IN ('integer', 'real') THEN CAST({doc} ->> {p} AS INTEGER) END",
        "boolean": f"CASE WHEN {t} IN ('true', 'false') THEN {doc} ->> {p} END",
        "date": f"CASE WHEN {t} = 'text' THEN date({doc} ->> {p}) END",
        "json": f"{doc} -> {p}",
    }[kind]


def _pg_cell(doc: str, key: str, kind: str) -> str:
    k = _lit(key)
    j, v, t = f"{doc} -> {k}", f"{doc} ->> {k}", f"json_typeof({doc} -> {k})"
    return {
        "text": f"CASE WHEN {t} = 'string' THEN {v} END",
        "label": v,
        "number": f"CASE WHEN {t} = 'number' THEN ({v})::double precision END",
        "integer": f"CASE WHEN {t} = 'number' THEN round(({v})::numeric)::bigint END",
        "boolean": f"CASE WHEN {t} = 'boolean' THEN ({v})::boolean END",
        "date": f"CASE WHEN {v} ~ '^\\d{{4}}-\\d{{2}}-\\d{{2}}$' THEN ({v})::date END",
        "json": f"CASE WHEN {t} <> 'null' THEN {j} END",
    }[kind]


def _mysql_cell(doc: str, key: str, kind: str) -> str:
    p = _path(key)
    v, t = f"JSON_VALUE({doc}, {p})", f"JSON_TYPE(JSON_EXTRACT({doc}, {p}))"
    return {
        "text": f"CASE WHEN {t} = 'STRING' THEN {v} END",
        "label": v,
        "number": f"CASE WHEN {t} IN ('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL') THEN CAST({v} AS DOUBLE) END",
        "integer": f"CASE WHEN {t} IN ('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL') "
                   f"THEN CAST(ROUND(CAST({v} AS DOUBLE)) AS SIGNED) END",
        "boolean": f"CASE WHEN {t} = 'BOOLEAN' THEN {v} IN ('1', 'true') END",
        "date": f"CASE WHEN {t} = 'STRING' THEN CAST({v} AS DATE) END",
        "json": f"CASE WHEN {t} <> 'NULL' THEN JSON_EXTRACT({doc}, {p}) END",
    }[kind]


DIALECTS: dict[str, _Dialect] = {
    "sqlite": _Dialect('"', lambda c: f"strftime('%Y-%m-%d %H:%M:%f', {c} / 1000.0, 'unixepoch')",
                       lambda c: c, _sqlite_cell),
    "postgresql": _Dialect('"', lambda c: f"to_timestamp({c} / 1000.0)", lambda c: c, _pg_cell),
    "mysql": _Dialect("`", lambda c: f"TIMESTAMPADD(MICROSECOND, {c} * 1000, TIMESTAMP '1970-01-01 00:00:00')",
                      lambda c: f"({c} <> 0)", _mysql_cell),
}


def select_sql(dialect: str, view: FormView, *, where: str = "") -> str:
    """The ``SELECT`` a view is made of (``where``, SQL over ``s``, narrows it further)."""
    d = DIALECTS[dialect]
    q = d.quote
    parts = []
    for (_, sql, kind), col in zip(FIXED, view.columns, strict=False):
        expr = d.timestamp(sql) if kind == "timestamp" else d.flag(sql) if kind == "flag" else sql
        parts.append(f"{expr} AS {q}{col.name}{q}")
    for col in view.columns[len(FIXED):]:
        assert col.field_key is not None
        doc = "s.display" if col.kind == "label" else "s.answers"
        parts.append(f"{d.cell(doc, col.field_key, col.kind)} AS {q}{col.name}{q}")
    cond = f"s.form_id = {_lit(view.form_id)}" + (f" AND ({where})" if where else "")
    return (f"SELECT {', '.join(parts)} FROM formsync_submissions s "
            f"LEFT JOIN formsync_requests r ON r.id = s.request_id WHERE {cond}")


def fields_from_list(items: Iterable[Mapping[str, Any]]) -> list[ViewField]:
    """``fields.list`` items (as dicts) as view fields, in order; fields that never hold
    an answer (documents) are left out."""
    return [ViewField(str(i["key"]), str(i.get("type") or "json"), i.get("title") or None)
            for i in items if i.get("type") not in NOT_ANSWERED]


# -- reading answers per key (the wide export) -------------------------------------------------

def answer_json(dialect: str, doc: str, key: str) -> str:
    """SQL giving the JSON text of one key of the JSON document column ``doc`` (NULL when
    the key is absent), in one lookup of the document."""
    if dialect == "sqlite":
        return f"{doc} -> {_path(key)}"
    if dialect == "postgresql":
        return f"({doc} -> {_lit(key)})::text"
    return f"JSON_EXTRACT({doc}, {_path(key)})"
