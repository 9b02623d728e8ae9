"""The helper that picks the sandbox's dialect (formservice/dialect.py)."""

from __future__ import annotations

from ...dialect import Dialect
from ...domain.base import Ctx, Params, Result
from .registry import helper


class DialectParams(Params):
    dialect: Dialect


class DialectView(Result):
    dialect: Dialect


@helper("dialect.set")
def dialect_set(ctx: Ctx, p: DialectParams) -> DialectView:
    """Answer later ``/api/v1`` calls in ``full`` (everything) or ``minimal`` (only what
    the spec shows). ``reset`` keeps it."""
    ctx.service.dialect = p.dialect
    return DialectView(dialect=p.dialect)
