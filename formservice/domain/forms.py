"""Forms: create, rename, move, decorate, publish, unpublish, trash and restore.

Publishing freezes the draft's field keys into a snapshot; ``fields.list`` and requests
read the snapshot, never the draft.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from sqlmodel import Session, col, select

from ..errors import ApiError, forbidden, not_found, validation
from ..ids import new_id
from ..tables import Folder, Form, ShareLink, Snapshot
from . import fieldtypes
from .base import NOT_NULL, Ctx, Page, Params, Result, decode_cursor, keyset_page, method

ICON_NAMES = (
    "QuestionMarkIcon", "ListBulletsIcon", "ChartBarIcon", "ClockCountdownIcon", "HeartIcon", "LightbulbIcon",
    "CheckCircleIcon", "MagnifyingGlassIcon", "TrendUpIcon", "EnvelopeIcon", "PhoneIcon", "CalendarIcon",
    "LinkIcon", "UsersIcon",
)
HEX_COLOR = re.compile(r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$")
Name = Annotated[str, Field(min_length=1, max_length=255)]
Emoji = Annotated[str, Field(max_length=10)]
Limit = Annotated[int, Field(ge=1, le=100)]


def _image_url(url: str) -> str:
    if not (url.startswith(("http://", "https://")) or url.startswith("data:image/")):
        raise ValueError("url must be an http(s) URL or a data:image URI")
    return url


# -- wire shapes -----------------------------------------------------------------


class CoverColor(Params):
    type: Literal["color"]
    color: str

    @field_validator("color")
    @classmethod
    def _hex(cls, v: str) -> str:
        if not HEX_COLOR.match(v):
            raise ValueError("color must be a hex colour such as #1f6feb")
        return v


class CoverImage(Params):
    type: Literal["image"]
    url: str
    offsetY: Annotated[int | float, Field(ge=0, le=100)] = 50

    _url = field_validator("url")(classmethod(lambda cls, v: _image_url(v)))


class CoverNone(Params):
    type: Literal["none"]


class LogoIcon(Params):
    type: Literal["icon"]
    name: Literal[ICON_NAMES]  # type: ignore[valid-type]


class LogoImage(Params):
    type: Literal["image"]
    url: str

    _url = field_validator("url")(classmethod(lambda cls, v: _image_url(v)))


class LogoNone(Params):
    type: Literal["none"]


Cover = Annotated[CoverColor | CoverImage | CoverNone, Field(discriminator="type")]
Logo = Annotated[LogoIcon | LogoImage | LogoNone, Field(discriminator="type")]


class FormItem(Result):
    id: str
    name: str
    folderId: str | None
    workspaceId: str
    isPublished: bool
    publishedAt: int | None
    unpublishedAt: int | None
    createdAt: int
    lastEditedAt: int
    emoji: str | None


class Question(Result):
    id: str
    type: str
    inputType: str
    title: str
    metadata: dict[str, Any] | None


class FormDetail(FormItem):
    questions: list[Question]
    hasContent: bool
    cover: dict[str, Any] | None
    logo: dict[str, Any] | None
    isDeleted: bool
    trashedAt: int | None
    previewUrl: str


def item(form: Form) -> FormItem:
    return FormItem(
        id=form.id, name=form.name, folderId=form.folder_id, workspaceId=form.workspace_id,
        isPublished=form.is_published, publishedAt=form.published_at, unpublishedAt=form.unpublished_at,
        createdAt=form.created_at, lastEditedAt=form.last_edited_at, emoji=form.emoji,
    )


def preview_url(ctx: Ctx, form: Form) -> str:
    return f"{ctx.base_url}/preview/{form.id}"


def detail(ctx: Ctx, form: Form) -> FormDetail:
    blocks = form.blocks or []
    questions = [Question(**fieldtypes.question_view(b)) for b in blocks if fieldtypes.is_question(b)]
    return FormDetail(
        **item(form).model_dump(), questions=questions, hasContent=bool(blocks), cover=form.cover,
        logo=form.logo, isDeleted=form.trashed_at is not None, trashedAt=form.trashed_at,
        previewUrl=preview_url(ctx, form),
    )


# -- shared operations (also used by the seed, the sandbox and the agent endpoint) ---


def with_block_ids(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for b in blocks:
        b = dict(b)
        b.setdefault("id", new_id("blk", 12))
        if b.get("members"):
            b["members"] = with_block_ids(b["members"])
        out.append(b)
    return out


def new_form(session: Session, workspace_id: str, name: str, folder_id: str | None, now: int,
             blocks: list[dict[str, Any]] | None = None, emoji: str | None = None,
             form_id: str | None = None) -> Form:
    form = Form(id=form_id or new_id("form"), workspace_id=workspace_id, folder_id=folder_id, name=name, emoji=emoji,
                blocks=with_block_ids(blocks or []), created_at=now, last_edited_at=now)
    session.add(form)
    session.flush()
    return form


def edit_blocks(form: Form, blocks: list[dict[str, Any]], now: int) -> list[dict[str, Any]]:
    """Replace the draft content (editor tools) and return it as stored; the published
    snapshot is untouched."""
    stored = with_block_ids(blocks)
    form.blocks = stored
    form.draft_rev += 1
    form.last_edited_at = now
    return stored


def publish_form(session: Session, form: Form, now: int) -> dict[str, Any]:
    """Publish per the lifecycle table; returns the flags of the result. A draft that
    changed since the last snapshot gets a new snapshot with its keys frozen; an
    unchanged one is republished from its last snapshot (or reported already published)."""
    blocks = form.blocks or []
    if not blocks:
        raise validation("This form has no content; add a question or a content block before publishing.",
                         field="formId", reason="FORM_EMPTY")
    flags: dict[str, Any] = {}
    unchanged = form.snapshot_id is not None and form.snapshot_rev == form.draft_rev
    if form.is_published and unchanged:
        flags["alreadyPublished"] = True
        return flags
    if not unchanged:
        last = snapshot_of(session, form)
        frozen = _published_keys(last.blocks or []) if last else {}
        keyed = fieldtypes.assign_keys(_with_frozen_keys(blocks, frozen), frozen_ids=frozen)
        form.blocks = keyed  # keys are frozen into the draft too, so they never change again
        snap = Snapshot(id=new_id("snap"), form_id=form.id, created_at=now, blocks=keyed,
                        fields=[fieldtypes.descriptor(b) for b in keyed if fieldtypes.is_question(b)])
        session.add(snap)
        form.snapshot_id = snap.id
        form.snapshot_rev = form.draft_rev
    if not any(fieldtypes.is_question(b) for b in form.blocks or []):
        flags["warning"] = "Published with content blocks but no questions: this form collects no answers."
    form.is_published = True
    form.published_at = now
    return flags


def _published_keys(blocks: list[dict[str, Any]], out: dict[str, str] | None = None) -> dict[str, str]:
    """Block id -> key of every question (group members included) in ``blocks``."""
    out = {} if out is None else out
    for b in blocks:
        if fieldtypes.is_question(b) and b.get("id") and b.get("key"):
            out[b["id"]] = b["key"]
        _published_keys(b.get("members") or [], out)
    return out


def _with_frozen_keys(blocks: list[dict[str, Any]], frozen: dict[str, str]) -> list[dict[str, Any]]:
    """The draft with every question an earlier snapshot published carrying that
    snapshot's key: an edit that dropped or changed a key cannot move a published field."""
    out = []
    for b in blocks:
        b = dict(b)
        if b.get("id") in frozen and fieldtypes.is_question(b):
            b["key"] = frozen[b["id"]]
        if b.get("members"):
            b["members"] = _with_frozen_keys(b["members"], frozen)
        out.append(b)
    return out


def snapshot_of(session: Session, form: Form) -> Snapshot | None:
    return session.get(Snapshot, form.snapshot_id) if form.snapshot_id else None


def folder_in(ctx: Ctx, folder_id: str, param: str = "folderId") -> Folder:
    folder = ctx.session.get(Folder, folder_id)
    if folder is None:
        raise not_found("Folder", field=param)
    if folder.workspace_id != ctx.workspace.id:
        raise forbidden(f"Folder {folder_id} belongs to another workspace.", field=param,
                        reason="FOREIGN_WORKSPACE")
    return folder


def live_form(ctx: Ctx, form_id: str) -> Form:
    """The caller's form ``form_id`` when it is not in the trash (404 with reason
    FORM_TRASHED when it is, so the caller knows to restore it rather than look for it)."""
    form = ctx.form(form_id, trashed_ok=True)
    if form.trashed_at is not None:
        raise ApiError("NOT_FOUND", f"Form {form_id} is in the trash; restore it with forms.restore first.",
                       field="formId", reason="FORM_TRASHED")
    return form


# -- methods -------------------------------------------------------------------------


class ListParams(Params):
    workspaceId: str
    folderId: str | None = None
    query: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    limit: Limit = 20
    cursor: str | None = None

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("query must not be blank; omit it to list every form")
        return v


class FormPage(Page):
    items: list[FormItem]


def fuzzy_score(query: str, name: str) -> float:
    q, n = query.lower().strip(), name.lower()
    if q in n:
        return 2.0 - n.index(q) / max(len(n), 1)
    words = n.split()
    best = max([difflib.SequenceMatcher(None, q, w).ratio() for w in words] or [0.0])
    return max(best, difflib.SequenceMatcher(None, q, n).ratio())


@method("forms.list")
def forms_list(ctx: Ctx, p: ListParams) -> FormPage:
    """List the workspace's forms, newest first; ``query`` is a fuzzy name search that
    returns one capped page."""
    ctx.check_workspace(p.workspaceId)
    stmt = select(Form).where(Form.workspace_id == ctx.workspace.id, col(Form.trashed_at).is_(None))
    if "folderId" in p.model_fields_set:
        if p.folderId is None:
            stmt = stmt.where(col(Form.folder_id).is_(None))
        else:
            folder_in(ctx, p.folderId)
            stmt = stmt.where(Form.folder_id == p.folderId)
    if p.query is not None:
        if p.cursor is not None:
            raise validation("A fuzzy query returns one page and cannot be paged; drop cursor or query.",
                             field="cursor", reason="QUERY_NOT_PAGINATED")
        scored = [(fuzzy_score(p.query, f.name), f) for f in ctx.session.exec(stmt)]
        matches = sorted((sf for sf in scored if sf[0] >= 0.6), key=lambda sf: (-sf[0], -sf[1].created_at))
        page = [item(f) for _, f in matches[: p.limit]]
        return FormPage(items=page, nextCursor=None, hasMore=len(matches) > p.limit, canPaginate=False)
    if p.cursor is not None:
        # a well-formed cursor of the wrong shape would silently restart the listing
        created, form_id = decode_cursor(p.cursor, 2)
        if type(created) is not int or not isinstance(form_id, str):
            raise validation("cursor is not a cursor forms.list issued; pass back the nextCursor of the "
                             "previous page.", field="cursor", reason="INVALID_CURSOR")
    rows, nxt = keyset_page(ctx.session, stmt, [Form.created_at, Form.id], lambda f: (f.created_at, f.id),
                            p.limit, p.cursor)
    return FormPage(items=[item(f) for f in rows], nextCursor=nxt, hasMore=nxt is not None, canPaginate=True)


class FormIdParams(Params):
    formId: str


@method("forms.get")
def forms_get(ctx: Ctx, p: FormIdParams) -> FormDetail:
    """One form with its draft questions, cover, logo and trash state."""
    return detail(ctx, ctx.form(p.formId, trashed_ok=True))


class CreateParams(Params):
    name: Name
    workspaceId: str
    folderId: str | None = None

    @field_validator("name")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("name must not be blank")
        return v


class Created(Result):
    id: str
    name: str
    workspaceId: str
    folderId: str | None
    isPublished: bool
    createdAt: int
    previewUrl: str


@method("forms.create")
def forms_create(ctx: Ctx, p: CreateParams) -> Created:
    """Create an empty, unpublished form (at the workspace root unless a folder is named)."""
    ctx.check_workspace(p.workspaceId)
    if p.folderId is not None:
        folder_in(ctx, p.folderId)
    form = new_form(ctx.session, ctx.workspace.id, p.name, p.folderId, ctx.now)
    return Created(id=form.id, name=form.name, workspaceId=form.workspace_id, folderId=form.folder_id,
                   isPublished=False, createdAt=form.created_at, previewUrl=preview_url(ctx, form))


class UpdateParams(Params):
    formId: str
    # null is refused for name, cover and logo (None only means "not sent")
    name: Annotated[Name | None, NOT_NULL] = None
    folderId: str | None = None
    emoji: Emoji | None = None
    cover: Annotated[Cover | None, NOT_NULL] = None
    logo: Annotated[Logo | None, NOT_NULL] = None

    @field_validator("name")
    @classmethod
    def _not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("name must not be blank")
        return v


class Updated(Result):
    id: str
    name: str
    folderId: str | None
    emoji: str | None
    cover: dict[str, Any] | None = None
    logo: dict[str, Any] | None = None
    noChange: bool = False


def _stored(decoration: Params | None) -> dict[str, Any] | None:
    if decoration is None or getattr(decoration, "type", None) == "none":
        return None
    return decoration.model_dump()


@method("forms.update")
def forms_update(ctx: Ctx, p: UpdateParams) -> Updated:
    """Rename, move, or decorate a form (emoji, cover, logo); never changes its content."""
    sent = p.model_fields_set - {"formId"}
    if not sent:
        raise validation("Send at least one of name, folderId, emoji, cover, logo.", reason="NOTHING_TO_UPDATE",
                         validKeys=["name", "folderId", "emoji", "cover", "logo"])
    form = live_form(ctx, p.formId)
    if "name" in sent and p.name is None:
        raise validation("name cannot be null; send a name of 1 to 255 characters.", field="name",
                         reason="INVALID_TYPE", expectedType="string")
    if "cover" in sent and p.cover is None:
        raise validation('cover cannot be null; send {"type": "none"} to remove it.', field="cover",
                         reason="INVALID_TYPE", expectedType="object")
    if "logo" in sent and p.logo is None:
        raise validation('logo cannot be null; send {"type": "none"} to remove it.', field="logo",
                         reason="INVALID_TYPE", expectedType="object")
    if "folderId" in sent and p.folderId is not None:
        folder_in(ctx, p.folderId)
    new = {
        "name": p.name if "name" in sent else form.name,
        "folder_id": p.folderId if "folderId" in sent else form.folder_id,
        "emoji": p.emoji if "emoji" in sent else form.emoji,
        "cover": _stored(p.cover) if "cover" in sent else form.cover,
        "logo": _stored(p.logo) if "logo" in sent else form.logo,
    }
    changed = {k: v for k, v in new.items() if getattr(form, k) != v}
    for k, v in changed.items():
        setattr(form, k, v)
    if changed:
        form.last_edited_at = ctx.now
    out = Updated(id=form.id, name=form.name, folderId=form.folder_id, emoji=form.emoji)
    if "cover" in sent:
        out.cover = form.cover or {"type": "none"}
    if "logo" in sent:
        out.logo = form.logo or {"type": "none"}
    if not changed:
        out.noChange = True
    return out


class Published(Result):
    id: str
    isPublished: bool
    publishedAt: int | None
    snapshotId: str | None
    alreadyPublished: bool = False
    warning: str | None = None


@method("forms.publish")
def forms_publish(ctx: Ctx, p: FormIdParams) -> Published:
    """Publish the form: freeze its field keys into a new snapshot when the draft changed,
    republish the last snapshot otherwise."""
    form = live_form(ctx, p.formId)
    flags = publish_form(ctx.session, form, ctx.now)
    return Published(id=form.id, isPublished=True, publishedAt=form.published_at,
                     snapshotId=form.snapshot_id, **flags)


class Unpublished(Result):
    id: str
    isPublished: bool
    unpublishedAt: int | None
    alreadyUnpublished: bool = False


@method("forms.unpublish")
def forms_unpublish(ctx: Ctx, p: FormIdParams) -> Unpublished:
    """Unpublish the form: respondents can no longer open it."""
    form = live_form(ctx, p.formId)
    if not form.is_published:
        return Unpublished(id=form.id, isPublished=False, unpublishedAt=form.unpublished_at,
                           alreadyUnpublished=True)
    form.is_published = False
    form.unpublished_at = ctx.now
    return Unpublished(id=form.id, isPublished=False, unpublishedAt=form.unpublished_at)


class Trashed(Result):
    id: str
    isDeleted: bool
    trashedAt: int
    revokedShareLinks: int
    alreadyTrashed: bool = False


@method("forms.delete")
def forms_delete(ctx: Ctx, p: FormIdParams) -> Trashed:
    """Move the form to the trash; its active share links are revoked for good."""
    form = ctx.form(p.formId, trashed_ok=True)
    if form.trashed_at is not None:
        return Trashed(id=form.id, isDeleted=True, trashedAt=form.trashed_at, revokedShareLinks=0,
                       alreadyTrashed=True)
    form.trashed_at = ctx.now
    links = ctx.session.exec(select(ShareLink).where(ShareLink.form_id == form.id,
                                                     col(ShareLink.revoked).is_(False))).all()
    for link in links:
        link.revoked = True
        link.revoked_at = ctx.now
    return Trashed(id=form.id, isDeleted=True, trashedAt=form.trashed_at, revokedShareLinks=len(links))


class RestoreParams(Params):
    formId: str
    folderId: str | None = None


class Restored(FormItem):
    alreadyRestored: bool = False


@method("forms.restore")
def forms_restore(ctx: Ctx, p: RestoreParams) -> Restored:
    """Take the form out of the trash, into its original folder (or root, or the folder
    named). Share links revoked by the trash stay revoked."""
    form = ctx.form(p.formId, trashed_ok=True)
    if form.trashed_at is None:
        return Restored(**item(form).model_dump(), alreadyRestored=True)
    if "folderId" in p.model_fields_set:
        if p.folderId is not None:
            folder_in(ctx, p.folderId)
        form.folder_id = p.folderId
    elif form.folder_id is not None and ctx.session.get(Folder, form.folder_id) is None:
        form.folder_id = None  # the original folder is gone: back to the root
    form.trashed_at = None
    form.last_edited_at = ctx.now
    return Restored(**item(form).model_dump())
