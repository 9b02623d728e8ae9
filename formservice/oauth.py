"""The HTTP binding of OAuth 2.1: the metadata documents (RFC 9728, RFC 8414), dynamic
client registration (RFC 7591), the authorization endpoint with its server-rendered
consent page, and the token endpoint. The rules live in :mod:`formservice.domain.oauth`."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import jinja2
from aiohttp import web
from multidict import MultiMapping

from . import rpc
from .domain import oauth
from .errors import ApiError
from .service import Service

log = logging.getLogger("formservice.oauth")
MAX_FORM = 64 * 1024
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
PAGE_HEADERS = {**NO_STORE, "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"}
# The authorization request travels through the consent form in these hidden fields.
CARRIED = ("client_id", "redirect_uri", "response_type", "scope", "state", "code_challenge",
           "code_challenge_method", "resource")


def register(app: web.Application) -> None:
    app.router.add_get("/.well-known/oauth-protected-resource", _resource_metadata)
    app.router.add_get("/.well-known/oauth-protected-resource/api/mcp", _resource_metadata)
    app.router.add_get("/.well-known/oauth-protected-resource/api/v1", _resource_metadata)
    app.router.add_get("/.well-known/oauth-authorization-server", _server_metadata)
    app.router.add_post("/oauth/register", _register)
    app.router.add_get("/oauth/authorize", _authorize_page)
    app.router.add_post("/oauth/authorize", _authorize_decision)
    app.router.add_post("/oauth/token", _token)


def _service(request: web.Request) -> Service:
    return request.app[rpc.SERVICE_KEY]


# -- metadata ----------------------------------------------------------------------------


async def _resource_metadata(request: web.Request) -> web.Response:
    path = request.path.removeprefix("/.well-known/oauth-protected-resource") or "/api/mcp"
    return web.json_response(oauth.protected_resource_metadata(_service(request).base_url, path))


async def _server_metadata(request: web.Request) -> web.Response:
    return web.json_response(oauth.authorization_server_metadata(_service(request).base_url))


# -- parameters ----------------------------------------------------------------------------


def first_values(pairs: MultiMapping[str] | list[tuple[str, str]]) -> dict[str, str]:
    """The first value of each parameter name; parameters sent without a value count as
    omitted (RFC 6749 section 3.1)."""
    items = pairs.items() if isinstance(pairs, MultiMapping) else pairs
    out: dict[str, str] = {}
    for name, value in items:
        out.setdefault(name, value)
    return {k: v for k, v in out.items() if v != ""}


async def _form_params(request: web.Request) -> dict[str, str]:
    """The first values of an ``application/x-www-form-urlencoded`` body."""
    if request.content_type != "application/x-www-form-urlencoded":
        raise oauth.OAuthError("invalid_request",
                               "Send the parameters as application/x-www-form-urlencoded, not "
                               f"{request.content_type}.")
    try:
        body = await rpc.read_limited(request, MAX_FORM)
        text = body.decode("utf-8")
    except ApiError:
        raise oauth.OAuthError("invalid_request", f"The body is over {MAX_FORM // 1024} KiB.") from None
    except UnicodeDecodeError:
        raise oauth.OAuthError("invalid_request", "The body is not UTF-8 text.") from None
    return first_values(parse_qsl(text, keep_blank_values=True))


def _oauth_error(err: oauth.OAuthError) -> web.Response:
    return web.json_response(err.to_wire(), status=err.status, headers=NO_STORE)


def _redirect(uri: str, params: dict[str, str | None]) -> web.Response:
    """A 302 to ``uri`` with ``params`` added to the query it already has."""
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [(k, v) for k, v in params.items() if v is not None]
    target = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))
    return web.Response(status=302, headers={"Location": target, **NO_STORE})


# -- registration ------------------------------------------------------------------------


async def _register(request: web.Request) -> web.Response:
    service = _service(request)
    try:
        try:
            body: Any = json.loads(await rpc.read_limited(request, MAX_FORM))
        except ApiError:
            raise oauth.OAuthError("invalid_client_metadata", f"The body is over {MAX_FORM // 1024} KiB.") from None
        except ValueError:
            raise oauth.OAuthError("invalid_client_metadata", "The body must be a JSON object of client "
                                                              "metadata (RFC 7591).") from None
        with service.session() as s:
            out = oauth.register_client(s, body, service.now())
            s.commit()
        return web.json_response(out, status=201, headers=NO_STORE)
    except oauth.OAuthError as err:
        return _oauth_error(err)


# -- authorization -----------------------------------------------------------------------


_env = jinja2.Environment(autoescape=True)
CONSENT = _env.from_string("""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>Authorize {{ client_name }}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem;line-height:1.5}
fieldset{border:1px solid #ccc;border-radius:.5rem;padding:1rem}label{display:block;margin:.25rem 0}
.error{color:#a00}.plan{color:#666}button{margin:1rem .5rem 0 0;padding:.5rem 1rem}</style></head>
<body>
<h1>Authorize {{ client_name }}</h1>
<p><strong>{{ client_name }}</strong> asks to act for the owner of one workspace, with the scopes
<code>{{ scope }}</code>. You will be sent back to <code>{{ redirect_host }}</code>.</p>
{% if error %}<p class="error" role="alert">{{ error }}</p>{% endif %}
<form method="post" action="/oauth/authorize">
{% for name, value in carried %}<input type="hidden" name="{{ name }}" value="{{ value }}">
{% endfor %}<fieldset><legend>Workspace</legend>
{% for ws in workspaces %}<label><input type="radio" name="workspace_id" value="{{ ws.id }}" required
{%- if ws.id == chosen %} checked{% endif %}> {{ ws.name }} <span class="plan">({{ ws.plan }})</span></label>
{% endfor %}</fieldset>
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny" formnovalidate>Deny</button>
</form>
</body>
</html>
""")
ERROR_PAGE = _env.from_string("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorization error</title></head>
<body><h1>This authorization request cannot continue</h1>
<p><code>{{ error }}</code>: {{ description }}</p></body></html>
""")


def _consent(req: oauth.AuthorizeRequest, params: dict[str, str], workspaces: list[Any], *,
             error: str | None = None, chosen: str | None = None) -> web.Response:
    html = CONSENT.render(
        client_name=req.client.name, scope=req.scope, redirect_host=urlsplit(req.redirect_uri).netloc,
        carried=[(k, params[k]) for k in CARRIED if k in params], workspaces=workspaces, error=error,
        chosen=chosen,
    )
    return web.Response(text=html, content_type="text/html", status=400 if error else 200, headers=PAGE_HEADERS)


def _authorize_failure(err: oauth.OAuthError) -> web.Response:
    if isinstance(err, oauth.RedirectableError):
        return _redirect(err.redirect_uri, {"error": err.error, "error_description": err.description,
                                            "state": err.state})
    html = ERROR_PAGE.render(error=err.error, description=err.description)
    return web.Response(text=html, content_type="text/html", status=err.status, headers=PAGE_HEADERS)


async def _authorize_page(request: web.Request) -> web.Response:
    """``GET /oauth/authorize``: check the request, then show the consent page."""
    service = _service(request)
    params = first_values(request.query)
    with service.session() as s:
        try:
            req = oauth.check_authorize(s, params, service.base_url)
        except oauth.OAuthError as err:
            return _authorize_failure(err)
        return _consent(req, params, oauth.consent_workspaces(s))


async def _authorize_decision(request: web.Request) -> web.Response:
    """``POST /oauth/authorize`` from the consent page: check the carried request again,
    then redirect back with a code (Approve) or ``access_denied`` (Deny)."""
    service = _service(request)
    try:
        params = await _form_params(request)
    except oauth.OAuthError as err:
        return _authorize_failure(err)
    with service.session() as s:
        try:
            req = oauth.check_authorize(s, params, service.base_url)
        except oauth.OAuthError as err:
            return _authorize_failure(err)
        decision = params.get("decision")
        if decision == "deny":
            return _redirect(req.redirect_uri, {"error": "access_denied",
                                                "error_description": "The person declined the request.",
                                                "state": req.state})
        if decision != "approve":
            return _consent(req, params, oauth.consent_workspaces(s), error="Choose Approve or Deny.")
        try:
            code = oauth.issue_code(s, req, params.get("workspace_id"), service.now())
        except oauth.OAuthError as err:
            return _consent(req, params, oauth.consent_workspaces(s), error=err.description)
        s.commit()
    return _redirect(req.redirect_uri, {"code": code, "state": req.state})


# -- tokens ----------------------------------------------------------------------------------


async def _token(request: web.Request) -> web.Response:
    service = _service(request)
    try:
        params = await _form_params(request)
        with service.session() as s:
            try:
                out = oauth.exchange(s, params, service.base_url, service.now())
                s.commit()
            except Exception:
                s.rollback()
                raise
        return web.json_response(out, headers=NO_STORE)
    except oauth.OAuthError as err:
        return _oauth_error(err)
    except Exception:
        log.exception("token endpoint failure")
        return web.json_response({"error": "server_error", "error_description": "Unexpected server error; "
                                  "nothing was issued. Retry later."}, status=500, headers=NO_STORE)
