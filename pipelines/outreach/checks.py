"""What makes a whole outreach unusable, said once before any row is checked: a form the
service will not take requests for (not found, in another workspace, not published),
and sheet columns that match nothing (with the closest known name and the mapping that
would fix it)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Literal

from connector.client.rpc import FormClient
from connector.errors import ApiError, Forbidden, NotFound
from connector.models import FieldDescriptor

from .columns import (
    RECIPIENT_COLUMNS,
    SPECIAL_COLUMNS,
    TARGETS_ACCEPTED,
    ColumnMapping,
    column_targets,
    header_key,
    mapping_target,
    mapping_targets,
    plain_expiry,
)
from .formats import DATES, NUMBERS, POINT, Settled, settle
from .sheet import Sheet
from .values import NUMBER_TYPES

ID_WORDS = ("id", "ref", "number", "no", "code")  # a header ending so names an id: map it to externalId


class OutreachRefused(ValueError):
    """The run cannot start as asked (the form, or the sheet's columns); nothing was sent.
    The text says what is wrong and how to fix it."""


def form_refusal(form_ids: Sequence[str], exc: ApiError) -> str | None:
    """What to say when the service will not act on the forms named on the command line
    (``form_ids``): not found, or in another workspace; None for any other failure. Every
    command taking ``--form`` says it with these words."""
    named = " or ".join(repr(f) for f in form_ids)
    if exc.field not in (None, "formId"):
        return None
    if isinstance(exc, NotFound):
        return f"the service has no form {named} (NOT_FOUND: {exc.message}); check the form id (it starts with form_)"
    if isinstance(exc, Forbidden):
        return (f"form {named} belongs to another workspace than service.token's (FORBIDDEN: {exc.message}); "
                "use that workspace's token or one of your forms")
    return None


async def form_fields(client: FormClient, form_id: str) -> list[FieldDescriptor]:
    """The form's fields; an ``OutreachRefused`` with the service's reason when the form
    cannot take requests: not found, in another workspace, or not published."""
    try:
        listed = await client.list_fields(form_id)
    except (NotFound, Forbidden) as e:
        if (said := form_refusal([form_id], e)) is None:
            raise
        raise OutreachRefused(f"--form: {said}") from None
    if not listed.published:
        raise OutreachRefused(f"--form: form {form_id!r} is not published (FORM_NOT_PUBLISHED): the service "
                              "creates no requests for it; publish it, then run again")
    return listed.items


def known_columns(fields: Sequence[FieldDescriptor]) -> list[str]:
    """The column names formsync knows without a mapping: recipient, special, field keys."""
    return list(dict.fromkeys([*RECIPIENT_COLUMNS, *SPECIAL_COLUMNS, *(f.key for f in fields)]))


# How alike a column and a known name must be (difflib's ratio, case and punctuation aside)
# to be suggested: `emial` is `email` (0.8); `Menge` is no `meeting` (0.67), `Land` no `plan` (0.75).
CLOSE_MATCH = 0.8


def closest(column: str, known: Sequence[str]) -> str | None:
    """The known name ``column`` most likely means (case and punctuation aside), if one is close."""
    plain = {header_key(k): k for k in known}
    found = difflib.get_close_matches(header_key(column), list(plain), n=1, cutoff=CLOSE_MATCH)
    return plain[found[0]] if found else None


def suggested_target(column: str, known: Sequence[str]) -> str:
    """A mapping target that works for an unknown column: the known name it most likely
    means, else ``externalId`` for a header naming an id, else ``metadata.<column>``."""
    near = closest(column, known)
    if near is not None:
        return near
    words = column.strip().lower().replace("-", " ").replace("_", " ").split()
    return "externalId" if words and words[-1] in ID_WORDS else f"metadata.{column}"


def _one(column: str, known: Sequence[str]) -> str:
    near, target = closest(column, known), suggested_target(column, known)
    if near is None:
        return (f"`{column}` is not a column formsync knows; map it: "
                f"[outreach] mapping = {{ \"{column}\" = \"{target}\" }} or remove it "
                f"(known: {', '.join(known)})")
    return (f"`{column}` is not a column formsync knows; did you mean `{near}`? "
            f"or map it: [outreach] mapping = {{ \"{column}\" = \"{target}\" }}")


def column_problem(columns: Sequence[str], fields: Sequence[FieldDescriptor],
                   mapping: ColumnMapping) -> str | None:
    """One sentence about the columns that match nothing (None when every column does)."""
    by_key = {f.key: f for f in fields}
    unknown = [c for c in columns if not column_targets(c, by_key, mapping)]
    if not unknown:
        return None
    known = known_columns(fields)
    if len(unknown) == 1:
        return _one(unknown[0], known)
    named = ", ".join(f"`{c}`" + (f" (did you mean `{n}`?)" if (n := closest(c, known)) else "") for c in unknown)
    return (f"{len(unknown)} columns match nothing formsync knows: {named}; rename them or map them, e.g. "
            f"[outreach] mapping = {{ \"{unknown[0]}\" = \"{suggested_target(unknown[0], known)}\" }} "
            f"(known: {', '.join(known)})")


def mapping_problem(mapping: ColumnMapping, fields: Sequence[FieldDescriptor], setting: str) -> str | None:
    """One line about the first mapping target that is no target of this form (None when
    every target is one): the ``setting`` it is in and the targets accepted."""
    by_key = {f.key: f for f in fields}
    for column, given in mapping.items():
        for target in mapping_targets(given):
            if mapping_target(target, by_key) is None:
                keys = ", ".join(f.key for f in fields if f.prefillable or f.context) or "(none)"
                return (f"{setting}: {column!r} = {target!r}: {target!r} is not a mapping target of this form; "
                        f"accepted: {TARGETS_ACCEPTED}; this form's field keys: {keys}")
    return None


ValueType = Literal["date", "number", "integer", "expiry"]


def value_type_of(target: str, fields: Mapping[str, FieldDescriptor]) -> ValueType | None:
    """The type of the values a target reads from its cells: a date or number field's
    (``number``; ``integer`` for rating and scale), ``expiry`` for ``expiresAt``; None for
    a target that takes its cells as text."""
    if target == "expiresAt":
        return "expiry"
    kind, _, key = target.partition(".")
    f = fields.get(key) if kind == "prefill" else None
    if f is None:
        return None
    if f.type == "date":
        return "date"
    return ("number" if f.type == "number" else "integer") if f.type in NUMBER_TYPES else None


def typed_columns(targets: Mapping[str, Sequence[str]], fields: Sequence[FieldDescriptor],
                  readings: Mapping[str, str]) -> dict[str, tuple[ValueType, str]]:
    """The sheet's date and number columns as a run read them (column -> its values'
    type and reading, see ``column_readings``): what a campaign export writes typed."""
    by_key = {f.key: f for f in fields}
    out: dict[str, tuple[ValueType, str]] = {}
    for column, given in targets.items():
        kind = next((v for t in given if (v := value_type_of(t, by_key)) in ("date", "number", "integer")), None)
        if kind is not None and column in readings:
            out[column] = (kind, readings[column])
    return out


def column_readings(sheet: Sheet, targets: Mapping[str, Sequence[str]], fields: Sequence[FieldDescriptor], *,
                    date_format: str | None = None, decimal: str | None = None) -> dict[str, str]:
    """How each date and number column of the sheet is read (column -> day/month order or
    decimal mark): ``date_format`` / ``decimal`` when given, else detected from all its
    cells (a workbook's numbers that read two ways, such as 1.234, with a point: that is how
    a workbook writes its own). A column that reads as neither, or means two things, is an
    ``OutreachRefused`` naming it and the option that settles it."""
    by_key = {f.key: f for f in fields}
    out: dict[str, str] = {}
    for column, given in targets.items():
        target, value_type = next(((t, v) for t in given if (v := value_type_of(t, by_key)) is not None),
                                  ("", None))
        if value_type is None:
            continue
        what, declared = (DATES, date_format) if value_type in ("date", "expiry") else (NUMBERS, decimal)
        cells = [(n, row.get(column, "")) for n, row in zip(sheet.numbers, sheet.rows, strict=True)
                 if target != "expiresAt" or not plain_expiry(row.get(column, ""))]
        settled = settle(what, column, cells, declared)
        if settled.unclear and what is NUMBERS and sheet.sheet_name is not None:
            settled = Settled(POINT)  # a workbook's own numbers are written with a point: 1.234 is 1.234
        if settled.problem is not None:
            raise OutreachRefused(f"{sheet.path}: {settled.problem}")
        assert settled.choice is not None
        out[column] = settled.choice
    return out
