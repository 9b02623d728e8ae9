"""Folders of a workspace (``folders.*``; the agent's ``workspaceFolder_*`` tools): list,
create, rename and delete. Folder names are unique in a workspace, compared without
regard to case or surrounding spaces. Deleting a folder moves its forms to the root."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator
from sqlalchemy import func
from sqlmodel import col, select

from ..errors import conflict
from ..ids import new_id
from ..tables import Folder, Form
from .base import Ctx, Params, Result, method
from .forms import folder_in

Name = Annotated[str, Field(min_length=1, max_length=255)]


def _name_check(v: str) -> str:
    if not v.strip():
        raise ValueError("name must not be blank")
    return v.strip()


class FolderView(Result):
    id: str
    name: str
    workspaceId: str
    createdAt: int
    formCount: int  # forms in the folder, trashed ones excluded


class FolderList(Result):
    items: list[FolderView]
    hasMore: bool


def _form_count(ctx: Ctx, folder_id: str) -> int:
    return ctx.session.exec(select(func.count()).select_from(Form).where(
        Form.folder_id == folder_id, col(Form.trashed_at).is_(None))).one()


def view(ctx: Ctx, folder: Folder) -> FolderView:
    return FolderView(id=folder.id, name=folder.name, workspaceId=folder.workspace_id, createdAt=folder.created_at,
                      formCount=_form_count(ctx, folder.id))


def _check_unique(ctx: Ctx, name: str, except_id: str | None = None) -> None:
    """CONFLICT when another folder of the workspace already has ``name`` (any case)."""
    wanted = name.strip().lower()
    for other in ctx.session.exec(select(Folder).where(Folder.workspace_id == ctx.workspace.id)):
        if other.id != except_id and other.name.strip().lower() == wanted:
            raise conflict(f'A folder named "{other.name}" already exists in this workspace ({other.id}); '
                           "pick another name or use that folder.", field="name", reason="DUPLICATE_NAME",
                           folderId=other.id)


class WorkspaceParams(Params):
    workspaceId: str


@method("folders.list")
def folders_list(ctx: Ctx, p: WorkspaceParams) -> FolderList:
    """The workspace's folders, by name, with how many forms each holds."""
    ctx.check_workspace(p.workspaceId)
    rows = ctx.session.exec(select(Folder).where(Folder.workspace_id == ctx.workspace.id)).all()
    rows = sorted(rows, key=lambda f: (f.name.lower(), f.id))
    return FolderList(items=[view(ctx, f) for f in rows], hasMore=False)


class CreateParams(Params):
    workspaceId: str
    name: Name

    _name = field_validator("name")(classmethod(lambda cls, v: _name_check(v)))


@method("folders.create")
def folders_create(ctx: Ctx, p: CreateParams) -> FolderView:
    """Create a folder; its name must be unique in the workspace (CONFLICT otherwise)."""
    ctx.check_workspace(p.workspaceId)
    _check_unique(ctx, p.name)
    folder = Folder(id=new_id("fld"), workspace_id=ctx.workspace.id, name=p.name, created_at=ctx.now)
    ctx.session.add(folder)
    ctx.session.flush()
    return view(ctx, folder)


class UpdateParams(Params):
    folderId: str
    name: Name

    _name = field_validator("name")(classmethod(lambda cls, v: _name_check(v)))


class FolderUpdated(FolderView):
    noChange: bool = False


@method("folders.update")
def folders_update(ctx: Ctx, p: UpdateParams) -> FolderUpdated:
    """Rename a folder; the new name must be unique in the workspace."""
    folder = folder_in(ctx, p.folderId)
    if folder.name == p.name:
        return FolderUpdated(**view(ctx, folder).model_dump(), noChange=True)
    _check_unique(ctx, p.name, except_id=folder.id)
    folder.name = p.name
    return FolderUpdated(**view(ctx, folder).model_dump())


class FolderIdParams(Params):
    folderId: str


class FolderDeleted(Result):
    id: str
    deleted: bool
    movedForms: int  # forms (trashed ones included) moved to the workspace root


@method("folders.delete")
def folders_delete(ctx: Ctx, p: FolderIdParams) -> FolderDeleted:
    """Delete a folder for good; its forms move to the workspace root, none is deleted."""
    folder = folder_in(ctx, p.folderId)
    forms = ctx.session.exec(select(Form).where(Form.folder_id == folder.id)).all()
    for form in forms:
        form.folder_id = None
    ctx.session.delete(folder)
    return FolderDeleted(id=folder.id, deleted=True, movedForms=len(forms))
