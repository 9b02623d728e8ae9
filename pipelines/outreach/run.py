"""One outreach run: check the form, read the sheet, check its columns, plan it against
the form's fields, report the rejected rows, send the rest through the ledger, and write
the job's links beside the report."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from connector.client.rpc import FormClient
from connector.config.settings import OutreachSettings
from connector.store import Store
from connector.store._ledger import Claim, PendingRow
from connector.store._tables import OutreachRow

from ..rules.contact import ContactRule, Recipient, contact_rule
from .checks import (
    OutreachRefused,
    ValueType,
    column_problem,
    column_readings,
    form_fields,
    mapping_problem,
    typed_columns,
)
from .columns import ColumnMapping, column_targets
from .counts import RunCounts
from .documents import Documents, document_problems
from .plan import Plan, plan_rows
from .report import OutreachReport, default_report_path, links_path, write_links, write_report
from .send import ProgressCallback, Sender, SendOptions, SendResult
from .sheet import Sheet, SheetOptions, load_sheet
from .suppression import apply_contact_rule


@dataclass
class Prepared:
    """A run checked and planned, nothing sent: the sheet as read, the plan, where the
    report went, the run's counts as the ledger has the plan's rows (see ``RunCounts``),
    each column's targets (``column_targets``) and the sheet's date and number columns as
    read (``typed_columns``)."""

    sheet: Sheet
    form_id: str
    job: str
    plan: Plan
    report_path: Path
    counts: RunCounts
    targets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    typed: Mapping[str, tuple[ValueType, str]] = field(default_factory=dict)
    allow_duplicates: bool = False  # kept with the job: remind asks the contact rule the same way

    @property
    def to_send(self) -> int:
        return self.counts.to_send


async def prepare_outreach(client: FormClient, store: Store | None, sheet: Path, form_id: str, *, job: str,
                           mapping: ColumnMapping | None = None, delivery: str = "none",
                           report_path: Path | None = None, sheet_options: SheetOptions | None = None,
                           mapping_setting: str = "outreach.mapping", rule: ContactRule | None = None) -> Prepared:
    """Check the form (``OutreachRefused`` with the service's reason when it cannot take
    requests), the mapping's targets (``OutreachRefused`` naming ``mapping_setting``), read
    the sheet (``SheetError``), check its columns once (``OutreachRefused`` naming each
    unknown column with a mapping that works) and how its dates and numbers read (one
    ``OutreachRefused`` per column that cannot be read, naming the option), plan the rows
    and write the rejected ones to the report; rows still to send that the contact rule
    refuses (``rule``; default: the store's list and bounces, see ``pipelines.rules.contact``)
    are reported ``suppressed``, not sent. Calls nothing but ``fields.list``, writes nothing
    to the store."""
    fields = await form_fields(client, form_id)
    mapping, options = mapping or {}, sheet_options or SheetOptions()
    problem = mapping_problem(mapping, fields, mapping_setting)
    if problem is not None:
        raise OutreachRefused(problem)
    read = load_sheet(sheet, options)
    problem = column_problem(read.columns, fields, mapping)
    if problem is not None:
        raise OutreachRefused(f"{sheet}: {problem}")
    by_key = {f.key: f for f in fields}
    targets = {c: t for c in read.columns if (t := column_targets(c, by_key, mapping))}
    readings = column_readings(read, targets, fields, date_format=options.date_order(), decimal=options.decimal_mark())
    plan = plan_rows(read.rows, fields, job=job, form_id=form_id, mapping=targets, delivery=delivery,
                     check_documents=lambda params: document_problems(params, sheet.parent), numbers=read.numbers,
                     readings=readings)
    claims = _claims(store, job, plan)
    # A row this job has sent already stays as it is: the rule is for what is still to send.
    rule = rule if rule is not None else contact_rule(store, OutreachSettings())
    plan = apply_contact_rule(plan, rule, to_send={identity for identity, claim in claims.items() if claim == "send"},
                              held=_held(store, job, plan))
    report_path = report_path or default_report_path(job)
    write_report(report_path, plan.rejected)
    return Prepared(read, form_id, job, plan, report_path, _counts(plan, claims), targets,
                    typed_columns(targets, fields, readings), rule.allow_duplicates)


def _claims(store: Store | None, job: str, plan: Plan) -> dict[str, Claim]:
    """What the ledger would decide for each valid row: send it, sent before, changed since sent."""
    if store is not None and store.exists() and OutreachRow.__tablename__ in store.table_names():
        return store.ledger.claims(job, {r.identity: r.content_hash for r in plan.valid})
    return {r.identity: "send" for r in plan.valid}


def _counts(plan: Plan, claims: Mapping[str, Claim]) -> RunCounts:
    """The plan's rows as the ledger has them: to send, sent before, changed since sent."""
    said = [claims[r.identity] for r in plan.valid]
    return RunCounts(rows=plan.rows, invalid=plan.invalid, suppressed=plan.suppressed,
                     skipped_existing=said.count("sent"),
                     changed=said.count("changed"), left=said.count("send"))


def _held(store: Store | None, job: str, plan: Plan) -> list[Recipient]:
    """The job's rows with a request that the plan does not hold (sent from an earlier sheet)."""
    if store is None or not store.exists() or store.campaign.job(job) is None:
        return []
    planned = {r.identity for r in plan.valid}
    return [Recipient(r.row_number, r.recipient_email, has_request=True) for r in store.campaign.rows(job)
            if r.request_id is not None and r.row_key not in planned]


async def send_outreach(client: FormClient, store: Store, prepared: Prepared, *, delivery: str = "none",
                        callback_url: str | None = None, test: bool = False,
                        progress: ProgressCallback | None = None, stop: asyncio.Event | None = None
                        ) -> OutreachReport:
    """Send a prepared plan (see ``run_outreach``) and write the job's links
    (``<report>-links.csv`` beside the report: externalId, email, url)."""
    p = prepared
    store.ledger.open_job(p.job, p.form_id, str(p.sheet.path),
                          {"delivery": delivery, "test": test, "typed_columns": dict(p.typed),
                           "allow_duplicates": p.allow_duplicates})
    store.ledger.record_suppressed(p.job, [(PendingRow(r.identity, r.number, r.content_hash, r.key), why)
                                           for r, why in p.plan.refused])
    documents = Documents(client, store.ledger, p.job, p.form_id, p.sheet.path.parent)
    sender = Sender(client, store, documents, job=p.job, form_id=p.form_id, stop=stop,
                    options=SendOptions(delivery=delivery, callback_url=callback_url, test=test))
    result = await sender.send(p.plan.valid, progress)
    links = links_path(p.report_path, p.job)
    report = outreach_report(p, result, documents.uploads, links)
    if result.problems:
        write_report(p.report_path, report.lines)
    store.ledger.record_outcome(p.job, {**report.counts().model_dump(), "report": str(p.report_path)})
    write_links(links, job_links(p.plan, store.outreach_progress.links(p.job)))
    return report


def job_links(plan: Plan, sent: list[tuple[str, str | None]]) -> list[tuple[str | None, str | None, str | None]]:
    """``(externalId, email, url)`` of each sent row: the ids and addresses as the sheet
    has them (a row sent by an earlier run and gone from the sheet keeps its externalId)."""
    rows = {r.identity: r.params for r in plan.valid}
    out: list[tuple[str | None, str | None, str | None]] = []
    for key, url in sent:
        params = rows.get(key)
        if params is not None:
            out.append((params.externalId, params.recipient.get("email"), url))
        else:
            out.append((key.removeprefix("ext:") if key.startswith("ext:") else None, None, url))
    return out


def outreach_report(p: Prepared, result: SendResult | None = None, uploads: int = 0,
                    links: Path | None = None) -> OutreachReport:
    """The report of a prepared run and what sending it did (None: nothing, a dry run):
    its counts are the prepared ones with what was sent (see ``RunCounts``)."""
    counts = p.counts if result is None else p.counts.finished(result.sent, result.failed, result.stopped)
    lines = p.plan.rejected + (result.problems if result is not None else [])
    return OutreachReport(**counts.model_dump(), report_path=p.report_path, links_path=links,
                          documents_uploaded=uploads, plan=p.plan, lines=sorted(lines, key=lambda line: line[0]))


async def run_outreach(client: FormClient, store: Store, sheet: Path, form_id: str, *, job: str,
                       mapping: ColumnMapping | None = None, delivery: str = "none",
                       callback_url: str | None = None, dry_run: bool = False, test: bool = False,
                       report_path: Path | None = None, progress: ProgressCallback | None = None,
                       stop: asyncio.Event | None = None, sheet_options: SheetOptions | None = None,
                       rule: ContactRule | None = None) -> OutreachReport:
    """Send one request per valid row of ``sheet`` to ``form_id``. The form and the
    sheet's columns are checked first (``OutreachRefused``, ``SheetError``: nothing is
    sent); every row is validated against ``fields.list``; bad rows go to the CSV report
    (row numbers as in the sheet) and are never sent. The rows to send are recorded
    ``pending`` first; each is marked ``sending`` before its create and ``sent`` after, so
    a re-run sends only rows without a request, with the same idempotency key. A row whose
    content changed under the same identity is marked ``changed`` and not sent; a row the
    service refused (``failed``, nothing sent) is sent again, as corrected, on the next
    run; a later row repeating an earlier row's identity is reported, not sent.
    ``dry_run`` calls nothing but ``fields.list`` and records nothing; the report carries
    the plan.

    ``progress`` hears each row gone through and each wait for the rate limit. ``stop``
    asks for a graceful end: the row being sent is finished and recorded, no further row
    is sent (a wait for the rate window is cut short), and the report says ``stopped``
    and how many rows are ``left``; the next run sends them."""
    prepared = await prepare_outreach(client, store, sheet, form_id, job=job, mapping=mapping, delivery=delivery,
                                      report_path=report_path, sheet_options=sheet_options, rule=rule)
    if dry_run:
        return outreach_report(prepared)
    return await send_outreach(client, store, prepared, delivery=delivery, callback_url=callback_url, test=test,
                               progress=progress, stop=stop)
