"""Operations only the agent endpoint offers: the form editor, themes, analytics and
translation drafts. They are domain functions like the JSON-RPC methods (``fn(ctx,
params) -> result``, params a strict pydantic model) and run through ``Service.invoke``
in one transaction, but live in their own registry, keyed by tool name, so they never
appear on ``/api/v1`` or in ``methods.list``."""

from __future__ import annotations

from .base import Ctx, Method, Params, Result, method_registry

AGENT_METHODS: dict[str, Method] = {}
agent_method = method_registry(AGENT_METHODS)


class _NoParams(Params):
    pass


class Identity(Result):
    userId: str
    userName: str
    userEmail: str
    workspaceId: str
    workspaceName: str
    plan: str


@agent_method("identity")
def identity(ctx: Ctx, p: _NoParams) -> Identity:
    """Who the token acts for, and in which workspace on which plan (for the agent's
    instructions and its ``identity`` prompt; not a tool)."""
    return Identity(userId=ctx.user.id, userName=ctx.user.name, userEmail=ctx.user.email,
                    workspaceId=ctx.workspace.id, workspaceName=ctx.workspace.name, plan=ctx.workspace.plan)
