"""One outreach run: read the sheet, plan it against the form's fields, report the
rejected rows, send the rest through the ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from connector.client import FormClient
from connector.store import Store

from .documents import Documents, document_problems
from .plan import plan_rows
from .report import OutreachReport, default_report_path, write_report
from .send import ProgressCallback, Sender, SendOptions, SendResult
from .sheet import read_sheet


async def run_outreach(client: FormClient, store: Store, sheet: Path, form_id: str, *, job: str,
                       mapping: Mapping[str, str] | None = None, delivery: str = "none",
                       callback_url: str | None = None, dry_run: bool = False, test: bool = False,
                       report_path: Path | None = None, progress: ProgressCallback | None = None,
                       stop: asyncio.Event | None = None) -> OutreachReport:
    """Send one request per valid row of ``sheet`` to ``form_id``. Every row is validated
    against ``fields.list`` first; bad rows go to the CSV report (row numbers as in the
    sheet, header = row 1) and are never sent. The rows to send are recorded ``pending``
    first; each is marked ``sending`` before its create and ``sent`` after, so a re-run
    sends only rows without a request, with the same idempotency key. A row whose content changed under
    the same identity is marked ``changed`` and not sent; a row the service refused
    (``failed``, nothing sent) is sent again, as corrected, on the next run; a later row
    repeating an earlier row's identity is reported, not sent. ``dry_run`` calls nothing
    but ``fields.list`` and records nothing; the report carries the plan.

    ``progress`` is called after each row with (rows done, rows to go through). ``stop``
    asks for a graceful end: the row being sent is finished and recorded, no further row
    is sent (a wait for the rate window is cut short), and the report says ``stopped``.
    Rows not sent have no request recorded, so the next run sends them."""
    rows = read_sheet(sheet)
    fields = (await client.list_fields(form_id)).items
    plan = plan_rows(rows, fields, job=job, form_id=form_id, mapping=mapping, delivery=delivery,
                     check_documents=lambda params: document_problems(params, sheet.parent))
    report_path = report_path or default_report_path(job)
    write_report(report_path, plan.rejected)
    result, uploads = SendResult(), 0
    if not dry_run:
        store.ledger.open_job(job, form_id, str(sheet), {"delivery": delivery, "test": test})
        documents = Documents(client, store.ledger, job, form_id, sheet.parent)
        sender = Sender(client, store, documents, job=job, form_id=form_id, stop=stop,
                        options=SendOptions(delivery=delivery, callback_url=callback_url, test=test))
        result = await sender.send(plan.valid, progress)
        uploads = documents.uploads
        if result.problems:
            write_report(report_path, sorted(plan.rejected + result.problems, key=lambda line: line[0]))
    return OutreachReport(rows=plan.rows, sent=result.sent, skipped_existing=result.skipped, invalid=plan.invalid,
                          changed=result.changed, failed=result.failed, report_path=report_path,
                          stopped=result.stopped, documents_uploaded=uploads, plan=plan)
