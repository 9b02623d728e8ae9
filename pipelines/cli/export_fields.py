"""What ``formsync export`` reads from the service about a form's fields: their titles
for ``--labels``, or their order for the wide table's columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from .context import TOKEN_HINT, Context
from .errors import UsageError, WorkFailed

if TYPE_CHECKING:
    from connector.client import FormClient


def _list_fields(ctx: Context, form: str, **overrides: Any) -> list[Any]:
    """The form's fields from one fields.list call (a ``FormsyncError`` when it fails)."""

    async def fetch(fc: FormClient) -> list[Any]:
        return list((await fc.list_fields(form)).items)

    return ctx.with_client(fetch, **overrides)


def field_titles(ctx: Context, form: str | None) -> tuple[dict[str, str], list[str]]:
    """Question titles by field key, and the keys in the form's order, for ``--labels``."""
    from connector.errors import FormsyncError

    if form is None:
        raise UsageError("--labels reads the titles of one form's fields: give --form", where="--labels")
    if ctx.settings().service.token is None:
        raise UsageError("--labels reads fields.list, which needs service.token", where="--labels", hint=TOKEN_HINT)
    try:
        fields = _list_fields(ctx, form)
    except FormsyncError as e:
        raise WorkFailed(f"cannot read the fields of form {form} for --labels: {e}") from None
    return {f.key: f.title or f.key for f in fields}, [f.key for f in fields]


def field_order(ctx: Context, form: str | None) -> list[str] | None:
    """The form's field keys in fields.list order, for the wide columns; None (columns in
    first-seen order, with a warning) without --form or service.token, or when the service
    cannot be read: the export needs only the store."""
    from connector.errors import FormsyncError

    if form is None or ctx.settings().service.token is None:
        return None
    try:
        # A nicety for an export that needs only the store: one try, no waiting on retries.
        return [f.key for f in _list_fields(ctx, form, max_retries=0)]
    except FormsyncError as e:
        typer.echo(f"warning: cannot read the field order of form {form} ({e}); the field columns follow "
                   f"the order in which answers were first seen", err=True)
        return None
