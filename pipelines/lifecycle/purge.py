"""``formsync purge``: each form's retention, read from the service in the same run, applied
to the store on the service's clock, as the service purges: drafts past
``draftRetentionDays`` since their last activity, completed submissions past
``submissionRetentionDays`` since they were submitted (or all of them once the form's fixed
deletion date has passed, when it has no retention days), with their events, archived files
(bytes only when no other answer uses them) and their requests' answers; and the answers of
each request the service says it purged (``dataPurgedAt``, read by ``requests.list`` and
kept on the request's row) once the service's clock has passed it, whatever the form's
settings say now."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from connector.client.rpc import FormClient
from connector.models import FormSettings
from connector.store import Store
from connector.store._submissions import SubmissionTimes

from .erase import remove_files

DAY_MS = 86_400_000


@dataclass(frozen=True)
class Retention:
    """A form's retention as the service said it (None: kept for good)."""

    draft_days: int | None
    submission_days: int | None
    fixed_deletion_at: int | None = None


def retention_of(doc: FormSettings) -> Retention:
    """The retention a ``formSettings.get`` answer sets."""
    return Retention(doc.settings.draft_retention_days, doc.settings.submission_retention_days,
                     doc.fixed_deletion_at_ms)


def past_retention(retention: Retention, now: int, rows: Iterable[SubmissionTimes]) -> list[str]:
    """The ids of ``rows`` the service has purged by ``now`` (its clock, epoch ms)."""
    r, out = retention, []
    for s in rows:
        if not s.is_completed:
            active = s.updated_at or s.submitted_at or s.created_at
            if r.draft_days is not None and active is not None and active <= now - r.draft_days * DAY_MS:
                out.append(s.id)
        elif r.submission_days is not None:
            if s.submitted_at is not None and s.submitted_at <= now - r.submission_days * DAY_MS:
                out.append(s.id)
        elif r.fixed_deletion_at is not None and r.fixed_deletion_at <= now:
            out.append(s.id)
    return sorted(out)


class FormPurge(BaseModel):
    """What a purge removed (or would remove) of one form."""

    form_id: str
    draft_days: int | None
    submission_days: int | None
    fixed_deletion_at: int | None = None
    submissions: int = 0
    events: int = 0
    request_answers: int = 0
    archived_files: int = 0


class PurgeReport(BaseModel):
    """``formsync purge``: per form, and the service's time it was applied at."""

    dry_run: bool
    service_now: int
    forms: list[FormPurge] = []
    calls: int = 0

    @property
    def submissions(self) -> int:
        """Submissions removed over every form."""
        return sum(f.submissions for f in self.forms)

    def outcome(self) -> str:
        """The last line's words."""
        verb = "would remove" if self.dry_run else "removed"
        return (f"{verb} {self.submissions} submissions past their retention "
                f"({len(self.forms)} forms read, {self.calls} calls)")


async def purge(client: FormClient, store: Store, form_ids: Sequence[str] | None = None, *,
                dry_run: bool = False) -> PurgeReport:
    """Apply each stored form's retention (of ``form_ids``, or every form with stored
    submissions), read by ``formSettings.get`` in this run (an API error stops the purge,
    nothing of that form removed), on the service's clock."""
    calls_before = client.stats["calls"]
    report = PurgeReport(dry_run=dry_run, service_now=await client.service_now())
    try:
        now = report.service_now
        forms = form_ids if form_ids is not None else sorted({*store.answered_forms(), *store.requests.purged_forms(now)})
        for form_id in forms:
            retention = retention_of(await client.get_form_settings(form_id))
            # What the service purged of the requests' answers, whatever the form's settings say now.
            purged = store.requests.data_purged(form_id, now, await _purged_requests(client, store, form_id, now,
                                                                                     dry_run))
            doomed = {*past_retention(retention, now, store.submissions.times(form_id)),
                      *(sid for _, sid in purged if sid is not None)}
            found = store.remove_submissions({sid: form_id for sid in sorted(doomed)}, reason="purge",
                                             dry_run=dry_run, cleared=[rid for rid, _ in purged])
            if not dry_run:
                remove_files(found.locations)
            report.forms.append(FormPurge(
                form_id=form_id, draft_days=retention.draft_days, submission_days=retention.submission_days,
                fixed_deletion_at=retention.fixed_deletion_at, submissions=len(found.submissions),
                events=len(found.events), request_answers=len(found.cleared), archived_files=found.archived))
    finally:
        report.calls = int(client.stats["calls"] - calls_before)
    return report


async def _purged_requests(client: FormClient, store: Store, form_id: str, now: int, dry_run: bool) -> list[str]:
    """The form's completed requests the service says it purged the answers of by ``now``
    (``requests.list``, one call per 100; none when the store holds no such answers),
    their ``dataPurgedAt`` kept in the store unless ``dry_run``."""
    if not store.requests.holds_answers(form_id):
        return []
    purged = [r async for r in client.iter_requests(form_id=form_id, status="completed")
              if (at := r.data_purged_at_ms) is not None and at <= now]
    if purged and not dry_run:
        store.upsert_requests(purged)
    return [r.id for r in purged]

