"""Bulk outreach: one request per sheet row (CSV or XLSX), validated against the form's
fields before anything is sent, recorded in the ledger before each send so that a re-run
sends only what is still missing, with the same idempotency key every time.

``sheet`` reads the rows, ``columns`` and ``values`` map each cell to the create params,
``checks`` refuses a form or columns that make the whole sheet unusable, ``plan`` turns a sheet into rows to send and rows rejected (pure), ``contact``
decides whether an address may be sent anything (``suppression`` applies it), ``send`` sends a plan
through the ledger, ``run`` ties them together."""

from .checks import OutreachRefused
from .columns import COLUMN_RULES, RowParams, validate_row
from .documents import Documents, DocumentUnreadable, document_problem, document_type
from .plan import Plan, PlannedRow, content_hash, idempotency_key, plan_rows, row_identity
from .report import OutreachReport
from .run import Prepared, outreach_report, prepare_outreach, run_outreach, send_outreach
from .send import ProgressCallback, SendProgress, SendResult
from .sheet import SHEET_SUFFIXES, Sheet, SheetError, SheetOptions, load_sheet, read_sheet
from .values import Problem

__all__ = [
    "COLUMN_RULES", "SHEET_SUFFIXES", "DocumentUnreadable", "Documents", "OutreachRefused", "OutreachReport", "Plan",
    "PlannedRow", "Prepared", "Problem", "ProgressCallback", "RowParams", "SendProgress", "SendResult", "Sheet", "SheetError",
    "SheetOptions", "content_hash", "document_problem", "document_type", "idempotency_key", "load_sheet",
    "outreach_report", "plan_rows", "prepare_outreach", "read_sheet", "row_identity", "run_outreach", "send_outreach", "validate_row",
]
