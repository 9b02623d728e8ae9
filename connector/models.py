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
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, Self, TypeVar, overload

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator
from pydantic.alias_generators import to_camel

from ._times import to_ms, to_service, utc

# Every timestamp attribute is an aware UTC datetime; each keeps its wire form when dumped.
WireMs = Annotated[datetime, BeforeValidator(utc), PlainSerializer(to_ms, return_type=int)]
"""A time the wire sends as epoch ms (the request, form and link methods)."""
ServiceTime = Annotated[datetime, BeforeValidator(utc), PlainSerializer(to_service, return_type=str)]
"""A time the wire sends as a naive ``YYYY-MM-DD HH:MM:SS`` string in UTC (submissions.list)."""
IsoTime = Annotated[datetime, BeforeValidator(utc)]
"""A time the wire sends as ISO 8601 (events)."""


class EpochMs:
    """The epoch-ms integer of a time attribute: ``created_at_ms`` reads ``created_at``
    (None when it is None)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._field = name.removesuffix("_ms")

    @overload
    def __get__(self, obj: None, owner: type) -> Self: ...
    @overload
    def __get__(self, obj: object, owner: type) -> int | None: ...
    def __get__(self, obj: object | None, owner: type) -> Self | int | None:
        if obj is None:
            return self
        moment: datetime | None = getattr(obj, self._field)
        return to_ms(moment)


class WireModel(BaseModel):
    """Base of every wire shape: unknown fields are ignored. Attributes are snake_case
    (``r.external_id``); the wire stays camelCase: a model reads either spelling
    (``Event.model_validate(body)``, ``RequestRecord(external_id=...)``) and dumps the
    wire's (``model_dump()`` gives ``externalId``). The wire's camelCase names also read
    as attributes (``r.externalId``), for code written against earlier versions."""

    model_config = ConfigDict(extra="ignore", alias_generator=to_camel, validate_by_name=True,
                              validate_by_alias=True, serialize_by_alias=True)

    if not TYPE_CHECKING:  # hidden from type checkers: typed code uses the snake_case names
        def __getattr__(self, name: str) -> Any:
            field = _wire_names(type(self)).get(name)
            if field is not None:
                return getattr(self, field)
            return super().__getattr__(name)


@cache
def _wire_names(model: type[BaseModel]) -> dict[str, str]:
    """The model's camelCase wire names -> its attribute names (those that differ)."""
    return {f.alias: name for name, f in model.model_fields.items() if f.alias and f.alias != name}


# ======================================================================================
# Events: the envelope of callbacks and webhook deliveries (spec "Events"; notes 3).
# Used by connector.store and connector.receiver.
# ======================================================================================


class EventForm(WireModel):
    """``data.form``: the form and the published version the answers belong to."""

    id: str
    name: str | None = None
    snapshot_id: str | None = None


class EventSubmission(WireModel):
    """``data.submission``. ``updatedAt`` is null until the first edit; ``editCount`` is 0
    for a fresh submission; ``submission.updated`` keeps the original ``submittedAt``."""

    id: str
    respondent_email: str | None = None
    submitted_at: IsoTime | None = None
    updated_at: IsoTime | None = None
    edit_count: int = 0
    pdf_url: str | None = None
    language: str | None = None


class EventRecipient(WireModel):
    email: str | None = None
    name: str | None = None


class EventRequest(WireModel):
    """``data.request`` of ``request.*`` events (ISO timestamps). Only the terminal
    timestamp of the event's own status is present (``completedAt``, ``expiredAt`` or
    ``canceledAt`` with ``cancelReason``)."""

    id: str
    form_id: str | None = None
    workspace_id: str | None = None
    external_id: str | None = None
    status: str | None = None
    outcome: str | None = None
    language: str | None = None
    recipient: EventRecipient | None = None
    metadata: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    created_at: IsoTime | None = None
    completed_at: IsoTime | None = None
    expired_at: IsoTime | None = None
    canceled_at: IsoTime | None = None
    cancel_reason: str | None = None


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
    created_at: IsoTime
    api_version: str | None = None
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
    next_cursor: str | None = None
    has_more: bool = False
    can_paginate: bool = True


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
    """An item of ``forms.list``; only ``id`` is required. Times are aware UTC datetimes
    (``created_at``), their epoch ms in ``*_ms`` (``created_at_ms``)."""

    id: str
    name: str = ""
    folder_id: str | None = None
    workspace_id: str | None = None
    is_published: bool = False
    published_at: WireMs | None = None
    published_at_ms: ClassVar[EpochMs] = EpochMs()
    unpublished_at: WireMs | None = None
    unpublished_at_ms: ClassVar[EpochMs] = EpochMs()
    created_at: WireMs | None = None
    created_at_ms: ClassVar[EpochMs] = EpochMs()
    last_edited_at: WireMs | None = None
    last_edited_at_ms: ClassVar[EpochMs] = EpochMs()
    emoji: str | None = None


class Question(WireModel):
    id: str
    type: str
    input_type: str | None = None
    title: str = ""
    metadata: dict[str, Any] | None = None


class FormDetail(Form):
    """``forms.get``: the form plus its questions, decoration and trash state."""

    questions: list[Question] = []
    has_content: bool = False
    cover: dict[str, Any] | None = None
    logo: dict[str, Any] | None = None
    is_deleted: bool = False
    trashed_at: WireMs | None = None
    trashed_at_ms: ClassVar[EpochMs] = EpochMs()
    preview_url: str | None = None


class FormCreated(WireModel):
    id: str
    name: str = ""
    workspace_id: str | None = None
    folder_id: str | None = None
    is_published: bool = False
    created_at: WireMs | None = None
    created_at_ms: ClassVar[EpochMs] = EpochMs()
    preview_url: str | None = None


class FormUpdated(WireModel):
    """``forms.update``: ``cover``/``logo`` only when sent; ``noChange`` when nothing did."""

    id: str | None = None
    name: str | None = None
    folder_id: str | None = None
    emoji: str | None = None
    cover: dict[str, Any] | None = None
    logo: dict[str, Any] | None = None
    no_change: bool = False


class FormPublished(WireModel):
    """``forms.publish``: the spec shows only the flags; the rest is optional."""

    id: str | None = None
    is_published: bool = True
    published_at: WireMs | None = None
    published_at_ms: ClassVar[EpochMs] = EpochMs()
    snapshot_id: str | None = None
    already_published: bool = False
    warning: str | None = None  # published with content blocks but no questions


class FormUnpublished(WireModel):
    id: str | None = None
    is_published: bool = False
    unpublished_at: WireMs | None = None
    unpublished_at_ms: ClassVar[EpochMs] = EpochMs()
    already_unpublished: bool = False


class FormTrashed(WireModel):
    """``forms.delete``: the form is in the trash; ``alreadyTrashed`` keeps the first date."""

    id: str | None = None
    is_deleted: bool = True
    trashed_at: WireMs | None = None
    trashed_at_ms: ClassVar[EpochMs] = EpochMs()
    revoked_share_links: int = 0
    already_trashed: bool = False


class FormRestored(Form):
    already_restored: bool = False


class Folder(WireModel):
    id: str
    name: str = ""
    workspace_id: str | None = None
    created_at: WireMs | None = None
    created_at_ms: ClassVar[EpochMs] = EpochMs()
    form_count: int = 0


class FolderUpdated(Folder):
    no_change: bool = False


class FolderDeleted(WireModel):
    id: str
    deleted: bool = True
    moved_forms: int = 0


# -- settings and translations -------------------------------------------------------------------


class RedirectQueryParam(WireModel):
    param_name: str
    field_id: str


class FormSettingsValues(WireModel):
    """The ``settings`` object: the spec's writable names (its exact shape is "not shown",
    so every member is optional). ``hasPassword`` stands in for the password, which is
    never returned."""

    language: str | None = None
    require_authentication: bool | None = None
    show_branding: bool | None = None
    captcha_enabled: bool | None = None
    password_enabled: bool | None = None
    has_password: bool | None = None
    notify_on_submission: bool | None = None
    notification_emails: list[str] | None = None
    self_notification_subject: str | None = None
    self_notification_email_body: str | None = None
    pdf_generation_enabled: bool | None = None
    show_view_submission_button: bool | None = None
    respondent_notification_enabled: bool | None = None
    respondent_notification_to: str | None = None
    respondent_notification_subject: str | None = None
    respondent_notification_body: str | None = None
    respondent_notification_pdf_enabled: bool | None = None
    respondent_reminder_enabled: bool | None = None
    respondent_reminder_to: str | None = None
    respondent_reminder_subject: str | None = None
    respondent_reminder_body: str | None = None
    respondent_reminder_required_field_ids: list[str] | None = None
    reminder_steps: list[str] | None = None
    redirect_url: str | None = None
    redirect_query_params: list[RedirectQueryParam] | None = None
    allow_another_response: bool | None = None
    max_submissions_per_respondent: int | None = None
    edit_after_submit: bool | None = None
    max_edits: int | None = None
    effective_max_edits: int | None = None
    draft_retention_days: int | None = None
    submission_retention_days: int | None = None
    email_domain_id: str | None = None


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
    is_default: bool = False
    available_email_domains: list[EmailDomain] = []
    default_from_address: str | None = None
    from_address: str | None = None
    payment: PaymentStatus | None = None
    fixed_deletion_at: WireMs | None = None
    fixed_deletion_at_ms: ClassVar[EpochMs] = EpochMs()


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
    """An item of ``submissions.list``; times are aware UTC datetimes (the wire's naive
    ``YYYY-MM-DD HH:MM:SS`` strings are UTC).
    ``isCompleted`` and ``createdAt`` are required: sync pages and stores by them."""

    id: str
    submitted_at: ServiceTime | None = None
    is_completed: bool
    created_at: ServiceTime
    updated_at: ServiceTime | None = None
    edit_count: int = 0
    respondent_email: str | None = None
    request_id: str | None = None
    answers: dict[str, Any] = {}
    display: dict[str, Any] = {}
    translation: SubmissionTranslation | None = None


class SubmissionPage(Page[Submission]):
    form_id: str | None = None
    form_name: str | None = None


class SubmissionPdf(WireModel):
    url: str
    filename: str | None = None
    content_type: str = "application/pdf"
    byte_length: int | None = None


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
    max_stars: int | None = None
    min: float | None = None
    max: float | None = None


class FieldList(WireModel):
    """``fields.list``; a result without ``published`` is taken as published when it
    lists fields (a never-published form lists none)."""

    published: bool | None = None
    items: list[FieldDescriptor] = []
    has_more: bool = False


# -- requests and documents -------------------------------------------------------------------------


class Recipient(WireModel):
    """A request's recipient (also the ``recipient`` param of ``requests.create``)."""

    email: str | None = None
    name: str | None = None


class DocumentRef(WireModel):
    """An item of the ``documents`` param of ``requests.create``: an uploaded document,
    the Documents block ``field`` it goes to (needed when the form has several) and an
    optional display ``name``."""

    document_id: str
    field: str | None = None
    name: str | None = None


class RequestDocument(WireModel):
    field: str | None = None
    name: str | None = None
    size: int | None = None
    content_type: str | None = None


class RequestCreated(WireModel):
    id: str
    status: str = "pending"
    url: str | None = None
    delivery_status: str | None = None
    external_id: str | None = None
    deduplicated: bool = False
    created_at: WireMs | None = None
    created_at_ms: ClassVar[EpochMs] = EpochMs()
    expires_at: WireMs | None = None
    expires_at_ms: ClassVar[EpochMs] = EpochMs()


class TimelineEntry(WireModel):
    id: str | None = None
    at: WireMs | None = None
    at_ms: ClassVar[EpochMs] = EpochMs()
    type: str = ""
    delivery_status: str | None = None
    attempt_count: int | None = None
    event_type: str | None = None
    canceled_by: str | None = None
    detail: str | None = None


class RequestRecord(WireModel):
    """A request as ``requests.get`` returns it (``requests.list``, ``cancel`` and
    ``remind`` return it without answers, display and timeline)."""

    id: str
    workspace_id: str | None = None
    form_id: str | None = None
    form_snapshot_id: str | None = None
    submission_id: str | None = None
    status: str
    outcome: str | None = None
    created_via: str | None = None
    is_test: bool = False
    recipient: Recipient | None = None
    language: str | None = None
    external_id: str | None = None
    metadata: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    prefill: dict[str, Any] | None = None
    readonly_keys: list[str] = []
    documents: list[RequestDocument] = []
    delivery: str | None = None
    delivery_status: str | None = None
    has_callback: bool = False
    callback_failed_at: WireMs | None = None
    callback_failed_at_ms: ClassVar[EpochMs] = EpochMs()
    url: str | None = None
    expires_at: WireMs | None = None
    expires_at_ms: ClassVar[EpochMs] = EpochMs()
    created_at: WireMs | None = None
    created_at_ms: ClassVar[EpochMs] = EpochMs()
    updated_at: WireMs | None = None
    updated_at_ms: ClassVar[EpochMs] = EpochMs()
    opened_at: WireMs | None = None
    opened_at_ms: ClassVar[EpochMs] = EpochMs()
    started_at: WireMs | None = None
    started_at_ms: ClassVar[EpochMs] = EpochMs()
    last_activity_at: WireMs | None = None
    last_activity_at_ms: ClassVar[EpochMs] = EpochMs()
    completed_at: WireMs | None = None
    completed_at_ms: ClassVar[EpochMs] = EpochMs()
    expired_at: WireMs | None = None
    expired_at_ms: ClassVar[EpochMs] = EpochMs()
    canceled_at: WireMs | None = None
    canceled_at_ms: ClassVar[EpochMs] = EpochMs()
    data_purged_at: WireMs | None = None
    data_purged_at_ms: ClassVar[EpochMs] = EpochMs()
    reminder_due_at: WireMs | None = None
    reminder_due_at_ms: ClassVar[EpochMs] = EpochMs()
    canceled_by: str | None = None
    cancel_reason: str | None = None
    reminder_step: int = 0
    reminders_sent: int = 0
    answers: dict[str, Any] | None = None
    display: dict[str, Any] | None = None
    timeline: list[TimelineEntry] | None = None


class Replay(WireModel):
    dispatch_id: str | None = None
    event_id: str | None = None


class DocumentUpload(WireModel):
    """``documents.create``: PUT the bytes to ``uploadUrl`` (before ``expiresAt``) with
    ``Content-Type`` equal to ``contentType``."""

    id: str
    name: str | None = None
    content_type: str
    size: int | None = None
    upload_url: str
    expires_at: WireMs | None = None
    expires_at_ms: ClassVar[EpochMs] = EpochMs()


class DocumentUploaded(WireModel):
    """The answer of the upload PUT."""

    id: str
    name: str | None = None
    content_type: str | None = None
    size: int | None = None
    sha256: str | None = None
    uploaded_at: WireMs | None = None
    uploaded_at_ms: ClassVar[EpochMs] = EpochMs()


# -- share links and webhooks ----------------------------------------------------------------------


class ShareLink(WireModel):
    id: str
    form_id: str | None = None
    url: str | None = None
    name: str | None = None
    revoked: bool = False
    revoked_at: WireMs | None = None
    revoked_at_ms: ClassVar[EpochMs] = EpochMs()
    created_at: WireMs | None = None
    created_at_ms: ClassVar[EpochMs] = EpochMs()


class WebhookSubscription(WireModel):
    """A subscription as create and list return it; the signing secret is never echoed."""

    subscription_id: str
    form_id: str | None = None
    provider: str | None = None
    target_url: str | None = None
    event_type: str = "submission_created"
    idle_window: str | None = None
    status: str = "active"
    created_at: WireMs | None = None
    created_at_ms: ClassVar[EpochMs] = EpochMs()


class WebhookDeleted(WireModel):
    subscription_id: str | None = None
    deleted: bool = True
