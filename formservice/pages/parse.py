"""Posted form data to JSON answers: a pure function of a snapshot's blocks and the
posted fields, so it is tested with fixed inputs.

The encoding the templates use (and :func:`parse_form` reads):

===================  ====================================================================
field                 form data
===================  ====================================================================
text, textarea,       ``<key>=<text>`` (single-line types are stripped; textarea kept as is)
email, phone, url,
date, time
number                ``<key>=<text>``: a whole number becomes an int, a decimal a float
rating, scale         ``<key>=<n>`` (one radio per value): an int
switch                ``<key>=false`` (a hidden marker) and ``<key>=true`` when ticked
select, radio,        ``<key>=<option key>``; a hidden ``<key>=`` marker comes first, so an
decision,             unanswered group still reads as answered-empty
picture-choice
checkbox              ``<key>=`` marker, then one ``<key>=<option key>`` per ticked box: a list
ranking               ``<key>[<position>]=<option key>``, one ``<select>`` per position
                      (0-based): a list in position order, blank positions skipped
matrix                ``<key>[<row key>]=<column key>`` per row (plus a ``<key>=`` marker):
                      an object of the rows answered
file, signature       ``<key>=<JSON file object {name, type, size, url}>`` per file, plus a
                      ``<key>=`` marker; the page handler stores each uploaded file and
                      replaces the upload by its JSON before calling :func:`parse_form`
payment,              ``<key>=<JSON object>`` (the sandbox takes these answers as JSON)
schedule-appointment
group (repeating)     ``<key>[<i>][<member key>]...``, each member encoded as above under the
                      name ``<key>[<i>][<member key>]``, plus a ``<key>=`` marker: a list of
                      instances in index order, wholly blank instances dropped
hidden, calculated,   never read: context comes from the request, calculated values from
documents             the form
===================  ====================================================================

A field whose name is absent from the data is absent from the result (a disabled,
readonly input sends nothing; the handler keeps its prefilled value). A field that is
present but left blank reads ``""``, ``[]`` or ``{}``: an explicit "no answer" that
overrides a prefill. A value that cannot be converted (``"abc"`` for a number, broken
JSON) is kept as the posted string, so the answer check names the problem and the page
shows the user's own text again.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from multidict import MultiMapping

from ..domain import fieldtypes

MAX_INSTANCES = 100  # instances of one repeating group a page accepts
SKIPPED = {"hidden", "calculated", "documents"}
STRIPPED = {"text", "email", "phone", "url", "date", "time"}
_INT_RE = re.compile(r"^[+-]?\d+$")


# What a posted form offers: aiohttp's ``MultiDictProxy`` and ``multidict.MultiDict``.
FormData = MultiMapping[Any]


def parse_form(blocks: list[dict[str, Any]], data: FormData) -> dict[str, Any]:
    """The answers posted for ``blocks`` (a snapshot's or a draft's blocks, keys assigned),
    by field key, converted to the field's JSON type as the module docstring describes.
    Never raises for any input: what cannot be converted is left as posted text."""
    out: dict[str, Any] = {}
    names = list(data.keys())
    for block in blocks:
        if not fieldtypes.is_question(block) or not block.get("key") or block["type"] in SKIPPED:
            continue
        present, value = _parse(block, block["key"], data, names)
        if present:
            out[block["key"]] = value
    return out


def instance_indices(data: FormData, key: str) -> list[int]:
    """The instance indices of repeating group ``key`` named in the data, ascending
    (at most :data:`MAX_INSTANCES`)."""
    pattern = re.compile(re.escape(key) + r"\[(\d{1,4})\]\[")
    found = {int(m.group(1)) for name in data.keys() if (m := pattern.match(name))}
    return sorted(found)[:MAX_INSTANCES]


def _texts(data: FormData, name: str) -> list[str]:
    return [v for v in data.getall(name, []) if isinstance(v, str)]


def _last_filled(values: list[str]) -> str:
    filled = [v for v in values if v != ""]
    return filled[-1] if filled else ""


def _number(text: str) -> Any:
    text = text.strip()
    if text == "":
        return ""
    if _INT_RE.match(text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else text


def _json(text: str) -> Any:
    if text.strip() == "":
        return ""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _parse(block: dict[str, Any], name: str, data: FormData, names: list[str]) -> tuple[bool, Any]:
    """(present, value) of one field posted under the input name ``name``."""
    ft = fieldtypes.field_type(block)
    t = ft.type
    values = _texts(data, name)
    scalar: dict[str, Callable[[str], Any]] = {
        "textarea": lambda v: v, "number": _number, "rating": _number, "scale": _number,
        "payment": _json, "schedule-appointment": _json,
    }
    if t in STRIPPED or t in scalar:
        if not values:
            return False, None
        text = values[-1]
        return True, text.strip() if t in STRIPPED else scalar[t](text)
    if t == "switch":
        if not values:
            return False, None
        return True, any(v.lower() in ("true", "on", "1", "yes") for v in values)
    if ft.kind == "choice":
        return (True, _last_filled(values)) if values else (False, None)
    if t == "checkbox":
        return (True, [v for v in values if v != ""]) if values else (False, None)
    if t == "ranking":
        prefix = f"{name}["
        positions = sorted({int(m.group(1)) for n in names
                            if n.startswith(prefix) and (m := re.fullmatch(re.escape(name) + r"\[(\d{1,4})\]", n))})
        if not positions and not values:
            return False, None
        picked = [_last_filled(_texts(data, f"{name}[{i}]")) for i in positions]
        return True, [v for v in picked if v != ""]
    if ft.kind == "matrix":
        rows = [r["key"] for r in block.get("rows") or []]
        answered = {r: _last_filled(_texts(data, f"{name}[{r}]")) for r in rows}
        if not values and not any(f"{name}[{r}]" in names for r in rows):
            return False, None
        return True, {r: c for r, c in answered.items() if c != ""}
    if ft.kind == "file":
        if not values:
            return False, None
        files = []
        for v in values:
            parsed = _json(v)
            if isinstance(parsed, dict):
                files.append(parsed)
        return True, files
    if ft.kind == "group":
        members = [m for m in block.get("members") or [] if fieldtypes.is_question(m) and m.get("key")
                   and m["type"] not in SKIPPED]
        indices = instance_indices(data, name)
        if not indices and not values:
            return False, None
        instances = []
        for i in indices:
            inst = {}
            for m in members:
                present, value = _parse(m, f"{name}[{i}][{m['key']}]", data, names)
                if present and not fieldtypes.is_empty(value):
                    inst[m["key"]] = value
            # an unticked switch alone does not make an instance: the row was left blank
            if any(v is not False for v in inst.values()):
                instances.append(inst)
        return True, instances
    return False, None
