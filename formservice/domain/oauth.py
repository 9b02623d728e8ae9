"""OAuth 2.1 rules: client registration (seeded system clients and RFC 7591 dynamic
registration), the authorization request with mandatory PKCE S256, authorization codes
(hashed, one use, ten minutes) and the token endpoint's two grants, with refresh tokens
that rotate on every use. Access tokens are ``fbo_`` tokens of :mod:`.auth`, bound to the
one workspace chosen at consent. No HTTP here: :mod:`formservice.oauth` binds it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError
from sqlalchemy import update
from sqlmodel import Session, col, select

from ..clock import DAY_MS, MINUTE_MS
from ..ids import ALNUM, new_id, new_oauth_token, sha256_hex
from ..tables import Member, OAuthClient, OAuthCode, RefreshToken, Workspace
from .auth import OAUTH_TOKEN_TTL_MS, create_oauth_token

MCP_SCOPES = ("mcp:read", "mcp:write", "offline_access")
CONNECTOR_SCOPES = ("api:read", "api:write")
SCOPES = (*MCP_SCOPES, *CONNECTOR_SCOPES)
DEFAULT_SCOPE = "mcp:read mcp:write"  # when a request names none: no refresh token without offline_access
AUTH_METHODS = ("client_secret_post", "none")
GRANT_TYPES = ("authorization_code", "refresh_token")
CODE_TTL_MS = 10 * MINUTE_MS
REFRESH_TTL_MS = 30 * DAY_MS
CLIENT_IDLE_MS = 30 * DAY_MS  # dynamically registered clients unused this long are removed
CHALLENGE_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # base64url of a SHA-256, unpadded
VERIFIER_RE = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")
MAX_REDIRECT_URIS = 10
MAX_TEXT = 255

# The system clients of the hosted service's automation connectors (notes section 6).
# A loopback URI lets a local run of a connector complete the flow against the sandbox.
SYSTEM_CLIENTS = (
    ("fboc_zapier", "Zapier", ["https://zapier.com/dashboard/auth/oauth/return/FormstepCLIAPI/",
                               "http://127.0.0.1/callback"]),
    ("fboc_make", "Make", ["https://www.make.com/oauth/cb/app", "https://www.integromat.com/oauth/cb/app",
                           "http://127.0.0.1/callback"]),
)


class OAuthError(Exception):
    """An OAuth failure in the RFC 6749 shape: ``error`` (a registered code such as
    ``invalid_grant``) and ``error_description`` saying what to fix."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status

    def to_wire(self) -> dict[str, str]:
        return {"error": self.error, "error_description": self.description}


class RedirectableError(OAuthError):
    """An authorization-request failure reported back to the client's (already
    verified) redirect URI, with the request's ``state``."""

    def __init__(self, error: str, description: str, redirect_uri: str, state: str | None) -> None:
        super().__init__(error, description)
        self.redirect_uri = redirect_uri
        self.state = state


def _secret() -> str:
    return "".join(secrets.choice(ALNUM) for _ in range(48))


# -- resources and metadata -------------------------------------------------------------


def resources(base_url: str) -> dict[str, str]:
    """The protected resources by path: the agent endpoint and the JSON-RPC endpoint
    (both take OAuth access tokens)."""
    return {"/api/mcp": f"{base_url}/api/mcp", "/api/v1": f"{base_url}/api/v1"}


def protected_resource_metadata(base_url: str, path: str = "/api/mcp") -> dict[str, Any]:
    """RFC 9728 metadata of one protected resource."""
    return {
        "resource": resources(base_url)[path],
        "authorization_servers": [base_url],
        "scopes_supported": list(MCP_SCOPES if path == "/api/mcp" else SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "Form Collection Service" + (" agent endpoint" if path == "/api/mcp" else " API"),
    }


def authorization_server_metadata(base_url: str) -> dict[str, Any]:
    """RFC 8414 metadata of the authorization server."""
    return {
        "issuer": base_url,
        "authorization_endpoint": f"{base_url}/oauth/authorize",
        "token_endpoint": f"{base_url}/oauth/token",
        "registration_endpoint": f"{base_url}/oauth/register",
        "scopes_supported": list(SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": list(GRANT_TYPES),
        "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
        "code_challenge_methods_supported": ["S256"],
    }


# -- clients ----------------------------------------------------------------------------


def seed_system_clients(session: Session, now: int) -> list[dict[str, Any]]:
    """Create the system clients that do not exist yet; returns their credentials (the
    secret exists only here: the store keeps its hash)."""
    out = []
    for client_id, name, uris in SYSTEM_CLIENTS:
        if session.get(OAuthClient, client_id) is not None:
            continue
        secret = _secret()
        session.add(OAuthClient(id=client_id, name=name, secret_hash=sha256_hex(secret), redirect_uris=uris,
                                grant_types=list(GRANT_TYPES), is_system=True, created_at=now))
        out.append({"clientId": client_id, "clientSecret": secret, "name": name, "redirectUris": uris})
    return out


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a URL's hostname) names this machine: ``localhost`` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_redirect_uri(uri: str, where: str = "redirect_uris") -> str:
    """An absolute https URI, or http to a loopback address; no fragment."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname
        _ = parts.port  # a port out of range raises here
    except ValueError:
        host = None
        parts = None
    if parts is None or not host or parts.fragment or parts.scheme not in ("https", "http"):
        raise OAuthError("invalid_redirect_uri",
                         f"{where}: {uri!r} is not an absolute https URI without a fragment.")
    if parts.scheme == "http" and not is_loopback(host):
        raise OAuthError("invalid_redirect_uri",
                         f"{where}: {uri!r} uses http; redirect URIs must be https, except to a loopback "
                         "address (127.0.0.1, [::1], localhost).")
    return uri


def redirect_registered(client: OAuthClient, uri: str) -> bool:
    """Exact match with a registered URI; for loopback http URIs the port may differ, as
    native apps pick a free port at run time (RFC 8252 section 7.3)."""
    registered = client.redirect_uris or []
    if uri in registered:
        return True
    try:
        want = urlsplit(uri)
        if want.scheme != "http" or not want.hostname or not is_loopback(want.hostname):
            return False
    except ValueError:
        return False
    return any((have.scheme, have.hostname, have.path, have.query) == ("http", want.hostname, want.path, want.query)
               for have in map(urlsplit, registered))


class RegistrationRequest(BaseModel):
    """RFC 7591 client metadata; members this server does not use are ignored, as the
    RFC asks."""

    model_config = ConfigDict(extra="ignore")
    redirect_uris: list[str]
    client_name: str | None = None
    token_endpoint_auth_method: str | None = None
    grant_types: list[str] | None = None
    response_types: list[str] | None = None
    scope: str | None = None


def register_client(session: Session, body: Any, now: int) -> dict[str, Any]:
    """Dynamic client registration: check the metadata, create a client with a random id
    (and a secret, unless it is a public client), and answer the RFC 7591 response.
    Clients unused for 30 days are collected first."""
    if not isinstance(body, dict):
        raise OAuthError("invalid_client_metadata", "The registration body must be a JSON object of client metadata.")
    if "redirect_uris" not in body:
        raise OAuthError("invalid_redirect_uri", "redirect_uris is required: the URIs the client receives codes at.")
    try:
        meta = RegistrationRequest.model_validate(body)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        kind = "invalid_redirect_uri" if where.startswith("redirect_uris") else "invalid_client_metadata"
        raise OAuthError(kind, f"{where}: {err['msg']}.") from None
    if not meta.redirect_uris or len(meta.redirect_uris) > MAX_REDIRECT_URIS:
        raise OAuthError("invalid_redirect_uri",
                         f"redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs; got {len(meta.redirect_uris)}.")
    uris = [check_redirect_uri(u, f"redirect_uris.{i}") for i, u in enumerate(meta.redirect_uris)]
    method = meta.token_endpoint_auth_method or "client_secret_post"
    if method not in AUTH_METHODS:
        raise OAuthError("invalid_client_metadata",
                         f"token_endpoint_auth_method {method!r} is not supported; use one of {', '.join(AUTH_METHODS)}.")
    grants = meta.grant_types or list(GRANT_TYPES)
    bad = [g for g in grants if g not in GRANT_TYPES]
    if bad:
        raise OAuthError("invalid_client_metadata",
                         f"grant_types {bad[0]!r} is not supported; use {' and '.join(GRANT_TYPES)}.")
    responses = meta.response_types or ["code"]
    if any(r != "code" for r in responses):
        raise OAuthError("invalid_client_metadata", 'response_types may only hold "code".')
    scope = " ".join(parse_scope(meta.scope or "", None, error="invalid_client_metadata")) or None
    name = (meta.client_name or "").strip() or "Unnamed client"
    if len(name) > MAX_TEXT:
        raise OAuthError("invalid_client_metadata", f"client_name is at most {MAX_TEXT} characters.")
    collect_clients(session, now)
    secret = None if method == "none" else _secret()
    client = OAuthClient(id=new_id("fboc"), name=name, secret_hash=sha256_hex(secret) if secret else None,
                         token_endpoint_auth_method=method, redirect_uris=uris, grant_types=grants, scope=scope,
                         created_at=now)
    session.add(client)
    out: dict[str, Any] = {
        "client_id": client.id,
        "client_id_issued_at": now // 1000,
        "client_name": name,
        "redirect_uris": uris,
        "token_endpoint_auth_method": method,
        "grant_types": grants,
        "response_types": responses,
    }
    if secret is not None:
        out["client_secret"] = secret
        out["client_secret_expires_at"] = 0  # never
    if scope is not None:
        out["scope"] = scope
    return out


def collect_clients(session: Session, now: int) -> int:
    """Remove dynamically registered clients that got no token for 30 days and hold no
    live refresh token (system clients stay). Returns how many went."""
    cutoff = now - CLIENT_IDLE_MS
    gone = 0
    stale = session.exec(select(OAuthClient).where(col(OAuthClient.is_system).is_(False))).all()
    for client in stale:
        if (client.last_used_at or client.created_at) > cutoff:
            continue
        live = session.exec(select(RefreshToken.id).where(
            RefreshToken.client_id == client.id, col(RefreshToken.used_at).is_(None),
            RefreshToken.expires_at > now)).first()
        if live is None:
            for code in session.exec(select(OAuthCode).where(OAuthCode.client_id == client.id)).all():
                session.delete(code)
            session.delete(client)
            gone += 1
    return gone


def parse_scope(text: str, client: OAuthClient | None, *, error: str = "invalid_scope") -> list[str]:
    """Space-separated scopes, each supported (and allowed to ``client`` when it registered
    a scope), without repeats."""
    names = list(dict.fromkeys(text.split()))
    for name in names:
        if name not in SCOPES:
            raise OAuthError(error, f"Unknown scope {name!r}; supported scopes: {' '.join(SCOPES)}.")
    if client is not None and client.scope is not None:
        allowed = client.scope.split()
        extra = [n for n in names if n not in allowed]
        if extra:
            raise OAuthError(error, f"Scope {extra[0]!r} was not registered for this client; it may ask for "
                                    f"{client.scope}.")
    return names


# -- the authorization request -------------------------------------------------------------


@dataclass
class AuthorizeRequest:
    """A checked authorization request, ready for the consent page."""

    client: OAuthClient
    redirect_uri: str
    scope: str
    state: str | None
    code_challenge: str
    resource: str | None


def check_authorize(session: Session, params: Mapping[str, str], base_url: str) -> AuthorizeRequest:
    """Check an authorization request (``params`` holds the first value of each name).
    Problems with the client or redirect URI raise :class:`OAuthError` (shown to the
    person, never redirected); the others raise :class:`RedirectableError`."""
    client_id = params.get("client_id")
    if not client_id:
        raise OAuthError("invalid_request", "Missing required parameter: client_id")
    client = session.get(OAuthClient, client_id)
    if client is None:
        raise OAuthError("invalid_client", f"Unknown client_id {client_id!r}; register the client first.")
    redirect_uri = params.get("redirect_uri")
    if not redirect_uri:
        raise OAuthError("invalid_request", "Missing required parameter: redirect_uri")
    if not redirect_registered(client, redirect_uri):
        raise OAuthError("invalid_request", "redirect_uri not registered for this client")
    state = params.get("state")

    def refuse(error: str, description: str) -> RedirectableError:
        return RedirectableError(error, description, redirect_uri, state)

    response_type = params.get("response_type")
    if response_type != "code":
        if not response_type:
            raise refuse("invalid_request", "Missing required parameter: response_type (use code).")
        raise refuse("unsupported_response_type", f"response_type {response_type!r} is not supported; use code.")
    if "authorization_code" not in (client.grant_types or GRANT_TYPES):
        raise refuse("unauthorized_client", "This client did not register the authorization_code grant.")
    challenge = params.get("code_challenge")
    if not challenge:
        raise refuse("invalid_request", "code_challenge is required: PKCE with S256 is mandatory.")
    method = params.get("code_challenge_method")
    if method != "S256":
        shown = "missing (which means plain)" if not method else repr(method)
        raise refuse("invalid_request", f"code_challenge_method is {shown}; only S256 is accepted.")
    if not CHALLENGE_RE.match(challenge):
        raise refuse("invalid_request", "code_challenge must be the unpadded base64url SHA-256 of the "
                                        "code_verifier (43 characters).")
    try:
        # No scope asked for: what the client registered, else the default (no refresh token).
        scope = parse_scope((params.get("scope") or "").strip() or client.scope or DEFAULT_SCOPE, client)
    except OAuthError as err:
        raise refuse(err.error, err.description) from None
    resource = params.get("resource")
    if resource is not None:
        try:
            resource = check_resource(resource, base_url)
        except OAuthError as err:
            raise refuse(err.error, err.description) from None
    return AuthorizeRequest(client=client, redirect_uri=redirect_uri, scope=" ".join(scope), state=state,
                            code_challenge=challenge, resource=resource)


def check_resource(resource: str, base_url: str) -> str:
    """An RFC 8707 ``resource`` must name one of this server's protected resources."""
    known = [*resources(base_url).values(), base_url]
    if resource.rstrip("/") not in known:
        raise OAuthError("invalid_target", f"resource {resource!r} is not served here; use one of {', '.join(known)}.")
    return resource.rstrip("/")


def consent_workspaces(session: Session) -> list[Workspace]:
    """The workspaces the consent page offers (the sandbox's seeded ones), oldest first."""
    return list(session.exec(select(Workspace).order_by(col(Workspace.created_at), col(Workspace.name))).all())


def issue_code(session: Session, req: AuthorizeRequest, workspace_id: str | None, now: int) -> str:
    """Approve ``req`` for the chosen workspace (acting as its owner) and return a new
    authorization code; only its hash is stored."""
    ws = session.get(Workspace, workspace_id) if workspace_id else None
    if ws is None:
        raise OAuthError("invalid_request", "Pick the workspace this app may act in." if not workspace_id
                         else f"No workspace {workspace_id}; pick one of the listed workspaces.")
    code = "".join(secrets.choice(ALNUM) for _ in range(43))
    session.add(OAuthCode(code_hash=sha256_hex(code), client_id=req.client.id, user_id=ws.owner_id,
                          workspace_id=ws.id, redirect_uri=req.redirect_uri, scope=req.scope,
                          code_challenge=req.code_challenge, resource=req.resource, created_at=now,
                          expires_at=now + CODE_TTL_MS))
    return code


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


# -- the token endpoint -----------------------------------------------------------------------


def exchange(session: Session, params: Mapping[str, str], base_url: str, now: int) -> dict[str, Any]:
    """The token endpoint: authenticate the client, then run the ``authorization_code``
    or ``refresh_token`` grant. Returns the token response (RFC 6749 section 5.1)."""
    grant = params.get("grant_type")
    if not grant:
        raise OAuthError("invalid_request", "grant_type <missing>: send authorization_code or refresh_token.")
    if grant not in GRANT_TYPES:
        raise OAuthError("unsupported_grant_type",
                         f"grant_type {grant!r} is not supported; use authorization_code or refresh_token.")
    client = authenticate_client(session, params)
    if grant not in (client.grant_types or GRANT_TYPES):
        raise OAuthError("unauthorized_client", f"This client did not register the {grant} grant.")
    if params.get("resource") is not None:
        check_resource(params["resource"], base_url)
    if grant == "authorization_code":
        return _code_grant(session, client, params, now)
    return _refresh_grant(session, client, params, now)


def authenticate_client(session: Session, params: Mapping[str, str]) -> OAuthClient:
    """The client behind ``client_id`` (and ``client_secret``, for a confidential client)."""
    client_id = params.get("client_id")
    if not client_id:
        raise OAuthError("invalid_request", "Missing required parameter: client_id")
    client = session.get(OAuthClient, client_id)
    if client is None:
        raise OAuthError("invalid_client", f"Unknown client_id {client_id!r}.", 401)
    if client.token_endpoint_auth_method != "none":
        secret = params.get("client_secret")
        if not secret:
            raise OAuthError("invalid_client", "client_secret is required for this client (client_secret_post).",
                             401)
        if not hmac.compare_digest(sha256_hex(secret), client.secret_hash or ""):
            raise OAuthError("invalid_client", "client_secret is wrong for this client.", 401)
    return client


def _code_grant(session: Session, client: OAuthClient, params: Mapping[str, str], now: int) -> dict[str, Any]:
    code, redirect_uri, verifier = params.get("code"), params.get("redirect_uri"), params.get("code_verifier")
    if not (code and redirect_uri and verifier):
        raise OAuthError("invalid_request", "code, redirect_uri, and code_verifier are required")
    if not redirect_registered(client, redirect_uri):
        raise OAuthError("invalid_request", "redirect_uri not registered for this client")
    if not VERIFIER_RE.match(verifier):
        raise OAuthError("invalid_request", "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~.")
    row = session.get(OAuthCode, sha256_hex(code))
    if row is None or row.client_id != client.id:
        raise OAuthError("invalid_grant", "The authorization code is unknown or was issued to another client.")
    if row.used_at is not None:
        raise OAuthError("invalid_grant", "The authorization code was already used; codes work once. Start the "
                                          "authorization again.")
    if now >= row.expires_at:
        raise OAuthError("invalid_grant", "The authorization code expired (codes last 10 minutes); start the "
                                          "authorization again.")
    if redirect_uri != row.redirect_uri:
        raise OAuthError("invalid_grant", "redirect_uri does not match the one of the authorization request.")
    if not hmac.compare_digest(s256(verifier), row.code_challenge):
        raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge (S256) of the "
                                          "authorization request.")
    # One use, even when two exchanges of the same code race.
    claimed = session.exec(update(OAuthCode).where(col(OAuthCode.code_hash) == row.code_hash,
                                                   col(OAuthCode.used_at).is_(None)).values(used_at=now)).rowcount
    if claimed != 1:
        raise OAuthError("invalid_grant", "The authorization code was already used; codes work once.")
    return _issue(session, client, row.user_id, row.workspace_id, row.scope, row.scope, now)


def _refresh_grant(session: Session, client: OAuthClient, params: Mapping[str, str], now: int) -> dict[str, Any]:
    value = params.get("refresh_token")
    if not value:
        raise OAuthError("invalid_request", "refresh_token is required")
    row = session.exec(select(RefreshToken).where(RefreshToken.token_hash == sha256_hex(value))).first()
    if row is None or row.client_id != client.id:
        raise OAuthError("invalid_grant", "The refresh token is unknown or was issued to another client.")
    if row.used_at is not None:
        raise OAuthError("invalid_grant", "The refresh token was already used: each refresh returns a new one "
                                          "and the old one stops working.")
    if now >= row.expires_at:
        raise OAuthError("invalid_grant", "The refresh token expired (unused for 30 days); authorize again.")
    granted = row.scope.split()
    scope = granted
    if params.get("scope"):
        scope = parse_scope(params["scope"], None)
        extra = [s for s in scope if s not in granted]
        if extra:
            raise OAuthError("invalid_scope", f"Scope {extra[0]!r} was not granted; a refresh may only narrow "
                                              f"the granted scope {row.scope}.")
    claimed = session.exec(update(RefreshToken).where(col(RefreshToken.id) == row.id,
                                                      col(RefreshToken.used_at).is_(None))
                           .values(used_at=now)).rowcount
    if claimed != 1:
        raise OAuthError("invalid_grant", "The refresh token was already used.")
    return _issue(session, client, row.user_id, row.workspace_id, " ".join(scope), row.scope, now)


def _issue(session: Session, client: OAuthClient, user_id: str, workspace_id: str, scope: str, grant_scope: str,
           now: int) -> dict[str, Any]:
    """A new access token (``scope``) and, when the grant holds offline_access, a new
    30-day refresh token carrying the whole grant."""
    if session.get(Member, (workspace_id, user_id)) is None:
        raise OAuthError("invalid_grant", "The person who consented is no longer in that workspace; authorize again.")
    access, _ = create_oauth_token(session, user_id, workspace_id, now, client_id=client.id, scope=scope)
    client.last_used_at = now
    out: dict[str, Any] = {"access_token": access, "token_type": "Bearer",
                           "expires_in": OAUTH_TOKEN_TTL_MS // 1000, "scope": scope}
    if "offline_access" in grant_scope.split():
        refresh = new_oauth_token("fbor")
        session.add(RefreshToken(id=new_id("rt"), token_hash=sha256_hex(refresh), client_id=client.id,
                                 user_id=user_id, workspace_id=workspace_id, scope=grant_scope, created_at=now,
                                 expires_at=now + REFRESH_TTL_MS))
        out["refresh_token"] = refresh
    return out
