"""``formsync login``: OAuth 2.1 authorization code with PKCE (S256) and a loopback
redirect, the client registered once by dynamic client registration and kept, the
workspace the consent page chose checked against ``--workspace``, and the grant stored
sealed with the store's key, all in one write at the end: a sign-in that fails at any
step stores nothing but the registered client."""

from __future__ import annotations

import asyncio
import secrets
import sys
import threading
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from pydantic import SecretStr

from connector.client import oauth
from connector.client.grant import sealed_tokens
from connector.client.rpc import FormClient
from connector.config.keyfile import key_id, seal, unseal
from connector.store import Store

Say = Callable[[str], None]
DONE_PAGE = "<!doctype html><title>formsync</title><p>{}</p><p>You may close this window.</p>"


class LoginRefused(Exception):
    """The sign-in did not end with a grant: the message says why and what to do;
    ``usage`` when the person's choice was the problem (a workspace not asked for)."""

    def __init__(self, message: str, *, usage: bool = False, where: str | None = None) -> None:
        super().__init__(message)
        self.usage, self.where = usage, where


@dataclass(frozen=True)
class LoginResult:
    """Who formsync is signed in as now."""

    workspace_id: str
    workspace_name: str
    service_url: str


@dataclass(frozen=True)
class LoginOptions:
    """How the person answers: a browser opened here, or the printed address (and
    ``port`` fixed for an SSH tunnel, ``paste`` to read the redirected address)."""

    workspace: str | None = None
    open_browser: bool = True
    port: int = 0
    paste: bool = False
    timeout_seconds: float = 600.0


class _Client:
    """The registered client: kept in the store, registered again when missing,
    sealed with another key, or collected by the server."""

    def __init__(self, store: Store, url: str, key: bytes, where: str) -> None:
        self.store, self.url, self.key, self.where = store, url, key, where

    def kept(self) -> tuple[str, SecretStr | None] | None:
        row = self.store.grants.get(self.url)
        if row is None or row.key_id != key_id(self.key):
            return None
        secret = (SecretStr(unseal(self.key, row.client_secret, f"{self.url}:client", self.where))
                  if row.client_secret is not None else None)
        return row.client_id, secret

    async def register(self, http: aiohttp.ClientSession, meta: oauth.ServerMeta) -> tuple[str, SecretStr | None]:
        client_id, secret = await oauth.register(http, meta)
        sealed = seal(self.key, secret.get_secret_value(), f"{self.url}:client") if secret is not None else None
        await asyncio.to_thread(self.store.grants.save_client, self.url, client_id, sealed, key_id(self.key))
        return client_id, secret


async def _known_client(http: aiohttp.ClientSession, authorize: str) -> bool:
    """Whether the authorization endpoint knows the client of ``authorize`` (a server
    may collect clients unused for a while: it answers ``invalid_client``)."""
    try:
        async with http.get(authorize, allow_redirects=False) as resp:
            return not (resp.status in (400, 401) and "invalid_client" in await resp.text())
    except aiohttp.ClientError:
        return True  # the person's browser will say what is wrong


class _Answer:
    """The redirected address, from the loopback listener or pasted by the person."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[str] = self.loop.create_future()

    def give(self, value: str) -> None:
        if not self.future.done():
            self.future.set_result(value)

    async def handle(self, request: web.Request) -> web.Response:
        self.give(str(request.url))
        said = "Sign-in refused: see the terminal." if "error" in request.query else "formsync is signed in."
        return web.Response(text=DONE_PAGE.format(said), content_type="text/html")

    def read_pasted(self) -> None:
        """Read a pasted address from stdin in a daemon thread (it may never come)."""
        def read() -> None:
            for line in sys.stdin:
                if line.strip():
                    self.loop.call_soon_threadsafe(self.give, line.strip())
                    return

        threading.Thread(target=read, daemon=True).start()


async def _listen(answer: _Answer, port: int) -> tuple[web.AppRunner, int]:
    """The loopback listener on 127.0.0.1:``port`` (0: a free one)."""
    app = web.Application()
    app.router.add_get(oauth.REDIRECT_PATH, answer.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    return runner, runner.addresses[0][1]


async def _consent(url: str, opts: LoginOptions, answer: _Answer, say: Say) -> str:
    """Send the person to ``url`` and wait for the redirected address."""
    if opts.open_browser and webbrowser.open(url):
        say(f"a browser was opened to sign in; if it shows nothing, open: {url}")
    else:
        say(f"open this address in a browser to sign in: {url}")
    if opts.paste:
        say("waiting for the browser; or paste here the whole address it was sent to after Approve:")
        answer.read_pasted()
    try:
        return await asyncio.wait_for(answer.future, opts.timeout_seconds)
    except TimeoutError:
        raise LoginRefused(f"no answer from the browser within {opts.timeout_seconds:.0f} s: run `formsync login` "
                           "again (with --no-browser on a machine without one)") from None


def _check_workspace(wanted: str | None, ws_id: str, ws_name: str) -> None:
    if wanted is not None and wanted not in (ws_id, ws_name):
        raise LoginRefused(f"the consent page chose workspace {ws_name!r} ({ws_id}), not {wanted!r}: run "
                           f"`formsync login` again and choose {wanted!r} there; nothing was stored",
                           usage=True, where="--workspace")


async def login(store: Store, service_url: str, key: bytes, key_where: str, opts: LoginOptions, say: Say,
                *, clock: Callable[[], int]) -> LoginResult:
    """Sign in to ``service_url`` and store the grant (see the module's docstring)."""
    service_url = service_url.rstrip("/")
    client = _Client(store, service_url, key, key_where)
    answer = _Answer()
    runner, port = await _listen(answer, opts.port)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            meta = await oauth.discover(http, service_url)
            scope, verifier, state = oauth.login_scope(meta), oauth.new_verifier(), secrets.token_urlsafe(16)
            redirect = oauth.redirect_uri(port)
            client_id, secret = client.kept() or await client.register(http, meta)
            url = oauth.authorization_url(meta, client_id, redirect, scope, state, verifier)
            if not await _known_client(http, url):
                client_id, secret = await client.register(http, meta)
                url = oauth.authorization_url(meta, client_id, redirect, scope, state, verifier)
            code = _code(await _consent(url, opts, answer, say), state)
            form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
                    "code_verifier": verifier, **oauth.client_form(client_id, secret)}
            tokens = await oauth.token_call(http, meta, form, clock())
    finally:
        await runner.cleanup()
    if tokens.refresh_token is None:
        raise LoginRefused("the service granted no refresh token (offline_access was not granted): formsync could "
                           "not renew the access token after an hour; nothing was stored")
    async with FormClient(service_url, tokens.access_token, max_retries=2) as fc:
        ws = (await fc.list_workspaces())[0]
    name = ws.name or ws.id
    _check_workspace(opts.workspace, ws.id, name)
    await asyncio.to_thread(store.grants.sign_in, service_url, workspace_id=ws.id, scope=tokens.scope or scope,
                            tokens=sealed_tokens(key, service_url, tokens, clock()))
    return LoginResult(workspace_id=ws.id, workspace_name=name, service_url=service_url)


def _code(address: str, state: str) -> str:
    try:
        return oauth.redirect_code(address, state)
    except oauth.OAuthRefused as e:
        if e.error == "access_denied":
            raise LoginRefused("the sign-in was denied at the consent page: run `formsync login` again and choose "
                               "Approve; nothing was stored") from None
        raise LoginRefused(f"the service refused the sign-in ({e.error}: {e.description}); nothing was "
                           "stored") from None
    except ValueError as e:
        raise LoginRefused(str(e)) from None
