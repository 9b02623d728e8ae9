"""Params validation: pydantic errors turned into one VALIDATION_ERROR that names the
offending param (dotted for nesting), what was wrong and what is accepted."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

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


def _label_matches(alt: Any, label: Any) -> bool:
    """Whether ``label`` (the member name pydantic puts in an error location when it
    tried one alternative of a union) names the alternative ``alt``."""
    if isinstance(alt, type) and issubclass(alt, BaseModel):
        return label in (_tag_of(alt), alt.__name__)
    name = getattr(alt, "__name__", None)
    return label == name or label == str(alt) or label == repr(alt)


def _walk(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[str, list[str], Any]:
    """Follow a pydantic error location through the params model. Returns the dotted
    field name (discriminator tags and union-member labels dropped), the valid keys of
    the object the error sits in, and the annotation found at the end of the location."""
    path: list[str] = []
    current: Any = model
    valid_keys: list[str] = sorted(model.model_fields)
    for part in loc:
        alts = [a for a in _unwrap(current) if a is not type(None)]
        if len(alts) > 1:
            # Past a union pydantic names the member it tried (a tag, a class or type
            # name): that label is no param, so narrow to the member and go on.
            current = next((a for a in alts if _label_matches(a, part)), Any)
            continue
        models = _models(current)
        if models:
            owner = models[0]
            valid_keys = sorted(owner.model_fields)
            path.append(str(part))
            # an unknown key has no annotation; its valid keys are the model's
            current = owner.model_fields[part].annotation if part in owner.model_fields else Any
            continue
        # inside a container: a list item (int index) or a dict value (string key)
        args = [a for alt in alts for a in get_args(alt)]
        path.append(str(part))
        if not args:
            current = Any
        else:
            current = args[0] if isinstance(part, int) else args[-1]
    return ".".join(path), valid_keys, current


def _tag_of(model: type[BaseModel]) -> Any:
    f = model.model_fields.get("type")
    if f is not None:
        vals = _literal_values(f.annotation)
        if vals and len(vals) == 1:
            return vals[0]
    return None


JSON_NAMES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object",
              "list": "array", "NoneType": "null"}


def _expected(errors: list[ErrorDetails]) -> str:
    """The accepted type(s) named by type errors at one field; a number covers an integer."""
    names = list(dict.fromkeys(EXPECTED_TYPE[e["type"]] for e in errors))
    if "number" in names and "integer" in names:
        names.remove("integer")
    return " or ".join(names)


def _union_tags(annotation: Any, ctx: dict[str, Any]) -> list[Any]:
    tags = [t for t in (_tag_of(m) for m in _models(annotation)) if t is not None]
    if tags:
        return tags
    return [t.strip().strip("'") for t in str(ctx.get("expected_tags", "")).split(",") if t.strip()]


def _describe(errors: list[ErrorDetails], field: str, annotation: Any) -> tuple[str, dict[str, Any]]:
    """Message and details for the errors pydantic reported at one ``field``."""
    err = errors[0]
    kind = err["type"]
    ctx = err.get("ctx") or {}
    where = field or "params"
    details: dict[str, Any] = {"field": field} if field else {}
    if kind == "missing":
        details["reason"] = "REQUIRED"
        return f"{where} is required.", details
    if all(e["type"] in EXPECTED_TYPE for e in errors):
        expected = _expected(errors)
        details.update(reason="INVALID_TYPE", expectedType=expected)
        got = type(err.get("input")).__name__
        got = JSON_NAMES.get(got, got)
        return f"{where} must be {_article(expected)} {expected}, not {_article(got)} {got}.", details
    if kind in ("literal_error", "enum"):
        values = _literal_values(annotation) or [v.strip().strip("'") for v in
                                                 str(ctx.get("expected", "")).replace(" or ", ",").split(",")]
        details.update(reason="INVALID_VALUE", validValues=values)
        shown = ", ".join(repr(v) if not isinstance(v, str) else v for v in values)
        return f"{where} must be one of: {shown}.", details
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        tags = _union_tags(annotation, ctx)
        tag_field = f"{field}.type" if field else "type"
        details.update(field=tag_field, validValues=tags)
        if kind == "union_tag_not_found":
            details["reason"] = "REQUIRED"
            return f"{tag_field} is required; one of: {', '.join(map(str, tags))}.", details
        details["reason"] = "INVALID_VALUE"
        return f"{tag_field} must be one of: {', '.join(map(str, tags))}.", details
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        details["reason"] = "OUT_OF_RANGE"
        op = {"greater_than_equal": "at least", "greater_than": "more than",
              "less_than_equal": "at most", "less_than": "less than"}[kind]
        bound = next(iter(ctx.values()))
        return f"{where} must be {op} {bound}.", details
    if kind in ("string_too_short", "string_too_long", "too_short", "too_long"):
        details["reason"] = "OUT_OF_RANGE"
        unit = "characters" if kind.startswith("string") else "items"
        if "min_length" in ctx and kind.endswith("short"):
            return f"{where} must have at least {ctx['min_length']} {unit}.", details
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
    problem (its field, dotted for nesting; a reason; validKeys, validValues or
    expectedType where they apply) and counting the others."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
    # An unknown key first (a typo explains the rest), a missing one last; among the
    # others the deepest, since past a union it is the member whose shape the input has.
    errors.sort(key=lambda e: (e["type"] != "extra_forbidden", e["type"] == "missing", -len(e["loc"])))
    walked = [(_walk(model, tuple(e["loc"])), e) for e in errors]
    (field, valid_keys, annotation), err = walked[0]
    if err["type"] == "extra_forbidden":
        key = field.rsplit(".", 1)[-1]
        hint = _closest(key, valid_keys)
        msg = f"Unknown param {field}." + (f" Did you mean {hint}?" if hint else "")
        msg += f" Valid keys here: {', '.join(valid_keys)}."
        raise ApiError("VALIDATION_ERROR", msg, reason="UNKNOWN_PARAM", field=field, validKeys=valid_keys)
    # the alternatives of a union each report at the same field: describe them together
    here = [e for (f, _, _), e in walked if f == field and e["type"] != "extra_forbidden"]
    message, details = _describe(here, field, annotation)
    others = len({f for (f, _, _), _ in walked if f != field and not field.startswith(f + ".")})
    if others:
        message += f" ({others} more problem{'s' if others > 1 else ''} in params.)"
    raise ApiError("VALIDATION_ERROR", message, **details)


def _closest(word: str, candidates: list[str]) -> str | None:
    import difflib

    match = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    if match:
        return match[0]
    lowered = {c.lower(): c for c in candidates}
    return lowered.get(word.lower())
