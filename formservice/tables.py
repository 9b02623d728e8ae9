"""SQLModel tables of the service. Nested structures (form content, settings, answers)
are JSON columns: the service reads them whole and writes them whole (reassign, never
mutate in place, so SQLAlchemy sees the change)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel


def json_col(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(JSON, nullable=nullable))


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
