"""The agent (MCP) binding of ``POST /api/mcp``: streamable HTTP with JSON responses
only (no SSE stream, no session id), protocol version ``2025-11-25``.

Every POST carries a bearer token, ``initialize`` included; a failure is HTTP 401 with
``WWW-Authenticate`` pointing at the protected-resource metadata. The body is one
JSON-RPC 2.0 message, checked with the official SDK's models: a notification (or a
response) is accepted with 202 and no body; a request is answered with the SDK's result
types. Only ``tools/call`` spends the rate budget; over it, the HTTP status stays 200
and the tool result is an error carrying ``RATE_LIMITED`` and ``retryAfterMs``. The
tools themselves are in :mod:`formservice.agent.tools`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import SplitResult, urlsplit

from aiohttp import web
from mcp import types as mt
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
from pydantic import AnyUrl, BaseModel, ValidationError

from . import rpc
from .agent import guides
from .agent import tools as agent_tools
from .dialect import shape_error, shape_tool_result
from .domain.agentops import AGENT_METHODS
from .domain.oauth import is_loopback
from .errors import ApiError
from .faults import Fault
from .service import Caller, Service

log = logging.getLogger("formservice.mcp")
PATH = "/api/mcp"
PROTOCOL_VERSION = "2025-11-25"
VERSION_HEADER = "MCP-Protocol-Version"
AUTH_ERROR = -32001  # server-defined JSON-RPC code: the bearer token was refused
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for an unknown resource URI


def _server_version() -> str:
    try:
        return version("formsync")
    except PackageNotFoundError:
        return "0.0.0"


SERVER_INFO = mt.Implementation(name="formstep", title="Form Collection Service", version=_server_version())


class RpcError(Exception):
    """A JSON-RPC error answer, with the HTTP status it travels with."""

    def __init__(self, code: int, message: str, *, status: int = 200, data: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.data, self.headers = code, message, status, data, headers


def _error_body(msg_id: Any, err: RpcError) -> dict[str, Any]:
    error = mt.ErrorData(code=err.code, message=err.message, data=err.data)
    # JSON-RPC answers an unreadable request with id null, which the SDK's JSONRPCError
    # (whose id is a string or number) cannot hold, so the envelope is assembled here.
    return {"jsonrpc": "2.0", "id": msg_id, "error": error.model_dump(mode="json", exclude_none=True)}


# -- the HTTP layer --------------------------------------------------------------------------


async def handle(request: web.Request) -> web.StreamResponse:
    """``/api/mcp``: POST only (there is no SSE stream to GET, no session to DELETE)."""
    if request.method != "POST":
        err = RpcError(-32600, f"{request.method} is not supported on {PATH}: send each JSON-RPC message as a POST "
                       "(responses are JSON; there is no SSE stream and no session).", status=405,
                       headers={"Allow": "POST"})
        return _json(_error_body(None, err), err.status, err.headers)
    service: Service = request.app[rpc.SERVICE_KEY]
    msg_id: Any = None
    try:
        _check_origin(service, request)
        body = await _read(request)
        msg_id = _peek_id(body)  # so even a refused token is answered under the request's id
        caller = _authenticate(service, request)
        _check_version_header(request)
        message = _parse(body)
        if not isinstance(message, mt.JSONRPCRequest):
            return web.Response(status=202)  # notifications and responses get no body
        msg_id = message.id
        tool = _called_tool(message)
        fault = service.faults.next(tool.name) if tool is not None else Fault()
        if fault.latency_ms:
            await asyncio.sleep(fault.latency_ms / 1000)
        if fault.kind == "error_5xx":
            if fault.status != 500:
                return rpc.proxy_page(fault.status)
            raise RpcError(mt.INTERNAL_ERROR, "Unexpected server error; nothing was changed. Retry later.", status=500)
        if fault.kind == "rate_limited" and tool is not None:  # as the real limit answers: a tool error
            result: BaseModel = agent_tools.failure(tool, rpc.injected_rate_limit(fault))
        else:
            result = dispatch(service, caller, message)
        reply = mt.JSONRPCResponse(jsonrpc="2.0", id=msg_id, result=_dump(result))
        response = _json(reply.model_dump(by_alias=True, mode="json", exclude_none=True), 200)
        if fault.kind in ("reset", "drop_after_commit"):
            rpc.cut_connection(request, response, partial=fault.kind == "reset")
        return response
    except RpcError as err:
        return _json(_error_body(msg_id, err), err.status, err.headers)
    except Exception as exc:
        log.exception("agent endpoint failure", exc_info=exc)
        failure = RpcError(mt.INTERNAL_ERROR, "Unexpected server error; nothing was changed. Retry later.", status=500)
        return _json(_error_body(msg_id, failure), 500)


def _called_tool(message: mt.JSONRPCRequest) -> agent_tools.ToolDef | None:
    """The known tool a ``tools/call`` names (the sandbox's fault plan meets those calls)."""
    if message.method != "tools/call" or not isinstance(message.params, dict):
        return None
    name = message.params.get("name")
    return agent_tools.TOOLS.get(name) if isinstance(name, str) else None


def _json(body: dict[str, Any], status: int, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


def _dump(result: BaseModel) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def _read(request: web.Request) -> bytes:
    ctype = request.content_type
    if request.headers.get("Content-Type") and ctype != "application/json":
        raise RpcError(-32600, f"Content-Type {ctype} is not accepted; send application/json.", status=415)
    try:
        return await rpc.read_limited(request)
    except ApiError as err:
        raise RpcError(-32600, err.message, status=413, data=err.to_wire()) from None


def resource_metadata_url(service: Service) -> str:
    """Where an MCP client learns how to get a token (RFC 9728 protected-resource metadata)."""
    return f"{service.base_url}/.well-known/oauth-protected-resource"


def _authenticate(service: Service, request: web.Request) -> Caller:
    try:
        return service.authenticate(request.headers.get("Authorization"), rpc.client_ip(request))
    except ApiError as err:
        if err.code == "RATE_LIMITED":
            seconds = str(int(err.details.get("retryAfterMs", 1000)) // 1000 + 1)
            raise RpcError(AUTH_ERROR, err.message, status=429, data=err.to_wire(),
                           headers={"Retry-After": seconds}) from None
        challenge = f'Bearer resource_metadata="{resource_metadata_url(service)}"'
        if request.headers.get("Authorization"):  # RFC 6750: no error code when no token was sent
            text = err.message.replace('"', "'")
            challenge += f', error="invalid_token", error_description="{text}"'
        raise RpcError(AUTH_ERROR, err.message, status=401, data=err.to_wire(),
                       headers={"WWW-Authenticate": challenge}) from None


def allowed_origin(origin: str, base_url: str) -> bool:
    """Whether a browser page at ``origin`` may call the endpoint: the service's own
    origin, under any loopback spelling when it is served on loopback (``localhost``,
    ``127.0.0.1`` and ``[::1]`` at the same scheme and port are one origin there, as the
    MCP guidance for local servers has it), or the hosted service's own sites
    (``https://formstep.io`` and its subdomains). Pure."""
    if origin.rstrip("/") == base_url.rstrip("/"):
        return True
    parts = urlsplit(origin)
    host = parts.hostname or ""
    if is_loopback(host) and _same_loopback_origin(parts, urlsplit(base_url)):
        return True
    return parts.scheme == "https" and (host == "formstep.io" or host.endswith(".formstep.io"))


def _same_loopback_origin(origin: SplitResult, own: SplitResult) -> bool:
    """Both loopback, with the same scheme and port (a missing port is the scheme's)."""
    defaults = {"http": 80, "https": 443}
    try:
        ports = (origin.port or defaults.get(origin.scheme), own.port or defaults.get(own.scheme))
    except ValueError:  # a port that is no number: not an origin at all
        return False
    return (is_loopback(own.hostname or "") and origin.scheme == own.scheme and ports[0] is not None
            and ports[0] == ports[1] and not origin.path.strip("/") and not origin.query)


def _check_origin(service: Service, request: web.Request) -> None:
    """Cross-origin calls only from the service's own sites; a request without ``Origin``
    (every non-browser client) passes. A foreign origin is 403, so a page on another
    site (or a DNS-rebound name) cannot drive the endpoint with a stored token."""
    origin = request.headers.get("Origin")
    if origin is not None and not allowed_origin(origin, service.base_url):
        raise RpcError(-32600, f"Cross-origin calls from {origin} are not allowed; the agent endpoint takes "
                       "browser calls from the service's own sites only.", status=403)


def _check_version_header(request: web.Request) -> None:
    sent = request.headers.get(VERSION_HEADER)
    if sent is not None and sent not in SUPPORTED_PROTOCOL_VERSIONS:
        raise RpcError(-32600, f"{VERSION_HEADER} {sent} is not supported; supported versions: "
                       f"{', '.join(SUPPORTED_PROTOCOL_VERSIONS)}.", status=400,
                       data={"supported": list(SUPPORTED_PROTOCOL_VERSIONS)})


def _peek_id(body: bytes) -> Any:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    msg_id = data.get("id") if isinstance(data, dict) else None
    return msg_id if isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool)) else None


def _parse(body: bytes) -> mt.JSONRPCRequest | mt.JSONRPCNotification | mt.JSONRPCResponse | mt.JSONRPCError:
    """One JSON-RPC 2.0 message, validated with the SDK's models."""
    try:
        data = rpc.load_json(body)
        rpc.check_tree(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RpcError(mt.PARSE_ERROR, f"Parse error: the body is not valid JSON ({exc}).", status=400) from None
    except ApiError as err:
        raise RpcError(mt.PARSE_ERROR, f"Parse error: {err.message}", status=400, data=err.to_wire()) from None
    if isinstance(data, list):
        raise RpcError(mt.INVALID_REQUEST, "Batches are not supported: send one JSON-RPC message per POST.",
                       status=400)
    if not isinstance(data, dict):
        raise RpcError(mt.INVALID_REQUEST, "The body must be one JSON-RPC 2.0 message (a JSON object).", status=400)
    if "method" in data:
        model: type[BaseModel] = mt.JSONRPCRequest if "id" in data else mt.JSONRPCNotification
    elif "error" in data:
        model = mt.JSONRPCError
    else:
        model = mt.JSONRPCResponse
    try:
        return model.model_validate(data)  # type: ignore[return-value]
    except ValidationError as exc:
        raise RpcError(mt.INVALID_REQUEST, f"Invalid JSON-RPC 2.0 message: {_first(exc)}", status=400) from None


def _first(exc: ValidationError) -> str:
    e = exc.errors(include_url=False)[0]
    where = ".".join(map(str, e["loc"])) or "message"
    return f"{where}: {e['msg']}" + (f" ({len(exc.errors())} problems)" if len(exc.errors()) > 1 else "")


# -- the JSON-RPC methods ------------------------------------------------------------------------


Handler = Callable[[Service, Caller, Any], BaseModel]
HANDLERS: dict[str, tuple[type[BaseModel], Handler]] = {}


def _on(method: str, request_model: type[BaseModel]) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        HANDLERS[method] = (request_model, fn)
        return fn

    return deco


def dispatch(service: Service, caller: Caller, message: mt.JSONRPCRequest) -> BaseModel:
    """The result of one request, or RpcError (method not found, invalid params)."""
    entry = HANDLERS.get(message.method)
    if entry is None:
        raise RpcError(mt.METHOD_NOT_FOUND, f"Method not found: {message.method}.",
                       data={"validValues": sorted(HANDLERS)})
    request_model, fn = entry
    raw: dict[str, Any] = {"method": message.method}
    if message.params is not None:
        raw["params"] = message.params
    try:
        typed = request_model.model_validate(raw)
    except ValidationError as exc:
        raise RpcError(mt.INVALID_PARAMS, f"Invalid params for {message.method}: {_first(exc)}") from None
    return fn(service, caller, typed)


def _identity(service: Service, caller: Caller) -> dict[str, Any]:
    out: dict[str, Any] = service.invoke(caller, "identity", {}, throttle=False, registry=AGENT_METHODS)
    return out


def _no_cursor(params: mt.PaginatedRequestParams | None) -> None:
    if params is not None and params.cursor is not None:
        raise RpcError(mt.INVALID_PARAMS, "Invalid cursor: every list of this server fits in one page.")


@_on("initialize", mt.InitializeRequest)
def _initialize(service: Service, caller: Caller, req: mt.InitializeRequest) -> mt.InitializeResult:
    asked = req.params.protocolVersion
    chosen = asked if isinstance(asked, str) and asked in SUPPORTED_PROTOCOL_VERSIONS else mt.LATEST_PROTOCOL_VERSION
    who = _identity(service, caller)
    instructions = (
        f"You act in the workspace {who['workspaceName']!r} ({who['workspaceId']}, {who['plan']} plan): pass that "
        "id as workspaceId. tools/list shows every tool with its input schema; load_tools {catalog} adds a "
        "catalog's usage notes, load_skill {topic} loads a guide. Call fields_list before "
        "request_create, and poll request_get on the order of minutes."
    )
    return mt.InitializeResult(
        protocolVersion=chosen,
        capabilities=mt.ServerCapabilities(tools=mt.ToolsCapability(listChanged=False),
                                           prompts=mt.PromptsCapability(listChanged=False),
                                           resources=mt.ResourcesCapability(subscribe=False, listChanged=False)),
        serverInfo=SERVER_INFO,
        instructions=instructions,
    )


@_on("ping", mt.PingRequest)
def _ping(service: Service, caller: Caller, req: mt.PingRequest) -> mt.EmptyResult:
    return mt.EmptyResult()


@_on("tools/list", mt.ListToolsRequest)
def _tools_list(service: Service, caller: Caller, req: mt.ListToolsRequest) -> mt.ListToolsResult:
    _no_cursor(req.params)
    return mt.ListToolsResult(tools=agent_tools.listed_tools())


@_on("tools/call", mt.CallToolRequest)
def _tools_call(service: Service, caller: Caller, req: mt.CallToolRequest) -> mt.CallToolResult:
    tool = agent_tools.TOOLS.get(req.params.name)
    if tool is None:
        raise RpcError(mt.INVALID_PARAMS, f"Unknown tool: {req.params.name}. tools/list shows every tool.",
                       data={"validValues": sorted(agent_tools.TOOLS)})
    try:
        service.throttle(caller, tool.bucket)  # the one place the agent endpoint spends the budget
        service.call_log.append((service.now(), caller.token_id, f"tools/call:{tool.name}"))
        data = agent_tools.run(service, caller, tool, req.params.arguments)
    except ApiError as err:
        return agent_tools.failure(tool, shape_error(service.dialect, err))
    except Exception as exc:
        return agent_tools.failure(tool, agent_tools.internal_error(exc))
    return agent_tools.success(tool, shape_tool_result(service.dialect, tool.name, tool.method, data))


@_on("prompts/list", mt.ListPromptsRequest)
def _prompts_list(service: Service, caller: Caller, req: mt.ListPromptsRequest) -> mt.ListPromptsResult:
    _no_cursor(req.params)
    return mt.ListPromptsResult(prompts=[mt.Prompt(name=name, title=name.replace("_", " ").capitalize(),
                                                   description=desc, arguments=[])
                                         for name, desc in guides.PROMPTS.items()])


@_on("prompts/get", mt.GetPromptRequest)
def _prompts_get(service: Service, caller: Caller, req: mt.GetPromptRequest) -> mt.GetPromptResult:
    name = req.params.name
    if name not in guides.PROMPTS:
        raise RpcError(mt.INVALID_PARAMS, f"Unknown prompt: {name}.", data={"validValues": list(guides.PROMPTS)})
    if req.params.arguments:
        raise RpcError(mt.INVALID_PARAMS, f"The prompt {name} takes no arguments.",
                       data={"validKeys": []})
    catalogs = {c: (d, agent_tools.names_in(c)) for c, d in agent_tools.CATALOGS.items()}
    who = _identity(service, caller) if name == "identity" else {}
    text = guides.prompt_text(name, who, catalogs)
    return mt.GetPromptResult(description=guides.PROMPTS[name], messages=[
        mt.PromptMessage(role="user", content=mt.TextContent(type="text", text=text))])


def _guides() -> dict[str, tuple[str, str, str, bool]]:
    """Every resource: uri -> (name, title, markdown, listed): the skills, then the catalogs."""
    out = {s.uri: (s.topic, s.title, s.markdown, s.listed) for s in guides.SKILLS.values()}
    out.update({f"skill://{c}": (c, c, agent_tools.catalog_markdown(c), True) for c in agent_tools.CATALOGS})
    return out


@_on("resources/list", mt.ListResourcesRequest)
def _resources_list(service: Service, caller: Caller, req: mt.ListResourcesRequest) -> mt.ListResourcesResult:
    _no_cursor(req.params)
    descriptions = {s.topic: s.description for s in guides.SKILLS.values()} | agent_tools.CATALOGS
    return mt.ListResourcesResult(resources=[
        mt.Resource(uri=AnyUrl(uri), name=name, title=title, description=descriptions[name],
                    mimeType="text/markdown", size=len(text.encode()))
        for uri, (name, title, text, listed) in _guides().items() if listed])


@_on("resources/templates/list", mt.ListResourceTemplatesRequest)
def _templates_list(service: Service, caller: Caller,
                    req: mt.ListResourceTemplatesRequest) -> mt.ListResourceTemplatesResult:
    _no_cursor(req.params)
    return mt.ListResourceTemplatesResult(resourceTemplates=[])


@_on("resources/read", mt.ReadResourceRequest)
def _resources_read(service: Service, caller: Caller, req: mt.ReadResourceRequest) -> mt.ReadResourceResult:
    uri = str(req.params.uri)
    found = _guides().get(uri)
    if found is None:
        raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}.",
                       data={"uri": uri, "validValues": [u for u, g in _guides().items() if g[3]]})
    return mt.ReadResourceResult(contents=[mt.TextResourceContents(uri=AnyUrl(uri), mimeType="text/markdown",
                                                                   text=found[2])])
