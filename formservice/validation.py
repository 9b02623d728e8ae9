"""Params validation: pydantic errors turned into one VALIDATION_ERROR that names the
offending param (dotted for nesting), what was wrong and what is accepted."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from .errors import ApiError

EXPECTED_TYPE = {
    "string_type": "string",
    "int_type": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "bool_type": "boolean",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "list_type": "array",
    "none_required": "null",
}


def _unwrap(tp: Any) -> list[Any]:
    """The alternatives of an annotation: Optional/Union/Annotated peeled off."""
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(get_args(tp)[0])
    if origin in (Union, types.UnionType):
        out: list[Any] = []
        for arg in get_args(tp):
            out.extend(_unwrap(arg))
        return out
    return [tp]


def _models(tp: Any) -> list[type[BaseModel]]:
    return [t for t in _unwrap(tp) if isinstance(t, type) and issubclass(t, BaseModel)]


def _literal_values(tp: Any) -> list[Any] | None:
    for alt in _unwrap(tp):
        if get_origin(alt) is Literal:
            return list(get_args(alt))
    return None


def _walk(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[str, list[str], Any]:
    """Follow a pydantic error location through the params model. Returns the dotted
    field name (discriminator tags and union-member names dropped), the valid keys of the
    object the error sits in, and the annotation of the field."""
    path: list[str] = []
    current: Any = model
    valid_keys: list[str] = sorted(model.model_fields)
    annotation: Any = None
    for part in loc:
        models = _models(current)
        if isinstance(part, int):
            path.append(str(part))
            args = [a for alt in _unwrap(current) for a in get_args(alt)]
            current = args[0] if args else Any
            continue
        if models:
            owner = next((m for m in models if part in m.model_fields), None)
            if owner is not None:
                valid_keys = sorted(owner.model_fields)
                annotation = owner.model_fields[part].annotation
                current = annotation
                path.append(part)
                continue
            # a union member's tag or class name: narrow to it, add nothing to the path
            tagged = [m for m in models if _tag_of(m) == part or m.__name__ == part]
            if tagged:
                current = tagged[0]
                continue
            if len(models) == 1 and part not in models[0].model_fields:
                # an extra key: keep it in the path, the valid keys are the model's
                valid_keys = sorted(models[0].model_fields)
                path.append(part)
                current = Any
                continue
        args = [a for alt in _unwrap(current) for a in get_args(alt)]
        path.append(str(part))
        current = args[-1] if args else Any
    return ".".join(path), valid_keys, annotation


def _tag_of(model: type[BaseModel]) -> Any:
    f = model.model_fields.get("type")
    if f is not None:
        vals = _literal_values(f.annotation)
        if vals and len(vals) == 1:
            return vals[0]
    return None


def _describe(err: dict[str, Any], field: str, annotation: Any) -> tuple[str, dict[str, Any]]:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    where = field or "params"
    details: dict[str, Any] = {"field": field} if field else {}
    if kind == "missing":
        details["reason"] = "REQUIRED"
        return f"{where} is required.", details
    if kind in EXPECTED_TYPE:
        expected = EXPECTED_TYPE[kind]
        if kind == "model_type" or kind == "dict_type":
            expected = "object"
        details.update(reason="INVALID_TYPE", expectedType=expected)
        got = type(err.get("input")).__name__
        got = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object",
               "list": "array", "NoneType": "null"}.get(got, got)
        return f"{where} must be {_article(expected)} {expected}, not {_article(got)} {got}.", details
    if kind in ("literal_error", "enum"):
        values = _literal_values(annotation) or []
        details.update(reason="INVALID_VALUE", validValues=values)
        shown = ", ".join(repr(v) if not isinstance(v, str) else v for v in values)
        return f"{where} must be one of: {shown}.", details
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tags = [t.strip().strip("'") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip()]
        details.update(field=f"{field}.type" if field else "type", reason="INVALID_VALUE", validValues=tags)
        return f"{where}.type must be one of: {', '.join(tags)}.", details
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        details["reason"] = "OUT_OF_RANGE"
        op = {"greater_than_equal": "at least", "greater_than": "more than",
              "less_than_equal": "at most", "less_than": "less than"}[kind]
        bound = next(iter(ctx.values()))
        return f"{where} must be {op} {bound}.", details
    if kind in ("string_too_short", "string_too_long", "too_short", "too_long"):
        details["reason"] = "OUT_OF_RANGE"
        if "min_length" in ctx and kind.endswith("short"):
            unit = "characters" if kind.startswith("string") else "items"
            return f"{where} must have at least {ctx['min_length']} {unit}.", details
        unit = "characters" if kind.startswith("string") else "items"
        return f"{where} must have at most {ctx.get('max_length')} {unit}.", details
    if kind == "value_error":
        details.setdefault("reason", "INVALID_VALUE")
        msg = str(ctx.get("error") or err.get("msg"))
        return (msg if msg.startswith(where) else f"{where}: {msg}").rstrip(".") + ".", details
    if kind == "string_pattern_mismatch":
        details["reason"] = "INVALID_FORMAT"
        return f"{where} must match {ctx.get('pattern')}.", details
    details["reason"] = "INVALID_VALUE"
    return f"{where}: {err.get('msg', 'invalid value')}.", details


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


P = typing.TypeVar("P", bound=BaseModel)


def parse_params(model: type[P], params: dict[str, Any]) -> P:
    """Validate ``params`` against ``model``; raise one VALIDATION_ERROR naming the first
    problem (an unknown key first, since a typo explains the rest)."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        errors.sort(key=lambda e: (e["type"] != "extra_forbidden", e["type"] == "missing"))
        err = errors[0]
        field, valid_keys, annotation = _walk(model, tuple(err["loc"]))
        if err["type"] == "extra_forbidden":
            key = field.rsplit(".", 1)[-1]
            hint = _closest(key, valid_keys)
            msg = f"Unknown param {field}." + (f" Did you mean {hint}?" if hint else "")
            msg += f" Valid keys here: {', '.join(valid_keys)}."
            raise ApiError("VALIDATION_ERROR", msg, reason="UNKNOWN_PARAM", field=field,
                           validKeys=valid_keys) from None
        message, details = _describe(err, field, annotation)
        if len(errors) > 1:
            message += f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} in params.)"
        raise ApiError("VALIDATION_ERROR", message, **details) from None


def _closest(word: str, candidates: list[str]) -> str | None:
    import difflib

    match = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    if match:
        return match[0]
    lowered = {c.lower(): c for c in candidates}
    return lowered.get(word.lower())
