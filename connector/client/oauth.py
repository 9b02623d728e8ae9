"""The client side of the service's OAuth 2.1: the server's metadata (RFC 8414), dynamic
client registration (RFC 7591), the authorization request with PKCE S256 for a loopback
redirect (RFC 8252), and the token endpoint's two grants. The rules (scope, PKCE, the
redirect's reading, when a token is due) are pure functions; the calls are plain aiohttp
POSTs. No token ever reaches a message or a log line."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import aiohttp
from pydantic import SecretStr

REDIRECT_PATH = "/callback"
# Registered once without a port: the server takes any port on a loopback redirect (RFC 8252 7.3).
REGISTERED_REDIRECT = "http://127.0.0.1" + REDIRECT_PATH
CLIENT_NAME = "formsync"
REFRESH_MARGIN_MS = 5 * 60_000  # an access token this close to its expiry is refreshed first


class OAuthUnavailable(Exception):
    """The service's OAuth endpoints cannot be used now (unreachable, not OAuth, a 5xx):
    trying again later may work; the stored grant is untouched."""


class OAuthRefused(Exception):
    """The authorization server refused (``error`` as RFC 6749 names it, e.g.
    ``invalid_grant``, ``invalid_client``, ``access_denied``), with its description."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error, self.description = error, description


@dataclass(frozen=True)
class ServerMeta:
    """What formsync needs of the authorization server's metadata."""

    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    scopes: tuple[str, ...]
    auth_methods: tuple[str, ...]


@dataclass(frozen=True)
class TokenSet:
    """A token endpoint's answer: the access token and when it expires (epoch ms), and
    the refresh token that replaces the one just used."""

    access_token: SecretStr
    expires_at: int
    refresh_token: SecretStr | None
    scope: str


def login_scope(meta: ServerMeta) -> str:
    """The scopes to ask for: those the server's metadata lists, and ``offline_access``
    (what yields a refresh token)."""
    return " ".join(dict.fromkeys([*meta.scopes, "offline_access"]))


def new_verifier() -> str:
    """A PKCE code verifier: 64 random characters of the unreserved set (RFC 7636)."""
    return secrets.token_urlsafe(48)


def s256(verifier: str) -> str:
    """The S256 code challenge of ``verifier``."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


def redirect_uri(port: int) -> str:
    """The loopback redirect URI of a login listening on ``port``."""
    return f"http://127.0.0.1:{port}{REDIRECT_PATH}"


def authorization_url(meta: ServerMeta, client_id: str, redirect: str, scope: str, state: str, verifier: str) -> str:
    """The address the person opens to consent."""
    query = urlencode({"response_type": "code", "client_id": client_id, "redirect_uri": redirect, "scope": scope,
                       "state": state, "code_challenge": s256(verifier), "code_challenge_method": "S256"})
    return f"{meta.authorization_endpoint}?{query}"


def redirect_code(url: str, state: str) -> str:
    """The authorization code in the address the browser was sent back to (a whole URL
    or its query); :class:`OAuthRefused` for a refusal (``access_denied`` when the
    person chose Deny), ValueError for an address that is not this login's answer."""
    text = url.strip()
    query = dict(parse_qsl(urlsplit(text).query if "://" in text else text.lstrip("?")))
    if query.get("state") != state:
        raise ValueError("that address is not the answer to this sign-in (its state differs): paste the whole "
                         "address the browser was sent to after Approve")
    if "error" in query:
        raise OAuthRefused(query["error"], query.get("error_description", ""))
    if not query.get("code"):
        raise ValueError("that address holds no authorization code: paste the whole address the browser was sent "
                         "to after Approve")
    return query["code"]


def refresh_due(expires_at: int | None, now: int, margin_ms: int = REFRESH_MARGIN_MS) -> bool:
    """Whether an access token expiring at ``expires_at`` should be refreshed before use."""
    return expires_at is None or now >= expires_at - margin_ms


def token_set(answer: Any, now: int) -> TokenSet:
    """The token endpoint's JSON answer, checked; ValueError when it is not a token response."""
    if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
        raise ValueError("the token endpoint's answer holds no access_token")
    refresh = answer.get("refresh_token")
    expires_in = answer.get("expires_in")
    seconds = expires_in if isinstance(expires_in, int) and expires_in > 0 else 3600
    return TokenSet(access_token=SecretStr(answer["access_token"]), expires_at=now + seconds * 1000,
                    refresh_token=SecretStr(refresh) if isinstance(refresh, str) else None,
                    scope=str(answer.get("scope") or ""))


def _meta(doc: Any, base_url: str) -> ServerMeta:
    if not isinstance(doc, dict) or not isinstance(doc.get("token_endpoint"), str) \
            or not isinstance(doc.get("authorization_endpoint"), str):
        raise OAuthUnavailable(f"the service at {base_url} publishes no OAuth authorization server metadata")
    if "S256" not in doc.get("code_challenge_methods_supported", ["S256"]):
        raise OAuthUnavailable(f"the service at {base_url} does not offer PKCE with S256")
    return ServerMeta(authorization_endpoint=doc["authorization_endpoint"], token_endpoint=doc["token_endpoint"],
                      registration_endpoint=doc.get("registration_endpoint"),
                      scopes=tuple(str(s) for s in doc.get("scopes_supported", [])),
                      auth_methods=tuple(doc.get("token_endpoint_auth_methods_supported", ["client_secret_post"])))


async def _json(http: aiohttp.ClientSession, method: str, url: str, what: str, **kw: Any) -> tuple[int, Any]:
    try:
        async with http.request(method, url, **kw) as resp:
            status, text = resp.status, await resp.text()
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        raise OAuthUnavailable(f"{what}: the service at {url} could not be reached ({type(e).__name__})") from None
    if status >= 500:
        raise OAuthUnavailable(f"{what}: {url} answered HTTP {status}; try again later")
    try:
        return status, json.loads(text)
    except ValueError:
        raise OAuthUnavailable(f"{what}: {url} answered HTTP {status} without JSON: it is not an OAuth "
                               "endpoint") from None


async def discover(http: aiohttp.ClientSession, base_url: str) -> ServerMeta:
    """The authorization server metadata of the service at ``base_url``."""
    url = base_url.rstrip("/") + "/.well-known/oauth-authorization-server"
    status, doc = await _json(http, "GET", url, "OAuth metadata")
    if status != 200:
        raise OAuthUnavailable(f"OAuth metadata: {url} answered HTTP {status}; is service.base_url the service?")
    return _meta(doc, base_url)


async def register(http: aiohttp.ClientSession, meta: ServerMeta) -> tuple[str, SecretStr | None]:
    """Register formsync as a client with a loopback redirect (any port); returns its
    id and secret (None for a public client)."""
    if meta.registration_endpoint is None:
        raise OAuthUnavailable("the service offers no dynamic client registration")
    method = "none" if "none" in meta.auth_methods else "client_secret_post"
    body = {"client_name": CLIENT_NAME, "redirect_uris": [REGISTERED_REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": method}
    status, doc = await _json(http, "POST", meta.registration_endpoint, "client registration", json=body)
    if status not in (200, 201) or not isinstance(doc, dict) or "client_id" not in doc:
        raise _refusal(doc, status)
    secret = doc.get("client_secret")
    return str(doc["client_id"]), SecretStr(secret) if isinstance(secret, str) else None


def _refusal(doc: Any, status: int) -> OAuthRefused:
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        return OAuthRefused(doc["error"], str(doc.get("error_description") or ""))
    return OAuthRefused("server_error", f"HTTP {status} without an OAuth error")


async def token_call(http: aiohttp.ClientSession, meta: ServerMeta, form: dict[str, str], now: int) -> TokenSet:
    """POST ``form`` to the token endpoint; the new tokens, or :class:`OAuthRefused`."""
    status, doc = await _json(http, "POST", meta.token_endpoint, "token endpoint", data=form)
    if status != 200:
        raise _refusal(doc, status)
    try:
        return token_set(doc, now)
    except ValueError as e:
        raise OAuthUnavailable(f"token endpoint: {e}") from None


def client_form(client_id: str, client_secret: SecretStr | None) -> dict[str, str]:
    """The client's credentials as the token endpoint takes them (client_secret_post)."""
    form = {"client_id": client_id}
    if client_secret is not None:
        form["client_secret"] = client_secret.get_secret_value()
    return form
