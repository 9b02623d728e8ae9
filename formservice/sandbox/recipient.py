"""Answering a request as its recipient does: open the request link, read the page's HTML
form, fill in what is blank and submit it, over plain HTTP like a browser without
JavaScript.

``parse_page_form``, ``fill`` and ``form_data`` are pure; ``answer_request`` does the two
HTTP calls. The form data follows the HTML rules for a submitted form: only named,
enabled controls; radios and checkboxes only when checked (a checkbox without a value
sends ``on``); a select its selected options, or its first option when none is
selected; a textarea its text without the one leading newline the markup may add; file
inputs nothing (no file chosen); and only the button that was pressed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from urllib.parse import urljoin

import aiohttp

BUTTON_TYPES = ("submit", "button", "reset")  # controls that are pressed, not answered
CHOICE_TYPES = ("radio", "checkbox")
THANKS_MARK = "Thank you"  # the heading of the page shown after a submit


@dataclass(frozen=True)
class Control:
    """One named control of a form. ``kind`` is the input type (``text``, ``email``,
    ``radio``, ``hidden``, ``file``, …), ``textarea``, ``select`` or ``button``;
    ``options`` are a select's option values and ``selected`` the chosen ones."""

    name: str
    kind: str
    value: str = ""
    checked: bool = False
    readonly: bool = False
    disabled: bool = False
    multiple: bool = False
    options: tuple[str, ...] = ()
    selected: tuple[str, ...] = ()

    @property
    def editable(self) -> bool:
        """Whether a person can change it (hidden inputs and buttons are not answers)."""
        return not (self.readonly or self.disabled) and self.kind not in ("hidden", *BUTTON_TYPES)


@dataclass(frozen=True)
class PageForm:
    """The first form of a page: where it posts and its controls in document order."""

    method: str
    action: str
    enctype: str
    controls: tuple[Control, ...] = ()

    def named(self, name: str) -> list[Control]:
        return [c for c in self.controls if c.name == name]

    def blanks(self) -> set[str]:
        """Names of the editable answers still empty: text left blank, no option chosen
        (a select on its empty first option counts as blank), no choice ticked."""
        out: set[str] = set()
        for name in dict.fromkeys(c.name for c in self.controls if c.editable and c.kind != "file"):
            group = [c for c in self.named(name) if c.editable]
            if group[0].kind in CHOICE_TYPES:
                blank = not any(c.checked for c in group)
            elif group[0].kind == "select":
                blank = not any(_chosen(c) for c in group)
            else:
                blank = all(not c.value.strip() for c in group)
            if blank:
                out.add(name)
        return out


def _chosen(c: Control) -> list[str]:
    """The values a select submits (ignoring the empty placeholder option)."""
    values = list(c.selected) or ([] if c.multiple or not c.options else [c.options[0]])
    return [v for v in values if v]


class _FormParser(HTMLParser):
    """Collects the first form's attributes and its named controls."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.form: dict[str, str] | None = None
        self.done = False
        self.controls: list[Control] = []
        self.select: Control | None = None
        self.option: tuple[str | None, bool, list[str]] | None = None  # (value attribute, selected, text)
        self.textarea: tuple[Control, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        if self.done:
            return
        attrs = {k: (v if v is not None else "") for k, v in attrs_list}
        if tag == "form" and self.form is None:
            self.form = attrs
        if self.form is None:
            return
        name, disabled = attrs.get("name", ""), "disabled" in attrs
        if tag == "option" and self.select is not None:
            self._end_option()
            self.option = (attrs.get("value"), "selected" in attrs, [])
        elif not name:
            return
        elif tag == "input":
            kind = (attrs.get("type") or "text").lower()
            value = attrs.get("value", "on" if kind in CHOICE_TYPES else "")
            self.controls.append(Control(name, kind, value, checked="checked" in attrs,
                                         readonly="readonly" in attrs, disabled=disabled))
        elif tag == "button":
            kind = (attrs.get("type") or "submit").lower()
            self.controls.append(Control(name, kind if kind in BUTTON_TYPES else "submit", attrs.get("value", ""),
                                         disabled=disabled))
        elif tag == "select":
            self.select = Control(name, "select", disabled=disabled, multiple="multiple" in attrs)
        elif tag == "textarea":
            self.textarea = (Control(name, "textarea", readonly="readonly" in attrs, disabled=disabled), [])

    def handle_data(self, data: str) -> None:
        if self.textarea is not None:
            self.textarea[1].append(data)
        elif self.option is not None:
            self.option[2].append(data)

    def _end_option(self) -> None:
        if self.option is None or self.select is None:
            return
        attr, selected, text = self.option
        # Without a value attribute an option's value is its text, whitespace collapsed.
        value = attr if attr is not None else " ".join("".join(text).split())
        self.select = replace(self.select, options=(*self.select.options, value),
                              selected=(*self.select.selected, value) if selected else self.select.selected)
        self.option = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.form is not None:
            self.done = True
        elif tag == "option":
            self._end_option()
        elif tag == "select" and self.select is not None:
            self._end_option()
            self.controls.append(self.select)
            self.select = None
        elif tag == "textarea" and self.textarea is not None:
            control, parts = self.textarea
            text = "".join(parts)
            # HTML drops one newline right after <textarea>.
            self.controls.append(replace(control, value=text[1:] if text.startswith("\n") else text))
            self.textarea = None


def parse_page_form(html: str, page_url: str = "") -> PageForm:
    """The first ``<form>`` of ``html`` with its named controls. ``action`` is the form's
    action resolved against ``page_url`` (the page itself when it has none: a form posts
    back to its own page). A page
    without a form is a ``ValueError``."""
    p = _FormParser()
    p.feed(html)
    p.close()
    if p.form is None:
        raise ValueError("the page has no <form>: it is not a form page (a closed or thank-you page?)")
    return PageForm(method=(p.form.get("method") or "get").lower(), action=urljoin(page_url, p.form.get("action") or ""),
                    enctype=(p.form.get("enctype") or "application/x-www-form-urlencoded").lower(),
                    controls=tuple(p.controls))


def fill(form: PageForm, answers: Mapping[str, str | Sequence[str]]) -> PageForm:
    """``form`` with ``answers`` entered (a new form; ``form`` is unchanged): text and
    textareas take the string, a select or a radio group the option value, a checkbox
    group a list of values (exactly those are ticked). A ``ValueError`` names the first
    answer that cannot be entered: no such control, a readonly or disabled control, or
    a value the control does not offer (with the values it does offer)."""
    controls = list(form.controls)
    for name, answer in answers.items():
        idx = [i for i, c in enumerate(controls) if c.name == name and c.kind not in ("hidden", *BUTTON_TYPES)]
        if not idx:
            names = sorted({c.name for c in controls if c.editable})
            raise ValueError(f"the form has no control named {name!r}; it has: {', '.join(names)}")
        group = [controls[i] for i in idx]
        if not all(c.editable for c in group):
            raise ValueError(f"{name!r} is readonly on this page: the recipient cannot change it")
        kind = group[0].kind
        values = [answer] if isinstance(answer, str) else list(answer)
        if kind in CHOICE_TYPES:
            offered = [c.value for c in group]
            unknown = [v for v in values if v not in offered]
            if unknown or (kind == "radio" and len(values) > 1):
                raise ValueError(f"{name!r} cannot take {values!r}; it offers {', '.join(offered)}"
                                 + (" (one of them)" if kind == "radio" else ""))
            for i in idx:
                controls[i] = replace(controls[i], checked=controls[i].value in values)
        elif kind == "select":
            c = group[0]
            if any(v not in c.options for v in values) or (len(values) > 1 and not c.multiple):
                raise ValueError(f"{name!r} cannot take {values!r}; it offers "
                                 f"{', '.join(o for o in c.options if o)}")
            controls[idx[0]] = replace(c, selected=tuple(values))
        elif kind == "file":
            raise ValueError(f"{name!r} is a file input: attach files with a multipart upload, not an answer")
        else:
            if len(values) != 1 or len(idx) != 1:
                raise ValueError(f"{name!r} takes one text value, got {values!r}")
            controls[idx[0]] = replace(group[0], value=values[0])
    return replace(form, controls=tuple(controls))


def form_data(form: PageForm, submitter: tuple[str, str] = ("__action", "submit")) -> list[tuple[str, str]]:
    """The (name, value) pairs a browser sends when ``submitter`` (a submit button's name
    and value) is pressed, in document order. A ``ValueError`` when the form has no such
    button."""
    buttons = [c for c in form.controls if c.kind == "submit" and not c.disabled]
    if not any((c.name, c.value) == submitter for c in buttons):
        offered = ", ".join(f"{c.name}={c.value}" for c in buttons) or "none"
        raise ValueError(f"the form has no submit button {submitter[0]}={submitter[1]}; it has: {offered}")
    out: list[tuple[str, str]] = []
    pressed = False
    for c in form.controls:
        if c.disabled or c.kind in ("file", "button", "reset"):
            continue
        if c.kind == "submit":
            if not pressed and (c.name, c.value) == submitter:
                out.append((c.name, c.value))
                pressed = True
        elif c.kind in CHOICE_TYPES:
            if c.checked:
                out.append((c.name, c.value))
        elif c.kind == "select":
            out.extend((c.name, v) for v in (list(c.selected) or ([] if c.multiple or not c.options
                                                                   else [c.options[0]])))
        else:
            out.append((c.name, c.value))
    return out


@dataclass
class Answered:
    """What a recipient's submit gave: the HTTP status of the POST and whether the
    thank-you page came back; ``errors`` holds the page text when it did not."""

    status: int
    thanked: bool
    sent: list[tuple[str, str]] = field(default_factory=list)
    errors: str = ""


async def answer_request(http: aiohttp.ClientSession, url: str,
                         choose: Mapping[str, str | Sequence[str]] | None = None, *,
                         only_blank: bool = True) -> Answered:
    """Open the request link ``url``, enter ``choose`` (the answers the recipient gives;
    with ``only_blank`` only where the page is still blank, so prefilled answers are
    kept) and press Submit. A link that does not show a form (closed, expired) is a
    ``ValueError`` naming the HTTP status."""
    async with http.get(url) as resp:
        page = await resp.text()
        if resp.status != 200:
            raise ValueError(f"{url} answered HTTP {resp.status}, not a form page")
    form = parse_page_form(page, url)
    if form.method != "post":
        raise ValueError(f"{url}: the form posts with {form.method.upper()}, expected POST")
    wanted = dict(choose or {})
    if only_blank:
        blank = form.blanks()
        wanted = {k: v for k, v in wanted.items() if k in blank}
    pairs = form_data(fill(form, wanted))
    body = aiohttp.FormData(pairs, default_to_multipart=form.enctype == "multipart/form-data")
    async with http.post(form.action, data=body, allow_redirects=False) as resp:
        text = await resp.text()
        thanked = resp.status == 200 and THANKS_MARK in text
        return Answered(resp.status, thanked, pairs, "" if thanked else text[:2000])
