"""Pydantic models of the wire shapes the connector reads. Unknown fields are ignored
everywhere, as the spec's versioning rule asks: the service may add response fields
without a new API version."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field


class WireModel(BaseModel):
    """Base of every wire shape: unknown fields are ignored, names are the wire's own."""

    model_config = ConfigDict(extra="ignore")


# ======================================================================================
# Events: the envelope of callbacks and webhook deliveries (spec "Events"; notes 3).
# Used by connector.store and connector.receiver.
# ======================================================================================


class EventForm(WireModel):
    """``data.form``: the form and the published version the answers belong to."""

    id: str
    name: str | None = None
    snapshotId: str | None = None


class EventSubmission(WireModel):
    """``data.submission``. ``updatedAt`` is null until the first edit; ``editCount`` is 0
    for a fresh submission; ``submission.updated`` keeps the original ``submittedAt``."""

    id: str
    respondentEmail: str | None = None
    submittedAt: datetime | None = None
    updatedAt: datetime | None = None
    editCount: int = 0
    pdfUrl: str | None = None
    language: str | None = None


class EventRecipient(WireModel):
    email: str | None = None
    name: str | None = None


class EventRequest(WireModel):
    """``data.request`` of ``request.*`` events (ISO timestamps). Only the terminal
    timestamp of the event's own status is present (``completedAt``, ``expiredAt`` or
    ``canceledAt`` with ``cancelReason``)."""

    id: str
    formId: str | None = None
    workspaceId: str | None = None
    externalId: str | None = None
    status: str | None = None
    outcome: str | None = None
    language: str | None = None
    recipient: EventRecipient | None = None
    metadata: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    createdAt: datetime | None = None
    completedAt: datetime | None = None
    expiredAt: datetime | None = None
    canceledAt: datetime | None = None
    cancelReason: str | None = None


class EventData(WireModel):
    """``data``: which blocks are present depends on the type. ``request.completed``
    carries all five; ``request.expired``/``request.canceled`` carry ``request`` only;
    submission events carry ``form``, ``submission``, ``answers`` and ``display``."""

    form: EventForm | None = None
    submission: EventSubmission | None = None
    request: EventRequest | None = None
    answers: dict[str, Any] | None = None
    display: dict[str, Any] | None = None


class Event(WireModel):
    """A delivered event envelope. ``type`` is kept as any string: a type this version
    does not know is still a valid event (it is stored raw)."""

    id: str
    type: str
    createdAt: datetime
    apiVersion: str | None = None
    test: bool = False
    data: EventData = Field(default_factory=EventData)


# == Client: results of the JSON-RPC methods ===========================================
# Every model ignores unknown fields: the service adds response fields without a new
# API version.


Wire = WireModel
T = TypeVar("T")


class Page(Wire, Generic[T]):
    items: list[T]
    nextCursor: str | None = None
    hasMore: bool = False
    canPaginate: bool = True


class Me(Wire):
    id: str
    email: str
    name: str


class WorkspaceRef(Wire):
    id: str
    name: str


class Form(Wire):
    id: str
    name: str
    folderId: str | None = None
    workspaceId: str
    isPublished: bool
    publishedAt: int | None = None
    unpublishedAt: int | None = None
    createdAt: int
    lastEditedAt: int | None = None
    emoji: str | None = None


class Question(Wire):
    id: str
    type: str
    inputType: str | None = None
    title: str = ""
    metadata: dict[str, Any] | None = None


class FormDetail(Form):
    questions: list[Question] = []
    hasContent: bool = False
    cover: dict[str, Any] | None = None
    logo: dict[str, Any] | None = None
    isDeleted: bool = False
    trashedAt: int | None = None
    previewUrl: str | None = None


class FormCreated(Wire):
    id: str
    name: str
    workspaceId: str
    folderId: str | None = None
    isPublished: bool = False
    createdAt: int
    previewUrl: str | None = None


class FormUpdated(Wire):
    id: str
    name: str
    folderId: str | None = None
    emoji: str | None = None
    cover: dict[str, Any] | None = None
    logo: dict[str, Any] | None = None
    noChange: bool = False


class FormState(Wire):
    """The result of publish, unpublish, delete and restore: the form's id, its state and
    whichever flag applies (alreadyPublished, alreadyUnpublished, alreadyTrashed,
    alreadyRestored)."""

    model_config = ConfigDict(extra="allow")
    id: str
    isPublished: bool | None = None
    alreadyPublished: bool = False
    alreadyUnpublished: bool = False
    alreadyTrashed: bool = False
    alreadyRestored: bool = False
    warning: str | None = None
    snapshotId: str | None = None


class FormSettings(Wire):
    settings: dict[str, Any]
    isDefault: bool
    availableEmailDomains: list[Any] = []
    defaultFromAddress: str | None = None
    payment: Any = None


class Option(Wire):
    key: str
    label: str


class FieldDescriptor(Wire):
    key: str
    type: str
    title: str = ""
    required: bool = False
    prefillable: bool = True
    options: list[Option] | None = None
    rows: list[Option] | None = None
    columns: list[Option] | None = None
    context: bool = False
    calculated: bool = False
    repeating: bool = False
    members: list[FieldDescriptor] | None = None
    documents: list[dict[str, Any]] | None = None
    multiple: bool = False


class FieldList(Wire):
    published: bool
    items: list[FieldDescriptor]
    hasMore: bool = False


class Submission(Wire):
    id: str
    submittedAt: str | None = None
    isCompleted: bool
    createdAt: str
    updatedAt: str | None = None
    editCount: int = 0
    respondentEmail: str | None = None
    requestId: str | None = None
    answers: dict[str, Any] = {}
    display: dict[str, Any] = {}
    translation: dict[str, Any] | None = None


class SubmissionPage(Page[Submission]):
    formId: str
    formName: str


class SubmissionPdf(Wire):
    url: str
    filename: str
    contentType: str
    byteLength: int


class Recipient(Wire):
    email: str | None = None
    name: str | None = None


class RequestCreated(Wire):
    id: str
    status: str
    url: str
    deliveryStatus: str
    externalId: str | None = None
    deduplicated: bool = False
    createdAt: int
    expiresAt: int


class TimelineEntry(Wire):
    id: str
    at: int
    type: str
    deliveryStatus: str | None = None
    attemptCount: int | None = None
    eventType: str | None = None
    canceledBy: str | None = None
    detail: str | None = None


class RequestRecord(Wire):
    """A request as ``requests.get`` returns it (``requests.list`` items lack answers,
    display and timeline)."""

    id: str
    workspaceId: str | None = None
    formId: str | None = None
    formSnapshotId: str | None = None
    submissionId: str | None = None
    status: str
    outcome: str | None = None
    isTest: bool = False
    recipient: Recipient | None = None
    language: str | None = None
    externalId: str | None = None
    metadata: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    prefill: dict[str, Any] | None = None
    readonlyKeys: list[str] = []
    documents: list[dict[str, Any]] = []
    delivery: str | None = None
    deliveryStatus: str | None = None
    hasCallback: bool = False
    callbackFailedAt: int | None = None
    url: str | None = None
    expiresAt: int | None = None
    createdAt: int | None = None
    updatedAt: int | None = None
    openedAt: int | None = None
    startedAt: int | None = None
    lastActivityAt: int | None = None
    completedAt: int | None = None
    expiredAt: int | None = None
    canceledAt: int | None = None
    dataPurgedAt: int | None = None
    canceledBy: str | None = None
    cancelReason: str | None = None
    reminderStep: int = 0
    remindersSent: int = 0
    answers: dict[str, Any] | None = None
    display: dict[str, Any] | None = None
    timeline: list[TimelineEntry] | None = None


class Replay(Wire):
    dispatchId: str
    eventId: str


class DocumentUpload(Wire):
    id: str
    name: str
    contentType: str
    size: int
    uploadUrl: str
    expiresAt: int | str | None = None


class ShareLink(Wire):
    id: str
    formId: str | None = None
    url: str | None = None
    name: str | None = None
    revoked: bool = False
    createdAt: int | None = None


class WebhookSubscription(Wire):
    subscriptionId: str
    formId: str
    provider: str
    targetUrl: str
    eventType: str
    idleWindow: str | None = None
    status: str = "active"
    createdAt: int | None = None
