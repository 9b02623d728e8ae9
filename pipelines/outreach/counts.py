"""The counts of one outreach run and the words they are said in: the estimate, the summary,
the last line, the run report's JSON, the scheduled run's record and ``formsync status``
all read them from here, so they agree."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel


class RunCounts(BaseModel):
    """Every sheet row of a run is in exactly one of: ``invalid`` (rejected by the checks,
    in the report file), ``skipped_existing`` (sent by an earlier run), ``changed`` (sent
    before, edited since: reported, not sent again), or the rows to send: ``sent`` now,
    ``failed`` (refused by the service, sent again by the next run) or ``left`` (a stop,
    or a dry run, came first), or ``suppressed`` (refused by the contact rule: a
    suppressed, bounced or complained address, or an address another row of the job
    has). So ``rows == sent_total + rejected + suppressed + left``, which every output
    states the same way."""

    rows: int
    invalid: int = 0
    suppressed: int = 0
    skipped_existing: int = 0
    changed: int = 0
    sent: int = 0
    failed: int = 0
    left: int = 0
    stopped: bool = False

    @property
    def to_send(self) -> int:
        """Rows the run set out to send (none of them has a request yet)."""
        return self.sent + self.failed + self.left

    @property
    def sent_total(self) -> int:
        """Rows with a request: sent now or by an earlier run."""
        return self.sent + self.skipped_existing

    @property
    def rejected(self) -> int:
        """Rows not sent for a problem of their own: invalid, changed since sent, refused."""
        return self.invalid + self.changed + self.failed

    @property
    def problems(self) -> int:
        """Rows in the report file: rejected and suppressed."""
        return self.rejected + self.suppressed

    def finished(self, sent: int, failed: int, stopped: bool) -> RunCounts:
        """The counts after sending: ``sent`` and ``failed`` of the rows to send."""
        return self.model_copy(update={"sent": sent, "failed": failed, "stopped": stopped,
                                       "left": self.to_send - sent - failed})

    def outcome(self, report: Path | str | None = None, *, dry_run: bool = False) -> str:
        """``sent 494 of 495 rows; 1 rejected (see bad-rows.csv)``; the rows sent before
        and those left are said when there are any; ``would send`` for a dry run."""
        if dry_run:
            text = f"would send {self.to_send:,} of {self.rows:,} rows"
        else:
            text = f"sent {self.sent + self.skipped_existing:,} of {self.rows:,} rows"
            if self.skipped_existing:
                text += f" ({self.sent:,} now, {self.skipped_existing:,} before)"
        if self.left and not dry_run:
            text += f", {self.left:,} left"
        bad = [(self.invalid, "rejected"), (self.changed, "changed since sent, not sent again"),
               (self.failed, "refused by the service"), (self.suppressed, "suppressed")]
        said = ", ".join(f"{n:,} {what}" for n, what in bad if n)
        if said:
            text += f"; {said}" + (f" (see {report})" if report is not None else "")
        return text

    def estimate(self, form_id: str) -> str:
        """What a run is about to send, before it starts."""
        before = [(self.skipped_existing, "sent before"), (self.changed, "changed since sent"),
                  (self.invalid, "rejected"), (self.suppressed, "suppressed")]
        also = ", ".join(f"{n:,} {what}" for n, what in before if n)
        return f"sending {self.to_send:,} of {self.rows:,} rows to {form_id}" + (f" ({also})" if also else "")

    def states_line(self) -> str:
        """The sheet's rows in their states: ``3 rows: 2 sent, 1 rejected (1 changed since
        sent), 0 suppressed``; the rows left to send when there are any."""
        why = f" ({self.changed:,} changed since sent)" if self.changed else ""
        text = (f"{self.rows:,} rows: {self.sent_total:,} sent, {self.rejected:,} rejected{why}, "
                f"{self.suppressed:,} suppressed")
        return text + (f", {self.left:,} not sent yet" if self.left else "")


def recorded_counts(outcome: Mapping[str, Any]) -> RunCounts | None:
    """The counts a run recorded in the ledger (see ``OutreachLedger.record_outcome``),
    or None when it recorded none (a run of an older version, or no run yet)."""
    fields = RunCounts.model_fields
    if "rows" not in outcome or "sent" not in outcome:
        return None
    return RunCounts.model_validate({k: v for k, v in outcome.items() if k in fields})


# The count each ledger state's rows are in (``connector.store._ledger``): a row recorded
# but without a confirmed request (a stopped or interrupted run) is left to send.
LEDGER_COUNTS = {"sent": "sent", "failed": "failed", "changed": "changed", "suppressed": "suppressed",
                 "pending": "left", "sending": "left"}
# A sheet row's state, as the campaign export says it: each count's rows in one word.
ROW_STATE = {"sent": "sent", "skipped_existing": "sent", "invalid": "rejected", "failed": "rejected",
             "changed": "changed", "suppressed": "suppressed", "left": "not sent"}


def job_counts(states: Mapping[str, int], outcome: Mapping[str, Any] | None) -> RunCounts:
    """A job's sheet rows in their states now: ``states`` the ledger's rows per state
    (``connector.store._ledger``), ``outcome`` its last run's record. The last run's counts
    while the ledger holds exactly what they say (they also tell the rows sent before the
    run, and a stop); otherwise (a run interrupted before it recorded its counts, a row
    erased since) the ledger's rows, with the rows the last run rejected before the
    ledger. Every output that counts a job's rows counts them here."""
    recorded = recorded_counts(outcome or {})
    invalid = recorded.invalid if recorded is not None else int((outcome or {}).get("invalid", 0))
    held = {name: 0 for name in RunCounts.model_fields if name not in ("rows", "stopped")}
    for state, n in states.items():
        count = LEDGER_COUNTS.get(state, "left")
        held[count] += n
    derived = RunCounts.model_validate({**held, "rows": sum(states.values()) + invalid, "invalid": invalid})
    if recorded is not None and _held_rows(recorded) == _held_rows(derived):
        return recorded
    return derived


def _held_rows(c: RunCounts) -> tuple[int, ...]:
    return (c.rows, c.sent_total, c.invalid, c.failed, c.changed, c.suppressed, c.left)


def row_state(ledger_state: str | None) -> str:
    """One sheet row's state in the words of ``ROW_STATE`` from its ledger state (None:
    the ledger has no record of it, a row the run's checks rejected)."""
    return ROW_STATE["invalid" if ledger_state is None else LEDGER_COUNTS.get(ledger_state, "left")]


# The words a row state is said in where each is listed (the campaign page); a state
# without its words here is said by its name.
ROW_STATE_WORDS = {"invalid": "rejected", "skipped_existing": "sent by an earlier run",
                   "changed": "changed since sent, not sent again", "failed": "refused by the service",
                   "left": "left to send"}


def row_states(counts: RunCounts) -> list[tuple[str, int]]:
    """Every row state of ``counts`` in its words, with its count (zeros too), in the
    order ``RunCounts`` declares them: a state added there is listed without a change here."""
    states = [(name, getattr(counts, name)) for name in type(counts).model_fields if name != "rows"]
    return [(ROW_STATE_WORDS.get(name, name.replace("_", " ")), n) for name, n in states if type(n) is int]
