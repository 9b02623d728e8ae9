"""A client for the agent (MCP) endpoint, on the official ``mcp`` SDK.

    async with AgentClient(base_url, token) as agent:
        doc_id = await agent.upload_document(form_id, Path("terms.pdf"))
        result = await agent.call("request_create", {"formId": form_id,
                                                      "documents": [{"documentId": doc_id}]})

Tool results are one JSON text item; :meth:`AgentClient.call` returns it parsed and raises
:class:`AgentToolError` (with the service's ``code``, ``details`` and ``suggestion``) for a
failure result.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import mimetypes
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent
from pydantic import SecretStr

from ..errors import FormsyncError, TransportError, reason_of
from ._pacing import Clock, Pacer, Sleep, shared_pacer, token_key

# Tools that also count against the service's creates limit (as requests.create and
# documents.create do on the JSON-RPC endpoint).
CREATE_TOOLS = frozenset({"request_create", "document_create"})


class AgentToolError(FormsyncError):
    """A tool answered ``success: false``."""

    def __init__(self, tool: str, payload: dict[str, Any]) -> None:
        self.tool = tool
        self.code = payload.get("code")
        self.details: dict[str, Any] = payload.get("details") or {}
        self.suggestion = payload.get("suggestion")
        self.message = str(payload.get("error") or "tool failed")
        super().__init__(f"{tool}: {self.code}: {self.message}")

    @property
    def reason(self) -> str | None:
        """``details.reason``, or a reason the service wrote as the error text's prefix."""
        return reason_of(self.details, self.message)


class AgentClient:
    """One initialized MCP session with ``{base_url}/api/mcp``. The token is a SecretStr
    and never appears in a repr or an error.

    Tool calls spend the same per-token budget as JSON-RPC calls, so they wait for the
    token's shared pacer (see :func:`connector.client._pacing.shared_pacer`): a FormClient and an
    AgentClient of one token in one event loop never exceed the token's calls, or
    creates, together in any window. Limits left unset here keep what the token's pacer
    has (a FormClient's), or the service's 120 calls and 60 creates a minute."""

    def __init__(self, base_url: str, token: str | SecretStr, *, timeout: float = 30.0,
                 calls_per_minute: int | None = None, creates_per_minute: int | None = None,
                 clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/api/mcp"
        self._token = token if isinstance(token, SecretStr) else SecretStr(token)
        self._timeout = timeout
        self._limits = (calls_per_minute, creates_per_minute)
        self._clock, self._sleep = clock, sleep
        self._stack: AsyncExitStack | None = None
        self.session: ClientSession | None = None
        self._http: httpx.AsyncClient | None = None
        self.pacer: Pacer | None = None

    def __repr__(self) -> str:
        return f"AgentClient(url={self.url!r}, token=SecretStr('**********'))"

    async def __aenter__(self) -> AgentClient:
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            headers = {"Authorization": f"Bearer {self._token.get_secret_value()}"}
            self._http = await stack.enter_async_context(httpx.AsyncClient(headers=headers, timeout=self._timeout))
            read, write, _ = await stack.enter_async_context(streamable_http_client(self.url, http_client=self._http))
            self.session = await stack.enter_async_context(ClientSession(read, write))
            await self.session.initialize()
            self.pacer = shared_pacer(self.base_url, token_key(self._token.get_secret_value()), *self._limits,
                                      clock=self._clock, sleep=self._sleep)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._stack is not None:
            await self._stack.aclose()
            self._stack = None
            self.session = None

    async def list_tools(self) -> list[str]:
        assert self.session is not None, "use AgentClient as an async context manager"
        return [t.name for t in (await self.session.list_tools()).tools]

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool; return its JSON result, or raise AgentToolError on a failure result."""
        assert self.session is not None and self.pacer is not None, "use AgentClient as an async context manager"
        async with self.pacer.slot(create=tool in CREATE_TOOLS):  # logged when the answer is back
            result = await self.session.call_tool(tool, arguments or {})
        text = next((c.text for c in result.content if isinstance(c, TextContent)), None)
        try:
            payload = json.loads(text) if text is not None else {}
        except ValueError:
            payload = {"success": False, "error": text}
        if result.isError or payload.get("success") is False:
            raise AgentToolError(tool, payload)
        return payload

    async def upload_document(self, form_id: str, path: Path | str, *, name: str | None = None,
                              content_type: str | None = None) -> str:
        """Reserve a document with ``document_create``, PUT the file's bytes to its upload
        URL (no token: the URL is its own credential) and return the document id."""
        path = Path(path)
        data = path.read_bytes()
        ctype = content_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        doc = await self.call("document_create", {"formId": form_id, "name": name or path.name,
                                                  "contentType": ctype, "size": len(data),
                                                  "sha256": hashlib.sha256(data).hexdigest()})
        doc = doc.get("document", doc)
        async with httpx.AsyncClient(timeout=self._timeout) as plain:
            resp = await plain.put(doc["uploadUrl"], content=data, headers={"Content-Type": ctype})
        if resp.status_code != 200:
            raise TransportError(f"document upload of {path.name}: HTTP {resp.status_code}: {resp.text[:300]}")
        return str(doc["id"])
