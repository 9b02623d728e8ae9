"""Pydantic models of the wire shapes the connector reads. Unknown fields are ignored
everywhere, as the spec's versioning rule asks: the service may add response fields
without a new API version.

Reading is tolerant: a model requires only what the connector needs to do its job (an
id, a page's ``items``, a request's ``status``, a submission's ``isCompleted`` and
``createdAt`` that sync pages by, an upload's URL and type); every other field is
optional with a default, so a service that answers with less than the spec shows (or
only what it shows) never fails a page."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator


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


# == Client: params and results of the JSON-RPC methods ===============================
# Every result model ignores unknown fields (WireModel): the service adds response fields
# without a new API version. Fields the spec leaves "not shown" default to None.

T = TypeVar("T")


class Page(WireModel, Generic[T]):
    """One page of a list method. ``hasMore`` comes with a ``nextCursor`` to pass back as
    ``cursor``; ``canPaginate`` is false when no cursor can resume (a fuzzy ``query``)."""

    items: list[T]
    nextCursor: str | None = None
    hasMore: bool = False
    canPaginate: bool = True


# -- me, workspaces, methods -------------------------------------------------------------


class Me(WireModel):
    id: str
    email: str | None = None
    name: str | None = None


class WorkspaceRef(WireModel):
    id: str
    name: str | None = None


class MethodInfo(WireModel):
    name: str
    summary: str = ""


class MethodList(WireModel):
    """``methods.list``: the names of every method the service offers."""

    methods: list[str] = []
    items: list[MethodInfo] = []


# -- forms ---------------------------------------------------------------------------------


class Form(WireModel):
    """An item of ``forms.list`` (timestamps in epoch ms); only ``id`` is required."""

    id: str
    name: str = ""
    folderId: str | None = None
    workspaceId: str | None = None
    isPublished: bool = False
    publishedAt: int | None = None
    unpublishedAt: int | None = None
    createdAt: int | None = None
    lastEditedAt: int | None = None
    emoji: str | None = None


class Question(WireModel):
    id: str
    type: str
    inputType: str | None = None
    title: str = ""
    metadata: dict[str, Any] | None = None


class FormDetail(Form):
    """``forms.get``: the form plus its questions, decoration and trash state."""

    questions: list[Question] = []
    hasContent: bool = False
    cover: dict[str, Any] | None = None
    logo: dict[str, Any] | None = None
    isDeleted: bool = False
    trashedAt: int | None = None
    previewUrl: str | None = None


class FormCreated(WireModel):
    id: str
    name: str = ""
    workspaceId: str | None = None
    folderId: str | None = None
    isPublished: bool = False
    createdAt: int | None = None
    previewUrl: str | None = None


class FormUpdated(WireModel):
    """``forms.update``: ``cover``/``logo`` only when sent; ``noChange`` when nothing did."""

    id: str | None = None
    name: str | None = None
    folderId: str | None = None
    emoji: str | None = None
    cover: dict[str, Any] | None = None
    logo: dict[str, Any] | None = None
    noChange: bool = False


class FormPublished(WireModel):
    """``forms.publish``: the spec shows only the flags; the rest is optional."""

    id: str | None = None
    isPublished: bool = True
    publishedAt: int | None = None
    snapshotId: str | None = None
    alreadyPublished: bool = False
    warning: str | None = None  # published with content blocks but no questions


class FormUnpublished(WireModel):
    id: str | None = None
    isPublished: bool = False
    unpublishedAt: int | None = None
    alreadyUnpublished: bool = False


class FormTrashed(WireModel):
    """``forms.delete``: the form is in the trash; ``alreadyTrashed`` keeps the first date."""

    id: str | None = None
    isDeleted: bool = True
    trashedAt: int | None = None
    revokedShareLinks: int = 0
    alreadyTrashed: bool = False


class FormRestored(Form):
    alreadyRestored: bool = False


class Folder(WireModel):
    id: str
    name: str = ""
    workspaceId: str | None = None
    createdAt: int | None = None
    formCount: int = 0


class FolderUpdated(Folder):
    noChange: bool = False


class FolderDeleted(WireModel):
    id: str
    deleted: bool = True
    movedForms: int = 0


# -- settings and translations -------------------------------------------------------------------


class RedirectQueryParam(WireModel):
    paramName: str
    fieldId: str


class FormSettingsValues(WireModel):
    """The ``settings`` object: the spec's writable names (its exact shape is "not shown",
    so every member is optional). ``hasPassword`` stands in for the password, which is
    never returned."""

    language: str | None = None
    requireAuthentication: bool | None = None
    showBranding: bool | None = None
    captchaEnabled: bool | None = None
    passwordEnabled: bool | None = None
    hasPassword: bool | None = None
    notifyOnSubmission: bool | None = None
    notificationEmails: list[str] | None = None
    selfNotificationSubject: str | None = None
    selfNotificationEmailBody: str | None = None
    pdfGenerationEnabled: bool | None = None
    showViewSubmissionButton: bool | None = None
    respondentNotificationEnabled: bool | None = None
    respondentNotificationTo: str | None = None
    respondentNotificationSubject: str | None = None
    respondentNotificationBody: str | None = None
    respondentNotificationPdfEnabled: bool | None = None
    respondentReminderEnabled: bool | None = None
    respondentReminderTo: str | None = None
    respondentReminderSubject: str | None = None
    respondentReminderBody: str | None = None
    respondentReminderRequiredFieldIds: list[str] | None = None
    reminderSteps: list[str] | None = None
    redirectUrl: str | None = None
    redirectQueryParams: list[RedirectQueryParam] | None = None
    allowAnotherResponse: bool | None = None
    maxSubmissionsPerRespondent: int | None = None
    editAfterSubmit: bool | None = None
    maxEdits: int | None = None
    effectiveMaxEdits: int | None = None
    draftRetentionDays: int | None = None
    submissionRetentionDays: int | None = None
    emailDomainId: str | None = None


class EmailDomain(WireModel):
    """A verified sender domain usable as ``emailDomainId`` (a bare id string is accepted)."""

    id: str
    domain: str | None = None
    verified: bool = True

    @model_validator(mode="before")
    @classmethod
    def _bare_id(cls, value: Any) -> Any:
        return {"id": value} if isinstance(value, str) else value


class PaymentStatus(WireModel):
    connected: bool = False


class FormSettings(WireModel):
    """``formSettings.get``. ``isDefault``: nothing saved yet, the defaults are shown."""

    settings: FormSettingsValues = Field(default_factory=FormSettingsValues)
    isDefault: bool = False
    availableEmailDomains: list[EmailDomain] = []
    defaultFromAddress: str | None = None
    fromAddress: str | None = None
    payment: PaymentStatus | None = None
    fixedDeletionAt: int | None = None


class TranslationEntry(WireModel):
    """A translatable text of a form and its translation (null when not translated)."""

    key: str
    source: str = ""
    translation: str | None = None


# -- submissions and fields ----------------------------------------------------------------------


class SubmissionTranslation(WireModel):
    language: str | None = None
    display: dict[str, Any] = {}


class Submission(WireModel):
    """An item of ``submissions.list``; timestamps are ``YYYY-MM-DD HH:MM:SS`` strings.
    ``isCompleted`` and ``createdAt`` are required: sync pages and stores by them."""

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
    translation: SubmissionTranslation | None = None


class SubmissionPage(Page[Submission]):
    formId: str | None = None
    formName: str | None = None


class SubmissionPdf(WireModel):
    url: str
    filename: str | None = None
    contentType: str = "application/pdf"
    byteLength: int | None = None


class Option(WireModel):
    key: str
    label: str = ""


class AuthoredDocument(WireModel):
    """A file of a Documents block that every respondent sees."""

    name: str


class FieldDescriptor(WireModel):
    """A field of the published form: ``key`` addresses it in prefill, readonly, context
    and answers. ``maxStars`` (rating) and ``min``/``max`` (scale) bound a number answer."""

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
    documents: list[AuthoredDocument] | None = None
    multiple: bool = False
    maxStars: int | None = None
    min: float | None = None
    max: float | None = None


class FieldList(WireModel):
    """``fields.list``; a result without ``published`` is taken as published when it
    lists fields (a never-published form lists none)."""

    published: bool | None = None
    items: list[FieldDescriptor] = []
    hasMore: bool = False


# -- requests and documents -------------------------------------------------------------------------


class Recipient(WireModel):
    """A request's recipient (also the ``recipient`` param of ``requests.create``)."""

    email: str | None = None
    name: str | None = None


class DocumentRef(WireModel):
    """An item of the ``documents`` param of ``requests.create``: an uploaded document,
    the Documents block ``field`` it goes to (needed when the form has several) and an
    optional display ``name``."""

    documentId: str
    field: str | None = None
    name: str | None = None


class RequestDocument(WireModel):
    field: str | None = None
    name: str | None = None
    size: int | None = None
    contentType: str | None = None


class RequestCreated(WireModel):
    id: str
    status: str = "pending"
    url: str | None = None
    deliveryStatus: str | None = None
    externalId: str | None = None
    deduplicated: bool = False
    createdAt: int | None = None
    expiresAt: int | None = None


class TimelineEntry(WireModel):
    id: str | None = None
    at: int | None = None
    type: str = ""
    deliveryStatus: str | None = None
    attemptCount: int | None = None
    eventType: str | None = None
    canceledBy: str | None = None
    detail: str | None = None


class RequestRecord(WireModel):
    """A request as ``requests.get`` returns it (``requests.list``, ``cancel`` and
    ``remind`` return it without answers, display and timeline)."""

    id: str
    workspaceId: str | None = None
    formId: str | None = None
    formSnapshotId: str | None = None
    submissionId: str | None = None
    status: str
    outcome: str | None = None
    createdVia: str | None = None
    isTest: bool = False
    recipient: Recipient | None = None
    language: str | None = None
    externalId: str | None = None
    metadata: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    prefill: dict[str, Any] | None = None
    readonlyKeys: list[str] = []
    documents: list[RequestDocument] = []
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
    reminderDueAt: int | None = None
    canceledBy: str | None = None
    cancelReason: str | None = None
    reminderStep: int = 0
    remindersSent: int = 0
    answers: dict[str, Any] | None = None
    display: dict[str, Any] | None = None
    timeline: list[TimelineEntry] | None = None


class Replay(WireModel):
    dispatchId: str | None = None
    eventId: str | None = None


class DocumentUpload(WireModel):
    """``documents.create``: PUT the bytes to ``uploadUrl`` (before ``expiresAt``) with
    ``Content-Type`` equal to ``contentType``."""

    id: str
    name: str | None = None
    contentType: str
    size: int | None = None
    uploadUrl: str
    expiresAt: int | None = None


class DocumentUploaded(WireModel):
    """The answer of the upload PUT."""

    id: str
    name: str | None = None
    contentType: str | None = None
    size: int | None = None
    sha256: str | None = None
    uploadedAt: int | None = None


# -- share links and webhooks ----------------------------------------------------------------------


class ShareLink(WireModel):
    id: str
    formId: str | None = None
    url: str | None = None
    name: str | None = None
    revoked: bool = False
    revokedAt: int | None = None
    createdAt: int | None = None


class WebhookSubscription(WireModel):
    """A subscription as create and list return it; the signing secret is never echoed."""

    subscriptionId: str
    formId: str | None = None
    provider: str | None = None
    targetUrl: str | None = None
    eventType: str = "submission_created"
    idleWindow: str | None = None
    status: str = "active"
    createdAt: int | None = None


class WebhookDeleted(WireModel):
    subscriptionId: str | None = None
    deleted: bool = True
