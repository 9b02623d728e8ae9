"""What every domain module shares: the call context, the method registry, the params
base model, cursor pagination and workspace scoping."""

from __future__ import annotations

import base64
import binascii
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import and_, or_
from sqlmodel import Session, select

from ..errors import ApiError, forbidden, not_found, validation
from ..tables import ApiToken, Form, User, Workspace

PLANS = ("free", "pro", "business")
PLAN_RANK = {p: i for i, p in enumerate(PLANS)}


def _drop_null(schema: dict[str, Any]) -> None:
    """Leave null out of a param's published schema (see NOT_NULL)."""
    alts = [a for a in schema.get("anyOf", []) if a != {"type": "null"}]
    if "anyOf" in schema:
        del schema["anyOf"]
        if len(alts) == 1:
            schema.update(alts[0])
        else:
            schema["anyOf"] = alts
    schema.pop("default", None)


# On an optional param that refuses null (None only means "not sent"): the published
# schema then offers no null either.
NOT_NULL = Field(json_schema_extra=_drop_null)


class Params(BaseModel):
    """Base of every method's params: unknown keys are refused and types are strict, so a
    typo or a string where a number belongs never passes silently."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Result(BaseModel):
    """Base of result shapes. Results are dumped with ``exclude_unset``: a field that is
    only sometimes present (``alreadyPublished``) is simply not set."""

    model_config = ConfigDict(extra="forbid")


class Page(Result):
    items: list[Any]
    nextCursor: str | None
    hasMore: bool
    canPaginate: bool = True


@dataclass
class Ctx:
    """One authenticated call: the open database session, the moment of the call (from
    the service clock), and who is calling in which workspace."""

    session: Session
    now: int
    workspace: Workspace
    user: User
    token: ApiToken
    base_url: str
    service: Any = None  # the Service, for collaborators that outlive a call
    after_commit: list[Callable[[], Any]] = field(default_factory=list)

    # -- scoping ---------------------------------------------------------------
    def check_workspace(self, workspace_id: str, param: str = "workspaceId") -> Workspace:
        """The caller's workspace, when ``workspace_id`` names it; 403 for another one."""
        if workspace_id == self.workspace.id:
            return self.workspace
        if self.session.get(Workspace, workspace_id) is None:
            raise not_found("Workspace", field=param)
        raise forbidden(
            f"This token acts in workspace {self.workspace.id} only; it cannot reach {workspace_id}.",
            field=param,
            reason="FOREIGN_WORKSPACE",
        )

    def form(self, form_id: str, *, trashed_ok: bool = False, param: str = "formId") -> Form:
        """The form ``form_id`` in the caller's workspace: 404 when it does not exist (or
        is trashed, unless ``trashed_ok``), 403 when it lives in another workspace."""
        form = self.session.get(Form, form_id)
        if form is None or (form.trashed_at is not None and not trashed_ok):
            raise not_found("Form", field=param)
        if form.workspace_id != self.workspace.id:
            raise forbidden(
                f"Form {form_id} belongs to another workspace; this token acts in {self.workspace.id} only.",
                field=param,
                reason="FOREIGN_WORKSPACE",
            )
        return form

    def plan_at_least(self, plan: str) -> bool:
        return PLAN_RANK[self.workspace.plan] >= PLAN_RANK[plan]

    def require_plan(self, plan: str, feature: str, what: str) -> None:
        if not self.plan_at_least(plan):
            raise ApiError(
                "UPGRADE_REQUIRED",
                f"{what} needs the {plan.capitalize()} plan or higher; this workspace is on "
                f"{self.workspace.plan.capitalize()}.",
                feature=feature,
                reason="PLAN_REQUIRED",
            )


# -- the method registry ---------------------------------------------------------


@dataclass(frozen=True)
class Method:
    name: str
    fn: Callable[[Any, Any], Any]  # (Ctx, params), or (Service, params) when is_async
    params: type[Params]
    result: type[BaseModel] | None
    summary: str
    bucket: str | None = None  # a second rate limit this method also counts against
    # A coroutine ``fn(service, params)`` that runs outside any transaction (it awaits
    # background work, such as the sandbox's reset and deliveries.flush helpers).
    is_async: bool = False


METHODS: dict[str, Method] = {}
F = TypeVar("F", bound=Callable[..., Any])


def method_registry(registry: dict[str, Method]) -> Callable[..., Callable[[F], F]]:
    """A decorator that registers domain functions ``fn(ctx, params) -> result`` in
    ``registry`` (or coroutines ``async fn(service, params) -> result``, run by
    ``Service.invoke_async`` outside any transaction). The params and result types come
    from the annotations; the docstring's first line is the summary shown by
    ``methods.list`` and the OpenAPI document."""

    def register(name: str, *, bucket: str | None = None) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            hints = get_type_hints(fn)
            params_type = hints[list(inspect.signature(fn).parameters)[1]]
            result_type = hints.get("return")
            if not (isinstance(result_type, type) and issubclass(result_type, BaseModel)):
                result_type = None
            summary = (inspect.getdoc(fn) or name).split("\n")[0]
            registry[name] = Method(name, fn, params_type, result_type, summary, bucket,
                                    is_async=inspect.iscoroutinefunction(fn))
            return fn

        return deco

    return register


method = method_registry(METHODS)


# -- cursor pagination -----------------------------------------------------------


def encode_cursor(values: Sequence[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, arity: int) -> list[Any]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        values = None
    if not isinstance(values, list) or len(values) != arity:
        raise validation(
            "cursor is not a cursor this method issued; pass back the nextCursor of the previous page.",
            field="cursor",
            reason="INVALID_CURSOR",
        )
    return values


def keyset_page(
    session: Session,
    stmt: Any,
    order: Sequence[Any],
    key: Callable[[Any], Sequence[Any]],
    limit: int,
    cursor: str | None,
) -> tuple[list[Any], str | None]:
    """Newest-first keyset pagination over ``order`` (columns sorted descending, the last
    one unique). Rows inserted while a client pages never shift its cursor: no gap, no
    duplicate. Returns the page and the next cursor (None on the last page)."""
    if cursor is not None:
        after = decode_cursor(cursor, len(order))
        clauses = []
        for i, col in enumerate(order):
            eq = [order[j] == after[j] for j in range(i)]
            clauses.append(and_(*eq, col < after[i]))
        stmt = stmt.where(or_(*clauses))
    stmt = stmt.order_by(*(c.desc() for c in order)).limit(limit + 1)
    rows = list(session.exec(stmt))
    if len(rows) > limit:
        rows = rows[:limit]
        return rows, encode_cursor(key(rows[-1]))
    return rows, None


def page_result(items: list[Any], next_cursor: str | None) -> dict[str, Any]:
    return {"items": items, "nextCursor": next_cursor, "hasMore": next_cursor is not None}


__all__ = [
    "Ctx",
    "METHODS",
    "Method",
    "Page",
    "Params",
    "Result",
    "keyset_page",
    "method",
    "method_registry",
    "page_result",
    "select",
]
