"""The suppression list (``formsync campaign suppress``): add addresses (and cancel their
pending requests, so the service's own scheduled reminders stop too), list them, take
them off. The contact rule (``pipelines.rules.contact``) reads the list; this module keeps it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel

from connector.client.rpc import FormClient
from connector.store import Store

from ..outreach.suppression import cancel_blocked
from ..rules.contact import Canceled, ContactRule


class Listed(BaseModel):
    """An address the contact rule refuses: ``listed`` (the store's list, with its reason
    and when) or ``bounced`` / ``complained`` (an earlier request's delivery)."""

    email: str
    source: str
    reason: str | None = None
    at: int | None = None  # epoch ms, for a listed address


class SuppressReport(BaseModel):
    """What ``campaign suppress`` did: the addresses ``added`` to the list (``already``
    there), ``removed`` from it (``not_listed``: were not on it), or the ``listed`` ones;
    and the pending requests ``canceled`` because their address is now suppressed."""

    action: Literal["add", "remove", "list"]
    added: list[str] = []
    already: list[str] = []
    removed: list[str] = []
    not_listed: list[str] = []
    listed: list[Listed] = []
    canceled: list[Canceled] = []

    def sentences(self) -> list[str]:
        """The report in words, one line each, the last ``done: ...``."""
        out = [f"suppressed {a}" for a in self.added] + [f"{a} was suppressed already" for a in self.already]
        out += [f"{c.email}: pending request {c.request_id} canceled ({c.reason})" for c in self.canceled]
        out += [f"{a} is no longer suppressed" for a in self.removed]
        out += [f"{a} was not on the suppression list" for a in self.not_listed]
        out += [_listed_line(x) for x in self.listed]
        return [*out, f"done: {self.summary()}"]

    def summary(self) -> str:
        if self.action == "list":
            return f"{_n(len(self.listed), 'address', 'addresses')} suppressed"
        if self.action == "remove":
            return f"{_n(len(self.removed), 'address', 'addresses')} taken off the suppression list"
        return (f"{_n(len(self.added), 'address', 'addresses')} added to the suppression list, "
                f"{_n(len(self.canceled), 'pending request', 'pending requests')} canceled")


def _n(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _listed_line(x: Listed) -> str:
    when = f", since {datetime.fromtimestamp(x.at / 1000, UTC):%Y-%m-%d %H:%M} UTC" if x.at else ""
    return f"{x.email}: {x.source}{f' ({x.reason})' if x.reason else ''}{when}"


def email_problem(addresses: Sequence[str]) -> str | None:
    """What is wrong with the first given address that is not one, or None."""
    for a in addresses:
        if "@" not in a.strip() or a.strip().startswith("@") or a.strip().endswith("@"):
            return f"{a!r} is not an email address"
    return None


def add(store: Store, addresses: Sequence[str], reason: str | None) -> SuppressReport:
    """Add ``addresses`` to the store's list (lower-cased)."""
    known = {s.email for s in store.campaign.suppressions()}
    given = sorted({a.strip().lower() for a in addresses})
    store.campaign.suppress(given, reason)
    return SuppressReport(action="add", added=[a for a in given if a not in known],
                          already=[a for a in given if a in known])


async def cancel_pending(client: FormClient, store: Store, report: SuppressReport, rule: ContactRule) -> None:
    """Cancel the pending requests to the addresses of ``report`` (added or already
    listed), each with why ``rule`` (made after the addresses were added) refuses it, into
    ``report.canceled``."""
    given = {*report.added, *report.already}
    report.canceled = await cancel_blocked(client, store, ContactRule(
        {a: why for a in given if (why := rule.blocked.get(a)) is not None}))


def remove(store: Store, addresses: Sequence[str]) -> SuppressReport:
    """Take ``addresses`` off the store's list."""
    given = sorted({a.strip().lower() for a in addresses})
    removed = store.campaign.unsuppress(given)
    return SuppressReport(action="remove", removed=removed, not_listed=[a for a in given if a not in removed])


def listing(store: Store) -> SuppressReport:
    """Every address the store makes the contact rule refuse: its list, then bounces and complaints."""
    listed = [Listed(email=s.email, source="listed", reason=s.reason, at=s.created_at)
              for s in store.campaign.suppressions()]
    on_list = {x.email for x in listed}
    listed += [Listed(email=a, source=why) for a, why in sorted(store.campaign.suppressed().items())
               if a not in on_list]
    return SuppressReport(action="list", listed=listed)
