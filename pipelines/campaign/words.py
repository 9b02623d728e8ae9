"""What the ``campaign`` commands say (pure): the sentences of a remind or close run, of an
export and of a page, and the text of each one's last line (``done: ...``), which a
scheduled run's record also reads, so the two agree."""

from __future__ import annotations

from datetime import UTC, datetime

from .actions import SPACING_MS, ActionReport
from .export import CampaignExportReport
from .funnel import Funnel

REFUSALS_SAID = 5  # refused rows named one a line; the rest are in the JSON (--json)
_VERB = {"remind": ("remind", "reminded"), "close": ("cancel", "canceled")}


def utc(ms: int) -> str:
    """An epoch-ms time as ``2026-06-30 18:00 UTC``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def closed_text(r: ActionReport) -> str:
    """``closed on 2026-06-30 18:00 UTC (survey closed)``: the campaign's close, said."""
    when = f"closed on {utc(r.closed_at)}" if r.closed_at is not None else "closed"
    return when + (f" ({r.closed_reason})" if r.closed_reason else "")


def action_outcome(r: ActionReport) -> str:
    """What a remind or close run did, in one sentence: ``reminded 17 of 20 pending
    requests; 3 refused (REMINDER_TOO_SOON 3)``; a dry run ``would remind 20 ...``; a
    closed campaign with nothing pending, a close date not reached, and a plan refusal
    say so."""
    verb, done = _VERB[r.action]
    if r.not_before:
        at = int(datetime.fromisoformat(r.not_before).timestamp() * 1000)
        return f"nothing yet: the campaign closes from {utc(at)}"
    if not r.candidates and r.closed_at is not None and r.action == "remind":
        return f"nothing to remind: the campaign {r.job} was {closed_text(r)} and no request is pending"
    if r.plan_refused:
        return (f"{done} {r.done:,} of {r.candidates:,} pending requests: the service refused the rest "
                f"for this workspace's plan ({r.plan_refused})")
    if r.dry_run:
        text = f"would {verb} {r.would_do:,} of {r.candidates:,} pending requests (a dry run: nothing was called)"
    else:
        text = f"{done} {r.done:,} of {r.candidates:,} pending requests"
    rest = [(r.too_recent, f"reminded less than {SPACING_MS // 60_000} minutes ago, skipped without a call"),
            (sum(r.refused.values()), "refused" + (f" ({_reasons(r)})" if r.refused else "")),
            (r.not_pending, "no longer pending"), (r.not_idle, "not idle long enough, left out"),
            (r.suppressed, "suppressed by the contact rule, no call")]
    said = ", ".join(f"{n:,} {what}" for n, what in rest if n)
    text += f"; {said}" if said else ""
    if r.action == "close" and not r.dry_run and not r.stopped:
        text += f"; the campaign is {closed_text(r)}" if r.closed_at is not None else "; the campaign is closed"
    return text


def _reasons(r: ActionReport) -> str:
    return ", ".join(f"{reason} {n:,}" for reason, n in sorted(r.refused.items()))


def action_lines(r: ActionReport) -> list[str]:
    """The sentences a remind or close run prints before its last line: the job, the
    service's time it decided by, the refused rows (the first ``REFUSALS_SAID``)."""
    lines = [f"campaign {r.job}: {r.candidates:,} pending requests"
             + (f" as of {utc(r.now)} (the service's time)" if r.now is not None else "")]
    if r.not_idle:
        lines.append(f"{r.not_idle:,} pending requests had activity too recently for --idle and are left out")
    if r.too_recent:
        lines.append(f"{r.too_recent:,} were reminded by formsync less than {SPACING_MS // 60_000} minutes ago: "
                     "the service would refuse them (REMINDER_TOO_SOON), so no call was made")
    for f in r.refusals[:REFUSALS_SAID]:
        lines.append(f"row {f.row} ({f.request_id}): refused, {f.reason}")
    if sum(r.refused.values()) > REFUSALS_SAID:
        lines.append(f"... {sum(r.refused.values()) - REFUSALS_SAID:,} more refused (all with --json)")
    if not r.dry_run and not r.not_before:
        lines.append(f"{r.calls:,} calls to the service")
    return lines


def plan_refusal(r: ActionReport) -> str | None:
    """The run's failure when the service refused the workspace's plan (no request can
    be reminded there), in words; None otherwise."""
    if r.plan_refused is None:
        return None
    return (f"the service refused to {_VERB[r.action][0]} on this workspace's plan ({r.plan_refused}): "
            f"{'reminders need' if r.action == 'remind' else 'this needs'} the Pro plan or higher; "
            f"{r.done:,} of {r.candidates:,} done")


def export_outcome(r: CampaignExportReport) -> str:
    """``wrote spring.xlsx: 13 rows, 24 columns``."""
    return f"wrote {r.path}: {r.rows:,} rows, {len(r.columns):,} columns ({r.format})"


def page_outcome(path: str, f: Funnel, as_of: int) -> str:
    """``wrote spring.html as of 2026-06-30 18:00 UTC: opened 8, completed 7 (64%), ...``."""
    return f"wrote {path} as of {utc(as_of)}: {f.line()}"
