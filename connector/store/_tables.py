"""The store's tables. Every timestamp column (``*_at``) is an integer in epoch
milliseconds, UTC; the one exception is ``SyncCursor.last_created_at``, which keeps the
service's own string. The migrations (``connector/migrations``) build exactly these."""

from __future__ import annotations

import json
import zlib
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    LargeBinary,
    MetaData,
    Select,
    Table,
    Text,
    UniqueConstraint,
    func,
    select,
)
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

BODY_MAX_BYTES = 2**24 - 1  # what ``RawEvent.body_zlib`` holds on every database
OUTREACH_STATES: tuple[str, ...] = ("pending", "sending", "sent", "invalid", "failed", "changed", "suppressed")
# Alembic's bookkeeping table, named so it never meets the user's own Alembic history.
VERSION_TABLE = "formsync_alembic_version"

# Every index and constraint gets a stable name, the same on SQLite and PostgreSQL, so the
# migrations can name what they create and later ones can drop it.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class StoreModel(SQLModel, registry=registry(metadata=MetaData(naming_convention=NAMING_CONVENTION))):
    """Base of the connector's tables. It has its own ``MetaData``, so the store's schema
    (and its migrations) never includes other SQLModel tables living in the same process."""


def _json_col() -> Any:
    # none_as_null: Python None is SQL NULL (not the JSON text 'null'), so IS NULL and
    # COALESCE treat a missing object as missing.
    return Field(default=None, sa_column=Column(JSON(none_as_null=True), nullable=True))


class RawEvent(StoreModel, table=True):
    """Every event received, exactly once per event id, as it came: its body is kept
    once, zlib-compressed (``body`` and ``payload`` read it back)."""

    __tablename__ = "formsync_events"

    id: str = Field(primary_key=True)  # evt_…
    type: str = Field(index=True)
    source: str  # callback | webhook | poll | sync
    created_at: int = Field(sa_type=BigInteger)  # the envelope's createdAt
    api_version: str | None = None
    test: bool = False
    received_at: int = Field(sa_type=BigInteger)
    # The raw body as received (or as re-serialised when not given), zlib-compressed. The
    # length makes it a MEDIUMBLOB on MySQL/MariaDB (a BLOB stops at 64 KiB).
    body_zlib: bytes = Field(sa_type=LargeBinary(BODY_MAX_BYTES))

    @property
    def body(self) -> str:
        """The raw body as received, as text."""
        return zlib.decompress(self.body_zlib).decode("utf-8", "surrogateescape")

    @property
    def payload(self) -> Any:
        """The body parsed as JSON (None when it is not JSON)."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


class SubmissionRow(StoreModel, table=True):
    """One row per submission id: its newest known version."""

    __tablename__ = "formsync_submissions"
    # A form's rows in arrival order: an incremental export of one form reads its new rows only.
    __table_args__ = (Index("ix_formsync_submissions_form_id_arrival", "form_id", "arrival"),)

    id: str = Field(primary_key=True)  # sub_…
    form_id: str
    form_name: str | None = None
    snapshot_id: str | None = None
    request_id: str | None = Field(default=None, index=True)
    respondent_email: str | None = None
    created_at: int | None = Field(default=None, sa_type=BigInteger)  # known from submissions.list only
    submitted_at: int | None = Field(default=None, sa_type=BigInteger)
    updated_at: int | None = Field(default=None, sa_type=BigInteger)
    edit_count: int = Field(default=0, sa_type=BigInteger)
    is_completed: bool = False
    language: str | None = None
    answers: dict[str, Any] | None = _json_col()
    display: dict[str, Any] | None = _json_col()
    pdf_url: str | None = None
    source: str  # what brought the stored version: callback | webhook | poll | sync
    last_event_id: str | None = None  # the event behind the stored version; null when it came from a read
    observed_at: int = Field(sa_type=BigInteger)  # when the service showed this version (event createdAt or read time)
    stored_at: int = Field(sa_type=BigInteger)
    # The row's place in the store's arrival order (``ArrivalCounter``): taken again by each
    # write that changes the row, so an edit moves it forward. 0: stored before it existed.
    arrival: int = Field(default=0, sa_type=BigInteger, index=True)
    # The hash of the row's content when it last took its place (``writer.content_hash``):
    # a write that leaves the content as it was (the same version read again) keeps the
    # place. Null: never hashed (stored before it existed); its next write places it.
    content_hash: str | None = None
    # When ``formsync sync --reconcile`` noticed the service no longer has it (deleted, its
    # form trashed); views, exports and frames leave such rows out unless asked.
    gone_at: int | None = Field(default=None, sa_type=BigInteger)


class RequestRow(StoreModel, table=True):
    """One row per request id: its newest known state. ``answers`` and ``display`` hold
    only what a request record read from the service carried (``requests.get``); a
    completion event stores them once, on the submission row (``submission_id``), and
    ``request_answers`` reads them from there."""

    __tablename__ = "formsync_requests"
    __table_args__ = (Index("ix_formsync_requests_form_id_arrival", "form_id", "arrival"),)  # as submissions'

    id: str = Field(primary_key=True)  # req_…
    form_id: str | None = None  # unknown when only an expiry/cancel event was seen
    workspace_id: str | None = None
    status: str = Field(index=True)  # pending | completed | expired | canceled
    delivery_status: str | None = None
    outcome: str | None = None
    external_id: str | None = Field(default=None, index=True)
    metadata_: dict[str, Any] | None = Field(
        default=None, sa_column=Column("metadata", JSON(none_as_null=True), nullable=True))
    context: dict[str, Any] | None = _json_col()
    recipient_email: str | None = None
    recipient_name: str | None = None
    language: str | None = None
    url: str | None = None
    is_test: bool = False
    created_at: int | None = Field(default=None, sa_type=BigInteger)
    expires_at: int | None = Field(default=None, sa_type=BigInteger)
    completed_at: int | None = Field(default=None, sa_type=BigInteger)
    expired_at: int | None = Field(default=None, sa_type=BigInteger)
    canceled_at: int | None = Field(default=None, sa_type=BigInteger)
    cancel_reason: str | None = None
    # When the service purged the request's answers (its retention): ``formsync purge``
    # removes them here too once the service's clock has passed it.
    data_purged_at: int | None = Field(default=None, sa_type=BigInteger)
    # The campaign's funnel (requests.get / requests.list; events do not carry them).
    opened_at: int | None = Field(default=None, sa_type=BigInteger)
    started_at: int | None = Field(default=None, sa_type=BigInteger)
    last_activity_at: int | None = Field(default=None, sa_type=BigInteger)
    reminders_sent: int | None = Field(default=None, sa_type=BigInteger)  # null: not read yet
    # The service's time of the last requests.remind formsync made (the 10-minute spacing).
    last_reminded_at: int | None = Field(default=None, sa_type=BigInteger)
    updated_at: int = Field(sa_type=BigInteger)
    submission_id: str | None = None
    answers: dict[str, Any] | None = _json_col()
    display: dict[str, Any] | None = _json_col()
    source: str
    last_event_id: str | None = None
    stored_at: int = Field(sa_type=BigInteger)
    arrival: int = Field(default=0, sa_type=BigInteger, index=True)  # as ``SubmissionRow.arrival``
    content_hash: str | None = None  # as ``SubmissionRow.content_hash``


class OutreachJob(StoreModel, table=True):
    """A named bulk-outreach job: one sheet sent to one form."""

    __tablename__ = "formsync_outreach_jobs"

    name: str = Field(primary_key=True)
    form_id: str
    source_path: str
    settings: dict[str, Any] | None = _json_col()
    created_at: int = Field(sa_type=BigInteger)
    updated_at: int = Field(sa_type=BigInteger)


class OutreachRow(StoreModel, table=True):
    """One sheet row of an outreach job and where it stands."""

    __tablename__ = "formsync_outreach_rows"
    __table_args__ = (
        UniqueConstraint("job_name", "row_key", name="uq_formsync_outreach_rows_job_row"),
        CheckConstraint("state IN (" + ", ".join(f"'{s}'" for s in OUTREACH_STATES) + ")",
                        name="ck_formsync_outreach_rows_state"),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_name: str = Field(sa_column=Column(ForeignKey("formsync_outreach_jobs.name"), nullable=False))
    row_key: str  # the row's identity in the sheet (an id column, or one derived by the job)
    row_number: int
    content_hash: str
    idempotency_key: str = Field(unique=True)
    state: str = "pending"
    request_id: str | None = None
    error: str | None = Field(default=None, sa_type=Text)
    attempts: int = 0
    updated_at: int = Field(sa_type=BigInteger)


class Suppression(StoreModel, table=True):
    """An address outreach never sends to (``formsync campaign suppress``), with why."""

    __tablename__ = "formsync_suppressions"

    email: str = Field(primary_key=True)  # lower-cased
    reason: str | None = Field(default=None, sa_type=Text)
    created_at: int = Field(sa_type=BigInteger)


class SyncCursor(StoreModel, table=True):
    """The high-water mark of an incremental ``submissions.list`` sync: the newest
    submission seen, as the service's ``createdAt`` string and its id."""

    __tablename__ = "formsync_sync_cursors"

    form_id: str = Field(primary_key=True)
    stream: str = Field(default="submissions", primary_key=True)
    last_created_at: str  # ``YYYY-MM-DD HH:MM:SS`` (UTC), as submissions.list gives it
    last_id: str
    updated_at: int = Field(sa_type=BigInteger)


class JobRun(StoreModel, table=True):
    """One run of a scheduled job (``formsync run``): when it started and finished, how
    it ended (``running`` until then; ``ok``, ``error``, ``stopped`` when a shutdown
    stopped it between rows, or ``skipped`` when it had nothing it could do, its summary
    saying why), its error and a short summary, and the process that ran it."""

    __tablename__ = "formsync_job_runs"
    __table_args__ = (
        CheckConstraint("outcome IN ('running', 'ok', 'error', 'stopped', 'skipped')",
                        name="ck_formsync_job_runs_outcome"),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(index=True)
    kind: str
    scheduled_at: int | None = Field(default=None, sa_type=BigInteger)  # the fire time the scheduler planned
    started_at: int = Field(sa_type=BigInteger)
    finished_at: int | None = Field(default=None, sa_type=BigInteger)
    outcome: str = "running"
    error: str | None = Field(default=None, sa_type=Text)
    summary: str | None = Field(default=None, sa_type=Text)
    pid: int
    host: str


class SchedulerLease(StoreModel, table=True):
    """Who may run the scheduler (SQLite; PostgreSQL uses an advisory lock instead): the
    holder renews ``expires_at``; once it has passed, another process may take over."""

    __tablename__ = "formsync_scheduler_lease"

    name: str = Field(primary_key=True)
    holder: str
    acquired_at: int = Field(sa_type=BigInteger)
    expires_at: int = Field(sa_type=BigInteger)


class OAuthGrant(StoreModel, table=True):
    """The sign-in of ``formsync login`` to one service: the OAuth client it registered
    (kept after ``logout``), and while signed in, the workspace, the access token and the
    one-use refresh token. Secrets are sealed with the store's key (``connector.config.keyfile``,
    ``key_id`` names the key); ``generation`` grows with each new token pair, so a process
    sees that another refreshed before it. ``failure`` holds why a refresh was refused for
    good (``invalid_grant``): the chain is gone and ``formsync login`` is needed."""

    __tablename__ = "formsync_oauth_grants"

    service_url: str = Field(primary_key=True)
    client_id: str
    client_secret: bytes | None = Field(default=None, sa_type=LargeBinary)
    key_id: str
    workspace_id: str | None = None
    scope: str | None = Field(default=None, sa_type=Text)
    access_token: bytes | None = Field(default=None, sa_type=LargeBinary)
    access_expires_at: int | None = Field(default=None, sa_type=BigInteger)
    refresh_token: bytes | None = Field(default=None, sa_type=LargeBinary)
    refresh_expires_at: int | None = Field(default=None, sa_type=BigInteger)
    generation: int = Field(default=0, sa_type=BigInteger)
    signed_in_at: int | None = Field(default=None, sa_type=BigInteger)
    refreshed_at: int | None = Field(default=None, sa_type=BigInteger)
    failure: str | None = Field(default=None, sa_type=Text)
    failed_at: int | None = Field(default=None, sa_type=BigInteger)


class TokenUse(StoreModel, table=True):
    """When formsync first (and last) used a static ``service.token``, by its fingerprint
    (``connector.client._pacing.token_key``), never the token: an API token lasts 30 days from
    its making, so its first use bounds how long it has left."""

    __tablename__ = "formsync_token_uses"

    fingerprint: str = Field(primary_key=True)
    kind: str  # api (fb_) or oauth (fbo_)
    first_used_at: int = Field(sa_type=BigInteger)
    last_used_at: int = Field(sa_type=BigInteger)


class FormField(StoreModel, table=True):
    """A field of a form the store knows, for the form's typed view (``views``): from
    ``fields.list`` (its order, type, title and choices). A key answered before a
    ``fields.list`` read named it is kept as ``source`` "answers", held back from every
    typed output (``type`` "pending" until the next read, "unlisted" when a read did not
    list it); no type is ever taken from values. A field gone from ``fields.list`` stays,
    with ``listed`` false, while answers to it exist. A field whose type changed under the
    same key keeps its row; the new type is a row ``<key>__<type>`` whose ``answer_key``
    is the key it reads."""

    __tablename__ = "formsync_form_fields"

    form_id: str = Field(primary_key=True)
    field_key: str = Field(primary_key=True)
    position: int  # the view's column order: fields.list order, unlisted fields after
    type: str
    title: str | None = None
    # the field's shape (``schema.shape_of``): a choice's options, a matrix's rows, a group's members
    options: list[dict[str, Any]] | None = _json_col()
    listed: bool = True  # in the last fields.list read (held-back keys: never listed)
    source: str  # fields.list | answers
    updated_at: int = Field(sa_type=BigInteger)
    answer_key: str | None = None  # the answer a type variant reads (None: field_key)


class FormSchemaState(StoreModel, table=True):
    """Per form: the snapshot and time of its last ``fields.list`` read (or attempt),
    its view's name (``schema.view_name``, fixed when first given), ``changed_at``, when a
    held-back column last appeared in its table (the rows answering it took new places in
    the arrival order then), and ``full_sync_at``, when a sync last read its whole
    ``submissions.list`` (the service's clock): a sync job reads it whole again once
    ``sync.full_every_hours`` have passed, so edits reach a store without a receiver."""

    __tablename__ = "formsync_form_schemas"

    form_id: str = Field(primary_key=True)
    snapshot_id: str | None = None
    read_at: int | None = Field(default=None, sa_type=BigInteger)
    changed_at: int | None = Field(default=None, sa_type=BigInteger)
    view_name: str | None = None  # given once, from the form's name: kept when the form is renamed
    full_sync_at: int | None = Field(default=None, sa_type=BigInteger)


class DeadLetter(StoreModel, table=True):
    """A correctly signed event that no database can store as an event (U+0000, an
    integer beyond 64 bits, ...), set aside: its body as received, zlib-compressed (bytes,
    so whatever it holds is storable), with why it was refused. One row per distinct body
    (``id`` is the body's SHA-256): a sender's retries of it add nothing."""

    __tablename__ = "formsync_dead_letters"

    id: str = Field(primary_key=True)  # hex SHA-256 of the body
    event_id: str = Field(index=True)
    type: str
    source: str  # callback | webhook
    code: str  # the refusal's code: UNSTORABLE_EVENT
    reason: str = Field(sa_type=Text)  # the refusal's message, what was wrong and where
    field: str | None = Field(default=None, sa_type=Text)  # the field at fault, when one is named
    received_at: int = Field(sa_type=BigInteger)
    set_aside_at: int = Field(sa_type=BigInteger)
    body_zlib: bytes = Field(sa_type=LargeBinary(BODY_MAX_BYTES))

    @property
    def body(self) -> bytes:
        """The body as received."""
        return zlib.decompress(self.body_zlib)


class ArchivedFile(StoreModel, table=True):
    """A file or signature answer whose bytes ``formsync files`` downloaded: where in the
    submission it is (field, instance and member of a repeating group, index in the answer's
    list), the sha256 and size of its bytes, and where they are kept. Files are kept by
    content, so several answers may name one location."""

    __tablename__ = "formsync_archived_files"

    submission_id: str = Field(primary_key=True)
    field_key: str = Field(primary_key=True)
    instance: int = Field(primary_key=True, default=-1)  # the group instance, -1 outside a group
    member: str = Field(primary_key=True, default="")  # the group member's key, "" outside a group
    idx: int = Field(primary_key=True, default=0)  # the file's place in the answer's list
    form_id: str = Field(index=True)
    name: str = Field(sa_type=Text)
    url: str = Field(sa_type=Text)
    size: int = Field(sa_type=BigInteger)
    sha256: str = Field(index=True)
    location: str = Field(sa_type=Text)
    archived_at: int = Field(sa_type=BigInteger)


class ArrivalCounter(StoreModel, table=True):
    """The store's arrival order: one row, the last place given. A writing transaction
    takes the next place as its last statement and holds the row's lock until it commits,
    so places are taken in commit order: a reader that sees a place sees every place
    before it (no commit can overtake another)."""

    __tablename__ = "formsync_arrival"

    name: str = Field(primary_key=True)  # always ``ARRIVAL``
    last_place: int = Field(sa_type=BigInteger)


class ExportCursor(StoreModel, table=True):
    """Where an incremental export (``formsync export --since-last NAME``) or load stopped:
    the last arrival place it wrote, per name, table and form (``''``: every form)."""

    __tablename__ = "formsync_export_cursors"

    name: str = Field(primary_key=True)
    table_name: str = Field(primary_key=True)  # wide | long | requests
    form_id: str = Field(primary_key=True)
    arrival: int = Field(sa_type=BigInteger)
    row_count: int = Field(sa_type=BigInteger)  # rows the last file held
    run: int = Field(sa_type=BigInteger)  # files written under this name, table and form
    updated_at: int = Field(sa_type=BigInteger)
    # The format its files are written in (csv, xlsx, parquet); None for a load's cursor.
    format: str | None = Field(default=None, max_length=16)


ARRIVAL = "arrival"  # the counter's one row


class Erasure(StoreModel, table=True):
    """A tombstone of ``formsync erase``: the keyed hash (HMAC-SHA256 with the store's key,
    ``connector.store._erasure.erasure_hash``) of an erased address, external id or
    submission, request or event id, never the value. Every ingest path drops what a
    tombstone names, and outreach never sends to an erased address."""

    __tablename__ = "formsync_erasures"

    hash: str = Field(primary_key=True)
    kind: str  # email | external_id | submission | request | event
    erased_at: int = Field(sa_type=BigInteger)
    # The id of the key that made the hash (``keyfile.key_id``): ingest checks the
    # tombstones only with that key, and refuses another.
    key_id: str | None = None


class Deletion(StoreModel, table=True):
    """One removal from the store, written in the transaction that removed it: what
    (``kind``: submission, request, event, ...), its id, its form, why (``erase``,
    ``purge`` or ``reconciled``) and when. A load passes these on as hard deletes."""

    __tablename__ = "formsync_deletions"

    id: int | None = Field(default=None, primary_key=True)
    kind: str
    item_id: str = Field(index=True)
    form_id: str | None = None
    reason: str
    deleted_at: int = Field(sa_type=BigInteger)
    # The removal's place in the store's arrival order (``ArrivalCounter``), taken at
    # commit: a load reads the log past its cursor on it, never on ``id`` (given at insert).
    arrival: int = Field(default=0, sa_type=BigInteger, index=True)

# The tables as SQLAlchemy Core sees them, for the writers' statements.
EVENTS: Table = RawEvent.__table__  # type: ignore[attr-defined]
SUBMISSIONS: Table = SubmissionRow.__table__  # type: ignore[attr-defined]
REQUESTS: Table = RequestRow.__table__  # type: ignore[attr-defined]
CURSORS: Table = SyncCursor.__table__  # type: ignore[attr-defined]
FORM_FIELDS: Table = FormField.__table__  # type: ignore[attr-defined]
FORM_SCHEMAS: Table = FormSchemaState.__table__  # type: ignore[attr-defined]
DEAD_LETTERS: Table = DeadLetter.__table__  # type: ignore[attr-defined]
ARRIVALS: Table = ArrivalCounter.__table__  # type: ignore[attr-defined]
EXPORT_CURSORS: Table = ExportCursor.__table__  # type: ignore[attr-defined]
ERASURES: Table = Erasure.__table__  # type: ignore[attr-defined]
DELETIONS: Table = Deletion.__table__  # type: ignore[attr-defined]
ARCHIVED: Table = ArchivedFile.__table__  # type: ignore[attr-defined]
METADATA = StoreModel.metadata  # what the migrations build


def request_answers() -> Select[tuple[str, Any, Any]]:
    """A select of every request's ``(id, answers, display)``: the linked submission's
    (stored once, there, by a completion event), else what the request's own record
    carried. Add a ``where`` on ``REQUESTS.c.id`` to pick requests."""
    r, s = REQUESTS.c, SUBMISSIONS.c
    return (select(r.id, func.coalesce(s.answers, r.answers).label("answers"),
                   func.coalesce(s.display, r.display).label("display"))
            .select_from(REQUESTS.outerjoin(SUBMISSIONS, s.id == r.submission_id)))
