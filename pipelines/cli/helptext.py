"""How ``formsync -h`` reads: each command's one-sentence summary in the command list,
and no ``<bool>`` placeholder after a flag (which takes no value)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

from rich.markup import escape
from typer.core import TyperOption

_MARKUP = re.compile(r"\[/?(bold|italic|dim|red|green|yellow|blue|cyan|magenta|underline|code)\]")


def plain(text: str) -> str:
    """Help text without Rich style tags (``[bold]…[/bold]``), escapes undone."""
    return _MARKUP.sub("", text).replace("\\[", "[")


def summary(fn: Callable[..., Any]) -> str:
    """The first sentence of a command's docstring (up to a period or a colon outside
    parentheses), on one line, without Rich tags, escaped again for Rich, which shows it."""
    first = inspect.cleandoc(fn.__doc__ or "").split("\n\n")[0]
    text = plain(" ".join(first.split()))
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and ch in ".:" and text[i + 1:i + 2] == " ":
            text = text[:i] + "."
            break
    return escape(text)


_display_type = TyperOption.display_type_rich


def _flag_aware_display_type(self: TyperOption, ctx: Any) -> str | None:
    # Typer shows the value type of every option, flags included ("--full <bool>"); a flag
    # takes no value, so it shows none.
    if self.is_flag or self.count:
        return None
    return _display_type(self, ctx)


TyperOption.display_type_rich = _flag_aware_display_type  # type: ignore[method-assign]
