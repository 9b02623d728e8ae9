"""Submissions and field keys: answer validation against a published snapshot, stored
responses, ``submissions.list``/``sample``/``pdf`` and ``fields.list``."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import Field
from sqlmodel import Session, select

from ..clock import iso, sql_ts
from ..errors import ApiError, not_found, validation
from ..ids import new_id
from ..pdf import render_text_pdf
from ..tables import Form, Integration, Snapshot, StoredFile, Submission, TranslationEntry
from . import fieldtypes
from .base import Ctx, Page, Params, Result, keyset_page, method
from .forms import snapshot_of

API_VERSION = "2026-09-24"
Limit = Annotated[int, Field(ge=1, le=100)]


# -- answers ---------------------------------------------------------------------


def questions(blocks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {b["key"]: b for b in blocks if fieldtypes.is_question(b) and b.get("key")}


def check_answers(blocks: list[dict[str, Any]], answers: dict[str, Any], *, require: bool,
                  allow_hidden: bool = True) -> tuple[dict[str, Any], dict[str, fieldtypes.FieldValueError]]:
    """Validate answers against a snapshot's blocks. Returns the normalised answers
    (calculated fields computed) and the problems by field key; ``require`` also flags
    empty required questions (a final submit, not a draft)."""
    qs = questions(blocks)
    errors: dict[str, fieldtypes.FieldValueError] = {}
    clean: dict[str, Any] = {}
    for key, value in answers.items():
        block = qs.get(key)
        if block is None:
            errors[key] = fieldtypes.FieldValueError("is not a field of this form", valid_values=sorted(qs))
            continue
        ft = fieldtypes.field_type(block)
        if not ft.answerable or ft.kind == "calculated" or (ft.type == "hidden" and not allow_hidden):
            errors[key] = fieldtypes.FieldValueError(f"is a {ft.type} field and takes no answer")
            continue
        if fieldtypes.is_empty(value):
            continue
        try:
            clean[key] = fieldtypes.check_value(block, value)
        except fieldtypes.FieldValueError as e:
            errors[key] = e
    if require:
        for key, block in qs.items():
            if block.get("required") and fieldtypes.field_type(block).answerable and key not in clean \
                    and key not in errors:
                errors[key] = fieldtypes.FieldValueError("is required")
    for key, block in qs.items():
        if block["type"] == "calculated" and block.get("formula"):
            value = fieldtypes.calculate(block["formula"], clean)
            if value is not None:
                clean[key] = value
    return clean, errors


def raise_answer_errors(errors: dict[str, fieldtypes.FieldValueError], prefix: str = "answers") -> None:
    if not errors:
        return
    key, err = next(iter(errors.items()))
    details: dict[str, Any] = {"field": f"{prefix}.{key}"}
    if str(err) == "is not a field of this form":
        details.update(reason="UNKNOWN_FIELD_KEY", validKeys=err.valid_values)
    else:
        details["reason"] = "REQUIRED" if str(err) == "is required" else "INVALID_ANSWER"
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
    (see :func:`check_answers`); display text is derived here."""
    snap = snapshot or snapshot_of(session, form)
    blocks = (snap.blocks if snap else form.blocks) or []
    clean, errors = check_answers(blocks, answers, require=False)
    raise_answer_errors(errors)
    if respondent_email is None:
        emails = [v for k, v in clean.items() if questions(blocks)[k]["type"] == "email"]
        respondent_email = emails[0] if emails else None
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


def retain_pdf(session: Session, form: Form, sub: Submission, now: int) -> None:
    """Keep a PDF of a completed submission when an active automation integration of the
    form asks for it (the only case ``submissions.pdf`` answers)."""
    wanted = session.exec(select(Integration).where(Integration.form_id == form.id, Integration.active.is_(True),
                                                    Integration.include_pdf.is_(True))).first()
    if wanted is None or sub.is_test:
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
    if not form.is_published:
        raise validation("The form is not published; publish it before collecting responses.",
                         field="formId", reason="FORM_NOT_PUBLISHED")
    snap = snapshot_of(ctx.session, form)
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


def translated_display(session: Session, form: Form, blocks: list[dict[str, Any]], answers: dict[str, Any],
                       language: str) -> dict[str, Any]:
    """Display text with option labels replaced by their translation where one exists
    (entries keyed ``field.<key>.option.<optionKey>``)."""
    entries = {e.key: (e.translations or {}).get(language)
               for e in session.exec(select(TranslationEntry).where(TranslationEntry.form_id == form.id))}
    translated: list[dict[str, Any]] = []
    for b in blocks:
        if not fieldtypes.is_question(b) or not b.get("options"):
            translated.append(b)
            continue
        opts = [{**o, "label": entries.get(f"field.{b['key']}.option.{o['key']}") or o["label"]}
                for o in b["options"]]
        translated.append({**b, "options": opts})
    return display_of(translated, answers)


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
    stmt = select(Submission).where(Submission.form_id == form.id, Submission.is_test.is_(False))
    if not drafts:
        stmt = stmt.where(Submission.is_completed.is_(True))
    rows, nxt = keyset_page(ctx.session, stmt, [Submission.created_at, Submission.id],
                            lambda s: (s.created_at, s.id), p.limit, p.cursor)
    snaps: dict[str | None, list[dict[str, Any]]] = {}
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
            item.translation = Translation(language=p.translationLanguage, display=translated_display(
                ctx.session, form, snaps[s.snapshot_id], s.answers or {}, p.translationLanguage))
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
    qs = questions(blocks)
    raw = {k: fieldtypes.sample_value(b) for k, b in qs.items() if fieldtypes.field_type(b).answerable}
    return {k: v for k, v in raw.items() if v is not None}


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
        raise not_found("Submission", field="submissionId")
    if not sub.is_completed:
        raise not_found("Submission PDF", field="submissionId", reason="SUBMISSION_NOT_COMPLETED")
    if sub.pdf_file_id is None:
        raise ApiError("NOT_FOUND", "No PDF is retained for this submission: only forms with an automation "
                       "integration that includes the PDF keep one.", field="submissionId", reason="PDF_NOT_RETAINED")
    stored = ctx.session.get(StoredFile, sub.pdf_file_id)
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
