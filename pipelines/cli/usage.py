"""Command-line mistakes Click finds itself (an unknown option, a bad or missing value)
said the way every other ``formsync`` error is: one ``error:`` line on stderr, with where
to read more, and exit code 2."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup


class FormsyncGroup(TyperGroup):
    """The ``formsync`` group: Click's usage errors as one line instead of a boxed panel."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, windows_expand_args: bool = True,
             **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except typer.exceptions.TyperException as e:  # Click's exceptions, as Typer vendors them
            sys.exit(_said(e))
        except typer.Abort:
            typer.echo("error: interrupted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)


def _said(e: Any) -> int:
    """Print a Click exception (a ``ClickException``) and return its exit code."""
    ctx = getattr(e, "ctx", None)
    if type(e).__name__ == "NoArgsIsHelpError" and ctx is not None:
        typer.echo(ctx.get_help())
        return 2
    message = e.format_message()
    message = (message[:1].lower() + message[1:].rstrip(".")).replace(". Did you mean", "; did you mean")
    where = f"; see '{ctx.command_path} -h'" if ctx is not None else ""
    typer.echo(f"error: {' '.join(message.split())}{where}", err=True)
    return int(getattr(e, "exit_code", 1))
