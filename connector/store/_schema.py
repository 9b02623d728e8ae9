"""The data contract: one form's table as a pure function of its field list.

``form_schema`` turns a form's stored field descriptors (``fields.list``, kept in
``formsync_form_fields``) into ordered columns, each with a name, a logical type and the
source of its value. Every reader of a form's answers is generated from it: the typed
view on each database (``views``), and the wide export, its Arrow (Parquet), CSV and XLSX
cells and the pandas frames (``pipelines.export.columns``). No type is ever inferred from the
answers, so two exports of one form have the same columns and types whatever was
answered in between.

The rules (docs/your-data.md, "The data contract"):

* the submission's own columns come first (``OWN``), then one or more columns per field
  in field-list order, answered or not;
* a choice field (select, radio, decision, picture-choice) is its option key and
  ``<name>_label``; a checkbox or ranking field is its list of keys (``keys``) and
  ``<name>_label``, the labels as the service's display text;
* a matrix is one text column per row, ``<name>_<row>``, holding the column key;
* a repeating group and a file list (file, signature) are ``records``: lists of objects
  whose members are typed by the member descriptors (a file: name, type, size, url); a
  file list has ``<name>__archived`` beside it (``keys``): where ``formsync files`` keeps
  each file's bytes, item for item in the answer's order, null for a file not archived
  (or archived from another URL than the answer's now); a group with file or signature
  members has ``<name>__archived`` beside it too (``records``): per instance, an object of
  those members' locations, item for item as above;
* number and calculated fields are ``number`` (one floating type always); rating and scale
  ``integer``; date ``date``; time ``time``; switch ``boolean``; hidden text;
* payment, booking and any type this distribution does not know are ``json``;
  documents fields never hold an answer and have no column;
* column names are SQL-safe (``sql_name``): a field key that is already lower-case
  ``[a-z0-9_]`` keeps its name, any other gets a short hash of the key appended;
* a field no longer listed keeps its column while stored answers have it (the caller
  passes it with ``listed=False``).

The store's other tables are declared here too, in the same vocabulary: the long answers
table (``LONG``), the requests (``REQUEST_COLUMNS``) and an outreach job's campaign rows
(``CAMPAIGN_COLUMNS``); the exports, the frames and the load write them from these."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

LogicalType = Literal["text", "number", "integer", "boolean", "date", "time", "timestamp", "keys", "records", "json"]
LOGICAL_TYPES: tuple[str, ...] = ("text", "number", "integer", "boolean", "date", "time", "timestamp", "keys",
                                  "records", "json")
# Where a column's value comes from: the submission row (or its request's), the answer of
# its field, the answer's display text, one row of a matrix answer, or where ``formsync
# files`` archived the answer's files (``formsync_archived_files``).
Source = Literal["own", "answer", "label", "row", "archived"]
ARCHIVED_SUFFIX = "__archived"  # a file field's column of archived locations: ``<name>__archived``
VIEW_PREFIX = "formsync_"
LEGACY_PREFIX = "formsync_form_"  # the views' names before they were named from the form's name
MAX_NAME = 63  # PostgreSQL's identifier limit (MySQL's is 64)

_SCALAR_TYPES: dict[str, LogicalType] = {
    **dict.fromkeys(("text", "textarea", "email", "phone", "url", "hidden"), "text"),
    **dict.fromkeys(("number", "calculated"), "number"),
    **dict.fromkeys(("rating", "scale"), "integer"),
    "switch": "boolean", "date": "date", "time": "time",
}
CHOICE_TYPES = frozenset({"select", "radio", "decision", "picture-choice"})
MULTI_TYPES = frozenset({"checkbox", "ranking"})
FILE_TYPES = frozenset({"file", "signature"})
NOT_ANSWERED = frozenset({"documents"})  # field types that never hold an answer


@dataclass(frozen=True)
class Column:
    """One column of a form's table: its name, its logical type, where its value comes
    from (``source``), the field it belongs to (None for the submission's own), the
    matrix row it holds (``source == "row"``), its members (``records``: the objects'
    members, each a ``Column`` named by the member key) and the question's title."""

    name: str
    type: LogicalType
    source: Source = "answer"
    field_key: str | None = None
    row_key: str | None = None
    members: tuple[Column, ...] = ()
    title: str | None = None


def _own(*columns: tuple[str, LogicalType]) -> tuple[Column, ...]:
    """Columns of a row's own values (``source == "own"``), by name and logical type."""
    return tuple(Column(n, t, "own") for n, t in columns)


# The submission's own columns, first in every table: name and type; ``own`` gives where.
OWN: tuple[Column, ...] = _own(
    ("submission_id", "text"), ("form_id", "text"), ("request_id", "text"), ("external_id", "text"),
    ("submitted_at", "timestamp"), ("updated_at", "timestamp"), ("respondent_email", "text"),
    ("language", "text"), ("completed", "boolean"), ("edit_count", "integer"), ("stored_at", "timestamp"))
OWN_NAMES = frozenset(c.name for c in OWN)
# When the service no longer had the submission (``formsync sync --reconcile``): the last
# column of the wide and long tables only when gone rows are asked for (``include_gone``),
# so the default outputs keep their columns. Its name is reserved in every table.
GONE_AT = Column("gone_at", "timestamp", "own")
# The long answers table (long exports, ``frames.long``, the load's ``answers``): one row
# per answer, or per matrix row or group instance and member. ``value`` is the answer as
# plain text, ``display_text`` the form's text of it; ``archived`` is where ``formsync
# files`` keeps a file or signature answer's files (a top-level one, or a group member's
# of one instance), item for item as in ``<name>__archived``; null on any other row.
LONG: tuple[Column, ...] = (
    Column("submission_id", "text", "own"), Column("form_id", "text", "own"), Column("field_key", "text", "own"),
    Column("instance", "integer", "own"), Column("row_key", "text", "own"), Column("member_key", "text", "own"),
    Column("value", "text", "answer"), Column("display_text", "text", "label"),
    Column("archived", "keys", "archived"))
FILE_MEMBERS: tuple[Column, ...] = (Column("name", "text"), Column("type", "text"), Column("size", "number"),
                                    Column("url", "text"))


# The requests table (requests exports, ``frames.requests``, the load's ``requests``): one
# row per request, its newest state. ``metadata`` is the caller's own data as JSON text,
# kept as sent (its keys are not the form's): text in every destination.
REQUEST_COLUMNS: tuple[Column, ...] = _own(
    ("request_id", "text"), ("form_id", "text"), ("status", "text"), ("outcome", "text"),
    ("delivery_status", "text"), ("external_id", "text"), ("recipient_email", "text"), ("recipient_name", "text"),
    ("url", "text"), ("submission_id", "text"), ("created_at", "timestamp"), ("expires_at", "timestamp"),
    ("completed_at", "timestamp"), ("expired_at", "timestamp"), ("canceled_at", "timestamp"),
    ("cancel_reason", "text"), ("updated_at", "timestamp"), ("metadata", "text"))
# The campaign rows (the load's ``campaign_rows``): one row per sheet row an outreach job's
# ledger holds, with its request as the store knows it (``store.campaign.rows``); the
# request's columns null for a row without one.
CAMPAIGN_COLUMNS: tuple[Column, ...] = _own(
    ("job", "text"), ("row_key", "text"), ("row_number", "integer"), ("state", "text"), ("request_id", "text"),
    ("status", "text"), ("delivery_status", "text"), ("recipient_email", "text"), ("recipient_name", "text"),
    ("external_id", "text"), ("url", "text"), ("created_at", "timestamp"), ("opened_at", "timestamp"),
    ("started_at", "timestamp"), ("last_activity_at", "timestamp"), ("completed_at", "timestamp"),
    ("expired_at", "timestamp"), ("canceled_at", "timestamp"), ("reminders_sent", "integer"),
    ("is_test", "boolean"), ("last_reminded_at", "timestamp"), ("cancel_reason", "text"))


@dataclass(frozen=True)
class StoredField:
    """A field as the store keeps it: key (of its answer), type (from ``fields.list``),
    title, its shape (``options`` of a choice, ``rows`` of a matrix, ``members`` of a
    group: lists of ``{key, ...}``), whether the last ``fields.list`` read listed it, and
    ``name``, its columns' name when not the key's (a type variant, ``variant_key``)."""

    key: str
    type: str
    title: str | None = None
    shape: tuple[Mapping[str, Any], ...] = field(default=())
    listed: bool = True
    name: str | None = None


@dataclass(frozen=True)
class FormSchema:
    """A form's table: the form, its view's name and its columns in order."""

    form_id: str
    name: str
    columns: tuple[Column, ...]

    def fields(self) -> tuple[Column, ...]:
        """The columns after the submission's own."""
        return self.columns[len(OWN):]


def sql_name(text: str, limit: int = MAX_NAME) -> str:
    """``text`` as a lower-case SQL name; a hash of ``text`` is appended when the name had
    to change it (case, punctuation, length), so two texts never meet."""
    slug = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_") or "x"
    if slug[0].isdigit():
        slug = "f_" + slug
    if slug == text and len(slug) <= limit:
        return slug
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{slug[:limit - 9]}_{digest}"


def legacy_view_name(form_id: str) -> str:
    """The name views had before they were named from the form's name: ``formsync_form_``
    then the id in lower case (with a short hash of the id when lower-casing or
    shortening changed it). Kept as an alias of the view for one release."""
    return LEGACY_PREFIX + sql_name(form_id, MAX_NAME - len(LEGACY_PREFIX))


def view_name(form_id: str, form_name: str | None = None) -> str:
    """The view (and warehouse table) of ``form_id`` named ``form_name``: ``formsync_``,
    the name as lower-case ``[a-z0-9_]`` (shortened to fit PostgreSQL's 63 characters),
    ``_`` and six hex digits of a hash of the id, so two forms of one name never meet
    (``Contact`` -> ``formsync_contact_1a2b3c``). Without a name, ``legacy_view_name``."""
    if not form_name:
        return legacy_view_name(form_id)
    suffix = "_" + hashlib.sha1(form_id.encode()).hexdigest()[:6]
    slug = re.sub(r"[^a-z0-9]+", "_", form_name.lower()).strip("_") or "form"
    return VIEW_PREFIX + slug[:MAX_NAME - len(VIEW_PREFIX) - len(suffix)].rstrip("_") + suffix


def shape_of(item: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """What the store keeps of a ``fields.list`` item's shape: a choice's ``options``, a
    matrix's ``rows``, a group's ``members`` (key, type, title and their own shape)."""
    if item.get("type") == "matrix":
        return [{"key": str(r["key"]), "label": r.get("label")} for r in item.get("rows") or []]
    if item.get("type") == "group":
        return [{"key": str(m["key"]), "type": str(m.get("type") or "json"), "title": m.get("title"),
                 **({"shape": s} if (s := shape_of(m)) else {})} for m in item.get("members") or []]
    options = item.get("options")
    return [dict(o) for o in options] if options else None


def variant_key(key: str, field_type: str) -> str:
    """The stored key (and column name) of field ``key`` after its type changed to
    ``field_type`` on the form: ``<key>__<type>``; the old column keeps its type."""
    return f"{key}__{field_type.replace('-', '_')}"


def same_columns(old_type: str, new_type: str) -> bool:
    """Whether a field of ``old_type`` and one of ``new_type`` make the same columns with
    the same types (``text`` to ``email`` does; ``text`` to ``number`` does not)."""
    def kinds(t: str) -> list[tuple[str, str]]:
        return [(c.type, c.source) for c in field_columns(StoredField("k", t))]
    return kinds(old_type) == kinds(new_type)


def _member(m: Mapping[str, Any]) -> Column:
    """A group member as a member column: text, number, integer and boolean types as at
    the top level, a choice as its key, a multi-choice as keys, a date or time as its ISO
    text, anything else (a file, a matrix, ...) as JSON text."""
    t = str(m.get("type") or "json")
    typed: LogicalType = _SCALAR_TYPES.get(t, "json")
    if t in CHOICE_TYPES or typed in ("date", "time"):
        typed = "text"
    elif t in MULTI_TYPES:
        typed = "keys"
    return Column(str(m["key"]), typed, title=m.get("title"))


class _Names:
    """Column names handed out so far: each new one is made unique."""

    def __init__(self) -> None:
        self.taken = {*OWN_NAMES, GONE_AT.name}

    def take(self, text: str, *suffixes: str) -> str:
        room = MAX_NAME - max((len(s) for s in suffixes), default=0)
        name = sql_name(text, room)
        while name in self.taken or any(name + s in self.taken for s in suffixes):
            name = sql_name(name + "_", room)
        self.taken.update([name, *(name + s for s in suffixes)])
        return name


def field_columns(f: StoredField, names: _Names | None = None) -> list[Column]:
    """The columns of one field (none for a field that never holds an answer); ``names``
    holds the names the table has handed out already."""
    names = names or _Names()
    t, key, title, base = f.type, f.key, f.title, f.name or f.key
    if t in NOT_ANSWERED:
        return []
    if t in CHOICE_TYPES or t in MULTI_TYPES:
        name = names.take(base, "_label")
        return [Column(name, "keys" if t in MULTI_TYPES else "text", "answer", key, title=title),
                Column(f"{name}_label", "text", "label", key, title=title)]
    if t == "matrix" and f.shape:
        prefix = sql_name(base, MAX_NAME - 16)
        return [Column(names.take(f"{prefix}_{r['key']}"), "text", "row", key, str(r["key"]), title=title)
                for r in f.shape]
    if t == "group" and f.shape:
        files = tuple(Column(str(m["key"]), "keys") for m in f.shape if m.get("type") in FILE_TYPES)
        if not files:
            return [Column(names.take(base), "records", "answer", key, members=tuple(_member(m) for m in f.shape),
                           title=title)]
        name = names.take(base, ARCHIVED_SUFFIX)
        return [Column(name, "records", "answer", key, members=tuple(_member(m) for m in f.shape), title=title),
                Column(name + ARCHIVED_SUFFIX, "records", "archived", key, members=files, title=title)]
    if t in FILE_TYPES:
        name = names.take(base, ARCHIVED_SUFFIX)
        return [Column(name, "records", "answer", key, members=FILE_MEMBERS, title=title),
                Column(name + ARCHIVED_SUFFIX, "keys", "archived", key, title=title)]
    return [Column(names.take(base), _SCALAR_TYPES.get(t, "json"), "answer", key, title=title)]


def form_schema(form_id: str, fields: Iterable[StoredField], name: str | None = None) -> FormSchema:
    """The table of ``form_id`` over ``fields`` (in their order): the submission's own
    columns, then each field's (``field_columns``); ``name`` is its view's (default
    ``view_name(form_id)``)."""
    names = _Names()
    columns = list(OWN)
    for f in fields:
        columns += field_columns(f, names)
    return FormSchema(form_id, name or view_name(form_id), tuple(columns))


def fields_from_list(items: Iterable[Mapping[str, Any]]) -> list[StoredField]:
    """``fields.list`` items (as dicts) as stored fields, in order; fields that never hold
    an answer (documents) are left out."""
    return [StoredField(str(i["key"]), str(i.get("type") or "json"), i.get("title") or None,
                        tuple(shape_of(i) or ()))
            for i in items if i.get("type") not in NOT_ANSWERED]


def by_field(columns: Sequence[Column]) -> dict[str, list[Column]]:
    """``columns`` grouped by field key (fields in order)."""
    out: dict[str, list[Column]] = {}
    for c in columns:
        if c.field_key is not None:
            out.setdefault(c.field_key, []).append(c)
    return out


_PLAIN = frozenset({"text", "number", "integer", "boolean", "date", "time"})


def display_schema(schema: FormSchema) -> FormSchema:
    """The human-readable variant of a form's table (``formsync export --display``): the
    submission's own columns, then one column per field: a text, number, integer,
    boolean, date or time field as its value, any other (choices, lists, matrices,
    groups, files, ...) as the service's display text (``source == "label"``). Each
    column keeps the question's title, for headers."""
    names = _Names()
    columns = list(OWN)
    for key, cols in by_field(schema.fields()).items():
        only = cols[0]
        if len(cols) == 1 and only.source == "answer" and only.type in _PLAIN:
            names.taken.add(only.name)
            columns.append(only)
        else:
            columns.append(Column(names.take(key), "text", "label", key, title=only.title))
    return FormSchema(schema.form_id, schema.name, tuple(columns))
