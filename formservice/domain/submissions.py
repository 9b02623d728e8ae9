"""Submissions and field keys: answer validation against a published snapshot, stored
responses, ``submissions.list``/``sample``/``pdf`` and ``fields.list``."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import func
from sqlmodel import Session, col, select

from ..clock import iso, sql_ts
from ..errors import ApiError, not_found, validation
from ..ids import new_id
from ..pdf import render_text_pdf
from ..tables import Form, Integration, Snapshot, StoredFile, Submission, TranslationEntry
from . import fieldtypes
from .base import Ctx, Page, Params, Result, decode_cursor, keyset_page, method
from .events import API_VERSION
from .forms import snapshot_of

Limit = Annotated[int, Field(ge=1, le=100)]


# -- answers ---------------------------------------------------------------------


def questions(blocks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {b["key"]: b for b in blocks if fieldtypes.is_question(b) and b.get("key")}


def takes_answer(block: dict[str, Any], *, allow_hidden: bool = True) -> bool:
    """Whether a respondent (or a caller) may send a value for this field: documents
    blocks carry files to read, calculated fields are computed by the form."""
    ft = fieldtypes.field_type(block)
    return ft.answerable and ft.kind != "calculated" and (allow_hidden or ft.type != "hidden")


def check_answers(blocks: list[dict[str, Any]], answers: dict[str, Any], *, require: bool,
                  allow_hidden: bool = True) -> tuple[dict[str, Any], dict[str, fieldtypes.FieldValueError]]:
    """Validate answers against a snapshot's blocks. Returns the normalised answers
    (calculated fields computed) and the problems by field key (dotted into a repeating
    group's instances); ``require`` also flags empty required questions, and required
    members of each group instance (a final submit, not a draft)."""
    qs = questions(blocks)
    errors: dict[str, fieldtypes.FieldValueError] = {}
    clean: dict[str, Any] = {}
    for key, value in answers.items():
        block = qs.get(key)
        if block is None or not takes_answer(block, allow_hidden=allow_hidden):
            valid = sorted(k for k, b in qs.items() if takes_answer(b, allow_hidden=allow_hidden))
            if block is None:
                errors[key] = fieldtypes.FieldValueError("is not a field of this form", valid_values=valid,
                                                         reason="UNKNOWN_FIELD_KEY")
            else:
                what = fieldtypes.field_type(block).type
                errors[key] = fieldtypes.FieldValueError(
                    f"is a {what} field and takes no answer" + (" (the form computes it)" if what == "calculated"
                                                                else ""),
                    valid_values=valid, reason="FIELD_NOT_ANSWERABLE")
            continue
        if fieldtypes.is_empty(value):
            continue
        try:
            value = fieldtypes.check_value(block, value)
        except fieldtypes.FieldValueError as e:
            errors[key] = e
            continue
        if not fieldtypes.is_empty(value):  # a group of blank instances is still blank
            clean[key] = value
    if require:
        for key, block in qs.items():
            if key in errors or not takes_answer(block):
                continue
            if block.get("required") and key not in clean:
                errors[key] = fieldtypes.FieldValueError("is required", reason="REQUIRED")
            elif block["type"] == "group" and key in clean:
                _require_members(block, key, clean[key], errors)
    for key, block in qs.items():
        if block["type"] == "calculated" and block.get("formula"):
            try:
                value = fieldtypes.calculate(block["formula"], clean)
            except ValueError:  # the author's formula is broken: the respondent is not to blame
                value = None
            if value is not None:
                clean[key] = value
    return clean, errors


def _require_members(block: dict[str, Any], key: str, instances: list[dict[str, Any]],
                     errors: dict[str, fieldtypes.FieldValueError]) -> None:
    required = [m["key"] for m in block.get("members") or [] if fieldtypes.is_question(m) and m.get("required")]
    for i, inst in enumerate(instances):
        for mk in required:
            if mk not in inst:
                errors[f"{key}.{i}.{mk}"] = fieldtypes.FieldValueError("is required", reason="REQUIRED")
                return


def raise_answer_errors(errors: dict[str, fieldtypes.FieldValueError], prefix: str = "answers") -> None:
    """Raise VALIDATION_ERROR for the first problem (naming how many more there are):
    ``field`` is ``<prefix>.<key>``, ``reason`` UNKNOWN_FIELD_KEY (with ``validKeys``),
    FIELD_NOT_ANSWERABLE (with ``validKeys``), REQUIRED or INVALID_ANSWER (with
    ``validValues`` and ``expectedType`` where the field names them)."""
    if not errors:
        return
    key, err = next(iter(errors.items()))
    details: dict[str, Any] = {"field": f"{prefix}.{key}", "reason": err.reason or "INVALID_ANSWER"}
    if err.reason in ("UNKNOWN_FIELD_KEY", "FIELD_NOT_ANSWERABLE"):
        details["validKeys"] = err.valid_values
    else:
        if err.valid_values is not None:
            details["validValues"] = err.valid_values
        if err.expected:
            details["expectedType"] = err.expected
    more = f" ({len(errors) - 1} more)" if len(errors) > 1 else ""
    raise ApiError("VALIDATION_ERROR", f"{prefix}.{key} {err}.{more}", **details)


def display_of(blocks: list[dict[str, Any]], answers: dict[str, Any]) -> dict[str, str]:
    qs = questions(blocks)
    return {k: fieldtypes.display(qs[k], v) for k, v in answers.items() if k in qs}


def record_submission(session: Session, form: Form, answers: dict[str, Any], now: int, *, completed: bool = True,
                      respondent_email: str | None = None, request_id: str | None = None,
                      share_link_id: str | None = None, language: str | None = None, is_test: bool = False,
                      snapshot: Snapshot | None = None) -> Submission:
    """Store a response to the form's published snapshot. Answers must already be valid
    (see :func:`check_answers`); calculated fields are computed here (any value given for
    one, such as check_answers' own output, is recomputed) and display text is derived."""
    snap = snapshot or snapshot_of(session, form)
    blocks = (snap.blocks if snap else form.blocks) or []
    qs = questions(blocks)
    given = {k: v for k, v in answers.items() if k not in qs or qs[k]["type"] != "calculated"}
    clean, errors = check_answers(blocks, given, require=False)
    raise_answer_errors(errors)
    if respondent_email is None:
        emails = [v for k, v in clean.items() if qs[k]["type"] == "email"]
        respondent_email = emails[0] if emails else None
    now = _after_latest(session, form.id, now)
    sub = Submission(
        id=new_id("sub"), form_id=form.id, workspace_id=form.workspace_id, snapshot_id=snap.id if snap else None,
        share_link_id=share_link_id, request_id=request_id, respondent_email=respondent_email,
        language=language, is_completed=completed, is_test=is_test, created_at=now,
        submitted_at=now if completed else None, last_activity_at=now, answers=clean,
        display=display_of(blocks, clean),
    )
    session.add(sub)
    if completed:
        retain_pdf(session, form, sub, now)
    return sub


def _after_latest(session: Session, form_id: str, now: int) -> int:
    """``now``, or one ms after the form's latest submission when that is not earlier:
    two responses in the same millisecond still list in the order they arrived (ids are
    random, so they cannot break the tie)."""
    latest = session.exec(select(func.max(Submission.created_at)).where(Submission.form_id == form_id)).one()
    return now if latest is None or latest < now else latest + 1


def _pdf_integration(session: Session, form: Form) -> Integration | None:
    """The form's active automation integration that includes the PDF, if any."""
    return session.exec(select(Integration).where(Integration.form_id == form.id, col(Integration.active).is_(True),
                                                  col(Integration.include_pdf).is_(True))).first()


def retain_pdf(session: Session, form: Form, sub: Submission, now: int) -> None:
    """Keep a PDF of a completed submission when an active automation integration of the
    form asks for it (the only case ``submissions.pdf`` answers)."""
    if sub.is_test or _pdf_integration(session, form) is None:
        return
    lines = [f"{k}: {v}" for k, v in (sub.display or {}).items()]
    data = render_text_pdf(f"{form.name} - submission {sub.id}", lines)
    stored = StoredFile(id=str(uuid.uuid4()), content_type="application/pdf", data=data, created_at=now)
    session.add(stored)
    sub.pdf_file_id = stored.id


def submit_public(ctx: Ctx, form: Form, answers: dict[str, Any], *, completed: bool = True,
                  respondent_email: str | None = None) -> Submission:
    """A public-link response: the form must be published; answers are validated as the
    form page does (required questions only on a final submit)."""
    snap = snapshot_of(ctx.session, form)
    if not form.is_published or snap is None:
        raise validation("The form is not published; publish it before collecting responses.",
                         field="formId", reason="FORM_NOT_PUBLISHED")
    _, errors = check_answers(snap.blocks or [], answers, require=completed)
    raise_answer_errors(errors)
    return record_submission(ctx.session, form, answers, ctx.now, completed=completed,
                             respondent_email=respondent_email, snapshot=snap)


def storage_url(ctx: Ctx, file_id: str) -> str:
    return f"{ctx.base_url}/api/storage/{file_id}"


# -- submissions.list ----------------------------------------------------------------


class ListParams(Params):
    formId: str
    includeDrafts: bool = True
    translationLanguage: Annotated[str, Field(pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")] | None = None
    limit: Limit = 20
    cursor: str | None = None


class Translation(Result):
    language: str
    display: dict[str, Any]


class SubmissionItem(Result):
    id: str
    submittedAt: str | None
    isCompleted: bool
    createdAt: str
    updatedAt: str | None
    editCount: int
    respondentEmail: str | None
    requestId: str | None
    answers: dict[str, Any]
    display: dict[str, Any]
    translation: Translation | None = None


class SubmissionPage(Page):
    formId: str
    formName: str
    items: list[SubmissionItem]


def translated_labels(session: Session, form: Form, language: str) -> dict[str, str]:
    """The form's translated labels in ``language`` by entry key; an entry without that
    exact tag falls back to its primary language (``de`` for ``de-AT``)."""
    primary = language.split("-")[0]
    out: dict[str, str] = {}
    for e in session.exec(select(TranslationEntry).where(TranslationEntry.form_id == form.id)):
        tr = e.translations or {}
        text = tr.get(language) or tr.get(primary)
        if isinstance(text, str) and text:
            out[e.key] = text
    return out


def _translate_block(block: dict[str, Any], labels: dict[str, str], prefix: str) -> dict[str, Any]:
    # entry keys: field.<key>.option.<optionKey>, field.<key>.row.<rowKey>, field.<key>.column.<colKey>;
    # a group's members are addressed as field.<groupKey>.<memberKey>...
    if not fieldtypes.is_question(block) or not block.get("key"):
        return block
    base = f"{prefix}{block['key']}"
    out = dict(block)
    for part, kind in (("options", "option"), ("rows", "row"), ("columns", "column")):
        items = fieldtypes.options_of(block) if part == "options" else block.get(part)
        if items:
            out[part] = [{**o, "label": labels.get(f"{base}.{kind}.{o['key']}", o["label"])} for o in items]
    if block.get("members"):
        out["members"] = [_translate_block(m, labels, f"{base}.") for m in block["members"]]
    return out


def translated_display(blocks: list[dict[str, Any]], answers: dict[str, Any],
                       labels: dict[str, str]) -> dict[str, Any]:
    """Display text with option, row and column labels replaced by their translation
    where one exists (see :func:`translated_labels`); other text reads as in ``display``."""
    return display_of([_translate_block(b, labels, "field.") for b in blocks], answers)


@method("submissions.list")
def submissions_list(ctx: Ctx, p: ListParams) -> SubmissionPage:
    """A form's submissions, newest first, with answers by field key and display text.
    Drafts are listed on Pro and Business; no totals are returned."""
    form = ctx.form(p.formId)
    drafts = p.includeDrafts
    if not ctx.plan_at_least("pro"):
        if "includeDrafts" in p.model_fields_set and p.includeDrafts:
            ctx.require_plan("pro", "drafts", "Listing draft (partial) submissions")
        drafts = False
    if p.cursor is not None:
        # a well-formed cursor of another shape would compare ids with times and skip rows
        created, sub_id = decode_cursor(p.cursor, 2)
        if type(created) is not int or not isinstance(sub_id, str):
            raise validation("cursor is not a cursor submissions.list issued; pass back the nextCursor of the "
                             "previous page.", field="cursor", reason="INVALID_CURSOR")
    stmt = select(Submission).where(Submission.form_id == form.id, col(Submission.is_test).is_(False))
    if not drafts:
        stmt = stmt.where(col(Submission.is_completed).is_(True))
    rows, nxt = keyset_page(ctx.session, stmt, [Submission.created_at, Submission.id],
                            lambda s: (s.created_at, s.id), p.limit, p.cursor)
    snaps: dict[str | None, list[dict[str, Any]]] = {}
    labels = translated_labels(ctx.session, form, p.translationLanguage) if p.translationLanguage else {}
    items = []
    for s in rows:
        item = SubmissionItem(
            id=s.id, submittedAt=sql_ts(s.submitted_at), isCompleted=s.is_completed, createdAt=sql_ts(s.created_at),
            updatedAt=sql_ts(s.updated_at), editCount=s.edit_count, respondentEmail=s.respondent_email,
            requestId=s.request_id, answers=s.answers or {}, display=s.display or {},
        )
        if p.translationLanguage:
            if s.snapshot_id not in snaps:
                snap = ctx.session.get(Snapshot, s.snapshot_id) if s.snapshot_id else None
                snaps[s.snapshot_id] = (snap.blocks if snap else form.blocks) or []
            item.translation = Translation(language=p.translationLanguage,
                                           display=translated_display(snaps[s.snapshot_id], s.answers or {}, labels))
        items.append(item)
    return SubmissionPage(formId=form.id, formName=form.name, items=items, nextCursor=nxt, hasMore=nxt is not None,
                          canPaginate=True)


# -- submissions.sample ----------------------------------------------------------------


class FormIdParams(Params):
    formId: str


class EventForm(Result):
    id: str
    name: str
    snapshotId: str | None


class EventSubmission(Result):
    id: str
    respondentEmail: str | None
    submittedAt: str | None
    updatedAt: str | None
    editCount: int
    pdfUrl: str | None
    language: str | None


class SubmissionEventData(Result):
    form: EventForm
    submission: EventSubmission
    answers: dict[str, Any]
    display: dict[str, Any]


class SubmissionEvent(Result):
    id: str
    type: str
    createdAt: str
    apiVersion: str
    test: bool
    data: SubmissionEventData


def sample_answers(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Plausible answers for every answerable field; calculated fields are computed from
    the other sample answers, as the form would compute them."""
    qs = questions(blocks)
    raw = {k: fieldtypes.sample_value(b) for k, b in qs.items() if takes_answer(b)}
    clean, _ = check_answers(blocks, {k: v for k, v in raw.items() if v is not None}, require=False)
    return clean


@method("submissions.sample")
def submissions_sample(ctx: Ctx, p: FormIdParams) -> SubmissionEvent:
    """An example ``submission.completed`` event for the form, built without real data
    (``test: true``)."""
    form = ctx.form(p.formId)
    snap = snapshot_of(ctx.session, form)
    blocks = (snap.blocks if snap else fieldtypes.assign_keys(form.blocks or [])) or []
    answers = sample_answers(blocks)
    return SubmissionEvent(
        id="evt_example000000000000", type="submission.completed", createdAt=iso(ctx.now), apiVersion=API_VERSION,
        test=True,
        data=SubmissionEventData(
            form=EventForm(id=form.id, name=form.name, snapshotId=form.snapshot_id if form.is_published else None),
            submission=EventSubmission(id="sub_example000000000000", respondentEmail="jane@example.com",
                                       submittedAt=iso(ctx.now), updatedAt=None, editCount=0, pdfUrl=None,
                                       language=(form.settings or {}).get("language", "en")),
            answers=answers, display=display_of(blocks, answers),
        ),
    )


# -- submissions.pdf -----------------------------------------------------------------------


class PdfParams(Params):
    formId: str
    submissionId: str


class PdfResult(Result):
    url: str
    filename: str
    contentType: str
    byteLength: int


@method("submissions.pdf")
def submissions_pdf(ctx: Ctx, p: PdfParams) -> PdfResult:
    """The retained PDF of a completed submission; 404 unless an automation integration
    of the form keeps PDFs and this one was kept."""
    form = ctx.form(p.formId)
    sub = ctx.session.get(Submission, p.submissionId)
    if sub is None or sub.form_id != form.id or sub.is_test:
        raise not_found("Submission", field="submissionId", reason="SUBMISSION_NOT_FOUND")
    if not sub.is_completed:
        raise ApiError("NOT_FOUND", "This submission is a draft: only completed submissions have a PDF.",
                       field="submissionId", reason="SUBMISSION_NOT_COMPLETED")
    stored = ctx.session.get(StoredFile, sub.pdf_file_id) if sub.pdf_file_id else None
    if stored is None or _pdf_integration(ctx.session, form) is None:
        raise ApiError("NOT_FOUND", "No PDF is retained for this submission: only forms with an active automation "
                       "integration that includes the PDF keep one, from the time it is set up.",
                       field="submissionId", reason="PDF_NOT_RETAINED")
    return PdfResult(url=storage_url(ctx, stored.id), filename=f"formbase-submission-{sub.id}.pdf",
                     contentType="application/pdf", byteLength=len(stored.data))


# -- fields.list ----------------------------------------------------------------------------


class FieldList(Result):
    published: bool
    items: list[dict[str, Any]]
    hasMore: bool


@method("fields.list")
def fields_list(ctx: Ctx, p: FormIdParams) -> FieldList:
    """The addressable field keys of the form's published version (none for a form never
    published). Re-read after each publish."""
    form = ctx.form(p.formId)
    snap = snapshot_of(ctx.session, form)
    if snap is None:
        return FieldList(published=False, items=[], hasMore=False)
    return FieldList(published=form.is_published, items=snap.fields or [], hasMore=False)
