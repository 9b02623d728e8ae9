"""The contact rule: whether an address may be sent anything (an invitation, a reminder,
any later message), and which pending requests must be canceled because it no longer may.

An address is refused when it is blocked (the suppression file, the store's list, an
earlier bounce or complaint unless ``outreach.suppress_bounced = false``, an erased
person), or when another row of the same job has the same address: the row that already
has a request keeps it, otherwise the first in sheet order; the later row is a duplicate
naming that row, unless the job allows duplicates (``outreach.allow_duplicates``).

The rule's inputs are built once per run from the settings (``contact_rule``) into one
``ContactRule``, which every send and cancel path receives: outreach, remind and close (by
hand and scheduled), poll's cancel step, ``campaign suppress`` and ``erase``."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from connector.config.settings import OutreachSettings
    from connector.store import Store

SUPPRESSED = "suppressed"


class SuppressionFileError(ValueError):
    """``outreach.suppression_file`` cannot be read; the text names it and the fix."""


@dataclass(frozen=True)
class Recipient:
    """One row of a job as the rule sees it: its sheet row number, its address (None:
    none given) and whether it has a request already."""

    row: int
    email: str | None
    has_request: bool = False


def address_key(email: str | None) -> str:
    """The form an address is compared in: trimmed, lower-cased ("" for none)."""
    return (email or "").strip().lower()


def contact_refusals(recipients: Sequence[Recipient], blocked: Mapping[str, str], *,
                     allow_duplicates: bool = False) -> list[str | None]:
    """For each of ``recipients`` (one job's rows), None when its address may be sent
    anything, else why not: ``suppressed (<why>)`` for an address in ``blocked``
    (lower-cased address -> why), ``suppressed (same email as row N)`` for a later row
    repeating an address another row holds. A row without an address is never refused
    here (nothing is emailed to it)."""
    holder: dict[str, int] = {}
    if not allow_duplicates:
        # The row with a request keeps the address; otherwise the first in sheet order.
        for r in sorted(recipients, key=lambda r: (not r.has_request, r.row)):
            holder.setdefault(address_key(r.email), r.row)
    out: list[str | None] = []
    for r in recipients:
        key = address_key(r.email)
        if not key:
            out.append(None)
        elif key in blocked:
            out.append(f"{SUPPRESSED} ({blocked[key]})")
        elif key in holder and holder[key] != r.row:
            out.append(f"{SUPPRESSED} (same email as row {holder[key]})")
        else:
            out.append(None)
    return out


@dataclass(frozen=True)
class ContactRule:
    """The contact rule with its inputs: ``blocked`` maps each refused address
    (lower-cased) to why (an erased address answers ``erased`` when looked up, never when
    listed); ``allow_duplicates`` lets one job send an address more than once. A rule made
    from the settings (``contact_rule``) also keeps what it was made of, so ``refreshed``
    can read the store again (a poll learns of bounces as it goes)."""

    blocked: Mapping[str, str] = field(default_factory=dict)
    allow_duplicates: bool = False
    file_listed: Mapping[str, str] | None = None  # the suppression file's; None: not made from the settings
    bounced: bool = True  # outreach.suppress_bounced

    def refusals(self, recipients: Sequence[Recipient]) -> list[str | None]:
        """``contact_refusals`` of ``recipients`` under this rule."""
        return contact_refusals(recipients, self.blocked, allow_duplicates=self.allow_duplicates)

    def why(self, email: str | None) -> str | None:
        """Why ``email`` may not be sent anything (``suppressed (...)``), or None."""
        key = address_key(email)
        return f"{SUPPRESSED} ({self.blocked[key]})" if key and key in self.blocked else None

    def for_job(self, allow_duplicates: bool) -> ContactRule:
        """The rule as a job that was sent with ``allow_duplicates`` asks it."""
        return replace(self, allow_duplicates=allow_duplicates)

    def refreshed(self, store: Store | None) -> ContactRule:
        """The rule with the store's list, bounces, complaints and erasures read now (a
        rule not made from the settings is returned as it is)."""
        from connector.store._campaign import Suppressed

        if self.file_listed is None:
            return self
        stored = Suppressed({})
        out: dict[str, str] = {}
        if store is not None and store.exists() and "formsync_suppressions" in store.table_names():
            stored = store.campaign.suppressed()
            out = {email: why for email, why in stored.items() if self.bounced or why.startswith("listed")}
        out.update(self.file_listed)
        return replace(self, blocked=replace(stored, listed=out))


class Canceled(BaseModel):
    """A pending request canceled because the contact rule now refuses its address."""

    request_id: str
    email: str
    reason: str


def read_suppression_file(path: Path) -> dict[str, str]:
    """The addresses of a suppression file: one per line, or a CSV whose column
    ``email`` (any case) holds them; blank lines and lines starting with ``#`` are
    skipped. An ``OSError`` when it cannot be read."""
    text = path.read_text(encoding="utf-8-sig")
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return {}
    header = [c.strip().lower() for c in next(csv.reader([lines[0]]))]
    if "email" in header and "@" not in lines[0]:
        at = header.index("email")
        cells = (row[at] for row in csv.reader(io.StringIO("\n".join(lines[1:]))) if len(row) > at)
    else:
        cells = (line.split(",")[0] for line in lines)
    return {c.strip().lower(): f"listed in {path.name}" for c in cells if "@" in c}


def contact_rule(store: Store | None, outreach: OutreachSettings) -> ContactRule:
    """The rule as the settings make it: the suppression file's addresses
    (``SuppressionFileError`` naming it when it cannot be read), the store's list, the
    erased ones (kept as keyed hashes) and, with ``suppress_bounced``, the addresses that
    bounced or complained in any job; ``allow_duplicates`` as set."""
    listed: dict[str, str] = {}
    if outreach.suppression_file is not None:
        file = outreach.suppression_file
        try:
            listed = read_suppression_file(file)
        except (OSError, UnicodeDecodeError) as e:
            raise SuppressionFileError(f"outreach.suppression_file: cannot read {file}: {e}; fix the path or "
                                       f"unset the setting") from None
    return ContactRule(allow_duplicates=outreach.allow_duplicates, file_listed=listed,
                       bounced=outreach.suppress_bounced).refreshed(store)
