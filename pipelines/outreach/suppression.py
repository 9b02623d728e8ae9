"""Suppression: addresses outreach never sends to. A plan's valid rows whose recipient is
suppressed become report lines with the problem ``suppressed (<why>)`` (pure), and the
addresses come from the suppression file, the store's suppression list and every stored
request whose invitation bounced or was complained about."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path

from connector.store import Store
from connector.store.campaign import Suppressed

from .plan import Plan
from .values import Problem

SUPPRESSED = "suppressed"


def apply_suppression(plan: Plan, suppressed: Mapping[str, str], *, only: AbstractSet[str] | None = None) -> Plan:
    """``plan`` without the valid rows whose recipient email (compared lower-cased) is a
    key of ``suppressed``; each becomes a rejected line ``suppressed (<why>)``. With
    ``only``, only rows of those identities are looked at (the rows still to send)."""
    if not suppressed:
        return plan
    valid, skipped = [], []
    for row in plan.valid:
        email = (row.params.recipient.get("email") or "").strip().lower()
        why = suppressed.get(email) if email and (only is None or row.identity in only) else None
        if why is None:
            valid.append(row)
        else:
            skipped.append((row.number, Problem(column="email", problem=f"{SUPPRESSED} ({why})",
                                                accepted="an address that is not suppressed")))
    if not skipped:
        return plan
    return replace(plan, valid=valid, rejected=sorted(plan.rejected + skipped, key=lambda line: line[0]))


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
    """Every suppressed address with why: the file's, the store's list, the erased ones
    (``formsync erase``, kept as keyed hashes) and, with ``bounced``, the addresses that
    bounced or complained in any job."""
    out: dict[str, str] = {}
    stored = Suppressed({})
    if store is not None and store.exists() and "formsync_suppressions" in store.table_names():
        stored = store.campaign.suppressed()
        for email, why in stored.items():
            if bounced or why.startswith("listed"):
                out[email] = why
    if file is not None:
        out.update(read_suppression_file(file))
    return replace(stored, listed=out)
