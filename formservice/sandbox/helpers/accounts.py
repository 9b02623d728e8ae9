"""Helpers that do the dashboard's job: tokens, members and the workspace's plan."""

from __future__ import annotations

from sqlmodel import select

from ...clock import from_ms
from ...domain import auth
from ...domain.base import Ctx
from ...errors import ApiError, not_found
from ...ids import new_id
from ...tables import ApiToken, Member, User
from ..models import (
    Deleted,
    MemberAddParams,
    MemberIdParams,
    MemberRemoved,
    MemberView,
    NoParams,
    TokenCreateParams,
    TokenIdParams,
    TokenList,
    TokenRenameParams,
    TokenView,
    WorkspaceParams,
    WorkspaceView,
)
from .registry import helper


def token_view(row: ApiToken, value: str | None = None) -> TokenView:
    """A token as the helpers show it; its value only when just minted."""
    v = TokenView(id=row.id, name=row.name, kind=row.kind, prefix=row.prefix, created_at=from_ms(row.created_at),
                  expires_at=from_ms(row.expires_at))
    if value is not None:
        v.token = value
    return v


def own_token(ctx: Ctx, token_id: str) -> ApiToken:
    """The caller's token ``token_id`` in this workspace, or NOT_FOUND."""
    row = ctx.session.get(ApiToken, token_id)
    if row is None or row.user_id != ctx.user.id or row.workspace_id != ctx.workspace.id:
        raise not_found("Token", field="tokenId")
    return row


@helper("tokens.create")
def tokens_create(ctx: Ctx, p: TokenCreateParams) -> TokenView:
    """Mint a token for the caller's person and workspace (the dashboard's job in the
    hosted service). The value is returned once."""
    if p.kind == "oauth":
        value, row = auth.create_oauth_token(ctx.session, ctx.user.id, ctx.workspace.id, ctx.now)
    else:
        value, row = auth.create_api_token(ctx.session, ctx.user.id, ctx.workspace.id, p.name, ctx.now)
    return token_view(row, value)


@helper("tokens.list")
def tokens_list(ctx: Ctx, p: NoParams) -> TokenList:
    """The caller's tokens in this workspace, without their values."""
    rows = ctx.session.exec(select(ApiToken).where(ApiToken.user_id == ctx.user.id,
                                                   ApiToken.workspace_id == ctx.workspace.id)).all()
    return TokenList(items=[token_view(r) for r in sorted(rows, key=lambda r: r.created_at)])


@helper("tokens.rename")
def tokens_rename(ctx: Ctx, p: TokenRenameParams) -> TokenView:
    """Rename a token; its value does not change."""
    auth.check_token_name(p.name)
    row = own_token(ctx, p.tokenId)
    row.name = p.name
    return token_view(row)


@helper("tokens.delete")
def tokens_delete(ctx: Ctx, p: TokenIdParams) -> Deleted:
    """Delete a token; it stops authenticating on the next call."""
    ctx.session.delete(own_token(ctx, p.tokenId))
    return Deleted(id=p.tokenId, deleted=True)


@helper("members.add")
def members_add(ctx: Ctx, p: MemberAddParams) -> MemberView:
    """Add a person to the caller's workspace with one API token (the dashboard's job in
    the hosted service), so a test can act as a second member."""
    user = User(id=new_id("usr"), email=p.email, name=p.name)
    ctx.session.add(user)
    ctx.session.add(Member(workspace_id=ctx.workspace.id, user_id=user.id, role="member"))
    ctx.session.flush()
    value, _ = auth.create_api_token(ctx.session, user.id, ctx.workspace.id, "member", ctx.now)
    return MemberView(user_id=user.id, email=user.email, name=user.name, token=value)


@helper("members.remove")
def members_remove(ctx: Ctx, p: MemberIdParams) -> MemberRemoved:
    """A person leaves the caller's workspace: every token they hold there stops working."""
    if p.userId == ctx.user.id:
        raise ApiError("VALIDATION_ERROR", "The calling person cannot remove themselves; call as another member.",
                       reason="CANNOT_REMOVE_SELF", field="userId")
    deleted = auth.remove_member(ctx.session, ctx.workspace.id, p.userId)
    return MemberRemoved(user_id=p.userId, removed=True, tokens_deleted=deleted)


@helper("workspace.update")
def workspace_update(ctx: Ctx, p: WorkspaceParams) -> WorkspaceView:
    """Change the caller's workspace plan or allowances (billing is the dashboard's job)."""
    ws = ctx.workspace
    if p.plan is not None:
        ws.plan = p.plan
    if p.monthlyAllowance is not None:
        ws.monthly_allowance = p.monthlyAllowance
    if p.partialTracking is not None:
        ws.partial_tracking = p.partialTracking
    if p.paymentConnected is not None:
        ws.payment_connected = p.paymentConnected
    return WorkspaceView(id=ws.id, plan=ws.plan, monthly_allowance=ws.monthly_allowance,
                         partial_tracking=ws.partial_tracking, payment_connected=ws.payment_connected)
