"""Sheet columns and what they become in a ``requests.create``: each column has a target
(``email``, ``name``, ``externalId``, ``readonly``, ``expiresAt``, ``document[.<key>]``,
``metadata.<key>``, ``prefill.<key>``, ``context.<key>``), and each target kind has one
rule in ``COLUMN_RULES`` that checks the cell and puts it in the row's params."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel

from connector.models import FieldDescriptor

from .formats import DATES, read_as
from .values import EMAIL_RE, TEXT_FORMATS, Problem, prefill_value

RECIPIENT_COLUMNS = ("email", "name")
SPECIAL_COLUMNS = ("externalId", "readonly", "expiresAt", "document")
KEYED_PREFIXES = ("metadata.", "document.")
# Headers people write for the recipient and id columns (compared as ``header_key`` does).
# A recipient's (email, name) wins over a form field key the header also matches, so a
# ``Full Name`` column greets the recipient; a field key wins over an id's synonym.
SYNONYMS = {
    "email": ("e-mail", "mail", "email address", "e-mail address", "mail address"),
    "name": ("full name", "recipient name", "contact name"),
    "externalId": ("external id", "id", "ref", "reference", "external ref", "external reference", "record id"),
}
RECIPIENT_SYNONYMS = ("email", "name")
# A mapping's value: one target, or several a column feeds (``["name", "full_name"]``).
ColumnMapping = Mapping[str, str | Sequence[str]]
TARGETS_ACCEPTED = ("email, name, externalId, readonly, expiresAt, document, document.<key>, metadata.<key>, "
                    "or a field key (also as prefill.<key>, context.<key> for a hidden field)")


class RowParams(BaseModel):
    """The ``requests.create`` params a valid row maps to."""

    recipient: dict[str, str] = {}
    prefill: dict[str, Any] = {}
    context: dict[str, str] = {}
    metadata: dict[str, str] = {}
    readonly: list[str] = []
    externalId: str | None = None
    expiresAt: int | None = None
    # Documents block field key ('' when the form has one block) -> the local file's path
    documents: dict[str, str] = {}


@dataclass
class _Row:
    """A row being mapped: the form's fields by key and the params so far."""

    fields: Mapping[str, FieldDescriptor]
    readings: Mapping[str, str] = field(default_factory=dict)  # column -> its date order or decimal mark
    out: RowParams = field(default_factory=RowParams)
    readonly: tuple[str, str] | None = None  # (column, cell), checked once the prefill is known

    def keys(self, keep: Callable[[FieldDescriptor], bool] = lambda f: True) -> str:
        """The keys of the fields ``keep`` selects, as an accepted-values text."""
        return ", ".join(sorted(k for k, f in self.fields.items() if keep(f)))


# A rule gets (row, column, target key, cell) and returns the problem with the cell, if any.
Rule = Callable[[_Row, str, str, str], Problem | None]


@dataclass(frozen=True)
class ColumnRule:
    """How a target kind is written (``none``: bare, ``required``: ``kind.<key>``,
    ``optional``: either) and the rule applied to its non-empty cells."""

    key: Literal["none", "required", "optional"]
    apply: Rule

    def fits(self, dot: str, key: str) -> bool:
        return {"none": not dot, "required": bool(key), "optional": not dot or bool(key)}[self.key]


def _recipient(name: str) -> Rule:
    def rule(row: _Row, column: str, _key: str, cell: str) -> Problem | None:
        if name == "email" and not EMAIL_RE.match(cell.strip()):
            return Problem(column=column, problem=f"{cell!r} is not an email address",
                           accepted=TEXT_FORMATS["email"][2])
        row.out.recipient[name] = cell.strip()
        # A form asking for the same key (a Contact form's name or email) gets it prefilled too.
        same = row.fields.get(name) if header_key(column) == name else None
        if same is not None and same.prefillable and not same.context:
            value, problem = prefill_value(same, cell)
            if problem is None:
                row.out.prefill[name] = value
        return None
    return rule


def _external_id(row: _Row, _column: str, _key: str, cell: str) -> Problem | None:
    row.out.externalId = cell.strip()
    return None


def _readonly(row: _Row, column: str, _key: str, cell: str) -> Problem | None:
    row.readonly = (column, cell)
    return None


def _expires_at(row: _Row, column: str, _key: str, cell: str) -> Problem | None:
    try:
        row.out.expiresAt = parse_expiry(cell, row.readings.get(column))
    except ValueError:
        return Problem(column=column, problem=f"{cell!r} is not a date or time",
                       accepted="an ISO date or datetime, epoch milliseconds, dd/mm/yyyy, mm/dd/yyyy or dd.mm.yyyy")
    return None


def _metadata(row: _Row, _column: str, key: str, cell: str) -> Problem | None:
    row.out.metadata[key] = cell
    return None


def _document(row: _Row, column: str, key: str, cell: str) -> Problem | None:
    f = row.fields.get(key) if key else None
    if key and (f is None or f.type != "documents"):
        return Problem(column=column, problem=f"{key!r} is not a documents field of this form",
                       accepted=row.keys(lambda f: f.type == "documents") or "(none)")
    row.out.documents[key] = cell.strip()
    return None


def _context(row: _Row, column: str, key: str, cell: str) -> Problem | None:
    f = row.fields.get(key)
    if f is None:
        return Problem(column=column, problem=f"{key!r} is not a field of this form", accepted=row.keys())
    if not f.context:
        return Problem(column=column, problem=f"{key!r} is not a hidden field", accepted=row.keys(lambda f: f.context))
    row.out.context[key] = cell
    return None


def _prefill(row: _Row, column: str, key: str, cell: str) -> Problem | None:
    f = row.fields.get(key)
    if f is None:
        return Problem(column=column, problem=f"{key!r} is not a field of this form", accepted=row.keys())
    if f.context:  # a hidden field is filled through the context
        row.out.context[key] = cell
        return None
    if not f.prefillable:
        return Problem(column=column, problem=f"{key!r} is a {f.type} field, which cannot be prefilled",
                       accepted=row.keys(lambda f: f.prefillable))
    value, problem = prefill_value(f, cell, row.readings.get(column))
    if problem is not None:
        return problem.model_copy(update={"column": column})
    row.out.prefill[key] = value
    return None


COLUMN_RULES: dict[str, ColumnRule] = {
    "email": ColumnRule("none", _recipient("email")),
    "name": ColumnRule("none", _recipient("name")),
    "externalId": ColumnRule("none", _external_id),
    "readonly": ColumnRule("none", _readonly),
    "expiresAt": ColumnRule("none", _expires_at),
    "document": ColumnRule("optional", _document),
    "metadata": ColumnRule("required", _metadata),
    "prefill": ColumnRule("required", _prefill),
    "context": ColumnRule("required", _context),
}


def parse_expiry(text: str, order: str | None = None) -> int:
    """Epoch milliseconds from digits (taken as they are), an ISO date/datetime (UTC when
    it has no offset) or a date as sheets write it in the column's day/month ``order``;
    ``ValueError`` otherwise."""
    s = text.strip()
    if s.isdigit():
        return int(s)
    try:
        dt = _iso_time(s)
    except ValueError:
        day = read_as(DATES, s, order)
        if day is None:
            raise
        dt = datetime(day.year, day.month, day.day)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _iso_time(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def plain_expiry(text: str) -> bool:
    """Whether an ``expiresAt`` cell reads the same in every column format: epoch
    milliseconds or an ISO date/datetime."""
    s = text.strip()
    try:
        return s.isdigit() or bool(_iso_time(s))
    except ValueError:
        return False


def header_key(name: str) -> str:
    """A header as it is compared: lower case, without surrounding spaces, ``-``, ``_``
    or spaces (``E-mail`` and ``email``, ``Full Name`` and ``full_name`` are the same)."""
    return "".join(c for c in name.strip().lower() if c not in "-_ \t")


def _named(name: str, fields: Mapping[str, FieldDescriptor]) -> str | None:
    """The target a header or bare target names as it is written: a recipient or special
    column, else a form field key (``context.<key>`` for a hidden field)."""
    key = header_key(name)
    special = {header_key(c): c for c in (*RECIPIENT_COLUMNS, *SPECIAL_COLUMNS)}
    if key in special:
        return special[key]
    f = next((f for k, f in fields.items() if header_key(k) == key), None)
    if f is not None:
        return f"context.{f.key}" if f.context else f"prefill.{f.key}"
    return None


_SYNONYMS = {header_key(s): target for target, names in SYNONYMS.items() for s in names}


def mapping_targets(given: str | Sequence[str]) -> tuple[str, ...]:
    """A mapping's value as the targets it names: one (a text) or several (a list)."""
    return (given,) if isinstance(given, str) else tuple(given)


def column_targets(column: str, fields: Mapping[str, FieldDescriptor], mapping: ColumnMapping) -> tuple[str, ...]:
    """Where a column goes: ``mapping`` first (every target it gives, as ``mapping_target``
    reads it, or as written when it reads nothing); else one target matched as
    ``header_key`` compares them: a recipient or special column, a synonym of ``email`` or
    ``name``, a field key, a synonym of ``externalId``. Empty when the column is unknown."""
    given = mapping.get(column)
    if given is None:
        given = next((t for c, t in mapping.items() if header_key(c) == header_key(column)), None)
    if given is not None:
        return tuple(mapping_target(t, fields) or t for t in mapping_targets(given))
    if column.startswith(KEYED_PREFIXES) or column.startswith(("prefill.", "context.")):
        return (column,)
    synonym = _SYNONYMS.get(header_key(column))
    special = _named(column, fields)
    if synonym in RECIPIENT_SYNONYMS and (special is None or "." in special):
        return (synonym,)
    found = special or synonym
    return (found,) if found is not None else ()


def mapping_target(target: str, fields: Mapping[str, FieldDescriptor]) -> str | None:
    """A mapping target as the rules read it (a bare field key becomes ``prefill.<key>``,
    or ``context.<key>`` for a hidden field), or None when it is no target of this form:
    an unknown kind, or a ``prefill``/``context``/``document`` key the form does not have
    as such a field."""
    kind, dot, key = target.strip().partition(".")
    if not dot:
        named = _named(kind, fields)
        return mapping_target(named, fields) if named is not None and "." in named else named
    rule = COLUMN_RULES.get(kind)
    if rule is None or not rule.fits(dot, key):
        return None
    f = fields.get(key)
    fits = {"prefill": f is not None and (f.prefillable or f.context), "context": f is not None and f.context,
            "document": f is not None and f.type == "documents"}
    return target.strip() if fits.get(kind, True) else None


def _cell_problem(row: _Row, column: str, cell: str, target: str | None) -> Problem | None:
    if target is None:
        return Problem(column=column, problem="unknown column",
                       accepted="email, name, externalId, readonly, expiresAt, document, document.<key>, "
                                "metadata.<key>, or a field key: " + row.keys())
    if cell.strip() == "":
        return None
    kind, dot, key = target.partition(".")
    rule = COLUMN_RULES.get(kind)
    if rule is None or not rule.fits(dot, key):
        return Problem(column=column, problem=f"unknown mapping target {target!r}", accepted=TARGETS_ACCEPTED)
    return rule.apply(row, column, key, cell)


def _readonly_problems(row: _Row) -> list[Problem]:
    if row.readonly is None:
        return []
    column, cell = row.readonly
    problems = []
    for key in (k.strip() for k in cell.split(",") if k.strip()):
        if key not in row.out.prefill:
            problems.append(Problem(column=column, problem=f"readonly key {key!r} is not prefilled in this row",
                                    accepted=", ".join(sorted(row.out.prefill)) or "(nothing prefilled)"))
        else:
            row.out.readonly.append(key)
    return problems


def validate_row(fields: Sequence[FieldDescriptor], row: Mapping[str, str], *,
                 mapping: ColumnMapping | None = None, delivery: str = "none",
                 readings: Mapping[str, str] | None = None) -> tuple[RowParams | None, list[Problem]]:
    """Map one sheet row (column -> string cell) to ``requests.create`` params using the
    form's fields, reading each column's dates and numbers as ``readings`` says (column ->
    day/month order or decimal mark, see ``formats``). Returns ``(params, [])`` when the
    row is valid, else ``(None, problems)`` listing every problem found. Empty cells are
    left out."""
    state = _Row({f.key: f for f in fields}, dict(readings or {}))
    problems: list[Problem] = []
    email_given = False  # an email cell, valid or not: a bad one is its own problem, never also "missing"
    for column, cell in row.items():
        targets = column_targets(column, state.fields, mapping or {}) or (None,)
        email_given = email_given or ("email" in targets and bool(cell.strip()))
        for target in targets:
            found = _cell_problem(state, column, cell, target)
            if found is not None:  # one problem per cell, whatever targets it feeds
                problems.append(found)
                break
    problems.extend(_readonly_problems(state))
    if delivery == "email" and not email_given:
        problems.append(Problem(column="email", problem="missing email with email delivery",
                                accepted="an email address"))
    return (None, problems) if problems else (state.out, [])
