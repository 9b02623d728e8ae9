"""Recipient pages: the server-rendered HTML behind request links (``/r/{token}``),
share links (``/f/{token}``) and form previews (``/preview/{form_id}``). Plain forms
that work without JavaScript; see :mod:`.parse` for how posted fields become answers."""

from .parse import parse_form
from .views import register

__all__ = ["parse_form", "register"]
