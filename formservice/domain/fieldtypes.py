"""Field types: how each question block becomes a field descriptor, which values it
accepts (as prefill or as an answer) and how an answer reads as display text.

A form's draft is a list of blocks. A question block is a dict::

    {"id": "blk_…", "type": "radio", "title": "…", "key": "plan" | None, "required": bool,
     "options": [{"key", "label"}], "rows": [...], "columns": [...],
     "members": [blocks], "documents": [{"name", "documentId"?}], "formula": "a + b",
     "maxStars": 5, "min": 0, "max": 10}

Content blocks (heading, paragraph, divider, image, embed, list, table, row) have no key
and no answer.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import date, time
from typing import Any, TypeGuard

KEY_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
CONTENT_BLOCKS = {"heading", "paragraph", "divider", "image", "embed", "list", "table", "row"}


class FieldValueError(ValueError):
    """A value a field does not accept: what is wrong, what the field takes, and (when a
    caller needs to tell failures apart) a ``details.reason`` such as ``REQUIRED``."""

    def __init__(self, message: str, *, expected: str | None = None,
                 valid_values: list[Any] | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.expected = expected
        self.valid_values = valid_values
        self.reason = reason


@dataclass(frozen=True)
class FieldType:
    type: str  # descriptor type in fields.list
    input_type: str  # Question.inputType in forms.get
    prefillable: bool = True
    answerable: bool = True  # documents blocks carry files to read, not an answer
    kind: str = "scalar"

    @property
    def block_type(self) -> str:
        """Question.type in forms.get, such as ``email-input``."""
        return self.type if self.kind in ("group", "documents", "calculated") else f"{self.input_type}-input"


FIELD_TYPES: dict[str, FieldType] = {
    ft.type: ft
    for ft in [
        FieldType("text", "text"),
        FieldType("textarea", "textarea"),
        FieldType("email", "email"),
        FieldType("phone", "phone"),
        FieldType("url", "url"),
        FieldType("number", "number"),
        FieldType("date", "date"),
        FieldType("time", "time"),
        FieldType("rating", "rating"),
        FieldType("scale", "scale"),
        FieldType("switch", "switch"),
        FieldType("select", "select", kind="choice"),
        FieldType("radio", "radio", kind="choice"),
        FieldType("decision", "decision", kind="choice"),
        FieldType("picture-choice", "picture-choice", kind="choice"),
        FieldType("checkbox", "checkbox", kind="multi"),
        FieldType("ranking", "ranking", kind="multi"),
        FieldType("matrix", "matrix", kind="matrix"),
        FieldType("hidden", "hidden", prefillable=False),
        FieldType("calculated", "calculated", prefillable=False, kind="calculated"),
        FieldType("file", "file", prefillable=False, kind="file"),
        FieldType("signature", "signature", prefillable=False, kind="file"),
        FieldType("payment", "payment", prefillable=False, kind="payment"),
        FieldType("schedule-appointment", "appointment", prefillable=False, kind="booking"),
        FieldType("group", "group", kind="group"),
        FieldType("documents", "documents", prefillable=False, answerable=False, kind="documents"),
    ]
}
DECISION_OPTIONS = [
    {"key": "approve", "label": "Approve"},
    {"key": "changes", "label": "Request changes"},
    {"key": "decline", "label": "Decline"},
]


def is_question(block: dict[str, Any]) -> bool:
    return block.get("type") in FIELD_TYPES


def field_type(block: dict[str, Any]) -> FieldType:
    return FIELD_TYPES[block["type"]]


def slug(title: str) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "_", title.strip().lower()).strip("_")
    return (s or "field")[:48]


def assign_keys(blocks: list[dict[str, Any]], frozen_ids: Collection[str] = ()) -> list[dict[str, Any]]:
    """Give every question without a key one derived from its title, unique in the form
    (members of a group are unique within the group). Existing keys never change: keys
    are frozen the first time a form is published. Only a key that cannot be an address
    is replaced: one with characters outside ``[A-Za-z0-9_.-]`` is cleaned, and a block
    repeating another block's key (a copied block) gets a key of its own. The earlier
    block keeps a repeated key, unless the other one's id is in ``frozen_ids`` (blocks
    whose keys a snapshot already published)."""
    # keys blocks already carry: a derived key never takes one that a later block owns
    authored = {str(b["key"]) for b in blocks if is_question(b) and b.get("key")}
    taken = {str(b["key"]) for b in blocks if is_question(b) and b.get("key") and b.get("id") in frozen_ids}
    out: list[dict[str, Any]] = []
    for block in blocks:
        block = dict(block)
        if is_question(block):
            key = str(block.get("key") or "")
            if key and not KEY_RE.match(key):
                key = _clean_key(key)
            if not key:
                key = "decision" if block["type"] == "decision" else slug(block.get("title") or block["type"])
                key = unique_key(key, taken | authored)
            elif key in taken and not (block.get("id") in frozen_ids and block.get("key") == key):
                key = unique_key(key, taken | authored)
            block["key"] = key
            taken.add(key)
            if block["type"] == "group":
                block["members"] = assign_keys(block.get("members") or [], frozen_ids)
        out.append(block)
    return out


def _clean_key(key: str) -> str:
    """An authored key made addressable: characters outside ``[A-Za-z0-9_.-]`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[:64].strip("_") or "field"


def unique_key(base: str, taken: set[str]) -> str:
    """``base``, or ``base_2``, ``base_3``... the first one not in ``taken``."""
    key, n = base, 2
    while key in taken:
        key, n = f"{base}_{n}", n + 1
    return key


def descriptor(block: dict[str, Any]) -> dict[str, Any]:
    """The fields.list descriptor of a question block (keys already assigned)."""
    ft = field_type(block)
    d: dict[str, Any] = {
        "key": block["key"],
        "type": ft.type,
        "title": block.get("title") or "",
        "required": bool(block.get("required", False)),
        "prefillable": ft.prefillable,
    }
    if ft.kind in ("choice", "multi"):
        d["options"] = [dict(o) for o in options_of(block)]
        if ft.kind == "multi":
            d["multiple"] = True
    if ft.kind == "matrix":
        d["rows"] = [dict(r) for r in block.get("rows") or []]
        d["columns"] = [dict(c) for c in block.get("columns") or []]
    if ft.type == "hidden":
        d["context"] = True
    if ft.kind == "calculated":
        d["calculated"] = True
    if ft.kind == "group":
        d["repeating"] = bool(block.get("repeating", True))
        d["members"] = [descriptor(m) for m in block.get("members") or [] if is_question(m)]
    if ft.kind == "documents":
        d["documents"] = [{"name": doc["name"]} for doc in block.get("documents") or []]
    if ft.type == "rating":
        d["maxStars"] = int(block.get("maxStars", 5))
    if ft.type == "scale":
        d["min"], d["max"] = int(block.get("min", 0)), int(block.get("max", 10))
    return d


def options_of(block: dict[str, Any]) -> list[dict[str, str]]:
    if block["type"] == "decision":
        return block.get("options") or DECISION_OPTIONS
    return block.get("options") or []


def question_view(block: dict[str, Any]) -> dict[str, Any]:
    """The Question shape of forms.get."""
    ft = field_type(block)
    meta: dict[str, Any] | None = None
    if ft.type == "rating":
        meta = {"kind": block.get("ratingKind", "star"), "maxStars": int(block.get("maxStars", 5))}
    elif ft.type == "scale":
        meta = {"min": int(block.get("min", 0)), "max": int(block.get("max", 10))}
    return {"id": block["id"], "type": ft.block_type, "inputType": ft.input_type,
            "title": block.get("title") or "", "metadata": meta}


# -- values ----------------------------------------------------------------------


def _need(cond: bool, message: str, expected: str, valid: list[Any] | None = None) -> None:
    if not cond:
        raise FieldValueError(message, expected=expected, valid_values=valid)


def _is_number(v: object) -> TypeGuard[int | float]:
    """A JSON number a form can hold: not a boolean, and finite as a double (JSON parsers
    accept NaN and Infinity, which no JSON answer can carry back out)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int beyond the range of a double
        return False


def _option_key(block: dict[str, Any], v: Any) -> str:
    keys = [o["key"] for o in options_of(block)]
    _need(isinstance(v, str), "expects an option key (a string)", "string", keys)
    if v not in keys:
        labels = {o["label"].lower(): o["key"] for o in options_of(block)}
        hint = f' ("{v}" is the label of {labels[v.lower()]})' if v.lower() in labels else ""
        raise FieldValueError(f"expects an option key{hint}", expected="string", valid_values=keys)
    return v


FILE_SHAPE = "each file is {name, type, size, url}: name a non-empty string, size a number of bytes >= 0"


def _file_list(block: dict[str, Any], v: Any) -> list[dict[str, Any]]:
    _need(isinstance(v, list), "expects a list of files {name, type, size, url}", "array")
    out = []
    for f in v:
        _need(isinstance(f, dict) and isinstance(f.get("name"), str) and bool(f["name"]), FILE_SHAPE, "object")
        size = f.get("size", 0)
        _need(_is_number(size) and size >= 0, FILE_SHAPE, "object")
        _need(isinstance(f.get("type"), str | None), "a file's type is a MIME type string", "string")
        _need(isinstance(f.get("url"), str | None), "a file's url is a string", "string")
        out.append({"name": f["name"], "type": f.get("type") or "application/octet-stream",
                    "size": size, "url": f.get("url")})
    return out


# Status values of payment and booking answers (the hosted service's 2026-09-24 shapes)
PAYMENT_STATUSES = ["paid", "partially_refunded", "refunded", "disputed"]
BOOKING_STATUSES = ["confirmed", "rescheduled", "cancelled", "rejected", "no_show"]


def _payment(v: Any) -> dict[str, Any]:
    _need(isinstance(v, dict), "expects a payment object {status, amount, currency, ...}", "object")
    _need(v.get("status") in PAYMENT_STATUSES, "expects a payment status", "string", PAYMENT_STATUSES)
    for money in ("amount", "amountRefunded"):
        _need(v.get(money) is None or _is_number(v[money]), f"a payment's {money} is a number (major unit)",
              "number")
    _need(v.get("currency") is None or (isinstance(v["currency"], str) and len(v["currency"]) == 3),
          "a payment's currency is an ISO 4217 code such as USD", "string")
    return dict(v)


def _booking(v: Any) -> dict[str, Any]:
    _need(isinstance(v, dict), "expects a booking object {status, start, end, timeZone, attendee, ...}", "object")
    _need(v.get("status") in BOOKING_STATUSES, "expects a booking status", "string", BOOKING_STATUSES)
    for text in ("start", "end", "timeZone", "eventTitle", "meetingUrl"):
        _need(v.get(text) is None or isinstance(v[text], str), f"a booking's {text} is a string", "string")
    return dict(v)


def _group(block: dict[str, Any], value: Any) -> list[dict[str, Any]]:
    members = {m["key"]: m for m in block.get("members") or [] if is_question(m)}
    _need(isinstance(value, list), "expects a list of instances (objects keyed by member key)", "array")
    out = []
    for i, inst in enumerate(value):
        _need(isinstance(inst, dict), f"instance {i} must be an object keyed by member key", "object",
              list(members))
        norm = {}
        for mk, mv in inst.items():
            if mk not in members:
                raise FieldValueError(f"instance {i} has no member {mk!r}", expected="object",
                                      valid_values=list(members))
            if is_empty(mv):  # a member left blank, as a blank question at the top level
                continue
            try:
                norm[mk] = check_value(members[mk], mv)
            except FieldValueError as e:
                raise FieldValueError(f"instance {i}, member {mk}: {e}", expected=e.expected,
                                      valid_values=e.valid_values) from None
        if norm:  # an instance left wholly blank is no instance
            out.append(norm)
    return out


def check_value(block: dict[str, Any], value: Any) -> Any:
    """The value normalised for storage, or FieldValueError saying what the field takes.
    Applies to prefill and to submitted answers alike."""
    ft = field_type(block)
    t = ft.type
    if t in ("text", "textarea", "phone", "hidden"):
        _need(isinstance(value, str), "expects text", "string")
        return value
    if t == "email":
        _need(isinstance(value, str) and bool(EMAIL_RE.match(value)), "expects an email address", "string")
        return value
    if t == "url":
        _need(isinstance(value, str) and value.startswith(("http://", "https://")),
              "expects an http(s) URL", "string")
        return value
    if t in ("number", "calculated"):
        _need(_is_number(value), "expects a number", "number")
        return value
    if t == "date":
        # fromisoformat alone also takes week dates (2026-W03-1) and basic ones (20260115)
        _need(isinstance(value, str) and bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", value)),
              "expects a date YYYY-MM-DD", "string")
        try:
            date.fromisoformat(value)
        except ValueError:
            raise FieldValueError("expects a date YYYY-MM-DD", expected="string") from None
        return value
    if t == "time":
        _need(isinstance(value, str) and bool(re.fullmatch(r"\d{2}:\d{2}", value)), "expects a time HH:MM",
              "string")
        try:
            time.fromisoformat(value)
        except ValueError:
            raise FieldValueError("expects a time HH:MM", expected="string") from None
        return value
    if t == "rating":
        top = int(block.get("maxStars", 5))
        _need(isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= top,
              f"expects a whole number of stars from 1 to {top}", "integer")
        return value
    if t == "scale":
        lo, hi = int(block.get("min", 0)), int(block.get("max", 10))
        _need(isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi,
              f"expects a whole number from {lo} to {hi}", "integer")
        return value
    if t == "switch":
        _need(isinstance(value, bool), "expects true or false", "boolean")
        return value
    if ft.kind == "choice":
        return _option_key(block, value)
    if ft.kind == "multi":
        keys = [o["key"] for o in options_of(block)]
        _need(isinstance(value, list), "expects a list of option keys", "array", keys)
        picked = [_option_key(block, v) for v in value]
        _need(len(set(picked)) == len(picked), "lists an option twice", "array", keys)
        return picked
    if ft.kind == "matrix":
        rows = {r["key"]: r for r in block.get("rows") or []}
        cols = [c["key"] for c in block.get("columns") or []]
        _need(isinstance(value, dict), "expects an object mapping row keys to column keys", "object")
        for rk, ck in value.items():
            _need(rk in rows, f"has no row {rk!r}", "object", list(rows))
            _need(isinstance(ck, str) and ck in cols, f"row {rk!r} expects a column key", "string", cols)
        return dict(value)
    if ft.kind == "group":
        return _group(block, value)
    if ft.kind == "file":
        return _file_list(block, value)
    if ft.kind == "payment":
        return _payment(value)
    if ft.kind == "booking":
        return _booking(value)
    raise FieldValueError("takes no value", expected="none")


def is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


# -- display ---------------------------------------------------------------------


def _label(block: dict[str, Any], key: Any) -> str:
    for o in options_of(block):
        if o["key"] == key:
            return o["label"]
    return str(key)


def _money(v: dict[str, Any]) -> str:
    amount = v.get("amount")
    amount = float(amount) if _is_number(amount) else 0.0
    currency = str(v.get("currency") or "").upper()
    symbol = {"USD": "$", "EUR": "€", "GBP": "£"}.get(currency, "")
    status = str(v.get("status", "")).replace("_", " ").capitalize()
    return f"{symbol}{amount:,.2f} {currency} · {status}".strip()


def display(block: dict[str, Any], value: Any) -> str:
    """Human-readable text of an answer: labels for keys, file names, joined instances.
    Never raises for a value :func:`check_value` accepted."""
    if value is None:
        return ""
    ft = field_type(block)
    if ft.type == "switch":
        return "Yes" if value else "No"
    if ft.kind == "choice":
        return _label(block, value)
    if ft.kind == "multi":
        return ", ".join(_label(block, v) for v in value)
    if ft.kind == "matrix":
        rows = {r["key"]: r["label"] for r in block.get("rows") or []}
        cols = {c["key"]: c["label"] for c in block.get("columns") or []}
        return ", ".join(f"{rows.get(r, r)}: {cols.get(c, c)}" for r, c in value.items())
    if ft.kind == "group":
        members = {m["key"]: m for m in block.get("members") or [] if is_question(m)}
        parts = []
        for inst in value:
            parts.append(" / ".join(display(members[k], v) for k, v in inst.items() if k in members))
        return ", ".join(parts)
    if ft.kind == "file":
        return ", ".join(f["name"] for f in value)
    if ft.kind == "payment":
        return _money(value)
    if ft.kind == "booking":
        title = value.get("eventTitle") or "Appointment"
        return f"{title} · {value.get('start') or ''} ({value.get('status', '')})"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# -- calculated fields -------------------------------------------------------------

_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}
MAX_FORMULA = 500  # characters: a form's arithmetic, not a program


def calculate(formula: str, answers: dict[str, Any]) -> float | int | None:
    """Evaluate a calculated field's arithmetic (``+ - * /``, parentheses, numbers and
    field keys, such as ``quantity * unit_price``) over other answers. Missing or
    non-numeric inputs count as 0. The result is rounded to 10 decimals (so 0.1 * 3 reads
    0.3) and whole numbers come back as int. A division by zero, or a result too large
    for a double, yields None. A formula that is not such arithmetic raises ValueError."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and _is_number(node.value):
            return node.value
        if isinstance(node, ast.Name):
            v = answers.get(node.id)
            return v if _is_number(v) else 0
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(f"unsupported expression in formula {formula!r}: use numbers, field keys, "
                         "+ - * / and parentheses")

    if not isinstance(formula, str) or len(formula) > MAX_FORMULA:
        raise ValueError(f"a formula is a string of at most {MAX_FORMULA} characters")
    try:
        result = ev(ast.parse(formula.strip(), mode="eval"))
    except ZeroDivisionError:
        return None
    except (SyntaxError, RecursionError, MemoryError):
        raise ValueError(f"formula {formula!r} is not arithmetic over field keys") from None
    if not _is_number(result):
        return None
    if isinstance(result, float):
        result = round(result, 10)
    if isinstance(result, float) and result.is_integer():
        return int(result)
    return result


def validate_formula(formula: str) -> None:
    """Raise ValueError unless ``formula`` is arithmetic :func:`calculate` evaluates."""
    calculate(formula, {})


# -- samples -----------------------------------------------------------------------


def sample_value(block: dict[str, Any]) -> Any:
    """A plausible answer for a field, built without real data (for sample payloads)."""
    ft = field_type(block)
    t = ft.type
    simple = {"text": "Sample text", "textarea": "A longer sample answer.", "email": "jane@example.com",
              "phone": "+1 555 0100", "url": "https://example.com", "number": 42, "date": "2026-01-15",
              "time": "09:30", "switch": True, "hidden": "sample-context", "calculated": 42}
    if t in simple:
        return simple[t]
    if t == "rating":
        return min(4, int(block.get("maxStars", 5)))
    if t == "scale":
        return int(block.get("max", 10))
    if ft.kind == "choice":
        opts = options_of(block)
        return opts[0]["key"] if opts else None
    if ft.kind == "multi":
        return [o["key"] for o in options_of(block)[:2]]
    if ft.kind == "matrix":
        cols = block.get("columns") or []
        return {r["key"]: cols[-1]["key"] for r in block.get("rows") or []} if cols else {}
    if ft.kind == "group":
        members = [m for m in block.get("members") or [] if is_question(m)]
        return [{m["key"]: sample_value(m) for m in members}]
    if t == "signature":
        return [{"name": "signature.png", "type": "image/png", "size": 2048,
                 "url": "https://example.com/files/signature.png"}]
    if ft.kind == "file":
        return [{"name": "sample.pdf", "type": "application/pdf", "size": 1024,
                 "url": "https://example.com/files/sample.pdf"}]
    if ft.kind == "payment":
        return {"status": "paid", "amount": 40.0, "currency": "USD", "amountRefunded": 0,
                "receiptUrl": "https://example.com/receipt", "paidAt": "2026-01-15T09:30:00.000Z",
                "refundedAt": None, "disputedAt": None, "provider": "stripe",
                "providerPaymentIntentId": "pi_sample"}
    if ft.kind == "booking":
        return {"status": "confirmed", "start": "2026-01-15T09:30:00.000Z", "end": "2026-01-15T10:00:00.000Z",
                "timeZone": "UTC", "attendee": {"name": "Jane Doe", "email": "jane@example.com"},
                "provider": "cal", "providerBookingId": "bk_sample", "eventTitle": "Intro call"}
    return None
