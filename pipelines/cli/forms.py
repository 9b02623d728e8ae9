"""The form ids named on a command line (``--form``) that the service refuses, said the same
way by every command that calls it (the store's check of them is the job layer's:
``pipelines.jobs.kinds.check_forms``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from .errors import UsageError


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
