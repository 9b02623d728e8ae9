"""The store's first schema: events, submissions, long-form answers, requests, outreach
jobs and rows, sync cursors.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _json() -> sa.JSON:
    return sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.create_table(
        "formsync_events",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("api_version", sa.String(), nullable=True),
        sa.Column("test", sa.Boolean(), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("payload", _json(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_formsync_events"),
    )
    op.create_index("ix_formsync_events_type", "formsync_events", ["type"])

    op.create_table(
        "formsync_submissions",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("form_id", sa.String(), nullable=False),
        sa.Column("form_name", sa.String(), nullable=True),
        sa.Column("snapshot_id", sa.String(), nullable=True),
        sa.Column("request_id", sa.String(), nullable=True),
        sa.Column("respondent_email", sa.String(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=True),
        sa.Column("submitted_at", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=True),
        sa.Column("edit_count", sa.Integer(), nullable=False),
        sa.Column("is_completed", sa.Boolean(), nullable=False),
        sa.Column("language", sa.String(), nullable=True),
        sa.Column("answers", _json(), nullable=True),
        sa.Column("display", _json(), nullable=True),
        sa.Column("pdf_url", sa.String(), nullable=True),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("last_event_id", sa.String(), nullable=True),
        sa.Column("observed_at", sa.BigInteger(), nullable=False),
        sa.Column("stored_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_formsync_submissions"),
    )
    op.create_index("ix_formsync_submissions_form_id", "formsync_submissions", ["form_id"])
    op.create_index("ix_formsync_submissions_request_id", "formsync_submissions", ["request_id"])

    op.create_table(
        "formsync_answers",
        sa.Column("submission_id", sa.String(), nullable=False),
        sa.Column("field_key", sa.String(), nullable=False),
        sa.Column("instance", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("row_key", sa.String(), nullable=False),
        sa.Column("member_key", sa.String(), nullable=False),
        sa.Column("value_json", sa.Text(), nullable=False),
        sa.Column("display_text", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("submission_id", "field_key", "instance", "row_key", "member_key",
                                name="pk_formsync_answers"),
    )

    op.create_table(
        "formsync_requests",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("form_id", sa.String(), nullable=True),
        sa.Column("workspace_id", sa.String(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("delivery_status", sa.String(), nullable=True),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.Column("external_id", sa.String(), nullable=True),
        sa.Column("metadata", _json(), nullable=True),
        sa.Column("context", _json(), nullable=True),
        sa.Column("recipient_email", sa.String(), nullable=True),
        sa.Column("recipient_name", sa.String(), nullable=True),
        sa.Column("language", sa.String(), nullable=True),
        sa.Column("url", sa.String(), nullable=True),
        sa.Column("is_test", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("completed_at", sa.BigInteger(), nullable=True),
        sa.Column("expired_at", sa.BigInteger(), nullable=True),
        sa.Column("canceled_at", sa.BigInteger(), nullable=True),
        sa.Column("cancel_reason", sa.String(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("submission_id", sa.String(), nullable=True),
        sa.Column("answers", _json(), nullable=True),
        sa.Column("display", _json(), nullable=True),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("last_event_id", sa.String(), nullable=True),
        sa.Column("stored_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_formsync_requests"),
    )
    op.create_index("ix_formsync_requests_form_id", "formsync_requests", ["form_id"])
    op.create_index("ix_formsync_requests_status", "formsync_requests", ["status"])
    op.create_index("ix_formsync_requests_external_id", "formsync_requests", ["external_id"])

    op.create_table(
        "formsync_outreach_jobs",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("form_id", sa.String(), nullable=False),
        sa.Column("source_path", sa.String(), nullable=False),
        sa.Column("settings", _json(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_formsync_outreach_jobs"),
    )

    op.create_table(
        "formsync_outreach_rows",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_name", sa.String(), nullable=False),
        sa.Column("row_key", sa.String(), nullable=False),
        sa.Column("row_number", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(), nullable=False),
        sa.Column("idempotency_key", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("request_id", sa.String(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_formsync_outreach_rows"),
        sa.ForeignKeyConstraint(["job_name"], ["formsync_outreach_jobs.name"],
                                name="fk_formsync_outreach_rows_job_name_formsync_outreach_jobs"),
        sa.UniqueConstraint("job_name", "row_key", name="uq_formsync_outreach_rows_job_row"),
        sa.UniqueConstraint("idempotency_key", name="uq_formsync_outreach_rows_idempotency_key"),
        sa.CheckConstraint("state IN ('pending', 'sending', 'sent', 'invalid', 'failed', 'changed')",
                           name="ck_formsync_outreach_rows_state"),
    )

    op.create_table(
        "formsync_sync_cursors",
        sa.Column("form_id", sa.String(), nullable=False),
        sa.Column("stream", sa.String(), nullable=False),
        sa.Column("last_created_at", sa.String(), nullable=False),
        sa.Column("last_id", sa.String(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("form_id", "stream", name="pk_formsync_sync_cursors"),
    )


def downgrade() -> None:
    op.drop_table("formsync_sync_cursors")
    op.drop_table("formsync_outreach_rows")
    op.drop_table("formsync_outreach_jobs")
    op.drop_index("ix_formsync_requests_external_id", table_name="formsync_requests")
    op.drop_index("ix_formsync_requests_status", table_name="formsync_requests")
    op.drop_index("ix_formsync_requests_form_id", table_name="formsync_requests")
    op.drop_table("formsync_requests")
    op.drop_table("formsync_answers")
    op.drop_index("ix_formsync_submissions_request_id", table_name="formsync_submissions")
    op.drop_index("ix_formsync_submissions_form_id", table_name="formsync_submissions")
    op.drop_table("formsync_submissions")
    op.drop_index("ix_formsync_events_type", table_name="formsync_events")
    op.drop_table("formsync_events")
