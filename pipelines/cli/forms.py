"""The form ids named on a command line (``--form``), checked the same way by every
command: against the store for the commands that only read it, against the service's
answer for those that call it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .errors import UsageError

if TYPE_CHECKING:
    from connector.store import Store


def check_stored_forms(store: Store, form_ids: str | Iterable[str] | None) -> None:
    """A ``UsageError`` naming ``formsync sync --form ID`` for the first form id the store
    has never seen (no submission, request, field list or sync of it); nothing when every
    one is known (a known form with no rows is no mistake)."""
    for form_id in [form_ids] if isinstance(form_ids, str) else (form_ids or ()):
        if not store.knows_form(form_id):
            raise UsageError(f"the store holds nothing of form {form_id!r} (no submission, request or field list)",
                             where="--form",
                             hint=f"check the form id, or copy its submissions first: formsync sync --form {form_id}")


@contextmanager
def service_forms(form_ids: str | Iterable[str] | None) -> Iterator[None]:
    """Turns the service's NOT_FOUND or FORBIDDEN about the forms named by ``--form`` into
    the one line every command says (``pipelines.outreach.checks.form_refusal``), exit 2."""
    from connector.errors import ApiError
    from pipelines.outreach.checks import form_refusal

    named = [form_ids] if isinstance(form_ids, str) else list(form_ids or ())
    try:
        yield
    except ApiError as e:
        if named and (said := form_refusal(named, e)) is not None:
            raise UsageError(said, where="--form") from None
        raise
