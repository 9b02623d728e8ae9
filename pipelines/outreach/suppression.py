"""Suppression: the outreach side of the contact rule (``contact``). A plan's rows still
to send that the rule refuses become report lines ``suppressed (<why>)`` (pure), and the
blocked addresses come from the suppression file, the store's suppression list and every
stored request whose invitation bounced or was complained about."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path

from pydantic import BaseModel

from connector import errors
from connector.client.rpc import FormClient
from connector.store import Store
from connector.store.campaign import Suppressed

from .checks import OutreachRefused
from .contact import SUPPRESSED, Recipient, contact_refusals
from .plan import Plan
from .values import Problem

ACCEPTED = "an address not suppressed, once per job (outreach.allow_duplicates = true allows repeats)"


def apply_contact_rule(plan: Plan, blocked: Mapping[str, str], *, to_send: AbstractSet[str] | None = None,
                       held: Sequence[Recipient] = (), allow_duplicates: bool = False) -> Plan:
    """``plan`` without the valid rows still to send (``to_send``: their identities;
    default all) that the contact rule refuses; each becomes a rejected line
    ``suppressed (<why>)``, and is kept in ``Plan.refused``. ``held`` are the job's rows
    with a request that are not in the plan (sent by an earlier run from another sheet)."""
    rows = [Recipient(r.number, r.params.recipient.get("email"), to_send is not None and r.identity not in to_send)
            for r in plan.valid]
    verdicts = contact_refusals([*rows, *held], blocked, allow_duplicates=allow_duplicates)
    valid, refused = [], []
    for row, recipient, why in zip(plan.valid, rows, verdicts, strict=False):
        if why is None or recipient.has_request:  # a row sent already stays as it is
            valid.append(row)
        else:
            refused.append((row, why))
    if not refused:
        return plan
    lines = [(row.number, Problem(column="email", problem=why, accepted=ACCEPTED)) for row, why in refused]
    return replace(plan, valid=valid, refused=plan.refused + refused,
                   rejected=sorted(plan.rejected + lines, key=lambda line: line[0]))


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


def suppressed_addresses(store: Store | None, file: Path | None, *, bounced: bool = True) -> Suppressed:
    """Every blocked address with why: the file's (``outreach.suppression_file``;
    ``OutreachRefused`` naming it when it cannot be read), the store's list, the erased
    ones (``formsync erase``, kept as keyed hashes) and, with ``bounced``, the addresses
    that bounced or complained in any job."""
    out: dict[str, str] = {}
    stored = Suppressed({})
    if store is not None and store.exists() and "formsync_suppressions" in store.table_names():
        stored = store.campaign.suppressed()
        for email, why in stored.items():
            if bounced or why.startswith("listed"):
                out[email] = why
    if file is not None:
        try:
            out.update(read_suppression_file(file))
        except (OSError, UnicodeDecodeError) as e:
            raise OutreachRefused(f"outreach.suppression_file: cannot read {file}: {e}; fix the path or "
                                  f"unset the setting") from None
    return replace(stored, listed=out)


class Canceled(BaseModel):
    """A pending request canceled because the contact rule now refuses its address."""

    request_id: str
    email: str
    reason: str


async def cancel_blocked(client: FormClient, store: Store, blocked: Mapping[str, str]) -> list[Canceled]:
    """Cancel every request the store holds as pending whose address is in ``blocked``
    (lower-cased address -> why), with the reason ``suppressed (<why>)``, and store each
    answered record: the service sends its own scheduled reminders to pending requests,
    so a suppressed address is only left alone once its requests are gone. A request
    found no longer pending is left as it is; other API errors are raised (what was
    canceled is stored)."""
    if not blocked or "formsync_requests" not in store.table_names():
        return []
    done: list[Canceled] = []
    for request_id, email in store.requests.pending_to(blocked):
        reason = f"{SUPPRESSED} ({blocked[email]})"
        try:
            record = await client.cancel_request(request_id, reason=reason)
        except errors.Conflict as e:
            if e.reason != "REQUEST_NOT_PENDING":
                raise
            continue
        store.upsert_requests([record], source="poll")
        done.append(Canceled(request_id=request_id, email=email, reason=reason))
    return done
