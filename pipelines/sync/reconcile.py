"""``formsync sync --reconcile``: deletions mirrored. The service's submission ids of each
form (``submissions.list``, 100 a call from the shared budget) against the store's: a
stored submission the service no longer has (deleted, its form trashed) is marked with when
it was noticed and logged as a deletion; one listed again (its form restored) is un-marked."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from connector.client.rpc import FormClient
from connector.errors import NotFound
from connector.store import Store


class FormReconcile(BaseModel):
    """One form's reconcile: ids listed by the service, marked gone, back again."""

    form_id: str
    listed: int
    gone: int
    back: int
    form_missing: bool = False  # the service answered NOT_FOUND: trashed or deleted


class ReconcileReport(BaseModel):
    """What ``formsync sync --reconcile`` found, and what it cost."""

    forms: list[FormReconcile] = []
    calls: int = 0

    def outcome(self) -> str:
        """The last line's words."""
        gone, back = sum(f.gone for f in self.forms), sum(f.back for f in self.forms)
        return f"reconciled {len(self.forms)} forms: {gone} gone from the service, {back} back; {self.calls} calls"


async def reconcile(client: FormClient, store: Store, form_ids: Sequence[str] | None = None) -> ReconcileReport:
    """Reconcile each form of ``form_ids`` (default: every form with stored submissions)."""
    report = ReconcileReport()
    calls_before = client.stats["calls"]
    try:
        for form_id in form_ids if form_ids is not None else store.answered_forms():
            missing = False
            try:
                listed = {s.id async for s in client.iter_submissions(form_id, include_drafts=False)}
            except NotFound:  # the form is in the trash or deleted: none of its submissions is listed
                listed, missing = set(), True
            gone, back = store.reconcile(form_id, listed)
            report.forms.append(FormReconcile(form_id=form_id, listed=len(listed), gone=len(gone), back=len(back),
                                              form_missing=missing))
    finally:
        report.calls = int(client.stats["calls"] - calls_before)
    return report
