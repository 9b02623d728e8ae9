"""A form's theme (the agent's ``formTheme_get``/``_set``): its colours and font, kept in
``Form.theme`` as a sparse JSON object (only what was set; the rest follows the
defaults). A theme is presentation: changing it needs no publish."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from ..errors import validation
from .agentops import agent_method
from .base import Ctx, Params, Result
from .forms import HEX_COLOR, live_form

FONTS = ("Inter", "Roboto", "Open Sans", "Lato", "Merriweather", "Playfair Display", "Space Grotesk", "System")
DEFAULT_COLORS = {"primary": "#1f6feb", "background": "#ffffff", "text": "#1f2328", "buttonText": "#ffffff"}
DEFAULT_FONT = "Inter"
Hex = Annotated[str, Field(max_length=9)]


def _hex(v: str | None) -> str | None:
    if v is not None and not HEX_COLOR.match(v):
        raise ValueError("a colour is a hex string such as #1f6feb (3, 6 or 8 digits)")
    return v


class ColorChanges(Params):
    """Colours to change; null reverts one to its default."""

    primary: Hex | None = None
    background: Hex | None = None
    text: Hex | None = None
    buttonText: Hex | None = None

    _check = field_validator("primary", "background", "text", "buttonText")(classmethod(lambda cls, v: _hex(v)))


class Colors(Result):
    primary: str
    background: str
    text: str
    buttonText: str


class ThemeView(Result):
    formId: str
    colors: Colors
    font: str
    isDefault: bool


class FormRef(Params):
    formId: str


class SetParams(Params):
    formId: str
    colors: ColorChanges | None = None
    font: Literal[FONTS] | None = None  # type: ignore[valid-type]
    reset: bool = False


def theme_of(form_id: str, stored: dict[str, Any] | None) -> ThemeView:
    """The effective theme: stored values over the defaults."""
    stored = stored or {}
    colors = {**DEFAULT_COLORS, **(stored.get("colors") or {})}
    return ThemeView(formId=form_id, colors=Colors(**colors), font=stored.get("font") or DEFAULT_FONT,
                     isDefault=not stored)


@agent_method("formTheme_get")
def theme_get(ctx: Ctx, p: FormRef) -> ThemeView:
    """A form's colours and font (the defaults until set)."""
    form = live_form(ctx, p.formId)
    return theme_of(form.id, form.theme)


@agent_method("formTheme_set")
def theme_set(ctx: Ctx, p: SetParams) -> ThemeView:
    """Change a form's colours and font (only what is sent); ``reset: true`` returns to
    the default theme."""
    form = live_form(ctx, p.formId)
    sent = p.model_fields_set - {"formId", "reset"}
    if p.reset:
        if sent:
            raise validation(f"reset: true restores the default theme; it cannot go with {', '.join(sorted(sent))}.",
                             field="reset", reason="CONFLICTING_VALUES")
        form.theme = None
    else:
        if not sent:
            raise validation("Send colors or font to change, or reset: true.", reason="NOTHING_TO_UPDATE",
                             validKeys=["colors", "font", "reset"])
        if "font" in sent and p.font is None:
            raise validation(f"font cannot be null; pick one of {', '.join(FONTS)} (the default is {DEFAULT_FONT}).",
                             field="font", reason="INVALID_TYPE", expectedType="string")
        if "colors" in sent and p.colors is None:
            raise validation("colors cannot be null; send the colours to change, or reset: true.", field="colors",
                             reason="INVALID_TYPE", expectedType="object")
        stored = dict(form.theme or {})
        colors = dict(stored.get("colors") or {})
        if p.colors is not None:
            for name in p.colors.model_fields_set:
                value = getattr(p.colors, name)
                if value is None or value.lower() == DEFAULT_COLORS[name]:
                    colors.pop(name, None)
                else:
                    colors[name] = value
        stored["colors"] = colors
        if p.font is not None:
            stored["font"] = p.font
        if stored.get("font") == DEFAULT_FONT:
            stored.pop("font")
        if not stored["colors"]:
            stored.pop("colors")
        form.theme = stored or None
    form.last_edited_at = ctx.now
    return theme_of(form.id, form.theme)
