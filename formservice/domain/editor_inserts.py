"""The agent endpoint's per-type insert tools (``editor_insertTextQuestion``, ...,
``editor_insertTable``): one precise input schema per kind of element, each a thin layer
over the one insert of :mod:`.editor` (``insert_question`` for questions,
``insert_content`` for content), so the rules of a new element live in one place.

Each tool's params name only what its element takes; :func:`spec_for` turns them into the
arguments of the one insert. The schemas are this service's own: the hosted service's
documentation names these tools but not their inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from . import fieldtypes
from .agentops import AGENT_METHODS
from .base import Ctx, Method
from .editor import (
    Choices,
    Description,
    Edited,
    FormRef,
    InsertContentParams,
    InsertQuestionParams,
    Items,
    Key,
    Placement,
    QuestionSpec,
    TableCells,
    Title,
    Url,
    insert_content,
    insert_question,
)

# -- params, by what an element takes ------------------------------------------------------


class _Element(Placement, FormRef):
    """Where the element goes (``index`` or ``afterElementId``; the end by default)."""


class _Question(_Element):
    title: Title
    key: Key | None = Field(None, description="The field key answers are stored under; derived from the title "
                                              "when omitted. Frozen once published.")
    description: Description | None = None
    required: bool | None = None


class TextQuestion(_Question):
    multiline: bool = Field(False, description="A long answer (several lines) instead of one line.")


class ContactQuestion(_Question):
    contactType: Literal["email", "phone", "url"] = Field(
        "email", description="What the recipient gives: an email address, a phone number or a web address.")


class ChoiceQuestion(_Question):
    options: Choices = Field(description="The choices: {label, key?}; a key is derived from its label when "
                                         "omitted. Answers and prefill use the key.")


class RatingQuestion(_Question):
    maxStars: Annotated[int, Field(ge=1, le=10)] = 5


class LinearScaleQuestion(_Question):
    min: Annotated[int, Field(ge=-1000, le=1000)] = 0
    max: Annotated[int, Field(ge=-1000, le=1000)] = 10


class MatrixQuestion(_Question):
    rows: Choices = Field(description="The statements rated, {label, key?}; an answer maps row key to column key.")
    columns: Choices = Field(description="The scale every row is answered on, {label, key?}.")


class HiddenField(_Element):
    title: Title
    key: Key | None = None
    description: Description | None = None


class CalculatedField(HiddenField):
    formula: Annotated[str, Field(min_length=1, max_length=fieldtypes.MAX_FORMULA)] = Field(
        description="Arithmetic over number-like field keys: + - * / ( ), numbers, min(), max(), round().")


class Variable(_Element):
    key: Key = Field(description="The variable's name: its answers key.")
    value: Annotated[str, Field(min_length=1, max_length=fieldtypes.MAX_FORMULA)] = Field(
        description="A number, or a formula over number-like field keys, kept as the variable's value.")
    title: Title | None = None


class RepeatingGroup(_Question):
    members: Annotated[list[QuestionSpec], Field(min_length=1, max_length=50)] = Field(
        description="The questions of one instance (no groups, documents or decision inside).")


class TextContent(_Element):
    text: Title


class ImageContent(_Element):
    url: Url = Field(description="An http(s) URL or a data:image URI.")
    alt: Annotated[str, Field(max_length=500)] | None = None


class ListContent(_Element):
    items: Items
    ordered: bool = False


class RowContent(_Element):
    items: Items = Field(description="Short texts shown side by side.")


class TableContent(_Element):
    cells: TableCells = Field(description="The table's rows, each a list of texts; the first row is its header.")


class DividerContent(_Element):
    pass


# -- the tools -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TypedInsert:
    """One per-type insert tool: its name, its params and the element it makes."""

    tool: str
    params: type[_Element]
    element: str  # the element it makes: a field or content type (a custom ``spec`` may choose among several)
    description: str
    spec: Callable[[Any], dict[str, Any]] | None = None  # how its params become the insert's; by default as named


def _text(p: TextQuestion) -> dict[str, Any]:
    return {"type": "textarea" if p.multiline else "text"}


def _contact(p: ContactQuestion) -> dict[str, Any]:
    return {"type": p.contactType}


def _variable(p: Variable) -> dict[str, Any]:
    return {"type": "calculated", "title": p.title or p.key, "key": p.key, "formula": p.value}


def _group(p: RepeatingGroup) -> dict[str, Any]:
    return {"type": "group", "repeating": True}


def _text_content(p: TextContent) -> dict[str, Any]:
    return {"title": p.text}


def _q(tool: str, params: type[_Element], element: str, description: str,
       spec: Callable[[Any], dict[str, Any]] | None = None) -> TypedInsert:
    return TypedInsert(f"editor_insert{tool}", params, element, description, spec)


INSERTS: list[TypedInsert] = [
    _q("TextQuestion", TextQuestion, "text or textarea", "Insert a text question: one line, or several with multiline.", _text),
    _q("ContactQuestion", ContactQuestion, "email, phone or url", "Insert a contact question: an email address, phone number "
       "or web address (contactType).", _contact),
    _q("NumberQuestion", _Question, "number", "Insert a number question."),
    _q("DateQuestion", _Question, "date", "Insert a date question (answers YYYY-MM-DD)."),
    _q("TimeQuestion", _Question, "time", "Insert a time question (answers HH:MM)."),
    _q("RadioQuestion", ChoiceQuestion, "radio", "Insert a single-choice question shown as radio buttons."),
    _q("CheckboxQuestion", ChoiceQuestion, "checkbox", "Insert a multiple-choice question (checkboxes)."),
    _q("SelectQuestion", ChoiceQuestion, "select", "Insert a single-choice question shown as a dropdown."),
    _q("PictureChoiceQuestion", ChoiceQuestion, "picture-choice", "Insert a single-choice question of pictures."),
    _q("SwitchQuestion", _Question, "switch", "Insert a yes/no switch (answers true or false)."),
    _q("RatingQuestion", RatingQuestion, "rating", "Insert a star rating (1 to maxStars)."),
    _q("LinearScaleQuestion", LinearScaleQuestion, "scale", "Insert a linear scale from min to max."),
    _q("RankingQuestion", ChoiceQuestion, "ranking", "Insert a ranking question: the recipient orders the options."),
    _q("MatrixQuestion", MatrixQuestion, "matrix", "Insert a matrix: every row answered on the same columns."),
    _q("FileQuestion", _Question, "file", "Insert a file upload question."),
    _q("SignatureQuestion", _Question, "signature", "Insert a signature question."),
    _q("PaymentQuestion", _Question, "payment", "Insert a payment question (a payment provider must be connected)."),
    _q("ScheduleAppointmentQuestion", _Question, "schedule-appointment", "Insert an appointment booking question."),
    _q("HiddenField", HiddenField, "hidden", "Insert a hidden field: its value comes from a request's context."),
    _q("CalculatedField", CalculatedField, "calculated", "Insert a calculated field: a formula over other answers."),
    _q("Variable", Variable, "calculated", "Insert a variable: a named value (a number or a formula) kept with "
       "the answers.", _variable),
    _q("RepeatingGroup", RepeatingGroup, "group", "Insert a repeating group: its member questions are answered "
       "once per instance.", _group),
    _q("Header", TextContent, "heading", "Insert a heading.", _text_content),
    _q("Paragraph", TextContent, "paragraph", "Insert a paragraph of text.", _text_content),
    _q("Image", ImageContent, "image", "Insert an image shown by its URL."),
    _q("List", ListContent, "list", "Insert a bulleted or numbered list."),
    _q("Table", TableContent, "table", "Insert a table of text (the first row is its header)."),
    _q("Row", RowContent, "row", "Insert a row of short texts shown side by side."),
    _q("PageDivider", DividerContent, "divider", "Insert a page divider: what follows starts a new page."),
]
BY_TOOL: dict[str, TypedInsert] = {i.tool: i for i in INSERTS}
_PLACEMENT = {"formId", "index", "afterElementId"}


def spec_for(ins: TypedInsert, p: _Element) -> dict[str, Any]:
    """The arguments of the one insert that ``p`` (the params of tool ``ins``) stands for."""
    sent = p.model_dump(exclude_none=True)
    if ins.spec is None:
        return {"type": ins.element, **sent}
    kept = _PLACEMENT | {"title", "key", "description", "required", "members"}
    return {"type": ins.element, **{k: v for k, v in sent.items() if k in kept}, **ins.spec(p)}


def _runner(ins: TypedInsert) -> Callable[[Ctx, Any], Edited]:
    def run(ctx: Ctx, p: Any) -> Edited:
        body = spec_for(ins, p)
        if body["type"] in fieldtypes.FIELD_TYPES:
            return insert_question(ctx, InsertQuestionParams.model_validate(body))
        return insert_content(ctx, InsertContentParams.model_validate(body))

    return run


for _ins in INSERTS:
    AGENT_METHODS[_ins.tool] = Method(_ins.tool, _runner(_ins), _ins.params, Edited, _ins.description)

