"""What makes a whole outreach unusable, said once before any row is checked: a form the
service will not take requests for (not found, in another workspace, not published),
and sheet columns that match nothing (with the closest known name and the mapping that
would fix it)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from connector.client import FormClient
from connector.errors import Forbidden, NotFound
from connector.models import FieldDescriptor

from .columns import RECIPIENT_COLUMNS, SPECIAL_COLUMNS, column_target
from .sheet import DELIMITERS


class OutreachRefused(ValueError):
    """The run cannot start as asked (the form, or the sheet's columns); nothing was sent.
    The text says what is wrong and how to fix it."""


async def form_fields(client: FormClient, form_id: str) -> list[FieldDescriptor]:
    """The form's fields; an ``OutreachRefused`` with the service's reason when the form
    cannot take requests: not found, in another workspace, or not published."""
    try:
        listed = await client.list_fields(form_id)
    except NotFound as e:
        raise OutreachRefused(f"--form: the service has no form {form_id!r} (NOT_FOUND: {e.message}); "
                              "check the form id (it starts with form_)") from None
    except Forbidden as e:
        raise OutreachRefused(f"--form: form {form_id!r} belongs to another workspace than service.token's "
                              f"(FORBIDDEN: {e.message}); use that workspace's token or one of your forms") from None
    if not listed.published:
        raise OutreachRefused(f"--form: form {form_id!r} is not published (FORM_NOT_PUBLISHED): the service "
                              "creates no requests for it; publish it, then run again")
    return listed.items


def known_columns(fields: Sequence[FieldDescriptor]) -> list[str]:
    """The column names formsync knows without a mapping: recipient, special, field keys."""
    return list(dict.fromkeys([*RECIPIENT_COLUMNS, *SPECIAL_COLUMNS, *(f.key for f in fields)]))


def closest(column: str, known: Sequence[str]) -> str | None:
    """The known name ``column`` most likely means (case and punctuation aside), if any."""
    plain = {k.lower(): k for k in known}
    found = difflib.get_close_matches(column.strip().lower(), list(plain), n=1, cutoff=0.6)
    return plain[found[0]] if found else None


def _one(column: str, known: Sequence[str]) -> str:
    seps = [name for sep, name in DELIMITERS.items() if sep in column and sep != ","]
    if seps:
        return (f"`{column}` looks like a whole {seps[0]}-separated header read as one column; "
                f"leave out --delimiter to detect it, or give the right one")
    near = closest(column, known)
    if near is None:
        return (f"`{column}` is not a column formsync knows; map it: "
                f"[outreach] mapping = {{ \"{column}\" = \"metadata.{column}\" }} or remove it "
                f"(known: {', '.join(known)})")
    return (f"`{column}` is not a column formsync knows; did you mean `{near}`? "
            f"or map it: [outreach] mapping = {{ \"{column}\" = \"{near}\" }}")


def column_problem(columns: Sequence[str], fields: Sequence[FieldDescriptor],
                   mapping: Mapping[str, str]) -> str | None:
    """One sentence about the columns that match nothing (None when every column does)."""
    by_key = {f.key: f for f in fields}
    unknown = [c for c in columns if column_target(c, by_key, mapping) is None]
    if not unknown:
        return None
    known = known_columns(fields)
    if len(unknown) == 1:
        return _one(unknown[0], known)
    named = ", ".join(f"`{c}`" + (f" (did you mean `{n}`?)" if (n := closest(c, known)) else "") for c in unknown)
    example = closest(unknown[0], known) or f"metadata.{unknown[0]}"
    return (f"{len(unknown)} columns match nothing formsync knows: {named}; rename them or map them, e.g. "
            f"[outreach] mapping = {{ \"{unknown[0]}\" = \"{example}\" }} (known: {', '.join(known)})")
