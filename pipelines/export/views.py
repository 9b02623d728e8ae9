"""``formsync views``: bring the typed view of each form (``formsync_<form name>_<hash>``)
up to date and list them. With a token, each form's ``fields.list`` is read: it types its
columns (number, date, choice with its label, JSON) and orders them as the form does;
answered keys no list names stay held back from the typed outputs."""

from __future__ import annotations

from pydantic import BaseModel

from connector.client.rpc import FormClient
from connector.errors import FormsyncError
from connector.store import FormView, Store
from connector.store._schema import legacy_view_name


class ViewColumnOut(BaseModel):
    name: str
    type: str  # the logical type (``connector.store._schema``)
    field_key: str | None = None


class ViewOut(BaseModel):
    """One form's view: its name, the name it had before views were named from the
    form's name (an alias of it, for one release), the form and its columns in order."""

    view: str
    alias: str | None = None
    form_id: str
    columns: list[ViewColumnOut]


class ViewsReport(BaseModel):
    """What ``refresh_views`` did: the views, and the forms whose fields.list could not be read."""

    views: list[ViewOut]
    warnings: list[str] = []


def _out(v: FormView) -> ViewOut:
    old = legacy_view_name(v.form_id)
    return ViewOut(view=v.name, alias=old if old != v.name else None, form_id=v.form_id,
                   columns=[ViewColumnOut(name=c.name, type=c.type, field_key=c.field_key) for c in v.columns])


async def refresh_views(store: Store, client: FormClient | None, *, form_id: str | None = None) -> ViewsReport:
    """(Re)build the views of every form the store knows (or of ``form_id``), with
    ``client`` from the form's fields.list (one call per form). A form whose fields.list
    fails keeps its view; its new answered keys stay held back (a warning)."""
    store.refresh_views(None if form_id is None else [form_id])
    warnings: list[str] = []
    if client is not None:
        forms = [form_id] if form_id is not None else [v.form_id for v in store.views()]
        for f in forms:
            try:
                listed = await client.list_fields(f)
            except FormsyncError as e:
                warnings.append(f"cannot read the fields of form {f} ({e}); its new fields stay held back")
                continue
            if listed.published or listed.items:
                store.record_fields(f, listed.items)
    views = [v for v in store.views() if form_id is None or v.form_id == form_id]
    return ViewsReport(views=[_out(v) for v in views], warnings=warnings)


def held_back_line(store: Store, form_id: str | None = None) -> str | None:
    """One line naming the answered keys an export or load leaves out of the form tables
    (wide) because no ``fields.list`` read named them yet (of ``form_id``, or of every
    form), with the fix; None when none is held back."""
    from connector.client._field_lists import HELD_BACK_FIX

    held = store.held_back_fields(None if form_id is None else [form_id])
    if not held:
        return None
    named = "; ".join(f"form {f}: {', '.join(keys)}" for f, keys in sorted(held.items()))
    return (f"held back from the form tables (no fields.list read named them yet; the long answers carry them): "
            f"{named}; fix: {HELD_BACK_FIX}")
