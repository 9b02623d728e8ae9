"""The helper that picks the sandbox's dialect (formservice/dialect.py)."""

from __future__ import annotations

from ...domain.base import Ctx
from ..models import DialectParams, DialectView
from .registry import helper


@helper("dialect.set")
def dialect_set(ctx: Ctx, p: DialectParams) -> DialectView:
    """Answer later ``/api/v1`` calls in ``full`` (everything) or ``minimal`` (only what
    the spec shows). ``reset`` keeps it."""
    ctx.service.dialect = p.dialect
    return DialectView(dialect=p.dialect)
