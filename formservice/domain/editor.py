"""The form editor of the agent endpoint: it reads and edits a form's DRAFT (``Form.blocks``
and the logic rules in ``Form.logic``), never the published snapshot. Every write goes
through :func:`forms.edit_blocks`, which bumps ``draft_rev``, so the next ``forms.publish``
snapshots the change; until then ``fields.list`` and requests keep the published version.

Elements are the draft's top-level blocks: questions (any type of
:data:`fieldtypes.FIELD_TYPES`) and content blocks (heading, paragraph, divider, image,
embed). An element is addressed by its id, or a question by its key. Every write stores
the draft with every question keyed (:func:`fieldtypes.assign_keys`), so the keys logic
rules name never move; a key a snapshot published is frozen and cannot be changed.

A logic rule is ``{id, when: {field, op, value}, then: {action, target}}``: when the
answer to question ``field`` satisfies ``op`` against ``value``, ``show`` or ``hide``
the element ``target``, or ``jump`` forward to it (skipping what lies between). An
element some ``show`` rule targets starts hidden.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import Field

from ..errors import ApiError, conflict, validation
from ..ids import new_id
from ..tables import Form
from . import fieldtypes
from .agentops import agent_method
from .base import Ctx, Params, Result
from .forms import (
    FormDetail,
    FormIdParams,
    Question,
    detail,
    edit_blocks,
    live_form,
    snapshot_of,
    with_block_ids,
)
from .submissions import check_answers, raise_answer_errors

MAX_ELEMENTS = 300
MAX_RULES = 100
MAX_CHOICES = 200
QUESTION_TYPES = tuple(fieldtypes.FIELD_TYPES)
CONTENT_TYPES = ("heading", "paragraph", "divider", "image", "list", "table", "row")
MEMBER_EXCLUDED = ("group", "documents", "decision")  # a group holds plain questions only
TEXT_TYPES = ("text", "textarea", "email", "phone", "url", "hidden")
NUMERIC_TYPES = ("number", "rating", "scale", "calculated")
ORDERED_TYPES = ("date", "time")
OPS_BY_KIND: dict[str, tuple[str, ...]] = {
    "text": ("equals", "notEquals", "contains"),
    "numeric": ("equals", "notEquals", "gt", "lt"),
    "ordered": ("equals", "notEquals", "gt", "lt"),
    "choice": ("equals", "notEquals"),
    "switch": ("equals", "notEquals"),
    "multi": ("contains",),
}
STYLES = ("bold", "italic", "underline", "strike", "code", "link", "plain")

Key = Annotated[str, Field(pattern=fieldtypes.KEY_RE.pattern)]
Title = Annotated[str, Field(min_length=1, max_length=1000)]
Description = Annotated[str, Field(max_length=2000)]
Url = Annotated[str, Field(min_length=1, max_length=2048)]
RuleId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
Cell = Annotated[str, Field(max_length=1000)]
Items = Annotated[list[Cell], Field(min_length=1, max_length=100)]
TableCells = Annotated[list[Annotated[list[Cell], Field(min_length=1, max_length=20)]],
                       Field(min_length=1, max_length=100)]


# -- params ------------------------------------------------------------------------------


class Choice(Params):
    """An option (or a matrix row or column); ``key`` is derived from the label when omitted."""

    key: Key | None = None
    label: Annotated[str, Field(min_length=1, max_length=500)]


Choices = Annotated[list[Choice], Field(min_length=1, max_length=MAX_CHOICES)]


class DocumentName(Params):
    name: Annotated[str, Field(min_length=1, max_length=255)]


class QuestionSpec(Params):
    """A question's attributes. Which ones apply depends on ``type``: options for select,
    radio, picture-choice, checkbox and ranking; rows and columns for matrix; maxStars for
    rating; min and max for scale; formula for calculated; documents for documents."""

    type: Literal[QUESTION_TYPES]  # type: ignore[valid-type]
    title: Title
    key: Key | None = None
    required: bool | None = None
    description: Description | None = None
    options: Choices | None = None
    rows: Choices | None = None
    columns: Choices | None = None
    formula: Annotated[str, Field(min_length=1, max_length=fieldtypes.MAX_FORMULA)] | None = None
    maxStars: Annotated[int, Field(ge=1, le=10)] | None = None
    min: Annotated[int, Field(ge=-1000, le=1000)] | None = None
    max: Annotated[int, Field(ge=-1000, le=1000)] | None = None
    documents: Annotated[list[DocumentName], Field(max_length=20)] | None = None


class FormRef(Params):
    formId: str


class Placement(Params):
    """Where a new element goes: at ``index`` (0 = first), or right after the element
    ``afterElementId``; at the end when neither is sent."""

    index: Annotated[int, Field(ge=0)] | None = None
    afterElementId: str | None = None


class InsertQuestionParams(Placement, QuestionSpec, FormRef):
    members: Annotated[list[QuestionSpec], Field(min_length=1, max_length=50)] | None = None
    repeating: bool | None = None


class InsertDocumentsParams(Placement, FormRef):
    title: Title
    key: Key | None = None
    description: Description | None = None
    documents: Annotated[list[DocumentName], Field(max_length=20)] = []


class DecisionLabels(Params):
    approve: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    changes: Annotated[str, Field(min_length=1, max_length=500)] | None = None
    decline: Annotated[str, Field(min_length=1, max_length=500)] | None = None


class InsertDecisionParams(Placement, FormRef):
    title: Title = "Your decision"
    required: bool = True
    description: Description | None = None
    labels: DecisionLabels | None = None


class InsertEmbeddedParams(Placement, FormRef):
    url: Url
    title: Annotated[str, Field(max_length=1000)] | None = None
    height: Annotated[int, Field(ge=50, le=2000)] | None = None


class InsertContentParams(Placement, FormRef):
    type: Literal[CONTENT_TYPES]  # type: ignore[valid-type]
    title: Title | None = None
    url: Url | None = None
    alt: Annotated[str, Field(max_length=500)] | None = None
    items: Items | None = None
    ordered: bool | None = None
    cells: TableCells | None = None


class UpdateElementParams(Placement, FormRef):
    """An element's new attributes, and where it moves to (``index`` or ``afterElementId``,
    counted without the element itself)."""

    elementId: str
    title: Title | None = None
    key: Key | None = None
    required: bool | None = None
    description: Description | None = None
    options: Choices | None = None
    rows: Choices | None = None
    columns: Choices | None = None
    formula: Annotated[str, Field(min_length=1, max_length=fieldtypes.MAX_FORMULA)] | None = None
    maxStars: Annotated[int, Field(ge=1, le=10)] | None = None
    min: Annotated[int, Field(ge=-1000, le=1000)] | None = None
    max: Annotated[int, Field(ge=-1000, le=1000)] | None = None
    documents: Annotated[list[DocumentName], Field(max_length=20)] | None = None
    members: Annotated[list[QuestionSpec], Field(min_length=1, max_length=50)] | None = None
    repeating: bool | None = None
    url: Url | None = None
    alt: Annotated[str, Field(max_length=500)] | None = None
    height: Annotated[int, Field(ge=50, le=2000)] | None = None
    items: Items | None = None
    ordered: bool | None = None
    cells: TableCells | None = None


class ElementParams(FormRef):
    elementId: str


class FormatTextParams(FormRef):
    elementId: str
    text: Annotated[str, Field(min_length=1, max_length=1000)]
    style: Literal[STYLES]  # type: ignore[valid-type]
    url: Url | None = None
    occurrence: Annotated[int, Field(ge=1)] = 1


class Condition(Params):
    field: str
    op: Literal["equals", "notEquals", "contains", "gt", "lt"]
    value: str | int | float | bool


class Action(Params):
    action: Literal["show", "hide", "jump"]
    target: str


class RuleSpec(Params):
    id: RuleId | None = None
    when: Condition
    then: Action


class InsertLogicParams(RuleSpec, FormRef):
    pass


class SetLogicParams(FormRef):
    rules: Annotated[list[RuleSpec], Field(max_length=MAX_RULES)]


class TestLogicParams(FormRef):
    answers: dict[str, Any] = {}
    rules: Annotated[list[RuleSpec], Field(max_length=MAX_RULES)] | None = None


# -- results -----------------------------------------------------------------------------


class Document(Result):
    formId: str
    name: str
    draftRev: int
    isPublished: bool
    snapshotId: str | None
    hasUnpublishedChanges: bool
    elements: list[dict[str, Any]]
    logic: list[dict[str, Any]]


class Edited(Result):
    formId: str
    draftRev: int
    element: dict[str, Any] | None = None
    index: int | None = None
    removedRules: list[str] | None = None
    rules: list[dict[str, Any]] | None = None
    marksCleared: bool | None = None


class LogicTest(Result):
    formId: str
    fired: list[str]
    visible: list[str]
    hidden: list[str]
    jumps: list[dict[str, Any]]


class PublishedForm(FormDetail):
    published: bool
    snapshotId: str | None
    hasUnpublishedChanges: bool


# -- the draft -------------------------------------------------------------------------


def _draft(form: Form) -> list[dict[str, Any]]:
    """A private copy of the draft with every question keyed (the keys a write stores)."""
    return copy.deepcopy(fieldtypes.assign_keys(form.blocks or []))


def _save(ctx: Ctx, form: Form, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Store ``blocks`` as the form's draft; returns them as stored (keys and ids set)."""
    if len(blocks) > MAX_ELEMENTS:
        raise validation(f"A form holds at most {MAX_ELEMENTS} elements; delete some first.",
                         field="formId", reason="TOO_MANY_ELEMENTS")
    return edit_blocks(form, fieldtypes.assign_keys(blocks), ctx.now)


def _logic(form: Form) -> list[dict[str, Any]]:
    return copy.deepcopy(form.logic or [])


def _save_logic(ctx: Ctx, form: Form, rules: list[dict[str, Any]]) -> None:
    form.logic = rules
    form.draft_rev += 1  # logic belongs to the draft: the next publish takes a new snapshot
    form.last_edited_at = ctx.now


def _find(blocks: list[dict[str, Any]], ref: str, param: str = "elementId") -> int:
    """The index of the element with id ``ref`` (or the question keyed ``ref``)."""
    for i, b in enumerate(blocks):
        if b.get("id") == ref:
            return i
    for i, b in enumerate(blocks):
        if fieldtypes.is_question(b) and b.get("key") == ref:
            return i
    raise ApiError("NOT_FOUND", f"{param}: no element {ref!r} in this form's draft; editor_getDocument lists the "
                   "element ids.", field=param, reason="ELEMENT_NOT_FOUND", validValues=[b["id"] for b in blocks])


def _place(blocks: list[dict[str, Any]], p: Placement) -> int:
    if p.index is not None and p.afterElementId is not None:
        raise validation("Send index or afterElementId, not both.", field="afterElementId",
                         reason="CONFLICTING_VALUES")
    if p.afterElementId is not None:
        return _find(blocks, p.afterElementId, "afterElementId") + 1
    if p.index is not None:
        if p.index > len(blocks):
            raise validation(f"index must be at most {len(blocks)} (the number of elements: the end).",
                             field="index", reason="OUT_OF_RANGE")
        return p.index
    return len(blocks)


def _frozen_ids(ctx: Ctx, form: Form) -> set[str]:
    """Ids of the questions a snapshot published: their keys never change."""
    snap = snapshot_of(ctx.session, form)
    return {b["id"] for b in (snap.blocks if snap else []) or [] if fieldtypes.is_question(b) and b.get("id")}


def _check_new_key(blocks: list[dict[str, Any]], key: str, except_id: str | None = None) -> None:
    for b in blocks:
        if fieldtypes.is_question(b) and b.get("key") == key and b.get("id") != except_id:
            raise conflict(f'The key "{key}" is already the key of question {b["id"]} ({b.get("title")!r}); '
                           "keys are unique in a form: pick another or omit key to derive one.", field="key",
                           reason="DUPLICATE_FIELD_KEY", elementId=b["id"])


# -- which attributes apply to which element ---------------------------------------------


def applicable(block_type: str) -> list[str]:
    """The attributes an element of ``block_type`` takes (besides ``type``)."""
    content = {"heading": ["title"], "paragraph": ["title"], "divider": [], "image": ["url", "alt"],
               "embed": ["url", "title", "height"], "list": ["items", "ordered"], "row": ["items"],
               "table": ["cells"]}
    if block_type in content:
        return content[block_type]
    ft = fieldtypes.FIELD_TYPES[block_type]
    out = ["title", "key", "description"]
    if ft.answerable and ft.kind != "calculated" and ft.type != "hidden":
        out.append("required")
    if ft.kind in ("choice", "multi") and block_type != "decision":
        out.append("options")
    extra = {"matrix": ["rows", "columns"], "rating": ["maxStars"], "scale": ["min", "max"],
             "calculated": ["formula"], "group": ["members", "repeating"], "documents": ["documents"]}
    return out + extra.get(block_type, [])


def _check_applicable(block_type: str, sent: set[str], where: str = "") -> None:
    ok = applicable(block_type)
    for name in sorted(sent):
        if name not in ok:
            takes = ", ".join(ok) or "nothing"
            raise validation(f"{where}{name} does not apply to a {block_type} element; it takes: {takes}.",
                             field=f"{where}{name}", reason="NOT_APPLICABLE", validKeys=ok)


def _choices(items: list[dict[str, Any]], field: str) -> list[dict[str, str]]:
    """Choices with every key set: given keys must be unique, missing ones are derived."""
    given: list[str] = [c["key"] for c in items if c.get("key")]
    for i, c in enumerate(items):
        if c.get("key") and given.count(c["key"]) > 1:
            raise validation(f'{field}.{i}.key "{c["key"]}" is used twice; keys are unique within {field}.',
                             field=f"{field}.{i}.key", reason="DUPLICATE_KEY")
    taken = set(given)
    out = []
    for c in items:
        key = c.get("key")
        if not key:
            key = fieldtypes.unique_key(fieldtypes.slug(c["label"]), taken)
            taken.add(key)
        out.append({"key": key, "label": c["label"]})
    return out


def _finish_question(block: dict[str, Any], where: str = "") -> dict[str, Any]:
    """Check a question block is complete for its type and normalise its choices."""
    t = block["type"]
    ft = fieldtypes.FIELD_TYPES[t]
    for name in ("options", "rows", "columns"):
        if block.get(name) is not None:
            block[name] = _choices(block[name], f"{where}{name}")
    needs = {"matrix": ("rows", "columns"), "calculated": ("formula",), "group": ("members",)}
    if ft.kind in ("choice", "multi") and t != "decision":
        needs[t] = ("options",)
    for name in needs.get(t, ()):
        if not block.get(name):
            raise validation(f"{where}{name} is required for a {t} question.", field=f"{where}{name}",
                             reason="REQUIRED")
    if t == "scale":
        lo, hi = int(block.get("min", 0)), int(block.get("max", 10))
        if lo >= hi:
            raise validation(f"{where}min ({lo}) must be less than max ({hi}).", field=f"{where}min",
                             reason="OUT_OF_RANGE")
    if t == "calculated":
        try:
            fieldtypes.validate_formula(block["formula"])
        except ValueError as exc:
            raise validation(f"{where}formula: {exc}.", field=f"{where}formula", reason="INVALID_FORMULA") from None
    if t == "group":
        block.setdefault("repeating", True)
    if t == "documents":
        block.setdefault("documents", [])
    return block


def _question_from(spec: dict[str, Any], where: str = "") -> dict[str, Any]:
    """A new question block from the sent attributes of a QuestionSpec."""
    sent = {k: v for k, v in spec.items() if v is not None}
    _check_applicable(sent["type"], set(sent) - {"type"}, where)
    return _finish_question(sent, where)


def _members(specs: list[dict[str, Any]], old: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A group's member blocks. A member whose key matches an existing member keeps that
    member's id (so a published member key stays frozen)."""
    by_key = {m.get("key"): m for m in old or [] if m.get("key")}
    out = []
    for i, spec in enumerate(specs):
        where = f"members.{i}."
        if spec["type"] in MEMBER_EXCLUDED:
            raise validation(f"{where}type {spec['type']} cannot be inside a group.", field=f"{where}type",
                             reason="INVALID_VALUE",
                             validValues=[t for t in QUESTION_TYPES if t not in MEMBER_EXCLUDED])
        member = _question_from(spec, where)
        if member.get("key") in by_key:
            member["id"] = by_key[member["key"]]["id"]
        out.append(member)
    keys = [m["key"] for m in out if m.get("key")]
    for i, m in enumerate(out):
        if m.get("key") and keys.count(m["key"]) > 1:
            raise validation(f'members.{i}.key "{m["key"]}" is used twice in the group.', field=f"members.{i}.key",
                             reason="DUPLICATE_KEY")
    return with_block_ids(out)


def _insert(ctx: Ctx, form: Form, blocks: list[dict[str, Any]], block: dict[str, Any], at: int) -> Edited:
    block = with_block_ids([block])[0]
    blocks.insert(at, block)
    _save(ctx, form, blocks)
    stored = next(b for b in form.blocks or [] if b["id"] == block["id"])
    return Edited(formId=form.id, draftRev=form.draft_rev, element=stored, index=at)


# -- reads ---------------------------------------------------------------------------------


@agent_method("editor_getDocument")
def get_document(ctx: Ctx, p: FormRef) -> Document:
    """The form's draft: every element (with the key each question has or will get) and
    the logic rules."""
    form = live_form(ctx, p.formId)
    return Document(formId=form.id, name=form.name, draftRev=form.draft_rev, isPublished=form.is_published,
                    snapshotId=form.snapshot_id, hasUnpublishedChanges=form.snapshot_rev != form.draft_rev,
                    elements=_draft(form), logic=_logic(form))


@agent_method("form_get")
def form_get(ctx: Ctx, p: FormIdParams) -> PublishedForm:
    """A form as ``forms.get`` shows it, but with the questions of its last published
    version (none when it was never published)."""
    form = ctx.form(p.formId, trashed_ok=True)
    snap = snapshot_of(ctx.session, form)
    published = [Question(**fieldtypes.question_view(b)) for b in (snap.blocks if snap else []) or []
                 if fieldtypes.is_question(b)]
    base = detail(ctx, form).model_dump()
    base["questions"] = published
    return PublishedForm(**base, published=snap is not None, snapshotId=form.snapshot_id,
                         hasUnpublishedChanges=form.snapshot_rev != form.draft_rev)


# -- inserts -------------------------------------------------------------------------------


def _has_decision(blocks: list[dict[str, Any]]) -> None:
    for b in blocks:
        if b.get("type") == "decision" or (fieldtypes.is_question(b) and b.get("key") == "decision"):
            raise conflict(f"This form already has a question keyed decision ({b['id']}); a form holds one "
                           "decision question.", field="formId", reason="DECISION_EXISTS", elementId=b["id"])


@agent_method("editor_insertQuestion")
def insert_question(ctx: Ctx, p: InsertQuestionParams) -> Edited:
    """Insert a question of any field type into the draft."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    at = _place(blocks, p)
    block = p.model_dump(include=set(QuestionSpec.model_fields), exclude_none=True)
    group_only = {n for n in ("members", "repeating") if getattr(p, n) is not None}
    _check_applicable(p.type, set(block) - {"type"} | group_only)
    if p.type == "decision":
        if p.key not in (None, "decision"):
            raise validation('A decision question is keyed "decision" (the request outcome reads it); omit key.',
                             field="key", reason="INVALID_VALUE", validValues=["decision"])
        _has_decision(blocks)
    if p.key is not None:
        _check_new_key(blocks, p.key)
    if p.members is not None:
        block["members"] = _members([m.model_dump(exclude_none=True) for m in p.members])
    if p.repeating is not None:
        block["repeating"] = p.repeating
    return _insert(ctx, form, blocks, _finish_question(block), at)


@agent_method("editor_insertDocumentsBlock")
def insert_documents_block(ctx: Ctx, p: InsertDocumentsParams) -> Edited:
    """Insert a Documents block: files every recipient sees (names listed here; a request's
    own files are attached with request_create documents)."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    at = _place(blocks, p)
    if p.key is not None:
        _check_new_key(blocks, p.key)
    block = _question_from({"type": "documents", "title": p.title, "key": p.key, "description": p.description,
                            "documents": [d.model_dump() for d in p.documents]})
    return _insert(ctx, form, blocks, block, at)


@agent_method("editor_insertDecisionQuestion")
def insert_decision(ctx: Ctx, p: InsertDecisionParams) -> Edited:
    """Insert the decision question (key ``decision``: approve, changes, decline) whose
    answer becomes a request's outcome."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    at = _place(blocks, p)
    _has_decision(blocks)
    labels = p.labels.model_dump(exclude_none=True) if p.labels else {}
    options = [{"key": o["key"], "label": labels.get(o["key"], o["label"])} for o in fieldtypes.DECISION_OPTIONS]
    block = {"type": "decision", "key": "decision", "title": p.title, "required": p.required, "options": options}
    if p.description is not None:
        block["description"] = p.description
    return _insert(ctx, form, blocks, block, at)


def _http_url(url: str, field: str, *, data_image: bool = False) -> str:
    if url.startswith(("http://", "https://")) or (data_image and url.startswith("data:image/")):
        return url
    accepted = "an http(s) URL" + (" or a data:image URI" if data_image else "")
    raise validation(f"{field} must be {accepted}.", field=field, reason="INVALID_FORMAT")


@agent_method("editor_insertEmbedded")
def insert_embedded(ctx: Ctx, p: InsertEmbeddedParams) -> Edited:
    """Insert embedded content (a video, a map, a page) shown by its URL."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    at = _place(blocks, p)
    block: dict[str, Any] = {"type": "embed", "url": _http_url(p.url, "url")}
    if p.title is not None:
        block["title"] = p.title
    if p.height is not None:
        block["height"] = p.height
    return _insert(ctx, form, blocks, block, at)


@agent_method("editor_insertContent")
def insert_content(ctx: Ctx, p: InsertContentParams) -> Edited:
    """Insert a content block: a heading or paragraph (its text in ``title``), a divider,
    an image (``url``, ``alt``), a list (``items``, ``ordered``), a row of texts shown side
    by side (``items``) or a table (``cells``, a list of rows, the first one its header)."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    at = _place(blocks, p)
    sent = p.model_dump(include={"title", "url", "alt", "items", "ordered", "cells"}, exclude_none=True)
    _check_applicable(p.type, set(sent))
    if p.type in ("heading", "paragraph") and not p.title:
        raise validation(f"title (the {p.type}'s text) is required.", field="title", reason="REQUIRED")
    needs = {"list": "items", "row": "items", "table": "cells"}.get(p.type)
    if needs is not None and needs not in sent:
        raise validation(f"{needs} is required for a {p.type}.", field=needs, reason="REQUIRED")
    if p.type == "image":
        if p.url is None:
            raise validation("url is required for an image.", field="url", reason="REQUIRED")
        _http_url(p.url, "url", data_image=True)
    return _insert(ctx, form, blocks, {"type": p.type, **sent}, at)


# -- updates -------------------------------------------------------------------------------


CLEARABLE = ("description", "alt", "height")


@agent_method("editor_updateElement")
def update_element(ctx: Ctx, p: UpdateElementParams) -> Edited:
    """Change attributes of one element (its type stays: delete and insert to change it),
    or move it. Only sent attributes change; null clears description, alt or height."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    i = _find(blocks, p.elementId)
    block = blocks[i]
    moves = bool(p.model_fields_set & set(Placement.model_fields))
    sent = {k: getattr(p, k) for k in p.model_fields_set - {"formId", "elementId", *Placement.model_fields}}
    if not sent and not moves:
        raise validation("Send at least one attribute to change, or index or afterElementId to move it.",
                         reason="NOTHING_TO_UPDATE", validKeys=[*applicable(block["type"]), *Placement.model_fields])
    _check_applicable(block["type"], set(sent))
    for name, value in sent.items():
        if value is None and name not in CLEARABLE:
            raise validation(f"{name} cannot be null; send a value (null clears only {', '.join(CLEARABLE)}).",
                             field=name, reason="INVALID_TYPE")
    old_key = block.get("key")
    if "key" in sent and sent["key"] != old_key:
        if block["id"] in _frozen_ids(ctx, form):
            raise conflict(f'The key "{old_key}" was published and is frozen: requests and integrations address '
                           "it. Keep it, or delete the question and insert a new one.", field="key",
                           reason="KEY_FROZEN")
        if block["type"] == "decision":
            raise validation('A decision question keeps the key "decision".', field="key", reason="INVALID_VALUE",
                             validValues=["decision"])
        _check_new_key(blocks, sent["key"], except_id=block["id"])
    if "url" in sent:
        _http_url(sent["url"], "url", data_image=block["type"] == "image")
    for name, value in sent.items():
        if name == "members":
            block["members"] = _members([m.model_dump(exclude_none=True) for m in value], block.get("members"))
        elif name in ("options", "rows", "columns"):
            block[name] = [c.model_dump(exclude_none=True) for c in value]
        elif name == "documents":
            block[name] = [d.model_dump() for d in value]
        elif value is None:
            block.pop(name, None)
        else:
            block[name] = value
    marks_cleared = None
    if "title" in sent and block.get("marks"):
        block.pop("marks")  # offsets into the old text mean nothing in the new one
        marks_cleared = True
    if fieldtypes.is_question(block):
        _finish_question(block)
    rules = _logic(form)
    if moves:
        i = _move(blocks, i, p, rules)
    if old_key and block.get("key") != old_key:
        for r in rules:
            if r["when"]["field"] == old_key:
                r["when"]["field"] = block["key"]
        _save_logic(ctx, form, rules)
    saved = _save(ctx, form, blocks)
    out = Edited(formId=form.id, draftRev=form.draft_rev, element=saved[i], index=i)
    if marks_cleared:
        out.marksCleared = True
    return out


def _move(blocks: list[dict[str, Any]], i: int, p: Placement, rules: list[dict[str, Any]]) -> int:
    """Move ``blocks[i]`` to where ``p`` says; a move that would turn a jump rule backwards
    is refused. The element's new index."""
    block = blocks.pop(i)
    at = _place(blocks, p)
    blocks.insert(at, block)
    _check_rules([RuleSpec.model_validate(r) for r in rules], blocks, "logic")
    return at


@agent_method("editor_deleteElement")
def delete_element(ctx: Ctx, p: ElementParams) -> Edited:
    """Remove one element from the draft, with the logic rules that name it."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    i = _find(blocks, p.elementId)
    gone = blocks.pop(i)
    rules = _logic(form)
    key = gone.get("key") if fieldtypes.is_question(gone) else None
    kept = [r for r in rules if r["then"]["target"] != gone["id"] and (key is None or r["when"]["field"] != key)]
    removed = [r["id"] for r in rules if r not in kept]
    if removed:
        _save_logic(ctx, form, kept)
    _save(ctx, form, blocks)
    return Edited(formId=form.id, draftRev=form.draft_rev, element=gone, index=i, removedRules=removed)


@agent_method("editor_formatText")
def format_text(ctx: Ctx, p: FormatTextParams) -> Edited:
    """Style a piece of an element's text (bold, italic, underline, strike, code, or a
    link with ``url``); ``plain`` removes the styles over that piece."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    i = _find(blocks, p.elementId)
    block = blocks[i]
    source = block.get("title") or ""
    if not source:
        raise validation(f"Element {block['id']} ({block['type']}) has no text to format.", field="elementId",
                         reason="NO_TEXT")
    if p.style == "link":
        if p.url is None:
            raise validation("url is required for a link.", field="url", reason="REQUIRED")
        _http_url(p.url, "url")
    elif p.url is not None:
        raise validation(f"url applies to style link only, not {p.style}.", field="url", reason="NOT_APPLICABLE")
    start = -1
    for _ in range(p.occurrence):
        start = source.find(p.text, start + 1)
        if start < 0:
            raise validation(f"text {p.text!r} occurs fewer than {p.occurrence} time(s) in the element's text "
                             f"{source!r}.", field="text", reason="TEXT_NOT_FOUND")
    end = start + len(p.text)
    marks = [m for m in block.get("marks") or []
             if not (m["start"] < end and start < m["end"] and (p.style == "plain" or m["style"] == p.style))]
    if p.style != "plain":
        mark: dict[str, Any] = {"start": start, "end": end, "style": p.style}
        if p.url is not None:
            mark["url"] = p.url
        marks.append(mark)
    block["marks"] = sorted(marks, key=lambda m: (m["start"], m["end"], m["style"]))
    if not block["marks"]:
        block.pop("marks")
    saved = _save(ctx, form, blocks)
    return Edited(formId=form.id, draftRev=form.draft_rev, element=saved[i], index=i)


# -- logic -----------------------------------------------------------------------------------


def _kind(block: dict[str, Any]) -> str | None:
    t = block["type"]
    ft = fieldtypes.FIELD_TYPES[t]
    if t in TEXT_TYPES:
        return "text"
    if t in NUMERIC_TYPES:
        return "numeric"
    if t in ORDERED_TYPES:
        return "ordered"
    if t == "switch":
        return "switch"
    if ft.kind in ("choice", "multi"):
        return ft.kind
    return None


def _check_rule(rule: RuleSpec, blocks: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """The rule as stored (target resolved to an element id), or a VALIDATION_ERROR
    naming the part of it that is wrong."""
    qs = {b["key"]: (i, b) for i, b in enumerate(blocks) if fieldtypes.is_question(b) and b.get("key")}
    conditionable = sorted(k for k, (_, b) in qs.items() if _kind(b))
    w = rule.when
    if w.field not in qs:
        raise validation(f"{where}when.field {w.field!r} is not a question key of this form's draft.",
                         field=f"{where}when.field", reason="UNKNOWN_FIELD_KEY", validKeys=conditionable)
    src_index, src = qs[w.field]
    kind = _kind(src)
    if kind is None:
        raise validation(f"{where}when.field {w.field!r} is a {src['type']} question, which no condition can test.",
                         field=f"{where}when.field", reason="FIELD_NOT_CONDITIONABLE", validKeys=conditionable)
    ops = OPS_BY_KIND[kind]
    if w.op not in ops:
        raise validation(f"{where}when.op {w.op} does not apply to a {src['type']} question; use one of: "
                         f"{', '.join(ops)}.", field=f"{where}when.op", reason="INVALID_VALUE", validValues=list(ops))
    try:
        if kind == "multi":
            fieldtypes.check_value(src, [w.value])  # contains: one of the option keys
        elif kind == "numeric":
            if isinstance(w.value, bool) or not isinstance(w.value, int | float):
                raise fieldtypes.FieldValueError("is compared with a number", expected="number")
        elif kind == "text":
            if not isinstance(w.value, str):
                raise fieldtypes.FieldValueError("is compared with text", expected="string")
        else:
            fieldtypes.check_value(src, w.value)
    except fieldtypes.FieldValueError as err:
        details: dict[str, Any] = {"field": f"{where}when.value", "reason": "INVALID_VALUE"}
        if err.valid_values is not None:
            details["validValues"] = err.valid_values
        if err.expected:
            details["expectedType"] = err.expected
        raise validation(f"{where}when.value: the {src['type']} question {w.field} {err}.", **details) from None
    t = rule.then
    try:
        target_index = _find(blocks, t.target, f"{where}then.target")
    except ApiError as err:
        raise validation(f"{where}then.target {t.target!r} is no element of this form's draft (an element id, "
                         "or a question key).", field=f"{where}then.target", reason="UNKNOWN_ELEMENT",
                         validValues=err.details.get("validValues")) from None
    if target_index == src_index:
        raise validation(f"{where}then.target is the question the rule tests; target another element.",
                         field=f"{where}then.target", reason="SELF_TARGET")
    if t.action == "jump" and target_index < src_index:
        raise validation(f"{where}then.target: a jump goes forward, to an element after {w.field}.",
                         field=f"{where}then.target", reason="INVALID_JUMP")
    return {"id": rule.id or new_id("rule", 10), "when": {"field": w.field, "op": w.op, "value": w.value},
            "then": {"action": t.action, "target": blocks[target_index]["id"]}}


def _check_rules(rules: list[RuleSpec], blocks: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    ids = [r.id for r in rules if r.id]
    out = []
    for i, rule in enumerate(rules):
        if rule.id and ids.count(rule.id) > 1:
            raise validation(f"{prefix}.{i}.id {rule.id!r} is used twice; rule ids are unique.",
                             field=f"{prefix}.{i}.id", reason="DUPLICATE_KEY")
        out.append(_check_rule(rule, blocks, f"{prefix}.{i}."))
    return out


@agent_method("editor_insertLogic")
def insert_logic(ctx: Ctx, p: InsertLogicParams) -> Edited:
    """Add one logic rule after the form's others."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    rules = _logic(form)
    if len(rules) >= MAX_RULES:
        raise validation(f"A form holds at most {MAX_RULES} logic rules.", field="formId", reason="TOO_MANY_RULES")
    if p.id is not None and any(r["id"] == p.id for r in rules):
        raise conflict(f"A rule with id {p.id!r} exists; pick another id, or replace all rules with "
                       "editor_setLogic.", field="id", reason="DUPLICATE_RULE_ID")
    rule = _check_rule(RuleSpec(id=p.id, when=p.when, then=p.then), blocks, "")
    _save(ctx, form, blocks)  # stores the keys the rule names
    _save_logic(ctx, form, [*rules, rule])
    return Edited(formId=form.id, draftRev=form.draft_rev, rules=form.logic)


@agent_method("editor_setLogic")
def set_logic(ctx: Ctx, p: SetLogicParams) -> Edited:
    """Replace every logic rule of the form (an empty list removes them all)."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    rules = _check_rules(p.rules, blocks, "rules")
    _save(ctx, form, blocks)
    _save_logic(ctx, form, rules)
    return Edited(formId=form.id, draftRev=form.draft_rev, rules=form.logic)


def holds(when: dict[str, Any], answers: dict[str, Any]) -> bool:
    """Whether a rule's condition is met by ``answers``; an unanswered question meets only
    ``notEquals``."""
    op, value = when["op"], when["value"]
    if fieldtypes.is_empty(answers.get(when["field"])):
        return op == "notEquals"
    got = answers[when["field"]]
    if op == "equals":
        return bool(got == value)
    if op == "notEquals":
        return bool(got != value)
    if op == "contains":
        if isinstance(got, list):
            return value in got
        return isinstance(got, str) and isinstance(value, str) and value.lower() in got.lower()
    comparable = (isinstance(got, str) and isinstance(value, str)) or (
        isinstance(got, int | float) and isinstance(value, int | float) and not isinstance(got, bool))
    if not comparable:
        return False
    return bool(got > value) if op == "gt" else bool(got < value)


def evaluate(form_id: str, blocks: list[dict[str, Any]], rules: list[dict[str, Any]],
             answers: dict[str, Any]) -> LogicTest:
    """Apply ``rules`` in order to ``answers``: which rules fire, which elements show."""
    order = [b["id"] for b in blocks]
    index = {bid: i for i, bid in enumerate(order)}
    by_key = {b["key"]: b["id"] for b in blocks if fieldtypes.is_question(b) and b.get("key")}
    hidden = {r["then"]["target"] for r in rules if r["then"]["action"] == "show"}
    fired, jumps = [], []
    for r in rules:
        if r["when"]["field"] not in by_key or r["then"]["target"] not in index:
            continue  # a rule left naming an element the draft no longer has never fires
        if not holds(r["when"], answers):
            continue
        fired.append(r["id"])
        action, target = r["then"]["action"], r["then"]["target"]
        if action == "show":
            hidden.discard(target)
        elif action == "hide":
            hidden.add(target)
        else:
            start, end = index[by_key[r["when"]["field"]]], index[target]
            skipped = order[start + 1:end]
            hidden.update(skipped)
            jumps.append({"ruleId": r["id"], "from": order[start], "to": target, "skipped": skipped})
    return LogicTest(formId=form_id, fired=fired, visible=[b for b in order if b not in hidden],
                     hidden=[b for b in order if b in hidden], jumps=jumps)


@agent_method("editor_testLogic")
def logic_test(ctx: Ctx, p: TestLogicParams) -> LogicTest:
    """Evaluate the form's logic rules (or the ``rules`` sent, without saving them)
    against sample ``answers``: the rules that fire and the elements shown or hidden."""
    form = live_form(ctx, p.formId)
    blocks = _draft(form)
    rules = _logic(form) if p.rules is None else _check_rules(p.rules, blocks, "rules")
    clean, errors = check_answers(blocks, p.answers, require=False)
    raise_answer_errors(errors)
    return evaluate(form.id, blocks, rules, clean)

