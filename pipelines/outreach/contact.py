"""The contact rule: whether an address may be sent anything (an invitation, a reminder,
any later message). Outreach, ``campaign remind`` (by hand and scheduled) and every
later send path ask ``contact_refusals``; what it refuses is counted ``suppressed``.

An address is refused when it is blocked (the suppression file, the store's list, an
earlier bounce or complaint: see ``suppression.suppressed_addresses``), or when another
row of the same job has the same address: the row that already has a request keeps it,
otherwise the first in sheet order; the later row is a duplicate naming that row,
unless the job allows duplicates (``outreach.allow_duplicates``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SUPPRESSED = "suppressed"


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
