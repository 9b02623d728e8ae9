"""The JSON-RPC binding of ``POST /api/v1``: read and check the envelope, authenticate,
dispatch to the domain, and map every outcome to ``{ok, data}`` / ``{ok, error}``."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from typing import Any

from aiohttp import web

from .dialect import shape_error, shape_result
from .errors import ApiError
from .faults import Fault
from .service import Service

log = logging.getLogger("formservice.rpc")
SERVICE_KEY = web.AppKey("service", Service)
MAX_BODY = 1024 * 1024
MAX_DEPTH = 64  # levels of objects and arrays in one body


async def read_limited(request: web.Request, limit: int = MAX_BODY) -> bytes:
    """The request body, refused with VALIDATION_ERROR past ``limit`` bytes (checked
    before and while reading, so an oversized body is never held whole)."""
    too_big = ApiError("VALIDATION_ERROR", f"Request body is over the {limit // 1024 // 1024} MiB limit.",
                       reason="BODY_TOO_LARGE")
    if request.content_length is not None and request.content_length > limit:
        raise too_big
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


SAFE_INTEGER = 2**53  # past it, a float no longer holds every integer exactly


def _finite(text: str) -> float | int:
    """A JSON number written with a fraction or an exponent. An integral one (``24.0``,
    ``1e2``) is the integer: JSON and JSON Schema do not tell 24.0 from 24, so a param
    published as an integer takes both."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:24]} is out of range")
    if value.is_integer() and abs(value) <= SAFE_INTEGER:
        return int(value)
    return value


def check_tree(value: Any) -> None:
    """Refuse what JSON parsing lets through but nothing downstream can hold: nesting past
    MAX_DEPTH and strings with lone UTF-16 surrogates (not Unicode text, so not storable)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise ApiError("VALIDATION_ERROR", f"Request body nests deeper than {MAX_DEPTH} levels.",
                               reason="TOO_DEEP")
            children = list(item.items()) if isinstance(item, dict) else [(None, v) for v in item]
            for key, child in children:
                if key is not None:
                    _check_text(key)
                stack.append((child, depth + 1))
        elif isinstance(item, str):
            _check_text(item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError("VALIDATION_ERROR",
                       "Request body holds a string with a lone UTF-16 surrogate escape (such as \\ud800); "
                       "send valid Unicode text.", reason="INVALID_UNICODE") from None


def load_json(body: bytes) -> Any:
    """``body`` parsed as JSON the way both endpoints read it: no NaN or Infinity, an
    integral number written with a fraction is the integer. Raises what ``json.loads``
    raises (ValueError, UnicodeDecodeError, RecursionError); :func:`check_tree` is the
    caller's next step."""
    return json.loads(body, parse_constant=_reject_constant, parse_float=_finite)


def json_type(value: Any) -> str:
    """``value``'s JSON type with its article, for messages: "an array", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def parse_envelope(body: bytes) -> tuple[str, Any]:
    """The method name and params of a JSON-RPC body, or VALIDATION_ERROR saying what is
    wrong with the envelope."""
    if not body.strip():
        raise ApiError("VALIDATION_ERROR", 'Request body is empty; send {"method": "...", "params": {...}}.',
                       reason="EMPTY_BODY")
    try:
        envelope = load_json(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError("VALIDATION_ERROR", f"Request body is not valid JSON ({exc}).",
                       reason="MALFORMED_JSON") from None
    except RecursionError:
        raise ApiError("VALIDATION_ERROR", f"Request body nests deeper than {MAX_DEPTH} levels.",
                       reason="TOO_DEEP") from None
    check_tree(envelope)
    if not isinstance(envelope, dict):
        raise ApiError("VALIDATION_ERROR",
                       f'Request body must be a JSON object {{"method": "...", "params": {{...}}}}, '
                       f"not {json_type(envelope)}.", reason="INVALID_ENVELOPE", expectedType="object")
    extra = sorted(set(envelope) - {"method", "params"})
    if extra:
        raise ApiError("VALIDATION_ERROR", f"Unknown envelope key {extra[0]}; the body holds method and params.",
                       reason="UNKNOWN_PARAM", field=extra[0], validKeys=["method", "params"])
    if "method" not in envelope:
        raise ApiError("VALIDATION_ERROR", 'The body has no "method"; name one such as "forms.list".',
                       reason="REQUIRED", field="method")
    name = envelope["method"]
    if not isinstance(name, str) or not name:
        got = "an empty string" if name == "" else json_type(name)
        raise ApiError("VALIDATION_ERROR", f'"method" must be a non-empty string such as "forms.list", not {got}.',
                       reason="INVALID_TYPE", field="method", expectedType="string")
    params = envelope.get("params")
    if params is not None and not isinstance(params, dict):
        raise ApiError("VALIDATION_ERROR", f'"params" must be a JSON object, or omitted; got {json_type(params)}.',
                       reason="INVALID_TYPE", field="params", expectedType="object")
    return name, params


def ok(data: Any) -> web.Response:
    return web.json_response({"ok": True, "data": data})


def fail(err: ApiError) -> web.Response:
    """The failure envelope; a throttled call also gets ``Retry-After`` (whole seconds,
    rounded up from ``retryAfterMs``), the HTTP way of saying how long to wait."""
    headers = {}
    wait = err.details.get("retryAfterMs")
    if err.code == "RATE_LIMITED" and isinstance(wait, int):
        headers["Retry-After"] = str(max(0, math.ceil(wait / 1000)))
    return web.json_response({"ok": False, "error": err.to_wire()}, status=err.status, headers=headers)


def internal(exc: BaseException) -> web.Response:
    log.exception("unexpected failure", exc_info=exc)
    return fail(ApiError("INTERNAL_ERROR", "Unexpected server error; the call changed nothing. Retry later."))


def client_ip(request: web.Request) -> str:
    return request.remote or "unknown"


async def handle(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    fault = Fault()
    try:
        body = await read_limited(request)
        caller = service.authenticate(request.headers.get("Authorization"), client_ip(request))
        name, params = parse_envelope(body)
        fault = service.faults.next(name)
        if fault.latency_ms:
            await asyncio.sleep(fault.latency_ms / 1000)
        refused = refusal(fault, service.dialect)
        if refused is not None:
            return refused
        response = ok(shape_result(service.dialect, name, service.invoke(caller, name, params)))
    except ApiError as err:
        response = fail(shape_error(service.dialect, err))
    except Exception as exc:  # never a bare 500 page: the closed code set holds
        response = internal(exc)
    if fault.kind in ("reset", "drop_after_commit"):
        cut_connection(request, response, partial=fault.kind == "reset")
    return response


# -- the sandbox's injected faults (formservice/faults.py decides, these apply) ------------


def injected_rate_limit(fault: Fault) -> ApiError:
    return ApiError("RATE_LIMITED", f"Rate limit reached; retry in {fault.retry_after_ms} ms.",
                    reason="RATE_LIMITED", retryAfterMs=fault.retry_after_ms)


def proxy_page(status: int) -> web.Response:
    """What a proxy in front of the service answers for a 502/503/504: not the API's envelope."""
    return web.Response(status=status, text=f"{status} upstream unavailable\n")


def refusal(fault: Fault, dialect: str = "full") -> web.Response | None:
    """The answer of a call the fault plan refuses before it runs, or None to run it."""
    if fault.kind == "rate_limited":
        return fail(shape_error(dialect, injected_rate_limit(fault)))
    if fault.kind == "error_5xx":
        if fault.status == 500:
            return fail(ApiError("INTERNAL_ERROR", "Unexpected server error; the call changed nothing. Retry later."))
        return proxy_page(fault.status)
    return None


def cut_connection(request: web.Request, response: web.Response, *, partial: bool) -> None:
    """Close the connection of a call that ran: after the status line, the headers and
    half the body (``partial``), or before sending a byte. The client sees the call fail
    although its change is committed."""
    transport = request.transport
    if transport is None or transport.is_closing():
        return
    if partial:
        body = bytes(response.body or b"")  # type: ignore[arg-type]
        head = (f"HTTP/1.1 {response.status} {response.reason}\r\nContent-Type: application/json; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        transport.write(head + body[: len(body) // 2])
        transport.close()  # sends what was written, then closes: the body stops short
    else:
        transport.abort()  # nothing sent


async def no_route(request: web.Request) -> web.Response:
    """Any other path under ``/api``: the JSON failure envelope (NOT_FOUND ``No route``)
    rather than a plain-text page, so a client with a wrong base address or version
    learns what to fix. A known path called with the wrong HTTP method stays 405."""
    allowed = sorted({r.method for r in request.app.router.routes()
                      if r.method != "*" and r.resource is not None and _serves(r.resource, request.path)})
    if allowed:  # what aiohttp answers when this route is absent
        raise web.HTTPMethodNotAllowed(request.method, allowed)
    return fail(ApiError("NOT_FOUND", f"No route: {request.method} {request.path}. The JSON-RPC endpoint is "
                         "POST /api/v1 (the agent endpoint POST /api/mcp).", reason="NO_ROUTE"))


def _serves(resource: web.AbstractResource, path: str) -> bool:
    """Whether ``resource`` (plain or with {placeholders}) matches ``path``."""
    info = resource.get_info()
    if "path" in info:
        return info["path"] == path
    pattern = info.get("pattern")
    return bool(pattern is not None and pattern.fullmatch(path))
