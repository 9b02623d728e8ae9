"""Who am I, which workspaces, which methods."""

from __future__ import annotations

from .base import METHODS, Ctx, Method, Params, Result, method


class NoParams(Params):
    pass


class Me(Result):
    id: str
    email: str
    name: str


@method("me.get")
def me_get(ctx: Ctx, p: NoParams) -> Me:
    """The person the token acts for; the connection test connectors use."""
    return Me(id=ctx.user.id, email=ctx.user.email, name=ctx.user.name)


class WorkspaceItem(Result):
    id: str
    name: str


class WorkspaceList(Result):
    items: list[WorkspaceItem]
    hasMore: bool


@method("workspaces.list")
def workspaces_list(ctx: Ctx, p: NoParams) -> WorkspaceList:
    """The workspaces this token reaches: exactly one, since a token acts in one workspace."""
    return WorkspaceList(items=[WorkspaceItem(id=ctx.workspace.id, name=ctx.workspace.name)], hasMore=False)


class MethodItem(Result):
    name: str
    summary: str


class MethodList(Result):
    methods: list[str]
    items: list[MethodItem]


def listing(registry: dict[str, Method]) -> MethodList:
    """The names of every method of ``registry``, sorted, with a one-line summary each."""
    names = sorted(registry)
    return MethodList(methods=names, items=[MethodItem(name=n, summary=registry[n].summary) for n in names])


@method("methods.list")
def methods_list(ctx: Ctx, p: NoParams) -> MethodList:
    """The names of every method this endpoint answers, with a one-line summary each."""
    return listing(METHODS)
