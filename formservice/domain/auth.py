"""API and OAuth access tokens: minting (seed, test helpers, OAuth), authentication,
expiry and deletion. Only the SHA-256 of a token is ever stored."""

from __future__ import annotations

import re

from sqlmodel import Session, func, select

from ..clock import DAY_MS, HOUR_MS
from ..errors import ApiError, validation
from ..ids import new_api_token, new_id, new_oauth_token, sha256_hex
from ..tables import ApiToken, Member, RefreshToken, User, Workspace

API_TOKEN_RE = re.compile(r"^fb_[A-Za-z0-9]{32}$")
OAUTH_TOKEN_RE = re.compile(r"^fbo_[A-Za-z0-9]{20,128}$")
API_TOKEN_TTL_MS = 30 * DAY_MS
OAUTH_TOKEN_TTL_MS = HOUR_MS
MAX_TOKENS_PER_PERSON = 10
MAX_TOKEN_NAME = 64


def create_api_token(
    session: Session, user_id: str, workspace_id: str, name: str, now: int, value: str | None = None
) -> tuple[str, ApiToken]:
    """Mint an API token for a person in a workspace; its value is returned once."""
    check_token_name(name)
    if session.get(Member, (workspace_id, user_id)) is None:
        raise validation(f"User {user_id} is not a member of workspace {workspace_id}.", field="userId")
    live = session.exec(
        select(func.count()).select_from(ApiToken).where(
            ApiToken.user_id == user_id,
            ApiToken.workspace_id == workspace_id,
            ApiToken.kind == "api",
        )
    ).one()
    if live >= MAX_TOKENS_PER_PERSON:
        raise ApiError(
            "CONFLICT",
            f"A person may hold at most {MAX_TOKENS_PER_PERSON} API tokens in a workspace; delete one first.",
            reason="TOKEN_LIMIT_REACHED",
        )
    value = value or new_api_token()
    if not API_TOKEN_RE.match(value):
        raise validation("An API token is fb_ followed by 32 letters or digits.", field="value")
    row = ApiToken(
        id=new_id("tok"),
        token_hash=sha256_hex(value),
        prefix=value[:11],
        name=name,
        kind="api",
        user_id=user_id,
        workspace_id=workspace_id,
        created_at=now,
        expires_at=now + API_TOKEN_TTL_MS,
    )
    session.add(row)
    return value, row


def create_oauth_token(
    session: Session,
    user_id: str,
    workspace_id: str,
    now: int,
    client_id: str | None = None,
    scope: str | None = None,
) -> tuple[str, ApiToken]:
    """Mint an OAuth access token (``fbo_``), valid one hour; it does not count towards
    the ten API tokens a person may hold."""
    value = new_oauth_token()
    row = ApiToken(
        id=new_id("tok"),
        token_hash=sha256_hex(value),
        prefix=value[:11],
        name=f"OAuth {client_id or 'access'}",
        kind="oauth",
        user_id=user_id,
        workspace_id=workspace_id,
        client_id=client_id,
        scope=scope,
        created_at=now,
        expires_at=now + OAUTH_TOKEN_TTL_MS,
    )
    session.add(row)
    return value, row


def check_token_name(name: str) -> None:
    if not name or len(name) > MAX_TOKEN_NAME:
        raise validation(
            f"A token name is 1 to {MAX_TOKEN_NAME} characters; got {len(name)}.",
            field="name",
            reason="OUT_OF_RANGE",
        )


def remove_member(session: Session, workspace_id: str, user_id: str) -> int:
    """A person leaves (or is removed from) a workspace: the membership goes, and with it
    every token the person holds there: API and OAuth access tokens, and OAuth refresh
    tokens (spec, Authentication 7). Returns how many access tokens were deleted; a
    person who is not a member is NOT_FOUND."""
    member = session.get(Member, (workspace_id, user_id))
    if member is None:
        raise ApiError("NOT_FOUND", f"User {user_id} is not a member of workspace {workspace_id}.",
                       field="userId")
    tokens = session.exec(select(ApiToken).where(ApiToken.workspace_id == workspace_id,
                                                 ApiToken.user_id == user_id)).all()
    refresh = session.exec(select(RefreshToken).where(RefreshToken.workspace_id == workspace_id,
                                                      RefreshToken.user_id == user_id)).all()
    for row in [*tokens, *refresh]:
        session.delete(row)
    session.delete(member)
    return len(tokens)


def authenticate(session: Session, header: str | None, now: int, *,
                 allow_expired: bool = False) -> tuple[ApiToken, User, Workspace]:
    """The token, person and workspace behind an ``Authorization: Bearer`` header, or
    UNAUTHORIZED saying what is wrong with it. ``allow_expired``: a token past its
    lifetime still names its holder (the sandbox's own helpers, never ``/api/v1``)."""
    if not header:
        raise ApiError("UNAUTHORIZED", "Missing Authorization header; send Authorization: Bearer <token>.",
                       reason="MISSING_TOKEN")
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not value:
        raise ApiError("UNAUTHORIZED", "The Authorization header must be Bearer <token>.",
                       reason="MALFORMED_TOKEN")
    if not (API_TOKEN_RE.match(value) or OAUTH_TOKEN_RE.match(value)):
        raise ApiError(
            "UNAUTHORIZED",
            "Bad API token: an API token is fb_ and 32 letters or digits, an OAuth token starts with fbo_.",
            reason="MALFORMED_TOKEN",
        )
    row = session.exec(select(ApiToken).where(ApiToken.token_hash == sha256_hex(value))).first()
    if row is None:
        raise ApiError("UNAUTHORIZED", "Invalid token: it does not exist or was deleted.",
                       reason="INVALID_TOKEN")
    if now >= row.expires_at and not allow_expired:
        raise ApiError(
            "UNAUTHORIZED",
            "Token expired"
            + (": API tokens last 30 days; create a new one." if row.kind == "api"
               else ": OAuth access tokens last one hour; refresh it."),
            reason="TOKEN_EXPIRED",
        )
    user = session.get(User, row.user_id)
    workspace = session.get(Workspace, row.workspace_id)
    if user is None or workspace is None or session.get(Member, (workspace.id, user.id)) is None:
        raise ApiError("UNAUTHORIZED", "Invalid token: its owner left the workspace.", reason="INVALID_TOKEN")
    row.last_used_at = now
    return row, user, workspace
