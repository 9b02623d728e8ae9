"""The OpenAPI 3.1 document of ``/api/v1``, generated from the same pydantic models that
validate params and shape results, so it cannot drift from the code."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from .domain.base import METHODS
from .errors import CODES, HTTP_STATUS

API_VERSION = "2026-09-24"


# pydantic leaves a bound on a union (``Annotated[int | float, Field(ge=0)]``) under its
# Python name; JSON Schema spells it differently.
BOUND_KEYWORDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}
DATA_KEYWORDS = frozenset({"const", "enum", "examples"})  # their values are data, never schemas


def _envelope_name(method: str) -> str:
    return "Call_" + method.replace(".", "_")


def _allows_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(isinstance(alt, dict) and _allows_null(alt) for alt in schema.get("anyOf", []) + schema.get("oneOf", []))


def to_json_schema(node: Any, names: bool = False) -> Any:
    """``node`` with what pydantic emits but JSON Schema does not mean fixed: leftover
    bound names become JSON Schema keywords, and ``default: null`` on a param that does
    not take null is dropped (there it only means "omitted: left unchanged").
    ``names`` marks a ``properties`` map, whose keys are param names, never keywords."""
    if isinstance(node, list):
        return [to_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if names:
            out[key] = to_json_schema(value)
        elif key in DATA_KEYWORDS:
            out[key] = value
        elif key in BOUND_KEYWORDS and isinstance(value, int | float):
            out[BOUND_KEYWORDS[key]] = value
        elif key == "default":
            if value is not None or _allows_null(node):
                out[key] = value
        else:
            out[key] = to_json_schema(value, names=key == "properties")
    return out


def _needs_params(model: type[BaseModel]) -> bool:
    return any(f.is_required() for f in model.model_fields.values())


def build() -> dict[str, Any]:
    """The OpenAPI 3.1 document: one operation, ``POST /api/v1``, whose body is one of
    the per-method envelopes (``method`` is the discriminator)."""
    methods = [METHODS[n] for n in sorted(METHODS)]
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = []
    for m in methods:
        models.append((m.params, "validation"))
        if m.result is not None:
            models.append((m.result, "serialization"))
    keyed, defs = models_json_schema(models, ref_template="#/components/schemas/{model}")
    schemas: dict[str, Any] = to_json_schema(dict(defs.get("$defs", {})))
    calls, results = [], []
    mapping = {}
    for m in methods:
        env = _envelope_name(m.name)
        params_ref = keyed[(m.params, "validation")]
        if not _needs_params(m.params):  # omitted, or null (read as omitted): the envelope's rule
            params_ref = {"anyOf": [params_ref, {"type": "null"}]}
        schemas[env] = {
            "type": "object",
            "title": m.name,
            "description": m.summary,
            "properties": {"method": {"type": "string", "const": m.name}, "params": params_ref},
            # params may be omitted only when the method needs none of them
            "required": ["method", "params"] if _needs_params(m.params) else ["method"],
            "additionalProperties": False,
        }
        if m.result is not None:
            # what ``data`` holds when this method succeeds (Success lists every method's)
            schemas[env]["x-result"] = keyed[(m.result, "serialization")]
        mapping[m.name] = f"#/components/schemas/{env}"
        calls.append({"$ref": f"#/components/schemas/{env}"})
        if m.result is not None:
            results.append(keyed[(m.result, "serialization")])
    schemas["Error"] = {
        "type": "object",
        "properties": {
            "ok": {"const": False},
            "error": {
                "type": "object",
                "properties": {
                    "code": {"type": "string", "enum": sorted(CODES)},
                    "message": {"type": "string"},
                    "details": {
                        "type": "object",
                        "properties": {
                            "reason": {"type": "string"},
                            "field": {"type": "string"},
                            "validKeys": {"type": "array", "items": {"type": "string"}},
                            "validValues": {"type": "array"},
                            "expectedType": {"type": "string"},
                            "feature": {"type": "string"},
                            "retryAfterMs": {"type": "integer", "minimum": 0},
                        },
                    },
                },
                "required": ["code", "message"],
            },
        },
        "required": ["ok", "error"],
    }
    schemas["Success"] = {
        "type": "object",
        "properties": {"ok": {"const": True}, "data": {"anyOf": results or [{}]}},
        "required": ["ok", "data"],
    }
    responses: dict[str, Any] = {"200": {"description": "Success",
                                         "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Success"}}}}}
    for status in sorted({str(s) for s in HTTP_STATUS.values()}):
        codes = [c for c, s in HTTP_STATUS.items() if str(s) == status]
        responses[status] = {"description": " or ".join(codes),
                             "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Form Collection Service", "version": "v1",
                 "description": "JSON-RPC over POST /api/v1. Every call names a method and its params. "
                                f"Events carry apiVersion {API_VERSION}."},
        "servers": [{"url": "/"}],
        "paths": {
            "/api/v1": {
                "post": {
                    "operationId": "call",
                    "summary": "Call a method",
                    "security": [{"bearer": []}],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {
                            "oneOf": calls,
                            "discriminator": {"propertyName": "method", "mapping": mapping},
                        }}},
                    },
                    "responses": responses,
                }
            }
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "fb_ API token or fbo_ OAuth access token"}},
        },
    }


_CACHE: dict[str, Any] = {}


async def handle(_request: web.Request) -> web.Response:
    if "doc" not in _CACHE:
        _CACHE["doc"] = build()
    return web.json_response(_CACHE["doc"])
