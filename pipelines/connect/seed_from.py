"""`formsync sandbox --seed-from URL`: a real workspace's forms read through read-only
calls only, and the sandbox seed (``config/sandbox-seed.yaml``'s format) built from what
they return. Building the seed and masking emails are pure; ``read_workspace`` is the I/O."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from connector.client.rpc import FormClient

# The only methods a seeding read sends: none of them writes.
READ_METHODS = ("workspaces.list", "folders.list", "forms.list", "forms.get", "fields.list", "formSettings.get")
PER_FORM = ("forms.get", "fields.list", "formSettings.get")
# What no read call returns, so the seed cannot hold it.
NOT_COPIED = (
    "themes (no read call returns a form's theme)",
    "content blocks between questions of a published form (fields.list lists questions only)",
    "calculated fields' formulas (fields.list does not show them)",
    "translations into other languages (no read call lists a form's languages)",
    "passwords (formSettings.get shows only whether one is set)",
    "logic, share links, webhooks, requests and documents' files",
)
# fields.list descriptor keys that are also a seed block's keys.
_BLOCK_KEYS = ("key", "type", "title", "required", "options", "rows", "columns", "maxStars", "min", "max",
               "repeating", "documents")


@dataclass
class FormRead:
    """What the read calls returned for one form."""

    item: dict[str, Any]
    detail: dict[str, Any]
    fields: dict[str, Any]
    settings: dict[str, Any]
    submissions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class WorkspaceRead:
    """What the read calls returned for the workspace the token acts in."""

    name: str
    folders: list[dict[str, Any]]
    forms: list[FormRead]


def planned_calls(form_count: int) -> int:
    """How many calls a seeding read sends for ``form_count`` forms (one page of each
    list; submissions pages come on top with ``--with-submissions``)."""
    return 3 + len(PER_FORM) * form_count


def mask_email(address: str) -> str:
    """The same masked address for the same address (any case), revealing nothing of it."""
    digest = hashlib.sha256(address.strip().lower().encode()).hexdigest()[:12]
    return f"person-{digest}@example.test"


def mask_answers(answers: dict[str, Any], email_keys: set[str]) -> dict[str, Any]:
    """``answers`` with each email-type answer masked (``mask_email``)."""
    return {k: (mask_email(v) if k in email_keys and isinstance(v, str) and v else v) for k, v in answers.items()}


def block_of(descriptor: dict[str, Any]) -> dict[str, Any]:
    """A seed block from a ``fields.list`` descriptor (members of a group included)."""
    block = {k: descriptor[k] for k in _BLOCK_KEYS if k in descriptor}
    if descriptor.get("type") == "calculated":
        block["formula"] = "0"  # the formula is not readable
    if "members" in descriptor:
        block["members"] = [block_of(m) for m in descriptor["members"]]
    if "documents" in block:
        block["documents"] = [{"name": d["name"]} for d in block["documents"] if "name" in d]
    return block


def _draft_block(question: dict[str, Any]) -> dict[str, Any]:
    """A seed block from a ``forms.get`` question (a never-published form's draft)."""
    block: dict[str, Any] = {"type": question.get("inputType") or question.get("type"), "title": question["title"]}
    for name in ("maxStars", "min", "max"):
        if name in (question.get("metadata") or {}):
            block[name] = question["metadata"][name]
    return block


def form_seed(read: FormRead, folders: dict[str, str]) -> dict[str, Any]:
    """One form of the seed: its id, name, emoji, folder, cover, logo, fields (the published
    ones, else the draft's questions), saved settings and (masked) submissions."""
    published = bool(read.fields.get("published"))
    blocks = ([block_of(d) for d in read.fields.get("items", [])] if published
              else [_draft_block(q) for q in read.detail.get("questions", [])])
    seed: dict[str, Any] = {"id": read.item["id"], "name": read.item["name"], "published": published and bool(blocks),
                            "blocks": blocks}
    for name in ("emoji", "cover", "logo"):
        value = read.detail.get(name, read.item.get(name))
        if value is not None:
            seed[name] = value
    if read.item.get("folderId") in folders:
        seed["folder"] = folders[read.item["folderId"]]
    if read.settings.get("isDefault") is False:
        seed["settings"] = dict(read.settings.get("settings") or {})
    if read.submissions:
        emails = {d["key"] for d in read.fields.get("items", []) if d.get("type") == "email"}
        seed["submissions"] = [{"answers": mask_answers(dict(s.get("answers") or {}), emails),
                                "completed": bool(s.get("isCompleted", True))} for s in read.submissions]
    return seed


def build_seed(workspace: WorkspaceRead, plan: str = "business") -> dict[str, Any]:
    """The sandbox seed holding ``workspace``'s folders and forms (newest last, as a seed
    lists them), in one workspace on ``plan``."""
    folders = {f["id"]: f["name"] for f in workspace.folders}
    forms = [form_seed(r, folders) for r in reversed(workspace.forms)]
    return {"workspaces": [{"name": workspace.name, "plan": plan, "folders": sorted(set(folders.values())),
                            "forms": forms}]}


def write_seed(seed: dict[str, Any], path: Path) -> Path:
    """``seed`` written as YAML at ``path`` (its folder made); the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(seed, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


async def all_items(fc: FormClient, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item of a paginated read."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = await fc.call(method, {**params, **({"cursor": cursor} if cursor else {})})
        items += page.get("items", [])
        cursor = page.get("nextCursor")
        if not page.get("hasMore") or not cursor:
            return items


async def read_workspace(fc: FormClient, *, with_submissions: bool = False,
                         on_plan: Any = None) -> WorkspaceRead:
    """The token's workspace read through ``READ_METHODS`` only (plus ``submissions.list``
    when asked); ``on_plan(calls)`` is told the planned number of calls once the forms are listed."""
    ws = (await fc.call("workspaces.list", {}))["items"][0]
    folders = await all_items(fc, "folders.list", {"workspaceId": ws["id"]})
    items = await all_items(fc, "forms.list", {"workspaceId": ws["id"], "limit": 100})
    if on_plan is not None:
        on_plan(planned_calls(len(items)))
    forms = []
    for item in items:
        fid = {"formId": item["id"]}
        read = FormRead(item=item, detail=await fc.call("forms.get", fid), fields=await fc.call("fields.list", fid),
                        settings=await fc.call("formSettings.get", fid))
        if with_submissions:
            read.submissions = await all_items(fc, "submissions.list", {**fid, "limit": 100})
        forms.append(read)
    return WorkspaceRead(name=ws["name"], folders=folders, forms=forms)
