"""Bulk outreach: one request per sheet row (CSV or XLSX), validated against the form's
fields before anything is sent, recorded in the store before each send so that a re-run
sends only what is still missing, with the same idempotency key every time."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import json
import mimetypes
import re
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel
from sqlmodel import select

from connector.client import FormClient
from connector.errors import FormsyncError
from connector.models import FieldDescriptor
from connector.store import OutreachJob, OutreachRow, Store

RECIPIENT_COLUMNS = ("email", "name")
SPECIAL_COLUMNS = ("externalId", "readonly", "expiresAt", "document")
# What the service accepts as a request document (PDF or an image), and its size limit.
DOCUMENT_TYPES = ("application/pdf", "image/png", "image/jpeg", "image/webp", "image/gif", "image/svg+xml",
                  "image/avif", "image/bmp", "image/tiff")
DOCUMENT_MAX_BYTES = 25 * 1024 * 1024
# What the service takes for an email, URL and time answer (checked here so a bad cell is
# reported before any call, beside the other problems of its row).
EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
URL_RE = re.compile(r"^https?://[^\s/]+\S*$", re.IGNORECASE)
TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
TEXT_FORMATS = {
    "email": (EMAIL_RE, "is not an email address", "an email address, e.g. ada@example.com"),
    "url": (URL_RE, "is not an http(s) URL", "an http:// or https:// URL"),
    "time": (TIME_RE, "is not a time", "HH:MM, e.g. 09:30"),
}
TRUE_WORDS = {"true", "yes", "1"}
FALSE_WORDS = {"false", "no", "0"}
REPORT_COLUMNS = ("row", "column", "problem", "accepted")


class Problem(BaseModel):
    """One thing wrong with a sheet row: the column, what is wrong, what is accepted."""

    column: str
    problem: str
    accepted: str = ""


class RowParams(BaseModel):
    """The ``requests.create`` params a valid row maps to."""

    recipient: dict[str, str] = {}
    prefill: dict[str, Any] = {}
    context: dict[str, str] = {}
    metadata: dict[str, str] = {}
    readonly: list[str] = []
    externalId: str | None = None
    expiresAt: int | None = None
    # Documents block field key ('' when the form has one block) -> the local file's path
    documents: dict[str, str] = {}


class OutreachReport(BaseModel):
    """What a run did: rows read, sent now, already sent before, invalid (in the report
    file), changed since they were sent (reported, not sent again), failed on send."""

    rows: int
    sent: int
    skipped_existing: int
    invalid: int
    changed: int
    failed: int
    report_path: Path | None = None
    stopped: bool = False  # a stop request ended the run between rows; a re-run sends the rest
    documents_uploaded: int = 0


# ======================================================================================
# Reading and validating
# ======================================================================================


def read_sheet(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV or XLSX file (first sheet), every cell as a string ('' when
    empty). Any other extension is a ``ValueError``."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    elif suffix in (".xlsx", ".xlsm"):
        df = pd.read_excel(path, dtype=str, keep_default_na=False, engine="openpyxl")
    else:
        raise ValueError(f"{path}: unsupported sheet type {suffix!r}; use .csv or .xlsx")
    return [{str(k).strip(): ("" if v is None else str(v)) for k, v in rec.items()}
            for rec in df.to_dict(orient="records")]


def _target(column: str, fields: Mapping[str, FieldDescriptor], mapping: Mapping[str, str]) -> str | None:
    """Where a column goes (``mapping`` first; ``email`` and ``name`` go to the recipient,
    and to prefill too when the form has such a field): 'email', 'name', 'externalId', 'readonly', 'expiresAt',
    'prefill.<key>', 'context.<key>', 'metadata.<key>'; None when unknown."""
    if column in mapping:
        return mapping[column]
    if (column in RECIPIENT_COLUMNS or column in SPECIAL_COLUMNS or column.startswith("metadata.")
            or column.startswith("document.")):
        return column
    f = fields.get(column)
    if f is not None:
        return f"context.{column}" if f.context else f"prefill.{column}"
    return None


def _labels(options: Sequence[Any]) -> str:
    return ", ".join(f"{o.label} ({o.key})" for o in options)


def _choice(f: FieldDescriptor, text: str) -> str | None:
    low = text.strip().lower()
    for o in f.options or []:
        if low in (o.key.lower(), o.label.lower()):
            return o.key
    return None


def _parse_expiry(text: str) -> int:
    s = text.strip()
    if s.isdigit():
        return int(s)
    dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _value(f: FieldDescriptor, text: str) -> tuple[Any, Problem | None]:
    """A cell converted to the field's prefill value, or the problem with it."""
    col = f.key
    if f.type in ("select", "radio", "decision") and f.options is not None:
        key = _choice(f, text)
        if key is None:
            return None, Problem(column=col, problem=f"{text!r} is not an option of {f.key}",
                                 accepted=_labels(f.options))
        return key, None
    if f.type in ("checkbox", "ranking") and f.options is not None:
        keys = []
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            key = _choice(f, part)
            if key is None:
                return None, Problem(column=col, problem=f"{part!r} is not an option of {f.key}",
                                     accepted="comma-separated options: " + _labels(f.options))
            keys.append(key)
        return keys, None
    if f.type in ("number", "rating", "scale"):
        try:
            num = float(text)
        except ValueError:
            return None, Problem(column=col, problem=f"{text!r} is not a number", accepted="a number, e.g. 42")
        return (int(num) if num.is_integer() else num), None
    if f.type == "switch":
        low = text.strip().lower()
        if low in TRUE_WORDS or low in FALSE_WORDS:
            return low in TRUE_WORDS, None
        return None, Problem(column=col, problem=f"{text!r} is not a boolean", accepted="true/false/yes/no/1/0")
    if f.type == "date":
        try:
            return date.fromisoformat(text.strip()[:10]).isoformat(), None
        except ValueError:
            return None, Problem(column=col, problem=f"{text!r} is not a date", accepted="YYYY-MM-DD")
    if f.type in TEXT_FORMATS:
        pattern, problem, accepted = TEXT_FORMATS[f.type]
        if not pattern.match(text.strip()):
            return None, Problem(column=col, problem=f"{text!r} {problem}", accepted=accepted)
        return text.strip(), None
    if f.type == "matrix" or (f.type == "group" and f.repeating):
        shape = "a JSON object of row key to column key" if f.type == "matrix" else "a JSON array of objects"
        try:
            parsed = json.loads(text)
        except ValueError:
            return None, Problem(column=col, problem=f"{text!r} is not valid JSON", accepted=shape)
        want = dict if f.type == "matrix" else list
        if not isinstance(parsed, want):
            return None, Problem(column=col, problem=f"{text!r} has the wrong JSON shape", accepted=shape)
        if f.type == "matrix":
            rows = {r.key for r in f.rows or []}
            cols = {c.key for c in f.columns or []}
            bad = [k for k, v in parsed.items() if k not in rows or v not in cols]
            if bad:
                return None, Problem(column=col, problem=f"unknown matrix row or column in {bad}",
                                     accepted=f"rows {sorted(rows)}, columns {sorted(cols)}")
        return parsed, None
    return text, None


def validate_row(fields: Sequence[FieldDescriptor], row: Mapping[str, str], *,
                 mapping: Mapping[str, str] | None = None, delivery: str = "none"
                 ) -> tuple[RowParams | None, list[Problem]]:
    """Map one sheet row (column -> string cell) to ``requests.create`` params using the
    form's fields. Returns ``(params, [])`` when the row is valid, else ``(None, problems)``
    listing every problem found. Empty cells are left out."""
    by_key = {f.key: f for f in fields}
    mapping = mapping or {}
    problems: list[Problem] = []
    out = RowParams()
    readonly_col: tuple[str, str] | None = None
    for column, cell in row.items():
        target = _target(column, by_key, mapping)
        if target is None:
            problems.append(Problem(column=column, problem="unknown column",
                                    accepted="email, name, externalId, readonly, expiresAt, document, "
                                             "document.<key>, metadata.<key>, or a field key: "
                                             + ", ".join(sorted(by_key))))
            continue
        if cell.strip() == "":
            continue
        kind, _, key = target.partition(".")
        if target in RECIPIENT_COLUMNS:
            if target == "email" and not EMAIL_RE.match(cell.strip()):
                problems.append(Problem(column=column, problem=f"{cell!r} is not an email address",
                                        accepted=TEXT_FORMATS["email"][2]))
                continue
            out.recipient[target] = cell.strip()
            # A form asking for the same key (a Contact form's name or email) gets it prefilled too.
            same = by_key.get(column) if column not in mapping else None
            if same is not None and same.prefillable and not same.context:
                value, problem = _value(same, cell)
                if problem is None:
                    out.prefill[column] = value
        elif target == "externalId":
            out.externalId = cell.strip()
        elif target == "readonly":
            readonly_col = (column, cell)
        elif target == "expiresAt":
            try:
                out.expiresAt = _parse_expiry(cell)
            except ValueError:
                problems.append(Problem(column=column, problem=f"{cell!r} is not a date or time",
                                        accepted="ISO date/datetime or epoch milliseconds"))
        elif kind == "metadata" and key:
            out.metadata[key] = cell
        elif target == "document" or (kind == "document" and key):
            f = by_key.get(key) if key else None
            if key and (f is None or f.type != "documents"):
                problems.append(Problem(column=column, problem=f"{key!r} is not a documents field of this form",
                                        accepted=", ".join(sorted(k for k, v in by_key.items()
                                                                  if v.type == "documents")) or "(none)"))
            else:
                out.documents[key] = cell.strip()
        elif kind in ("prefill", "context") and key:
            f = by_key.get(key)
            if f is None:
                problems.append(Problem(column=column, problem=f"{key!r} is not a field of this form",
                                        accepted=", ".join(sorted(by_key))))
            elif kind == "context":
                if not f.context:
                    problems.append(Problem(column=column, problem=f"{key!r} is not a hidden field",
                                            accepted=", ".join(sorted(k for k, v in by_key.items() if v.context))))
                else:
                    out.context[key] = cell
            elif f.context:
                out.context[key] = cell
            elif not f.prefillable:
                problems.append(Problem(column=column, problem=f"{key!r} is a {f.type} field, which cannot be "
                                        "prefilled", accepted=", ".join(
                                            sorted(k for k, v in by_key.items() if v.prefillable))))
            else:
                value, problem = _value(f, cell)
                if problem is not None:
                    problems.append(problem.model_copy(update={"column": column}))
                else:
                    out.prefill[key] = value
        else:
            problems.append(Problem(column=column, problem=f"unknown mapping target {target!r}",
                                    accepted="email, name, externalId, readonly, expiresAt, document, "
                                             "document.<key>, prefill.<key>, context.<key>, metadata.<key>"))
    if readonly_col is not None:
        column, cell = readonly_col
        for key in (k.strip() for k in cell.split(",") if k.strip()):
            if key not in out.prefill:
                problems.append(Problem(column=column, problem=f"readonly key {key!r} is not prefilled in this row",
                                        accepted=", ".join(sorted(out.prefill)) or "(nothing prefilled)"))
            else:
                out.readonly.append(key)
    if delivery == "email" and not out.recipient.get("email"):
        problems.append(Problem(column="email", problem="missing email with email delivery",
                                accepted="an email address"))
    return (None, problems) if problems else (out, [])


def document_problem(path: Path) -> tuple[str, str] | None:
    """Why the local file at ``path`` cannot be a request document, as (problem,
    accepted), or None when it can: it must exist, be a PDF or an image (by its
    extension) and hold 1 byte to 25 MiB."""
    if not path.is_file():
        return f"file {str(path)!r} does not exist", "the path of a PDF or image file (relative to the sheet)"
    ctype = document_type(path)
    if ctype not in DOCUMENT_TYPES:
        return (f"file {path.name!r} is not a PDF or an image ({ctype or 'unknown type'})",
                "a .pdf, .png, .jpg, .webp, .gif, .svg, .avif, .bmp or .tif file")
    size = path.stat().st_size
    if not 0 < size <= DOCUMENT_MAX_BYTES:
        return f"file {path.name!r} has {size:,} bytes", "1 byte to 25 MiB"
    return None


def document_type(path: Path) -> str | None:
    return mimetypes.guess_type(path.name, strict=False)[0]


def _check_documents(params: RowParams, base: Path) -> list[Problem]:
    out = []
    for key, cell in params.documents.items():
        found = document_problem(_document_path(cell, base))
        if found is not None:
            out.append(Problem(column=f"document.{key}" if key else "document", problem=found[0], accepted=found[1]))
    return out


def _document_path(cell: str, base: Path) -> Path:
    path = Path(cell).expanduser()
    return path if path.is_absolute() else base / path


class DocumentUnreadable(Exception):
    """A row's document file could not be read when its request was sent."""


class _Documents:
    """The job's uploaded documents: one ``documents.create`` and PUT per distinct file
    content (by SHA-256), recorded in the job's settings so a re-run reuses them too."""

    def __init__(self, client: FormClient, store: Store, job: str, form_id: str, base: Path) -> None:
        self.client, self.store, self.job, self.form_id, self.base = client, store, job, form_id, base
        with store.session() as s:
            rec = s.get(OutreachJob, job)
            self.ids: dict[str, str] = dict(((rec.settings if rec else None) or {}).get("documents", {}))
        self.uploads = 0
        self.digests: dict[Path, str] = {}  # each file is read and hashed once per run

    async def refs(self, params: RowParams) -> list[dict[str, str]]:
        """The ``documents`` param of a row, uploading any file not uploaded yet."""
        refs = []
        for key, cell in sorted(params.documents.items()):
            path = _document_path(cell, self.base)
            digest = self.digests.get(path)
            if digest is None:
                try:
                    data = await asyncio.to_thread(path.read_bytes)
                except OSError as e:
                    raise DocumentUnreadable(f"document {str(path)!r} cannot be read: {e.strerror or e}") from e
                digest = hashlib.sha256(data).hexdigest()
                if digest not in self.ids:
                    await self._upload(path, data, digest)
                self.digests[path] = digest  # only once its document exists
            refs.append({"documentId": self.ids[digest], **({"field": key} if key else {})})
        return refs

    async def _upload(self, path: Path, data: bytes, digest: str) -> None:
        upload = await self.client.create_document(self.form_id, path.name, document_type(path) or "", len(data),
                                                   sha256=digest)
        await self.client.upload_document(upload, data)
        self.ids[digest] = upload.id
        self.uploads += 1
        with self.store.session() as s:  # recorded before any request refers to it
            rec = s.get(OutreachJob, self.job)
            if rec is not None:
                rec.settings = {**(rec.settings or {}), "documents": dict(self.ids)}
                s.add(rec)


# ======================================================================================
# Identity and idempotency
# ======================================================================================


def content_hash(params: RowParams) -> str:
    """A hash of the row's normalised params (sorted keys, compact JSON)."""
    values = params.model_dump()
    if not values["documents"]:  # rows without documents keep the hash they always had
        del values["documents"]
    text = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def row_identity(params: RowParams) -> str:
    """The row's identity: its externalId, else the hash of its content."""
    return f"ext:{params.externalId}" if params.externalId else f"hash:{content_hash(params)}"


def idempotency_key(job: str, form_id: str, identity: str) -> str:
    """The deterministic idempotency key of a row: a pure function of job, form and row identity."""
    digest = hashlib.sha256(json.dumps([job, form_id, identity]).encode()).hexdigest()
    return f"outreach-{digest[:48]}"


# ======================================================================================
# The run
# ======================================================================================


def _write_report(path: Path, lines: list[tuple[int, Problem]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(REPORT_COLUMNS)
        for n, p in lines:
            w.writerow([n, p.column, p.problem, p.accepted])


def _now() -> int:
    return int(time.time() * 1000)


async def run_outreach(client: FormClient, store: Store, sheet: Path, form_id: str, *, job: str,
                       mapping: dict[str, str] | None = None, delivery: str = "none",
                       callback_url: str | None = None, dry_run: bool = False, test: bool = False,
                       report_path: Path | None = None, progress: bool = True,
                       stop: asyncio.Event | None = None) -> OutreachReport:
    """Send one request per valid row of ``sheet`` to ``form_id``. Every row is validated
    against ``fields.list`` first; bad rows go to the CSV report (row numbers as in the
    sheet, header = row 1) and are never sent. Each row is recorded (``pending``) before its
    create and marked ``sent`` after, so a re-run sends only rows without a request, with
    the same idempotency key. A row whose content changed under the same identity is
    marked ``changed`` and not sent; a row the service refused (``failed``, nothing sent) is
    sent again, as corrected, on the next run; a later row repeating an earlier row's identity is
    reported, not sent. ``dry_run`` calls nothing but ``fields.list`` and prints the plan.

    ``stop`` asks for a graceful end: the row being sent is finished and recorded, no
    further row is sent (a wait for the rate window is cut short), and the report says
    ``stopped``. Rows not sent have no request recorded, so the next run sends them."""
    rows = read_sheet(sheet)
    fields = (await client.list_fields(form_id)).items
    problems: list[tuple[int, Problem]] = []
    good: list[tuple[int, RowParams]] = []
    seen: dict[str, int] = {}
    base = sheet.parent
    for i, row in enumerate(rows):
        params, found = validate_row(fields, row, mapping=mapping, delivery=delivery)
        if params is not None and params.documents:
            found = _check_documents(params, base)
            params = None if found else params
        number = i + 2  # the header is row 1
        if params is not None and row_identity(params) in seen:
            # Two rows of one identity would share one idempotency key: neither order wins.
            found = [Problem(column="externalId" if params.externalId else "",
                             problem=f"same row identity as row {seen[row_identity(params)]}",
                             accepted="one row per externalId (or no identical rows)")]
            params = None
        if params is None:
            problems.extend((number, p) for p in found)
        else:
            seen[row_identity(params)] = number
            good.append((number, params))
    invalid = len(rows) - len(good)
    if report_path is None:
        report_path = Path("formsync-reports") / f"{job}-report.csv"
    _write_report(report_path, problems)

    sent = skipped = changed = failed = 0
    stopped = False
    if not dry_run:
        now = _now()
        with store.session() as s:
            if s.get(OutreachJob, job) is None:
                s.add(OutreachJob(name=job, form_id=form_id, source_path=str(sheet), created_at=now, updated_at=now,
                                  settings={"delivery": delivery, "test": test}))
    bar = None
    if progress and not dry_run:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        bar = Progress(TextColumn("outreach"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[rate]}"), TimeRemainingColumn())
        bar.start()
    task = bar.add_task("rows", total=len(good), rate="") if bar else None
    documents = None if dry_run else _Documents(client, store, job, form_id, base)
    # Rows already sent, read once: a resumed run skips them without a transaction each
    # (a row never goes back from sent, so this snapshot cannot send anything twice).
    already_sent: dict[str, str] = {}
    if not dry_run:
        with store.reader() as s:
            already_sent = {r.row_key: r.content_hash for r in s.exec(select(OutreachRow).where(
                OutreachRow.job_name == job, OutreachRow.request_id.is_not(None)))}  # type: ignore[union-attr]
    started = time.monotonic()
    try:
        for number, params in good:
            if stop is not None and stop.is_set():
                stopped = True
                break
            if bar is not None and task is not None:
                done = bar.tasks[0].completed + 1
                bar.update(task, advance=1, rate=f"{done / max(time.monotonic() - started, 1e-3):.1f} rows/s")
            identity = row_identity(params)
            chash = content_hash(params)
            key = idempotency_key(job, form_id, identity)
            if dry_run:
                print(f"row {number}: would create ({identity}) key={key}")
                continue
            if already_sent.get(identity) == chash:
                skipped += 1
                continue
            with store.session() as s:
                rec = s.exec(select(OutreachRow).where(OutreachRow.job_name == job,
                                                       OutreachRow.row_key == identity)).first()
                if rec is None:
                    rec = OutreachRow(job_name=job, row_key=identity, row_number=number, content_hash=chash,
                                      idempotency_key=key, state="pending", updated_at=_now())
                    s.add(rec)
                elif rec.state == "failed" and rec.request_id is None:
                    # The service refused the last create, so nothing was sent: a corrected row goes out.
                    rec.content_hash, rec.row_number = chash, number
                    s.add(rec)
                elif rec.content_hash != chash:
                    rec.state, rec.row_number, rec.updated_at = "changed", number, _now()
                    rec.error = "content changed since it was recorded; not sent again"
                    s.add(rec)
                    changed += 1
                    problems.append((number, Problem(
                        column="externalId" if params.externalId else "",
                        problem=f"changed since it was recorded ({identity}); not sent again",
                        accepted="the row as first sent, or a new externalId (or a new job) for a new request")))
                    continue
                elif rec.request_id is not None:
                    skipped += 1
                    continue
                rec.attempts += 1
            if stop is not None and await _stopped_while_waiting(client, stop):
                # Recorded as pending with no request: the next run sends it, same key.
                stopped = True
                break
            try:
                extra: dict[str, Any] = {}
                if params.documents and documents is not None:
                    extra["documents"] = await documents.refs(params)
                created = await client.create_request(
                    form_id, recipient=params.recipient or {}, **_optional(params, delivery, callback_url, test),
                    **extra, idempotency_key=key)
            except (FormsyncError, DocumentUnreadable) as e:  # refused, or a file gone since validation
                failed += 1
                with store.session() as s:
                    row_rec = s.exec(select(OutreachRow).where(OutreachRow.idempotency_key == key)).one()
                    row_rec.state, row_rec.error, row_rec.updated_at = "failed", str(e), _now()
                    s.add(row_rec)
                problems.append((number, Problem(column="", problem=f"create failed: {e}")))
                continue
            # Stored as pending (with its form, as a form's poll job looks for it) before the row is
            # marked sent: if this fails, the next run sends the row again, deduplicated by its key.
            store.upsert_requests([{**created.model_dump(exclude_none=True), "formId": form_id}], source="poll")
            with store.session() as s:
                row_rec = s.exec(select(OutreachRow).where(OutreachRow.idempotency_key == key)).one()
                row_rec.state, row_rec.request_id, row_rec.error, row_rec.updated_at = "sent", created.id, None, _now()
                s.add(row_rec)
            sent += 1
    finally:
        if bar is not None:
            bar.stop()
    if failed or changed:
        _write_report(report_path, sorted(problems, key=lambda line: line[0]))
    return OutreachReport(rows=len(rows), sent=sent, skipped_existing=skipped, invalid=invalid, changed=changed,
                          failed=failed, report_path=report_path, stopped=stopped,
                          documents_uploaded=documents.uploads if documents is not None else 0)


async def _stopped_while_waiting(client: FormClient, stop: asyncio.Event) -> bool:
    """Wait until the client's pacer would admit a create, unless ``stop`` is set first;
    True when stopped (the row stays recorded as pending with no request, and the next
    run sends it under the same idempotency key)."""
    pacer = client.pacer
    delay = pacer.delay(create=True) if pacer is not None else 0.0
    if delay > 0 and not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), delay)
        except TimeoutError:
            pass
    return stop.is_set()


def _optional(params: RowParams, delivery: str, callback_url: str | None, test: bool) -> dict[str, Any]:
    """The create params a row sets, leaving out the empty ones (so the body, and so the
    idempotency fingerprint, is the same on every run)."""
    out: dict[str, Any] = {"delivery": delivery}
    if params.prefill:
        out["prefill"] = params.prefill
    if params.context:
        out["context"] = params.context
    if params.metadata:
        out["metadata"] = params.metadata
    if params.readonly:
        out["readonly"] = params.readonly
    if params.externalId:
        out["external_id"] = params.externalId
    if params.expiresAt is not None:
        out["expires_at"] = params.expiresAt
    if callback_url:
        out["callback_url"] = callback_url
    if test:
        out["test"] = True
    return out
