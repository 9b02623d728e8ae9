"""How ``formsync -h`` reads: each command's one-sentence summary in the command list,
and no ``<bool>`` placeholder after a flag (which takes no value)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from typer.core import TyperOption


def summary(fn: Callable[..., Any]) -> str:
    """The first sentence (up to a colon) of a command's docstring, on one line."""
    first = inspect.cleandoc(fn.__doc__ or "").split("\n\n")[0]
    text = " ".join(first.split())
    ends = [i for i in (text.find(". "), text.find(": ")) if i >= 0]
    return text if not ends else text[: min(ends)] + "."


_display_type = TyperOption.display_type_rich


def _flag_aware_display_type(self: TyperOption, ctx: Any) -> str | None:
    # Typer shows the value type of every option, flags included ("--full <bool>"); a flag
    # takes no value, so it shows none.
    if self.is_flag or self.count:
        return None
    return _display_type(self, ctx)


TyperOption.display_type_rich = _flag_aware_display_type  # type: ignore[method-assign]
