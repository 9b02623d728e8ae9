"""SQLModel tables of the service. Nested structures (form content, settings, answers)
are JSON columns: the service reads them whole and writes them whole (reassign, never
mutate in place, so SQLAlchemy sees the change)."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, Session, SQLModel

RowT = TypeVar("RowT", bound=SQLModel)


def json_col(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(JSON, nullable=nullable))


def referenced(session: Session, model: type[RowT], key: object) -> RowT:
    """The ``model`` row ``key`` names, where ``key`` comes from a row that refers to it
    (so it exists). A missing row means a broken store, not a caller's mistake: it raises
    ``LookupError``."""
    row = session.get(model, key)
    if row is None:
        raise LookupError(f"{model.__name__} {key!r} is referenced but not stored")
    return row


class Meta(SQLModel, table=True):
    """Key-value facts about the store itself: the test clock offset, the seed marker."""

    key: str = Field(primary_key=True)
    value: str


class User(SQLModel, table=True):
    id: str = Field(primary_key=True)
    email: str
    name: str


class Workspace(SQLModel, table=True):
    id: str = Field(primary_key=True)
    name: str
    plan: str  # free | pro | business
    owner_id: str = Field(index=True)
    signing_secret: str
    monthly_allowance: int = 100
    free_invitations_used: int = 0
    partial_tracking: bool = True
    payment_connected: bool = False
    # [{id, domain, verified}] and [{id, domain}]: managed in the dashboard, set by the seed
    email_domains: list[dict[str, Any]] | None = json_col()
    custom_domains: list[dict[str, Any]] | None = json_col()
    created_at: int


class Member(SQLModel, table=True):
    workspace_id: str = Field(primary_key=True)
    user_id: str = Field(primary_key=True)
    role: str = "owner"


class ApiToken(SQLModel, table=True):
    """An API (``fb_``) or OAuth access (``fbo_``) token. Only the SHA-256 of its value is kept."""

    id: str = Field(primary_key=True)
    token_hash: str = Field(unique=True, index=True)
    prefix: str  # the first 11 characters, as the dashboard lists them
    name: str
    kind: str = "api"  # api | oauth
    user_id: str = Field(index=True)
    workspace_id: str = Field(index=True)
    client_id: str | None = None
    scope: str | None = None
    created_at: int
    expires_at: int
    last_used_at: int | None = None


class Folder(SQLModel, table=True):
    id: str = Field(primary_key=True)
    workspace_id: str = Field(index=True)
    name: str
    created_at: int


class Form(SQLModel, table=True):
    id: str = Field(primary_key=True)
    workspace_id: str = Field(index=True)
    folder_id: str | None = None
    name: str
    emoji: str | None = None
    cover: dict[str, Any] | None = json_col()
    logo: dict[str, Any] | None = json_col()
    # The draft: a list of blocks (questions and content blocks), see domain/fieldtypes.py
    blocks: list[dict[str, Any]] | None = json_col()
    logic: list[dict[str, Any]] | None = json_col()
    is_published: bool = False
    published_at: int | None = None
    unpublished_at: int | None = None
    created_at: int
    last_edited_at: int
    trashed_at: int | None = None
    snapshot_id: str | None = None  # the latest published snapshot
    draft_rev: int = 0  # bumped on every content edit
    snapshot_rev: int = -1  # draft_rev captured by the latest snapshot
    settings: dict[str, Any] | None = json_col()  # None until first saved: defaults shown
    fixed_deletion_at: int | None = None  # a deletion date set in the form builder
    theme: dict[str, Any] | None = json_col()


class Snapshot(SQLModel, table=True):
    """A published version: the blocks and field descriptors frozen at publish."""

    id: str = Field(primary_key=True)
    form_id: str = Field(index=True)
    created_at: int
    blocks: list[dict[str, Any]] | None = json_col()
    fields: list[dict[str, Any]] | None = json_col()


class ShareLink(SQLModel, table=True):
    id: str = Field(primary_key=True)
    form_id: str = Field(index=True)
    workspace_id: str = Field(index=True)
    token: str = Field(unique=True, index=True)
    name: str | None = None
    revoked: bool = False
    revoked_at: int | None = None
    created_at: int


class Submission(SQLModel, table=True):
    __table_args__ = (Index("ix_submission_form_order", "form_id", "created_at", "id"),)

    id: str = Field(primary_key=True)
    form_id: str = Field(index=True)
    workspace_id: str = Field(index=True)
    snapshot_id: str | None = None
    share_link_id: str | None = None
    request_id: str | None = Field(default=None, index=True)
    respondent_email: str | None = None
    language: str | None = None
    is_completed: bool = False
    is_test: bool = False
    created_at: int
    submitted_at: int | None = None
    updated_at: int | None = None
    last_activity_at: int
    edit_count: int = 0
    answers: dict[str, Any] | None = json_col()
    display: dict[str, Any] | None = json_col()
    pdf_file_id: str | None = None  # a StoredFile, kept when an integration retains PDFs
    abandoned_at: int | None = None  # set once the abandoned sweep has reported it
    edit_token: str | None = None


class Integration(SQLModel, table=True):
    """An automation-connector integration of a form (the seed sets these up)."""

    id: str = Field(primary_key=True)
    form_id: str = Field(index=True)
    kind: str = "automation"
    include_pdf: bool = False
    active: bool = True
    created_at: int


class StoredFile(SQLModel, table=True):
    """Bytes the service serves from ``/api/storage/<id>``: retained PDFs, uploaded documents."""

    id: str = Field(primary_key=True)
    content_type: str
    data: bytes
    created_at: int


class TranslationEntry(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("form_id", "key"),)

    id: int | None = Field(default=None, primary_key=True)
    form_id: str = Field(index=True)
    key: str
    source: str
    translations: dict[str, Any] | None = json_col()
    updated_at: int


class Request(SQLModel, table=True):
    """One published form assigned to one recipient, with its own link."""

    __table_args__ = (Index("ix_request_ws_order", "workspace_id", "created_at", "id"),)

    id: str = Field(primary_key=True)
    workspace_id: str = Field(index=True)
    form_id: str = Field(index=True)
    snapshot_id: str
    token: str = Field(unique=True, index=True)  # the link token, rq_…
    status: str = Field(default="pending", index=True)  # pending | completed | expired | canceled
    outcome: str | None = None
    is_test: bool = False
    recipient_email: str | None = None
    recipient_name: str | None = None
    language: str | None = None
    external_id: str | None = Field(default=None, index=True)
    metadata_: dict[str, Any] | None = Field(default=None, sa_column=Column("metadata", JSON))
    context: dict[str, Any] | None = json_col()
    prefill: dict[str, Any] | None = json_col()
    readonly_keys: list[str] | None = json_col()
    documents: list[dict[str, Any]] | None = json_col()
    reminders: list[str] | None = json_col()  # None: the form's schedule; []: none
    delivery: str = "none"
    delivery_status: str = "not_requested"
    callback_url: str | None = None
    callback_failed_at: int | None = None
    domain_id: str | None = None
    base_url: str | None = None  # the link's origin (a custom domain or the service)
    created_at: int
    updated_at: int
    expires_at: int
    opened_at: int | None = None
    started_at: int | None = None
    last_activity_at: int | None = None
    completed_at: int | None = None
    expired_at: int | None = None
    canceled_at: int | None = None
    data_purged_at: int | None = None
    reminder_due_at: int | None = Field(default=None, index=True)
    canceled_by: str | None = None
    cancel_reason: str | None = None
    reminder_step: int = 0
    reminders_sent: int = 0
    last_manual_reminder_at: int | None = None
    submission_id: str | None = None
    draft: dict[str, Any] | None = json_col()  # answers saved on the page before submit
    answers: dict[str, Any] | None = json_col()
    display: dict[str, Any] | None = json_col()
    timeline: list[dict[str, Any]] | None = json_col()


class IdempotencyKey(SQLModel, table=True):
    workspace_id: str = Field(primary_key=True)
    key: str = Field(primary_key=True)
    body_hash: str
    request_id: str
    created_at: int
    expires_at: int


class Event(SQLModel, table=True):
    """The outbox: every state change writes its event here in the same transaction."""

    id: str = Field(primary_key=True)
    type: str
    workspace_id: str = Field(index=True)
    form_id: str | None = Field(default=None, index=True)
    request_id: str | None = Field(default=None, index=True)
    submission_id: str | None = None
    test: bool = False
    created_at: int
    payload: dict[str, Any] | None = json_col()


class Delivery(SQLModel, table=True):
    """One event on its way to one URL (a request's callback or a subscription)."""

    id: str = Field(primary_key=True)  # disp_…
    event_id: str = Field(index=True)
    workspace_id: str = Field(index=True)
    kind: str  # callback | webhook
    request_id: str | None = None
    subscription_id: str | None = None
    target_url: str
    state: str = Field(default="pending", index=True)  # pending | delivered | failed
    attempt_count: int = 0
    next_attempt_at: int | None = Field(default=None, index=True)
    last_status: int | None = None
    last_error: str | None = None
    created_at: int
    delivered_at: int | None = None
    failed_at: int | None = None


class DeliveryAttempt(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    delivery_id: str = Field(index=True)
    at: int
    status: int | None = None
    error: str | None = None
    signature: str
    duration_ms: int


class Mail(SQLModel, table=True):
    """The sandbox sends no mail: every invitation and reminder lands here."""

    id: str = Field(primary_key=True)
    workspace_id: str = Field(index=True)
    request_id: str | None = Field(default=None, index=True)
    submission_id: str | None = None
    kind: str  # invitation | reminder | respondent-reminder | notification
    to: str
    sender: str
    subject: str
    body: str
    status: str  # sent | bounced | failed
    created_at: int


class Subscription(SQLModel, table=True):
    """A webhook subscription of a form (webhooks.create)."""

    id: str = Field(primary_key=True)  # int_…
    workspace_id: str = Field(index=True)
    form_id: str = Field(index=True)
    target_url: str
    provider: str
    event_type: str
    idle_window: str | None = None
    signing_secret: str | None = None
    status: str = "active"
    created_at: int


class Document(SQLModel, table=True):
    """A file offered to recipients on a request's Documents block."""

    id: str = Field(primary_key=True)  # doc_…
    workspace_id: str = Field(index=True)
    form_id: str = Field(index=True)
    name: str
    content_type: str
    size: int
    sha256: str | None = None
    upload_token: str = Field(unique=True, index=True)
    upload_expires_at: int
    uploaded_at: int | None = None
    file_id: str | None = None
    created_at: int


class DraftNotice(SQLModel, table=True):
    """A follow-up the draft sweeps already sent for a public-link draft, so each goes out
    once: ``kind`` ``abandoned`` with ``target`` the subscription id, or ``reminder`` with
    ``target`` the index of the form's reminder step."""

    submission_id: str = Field(primary_key=True)
    kind: str = Field(primary_key=True)
    target: str = Field(primary_key=True)
    at: int


class OAuthClient(SQLModel, table=True):
    """An OAuth client: a seeded system client (``fboc_zapier``) or one made by dynamic
    client registration. Only the SHA-256 of its secret is kept; public clients
    (``token_endpoint_auth_method`` ``none``) have none."""

    id: str = Field(primary_key=True)  # the client_id
    name: str
    secret_hash: str | None = None
    token_endpoint_auth_method: str = "client_secret_post"  # client_secret_post | none
    redirect_uris: list[str] | None = json_col()
    grant_types: list[str] | None = json_col()
    scope: str | None = None  # the scopes it may ask for; None: any supported scope
    is_system: bool = False  # seeded clients are never garbage-collected
    created_at: int
    last_used_at: int | None = None  # the last token issued to it


class OAuthCode(SQLModel, table=True):
    """An authorization code: hashed, good for one exchange within ten minutes, bound to
    its client, redirect URI, PKCE challenge, scope, and the person and workspace chosen
    at consent."""

    code_hash: str = Field(primary_key=True)
    client_id: str = Field(index=True)
    user_id: str
    workspace_id: str
    redirect_uri: str
    scope: str
    code_challenge: str
    resource: str | None = None
    created_at: int
    expires_at: int
    used_at: int | None = None


class RefreshToken(SQLModel, table=True):
    """An OAuth refresh token (hashed). Each use rotates it: the used token stops working
    and a new one, valid 30 days, takes its place."""

    id: str = Field(primary_key=True)
    token_hash: str = Field(unique=True, index=True)
    client_id: str = Field(index=True)
    user_id: str
    workspace_id: str = Field(index=True)
    scope: str
    created_at: int
    expires_at: int
    used_at: int | None = None  # set when rotated: a used token is refused
