"""The params and results of the sandbox's test helpers: what ``POST /api/sandbox``
takes and answers, shared by the helpers (which validate and build them) and the
client (which sends and reads them)."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel

from ..clock import MsOf, from_ms, to_ms
from ..domain.base import Params, Result
from ..faults import FaultPlan, FaultsView

__all__ = ["FaultPlan", "FaultsView"]  # the faults.* helpers' params and result


class HelperResult(Result):
    """Base of the helpers' results: attributes are snake_case (``clock.offset_ms``), the
    wire stays camelCase (``offsetMs``), as in the connector's models; the camelCase
    names also read as attributes, for code written against earlier versions."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True,
                              serialize_by_alias=True)

    if not TYPE_CHECKING:  # hidden from type checkers: typed code uses the snake_case names
        def __getattr__(self, name: str) -> Any:
            field = _wire_names(type(self)).get(name)
            if field is not None:
                return getattr(self, field)
            return super().__getattr__(name)


Ms = Annotated[datetime, BeforeValidator(from_ms), PlainSerializer(to_ms, return_type=int)]
"""A time: an aware UTC datetime in Python, epoch ms on the wire (its ``*_ms`` keeps the integer)."""


@cache
def _wire_names(model: type[BaseModel]) -> dict[str, str]:
    """The model's camelCase wire names -> its attribute names (those that differ)."""
    return {f.alias: name for name, f in model.model_fields.items() if f.alias and f.alias != name}


class NoParams(Params):
    pass


# -- clock, reset, deliveries --------------------------------------------------------


class AdvanceParams(Params):
    ms: Annotated[int, Field(ge=0, le=400 * 24 * 3600 * 1000)]


class ClockResult(HelperResult):
    now: Ms
    now_ms: ClassVar[MsOf[int]] = MsOf()
    offset_ms: int


class ResetResult(HelperResult):
    reset: bool
    now: Ms
    now_ms: ClassVar[MsOf[int]] = MsOf()


class FlushedAttempt(HelperResult):
    """A delivery ``deliveries.flush`` attempted: the answer's status (None when no answer
    came), the error if any, and the delivery's state after it."""

    delivery_id: str
    event_id: str
    status: int | None
    error: str | None
    state: str
    attempt_count: int


class FlushResult(HelperResult):
    attempts: list[FlushedAttempt]  # one per delivery attempted


# -- tokens, members, limits, workspace ----------------------------------------------


class TokenCreateParams(Params):
    name: str = "test"
    kind: Literal["api", "oauth"] = "api"


class TokenView(HelperResult):
    id: str
    name: str
    kind: str
    prefix: str
    created_at: Ms
    created_at_ms: ClassVar[MsOf[int]] = MsOf()
    expires_at: Ms
    expires_at_ms: ClassVar[MsOf[int]] = MsOf()
    token: str | None = None


class TokenList(HelperResult):
    items: list[TokenView]


class TokenIdParams(Params):
    tokenId: str


class TokenRenameParams(Params):
    tokenId: str
    name: str


class Deleted(HelperResult):
    id: str
    deleted: bool


class MemberAddParams(Params):
    email: Annotated[str, Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")]
    name: Annotated[str, Field(min_length=1, max_length=255)]


class MemberView(HelperResult):
    user_id: str
    email: str
    name: str
    token: str  # an API token of the new member, shown once


class MemberIdParams(Params):
    userId: str


class MemberRemoved(HelperResult):
    user_id: str
    removed: bool
    tokens_deleted: int


class LimitsParams(Params):
    callsPerMinute: Annotated[int, Field(ge=1)] | None = None
    createsPerMinute: Annotated[int, Field(ge=1)] | None = None
    failedAuth: Annotated[int, Field(ge=1)] | None = None
    # The window of callsPerMinute and createsPerMinute (60000 by default): shorter, a
    # test sees several full windows in seconds. 100 ms to 1 hour.
    windowMs: Annotated[int, Field(ge=100, le=3_600_000)] | None = None


class LimitsView(HelperResult):
    calls_per_minute: int
    creates_per_minute: int
    failed_auth: int
    window_ms: int


class CallsParams(Params):
    since: int | None = None
    method: str | None = None


class CallItem(HelperResult):
    at: Ms
    at_ms: ClassVar[MsOf[int]] = MsOf()
    method: str


class CallList(HelperResult):
    count: int
    items: list[CallItem]


class WorkspaceParams(Params):
    plan: Literal["free", "pro", "business"] | None = None
    monthlyAllowance: Annotated[int, Field(ge=0)] | None = None
    partialTracking: bool | None = None
    paymentConnected: bool | None = None


class WorkspaceView(HelperResult):
    id: str
    plan: str
    monthly_allowance: int
    partial_tracking: bool
    payment_connected: bool


# -- what respondents and recipients do ------------------------------------------------


class SubmitParams(Params):
    formId: str
    answers: dict[str, Any] = {}
    completed: bool = True
    respondentEmail: str | None = None


class SubmissionRef(HelperResult):
    id: str
    form_id: str
    is_completed: bool


class CompleteParams(Params):
    requestId: str
    answers: dict[str, Any] = {}


class RequestIdParams(Params):
    requestId: str


class StartParams(Params):
    requestId: str
    answers: dict[str, Any] = {}


class CompletedRequest(HelperResult):
    """``requests.complete`` (and ``requests.open``, ``requests.start``): the request's
    full record, as ``requests.get`` returns it (the fields below typed; every other
    member of the record kept as an extra)."""

    model_config = ConfigDict(extra="allow")
    id: str
    status: str
    form_id: str | None = None
    submission_id: str | None = None
    external_id: str | None = None
    outcome: str | None = None
    url: str | None = None
    recipient: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    created_at: Ms | None = None
    created_at_ms: ClassVar[MsOf[int | None]] = MsOf()
    opened_at: Ms | None = None
    opened_at_ms: ClassVar[MsOf[int | None]] = MsOf()
    started_at: Ms | None = None
    started_at_ms: ClassVar[MsOf[int | None]] = MsOf()
    last_activity_at: Ms | None = None
    last_activity_at_ms: ClassVar[MsOf[int | None]] = MsOf()
    completed_at: Ms | None = None
    completed_at_ms: ClassVar[MsOf[int | None]] = MsOf()
    answers: dict[str, Any] | None = None
    display: dict[str, Any] | None = None
    timeline: list[dict[str, Any]] | None = None


class ShareSubmitParams(Params):
    url: str
    answers: dict[str, Any] = {}
    completed: bool = True
    password: str | None = None
    editToken: str | None = None
    submissionId: str | None = None


class ShareSubmitted(HelperResult):
    submission_id: str
    is_completed: bool
    edit_count: int
    edit_url: str | None = None
    redirect_url: str | None = None


class UpdateParams(Params):
    submissionId: str
    answers: dict[str, Any] = {}


class UpdatedSubmission(HelperResult):
    """``submissions.update``: the edited submission's answers, ``editCount`` and ``updatedAt``."""

    id: str
    form_id: str
    edit_count: int
    updated_at: Ms | None = None
    updated_at_ms: ClassVar[MsOf[int | None]] = MsOf()
    answers: dict[str, Any] = {}


class SubmissionIdParams(Params):
    submissionId: str


class DeletedSubmission(HelperResult):
    """``submissions.delete``: the submission deleted, its form, and the request it answered."""

    id: str
    form_id: str
    request_id: str | None = None


# -- the outbox: mail and events --------------------------------------------------------


class MailParams(Params):
    to: str | None = None
    requestId: str | None = None


class MailItem(HelperResult):
    """A mail the sandbox "sent" (``from_`` is the wire's ``from``)."""

    id: str
    kind: str
    to: str
    from_: str = Field(alias="from")
    subject: str
    body: str
    status: str
    request_id: str | None
    submission_id: str | None
    created_at: Ms
    created_at_ms: ClassVar[MsOf[int]] = MsOf()


class MailList(HelperResult):
    items: list[MailItem]


class EventsParams(Params):
    requestId: str | None = None
    type: str | None = None
    formId: str | None = None


class AttemptItem(HelperResult):
    at: Ms
    at_ms: ClassVar[MsOf[int]] = MsOf()
    status: int | None
    error: str | None
    signature: str | None
    duration_ms: int | None


class DeliveryItem(HelperResult):
    id: str
    kind: str
    target_url: str
    state: str
    attempt_count: int
    next_attempt_at: Ms | None
    next_attempt_at_ms: ClassVar[MsOf[int | None]] = MsOf()
    subscription_id: str | None
    attempts: list[AttemptItem]


class EventItem(HelperResult):
    """An event with its deliveries; ``payload`` is the body every delivery sends."""

    id: str
    type: str
    created_at: Ms
    created_at_ms: ClassVar[MsOf[int]] = MsOf()
    test: bool
    request_id: str | None
    submission_id: str | None
    payload: dict[str, Any] | None
    deliveries: list[DeliveryItem]


class EventList(HelperResult):
    items: list[EventItem]


class PendingParams(Params):
    """``deliveries.pending``: only these subscriptions' deliveries (all when not given)."""

    subscriptionIds: list[str] | None = None


class PendingItem(HelperResult):
    """A subscription's deliveries still waiting for an answer (not delivered, not given up)."""

    subscription_id: str
    pending: int
    next_attempt_at: Ms | None
    next_attempt_at_ms: ClassVar[MsOf[int | None]] = MsOf()


class PendingList(HelperResult):
    items: list[PendingItem]  # only subscriptions with a delivery pending


class DialectParams(Params):
    """``dialect.set``: the dialect later ``/api/v1`` answers use (formservice/dialect.py)."""

    dialect: Literal["full", "minimal"]


class DialectView(HelperResult):
    dialect: Literal["full", "minimal"]


class FileCreateParams(Params):
    name: Annotated[str, Field(min_length=1, max_length=255)]
    type: Annotated[str, Field(min_length=3, max_length=255, pattern=r"^[\w.+-]+/[\w.+-]+$")] = \
        "application/octet-stream"
    contentBase64: str


class FileObject(HelperResult):
    """A file answer's object, as ``submissions.create`` and ``requests.complete`` take it."""

    name: str
    type: str
    size: int
    url: str


# -- snapshots -----------------------------------------------------------------------


class SnapshotParams(Params):
    """``snapshot.save`` / ``snapshot.restore``: the snapshot's name (a file name in the
    snapshot dir: letters, digits, ``.``, ``_``, ``-``)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]


class SnapshotView(HelperResult):
    name: str
    saved_at: Ms
    size_bytes: int
    saved_at_ms: ClassVar[MsOf[int]] = MsOf()


class SnapshotList(HelperResult):
    items: list[SnapshotView]
