"""The params and results of the sandbox's test helpers: what ``POST /api/sandbox``
takes and answers, shared by the helpers (which validate and build them) and the
client (which sends and reads them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from pydantic import Field

from ..domain.base import Params, Result
from ..faults import FaultPlan, FaultsView

__all__ = ["FaultPlan", "FaultsView"]  # the faults.* helpers' params and result


class NoParams(Params):
    pass


# -- clock, reset, deliveries --------------------------------------------------------


class AdvanceParams(Params):
    ms: Annotated[int, Field(ge=0, le=400 * 24 * 3600 * 1000)]


class ClockResult(Result):
    now: int
    offsetMs: int


class ResetResult(Result):
    reset: bool
    now: int


class FlushResult(Result):
    attempts: list[dict[str, Any]]  # one per delivery attempted: its id, state, status, ...


# -- tokens, members, limits, workspace ----------------------------------------------


class TokenCreateParams(Params):
    name: str = "test"
    kind: Literal["api", "oauth"] = "api"


class TokenView(Result):
    id: str
    name: str
    kind: str
    prefix: str
    createdAt: int
    expiresAt: int
    token: str | None = None


class TokenList(Result):
    items: list[TokenView]


class TokenIdParams(Params):
    tokenId: str


class TokenRenameParams(Params):
    tokenId: str
    name: str


class Deleted(Result):
    id: str
    deleted: bool


class MemberAddParams(Params):
    email: Annotated[str, Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")]
    name: Annotated[str, Field(min_length=1, max_length=255)]


class MemberView(Result):
    userId: str
    email: str
    name: str
    token: str  # an API token of the new member, shown once


class MemberIdParams(Params):
    userId: str


class MemberRemoved(Result):
    userId: str
    removed: bool
    tokensDeleted: int


class LimitsParams(Params):
    callsPerMinute: Annotated[int, Field(ge=1)] | None = None
    createsPerMinute: Annotated[int, Field(ge=1)] | None = None
    failedAuth: Annotated[int, Field(ge=1)] | None = None
    # The window of callsPerMinute and createsPerMinute (60000 by default): shorter, a
    # test sees several full windows in seconds. 100 ms to 1 hour.
    windowMs: Annotated[int, Field(ge=100, le=3_600_000)] | None = None


class LimitsView(Result):
    callsPerMinute: int
    createsPerMinute: int
    failedAuth: int
    windowMs: int


class CallsParams(Params):
    since: int | None = None
    method: str | None = None


class CallItem(Result):
    at: int
    method: str


class CallList(Result):
    count: int
    items: list[CallItem]


class WorkspaceParams(Params):
    plan: Literal["free", "pro", "business"] | None = None
    monthlyAllowance: Annotated[int, Field(ge=0)] | None = None
    partialTracking: bool | None = None
    paymentConnected: bool | None = None


class WorkspaceView(Result):
    id: str
    plan: str
    monthlyAllowance: int
    partialTracking: bool
    paymentConnected: bool


# -- what respondents and recipients do ------------------------------------------------


class SubmitParams(Params):
    formId: str
    answers: dict[str, Any] = {}
    completed: bool = True
    respondentEmail: str | None = None


class SubmissionRef(Result):
    id: str
    formId: str
    isCompleted: bool


class CompleteParams(Params):
    requestId: str
    answers: dict[str, Any] = {}


class ShareSubmitParams(Params):
    url: str
    answers: dict[str, Any] = {}
    completed: bool = True
    password: str | None = None
    editToken: str | None = None
    submissionId: str | None = None


class ShareSubmitted(Result):
    submissionId: str
    isCompleted: bool
    editCount: int
    editUrl: str | None = None
    redirectUrl: str | None = None


# -- the outbox: mail and events --------------------------------------------------------


class MailParams(Params):
    to: str | None = None
    requestId: str | None = None


# "from" is a keyword, hence the functional TypedDict form.
MailItem = TypedDict("MailItem", {
    "id": str, "kind": str, "to": str, "from": str, "subject": str, "body": str, "status": str,
    "requestId": "str | None", "submissionId": "str | None", "createdAt": int,
})


class MailList(TypedDict):
    items: list[MailItem]


class EventsParams(Params):
    requestId: str | None = None
    type: str | None = None
    formId: str | None = None


class AttemptItem(TypedDict):
    at: int
    status: int | None
    error: str | None
    signature: str | None
    durationMs: int | None


class DeliveryItem(TypedDict):
    id: str
    kind: str
    targetUrl: str
    state: str
    attemptCount: int
    nextAttemptAt: int | None
    subscriptionId: str | None
    attempts: list[AttemptItem]


class EventItem(TypedDict):
    id: str
    type: str
    createdAt: int
    test: bool
    requestId: str | None
    submissionId: str | None
    payload: dict[str, Any] | None
    deliveries: list[DeliveryItem]


class EventList(TypedDict):
    items: list[EventItem]


class DialectParams(Params):
    """``dialect.set``: the dialect later ``/api/v1`` answers use (formservice/dialect.py)."""

    dialect: Literal["full", "minimal"]


class DialectView(Result):
    dialect: Literal["full", "minimal"]
