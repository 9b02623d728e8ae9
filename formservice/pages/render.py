"""Jinja2 rendering of the recipient pages: the template environment and the state a
form page is drawn from (values, errors, readonly fields, group sizes, documents)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from ..domain import fieldtypes
from ..domain.submissions import questions

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
INPUT_TYPES = {"text": "text", "email": "email", "phone": "tel", "url": "url", "number": "number",
               "date": "date", "time": "time"}
PAYMENT_EXAMPLE = '{"status": "paid", "amount": 40, "currency": "USD"}'
BOOKING_EXAMPLE = ('{"status": "confirmed", "start": "2026-01-15T09:30:00.000Z", '
                   '"end": "2026-01-15T10:00:00.000Z", "timeZone": "UTC"}')

env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=jinja2.select_autoescape(["html"]))


def render(template: str, **context: Any) -> str:
    return env.get_template(template).render(**context)


@dataclass
class FormPage:
    """What a form page shows. ``values`` are by field key as :func:`parse_form` or the
    store hold them; ``errors`` by field key or ``group.<i>.<member>``."""

    blocks: list[dict[str, Any]]
    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    readonly_keys: set[str] = field(default_factory=set)
    computed: dict[str, Any] = field(default_factory=dict)
    documents: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    group_sizes: dict[str, int] = field(default_factory=dict)
    preview: bool = False  # every control disabled, no buttons

    # -- lookups used by the templates ----------------------------------------------
    def is_question(self, block: dict[str, Any]) -> bool:
        return fieldtypes.is_question(block) and bool(block.get("key"))

    def value(self, key: str) -> Any:
        return self.values.get(key)

    def error(self, path: str) -> str | None:
        return self.errors.get(path)

    def readonly(self, key: str) -> bool:
        return self.preview or key in self.readonly_keys

    def options(self, block: dict[str, Any]) -> list[dict[str, Any]]:
        return fieldtypes.options_of(block)

    def input_type(self, block: dict[str, Any]) -> str:
        return INPUT_TYPES.get(block["type"], "text")

    def instances(self, key: str) -> list[dict[str, Any]]:
        """The instances to draw for repeating group ``key``: its values, padded with
        empty ones up to the requested size (at least one)."""
        value = self.values.get(key)
        items = [i if isinstance(i, dict) else {} for i in value] if isinstance(value, list) else []
        size = max(len(items), self.group_sizes.get(key, 0), 1)
        return items + [{} for _ in range(size - len(items))]

    def members(self, block: dict[str, Any]) -> list[dict[str, Any]]:
        return [m for m in block.get("members") or [] if self.is_question(m) and m["type"] != "hidden"]

    def range(self, block: dict[str, Any]) -> list[int]:
        if block["type"] == "rating":
            return list(range(1, int(block.get("maxStars", 5)) + 1))
        return list(range(int(block.get("min", 0)), int(block.get("max", 10)) + 1))

    def example(self, block: dict[str, Any]) -> str:
        return PAYMENT_EXAMPLE if block["type"] == "payment" else BOOKING_EXAMPLE

    def error_anchor(self, path: str) -> str:
        parts = path.split(".")
        if len(parts) == 3 and parts[1].isdigit():
            return dom_id(f"{parts[0]}[{parts[1]}][{parts[2]}]")
        return dom_id(path)

    def error_title(self, path: str) -> str:
        qs = questions(self.blocks)
        parts = path.split(".")
        block = qs.get(parts[0])
        if block is None:
            return path
        title = block.get("title") or parts[0]
        if len(parts) == 3 and parts[1].isdigit():
            member = next((m for m in block.get("members") or [] if m.get("key") == parts[2]), None)
            return f"{title} {int(parts[1]) + 1}, {(member or {}).get('title') or parts[2]}"
        return title


def dom_id(name: str) -> str:
    """The element id of the input named ``name`` (``line_items[0][item]`` ->
    ``f-line_items-0-item``)."""
    return "f-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")


def as_text(value: Any) -> str:
    """A stored value as an input's text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def contains(value: Any, key: str) -> bool:
    return isinstance(value, list) and key in value


def at(value: Any, index: int) -> Any:
    return value[index] if isinstance(value, list) and index < len(value) else None


def pick(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def files(value: Any) -> list[dict[str, Any]]:
    return [f for f in value if isinstance(f, dict)] if isinstance(value, list) else []


env.filters.update(text=as_text, json=json.dumps, dom_id=dom_id)
env.globals.update(contains=contains, at=at, pick=pick, files=files)
