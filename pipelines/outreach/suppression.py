"""Suppression: the contact rule (``pipelines.rules.contact``) applied. A plan's rows still
to send that the rule refuses become report lines ``suppressed (<why>)`` (pure), and the
pending requests to addresses it refuses are canceled at the service."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace

from connector import errors
from connector.client.rpc import FormClient
from connector.store import Store

from ..rules.contact import Canceled, ContactRule, Recipient
from .plan import Plan
from .values import Problem

ACCEPTED = "an address not suppressed, once per job (outreach.allow_duplicates = true allows repeats)"


def apply_contact_rule(plan: Plan, rule: ContactRule, *, to_send: AbstractSet[str] | None = None,
                       held: Sequence[Recipient] = ()) -> Plan:
    """``plan`` without the valid rows still to send (``to_send``: their identities;
    default all) that the contact rule refuses; each becomes a rejected line
    ``suppressed (<why>)``, and is kept in ``Plan.refused``. ``held`` are the job's rows
    with a request that are not in the plan (sent by an earlier run from another sheet)."""
    rows = [Recipient(r.number, r.params.recipient.get("email"), to_send is not None and r.identity not in to_send)
            for r in plan.valid]
    verdicts = rule.refusals([*rows, *held])
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


async def cancel_blocked(client: FormClient, store: Store, rule: ContactRule, *,
                         form_id: str | None = None) -> list[Canceled]:
    """Cancel every request the store holds as pending (of ``form_id`` when given) whose
    address the contact rule now refuses, with the reason ``suppressed (<why>)``, and store
    each answered record: the service sends its own scheduled reminders to pending
    requests, so a suppressed address is only left alone once its requests are gone. A
    request found no longer pending is left as it is; other API errors are raised (what was
    canceled is stored)."""
    if not rule.blocked or "formsync_requests" not in store.table_names():
        return []
    done: list[Canceled] = []
    for request_id, email in store.requests.pending_to(rule.blocked, form_id=form_id):
        reason = rule.why(email)
        if reason is None:
            continue
        try:
            record = await client.cancel_request(request_id, reason=reason)
        except errors.Conflict as e:
            if e.reason != "REQUEST_NOT_PENDING":
                raise
            continue
        store.upsert_requests([record], source="poll")
        done.append(Canceled(request_id=request_id, email=email, reason=reason))
    return done
