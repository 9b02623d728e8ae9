"""Sending a plan's rows: each row recorded in the ledger before its create and marked
after it, paced by the client's pacer, with progress reported through a callback."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from connector.client.rpc import FormClient
from connector.errors import FormsyncError
from connector.models import RequestCreated
from connector.store import Store
from connector.store._ledger import PendingRow

from .columns import RowParams
from .documents import Documents, DocumentUnreadable
from .plan import PlannedRow
from .values import Problem


@dataclass(frozen=True)
class SendProgress:
    """Where a run is: rows to send gone through (sent or refused) of the ``total`` to send
    (the estimate's number), requests ``sent`` by this run, and ``waiting``: the seconds
    until the rate limit admits the next create (0 when the run is not waiting for it)."""

    done: int
    total: int
    sent: int
    waiting: float = 0.0


# Called after each row, and before each wait for the rate limit.
ProgressCallback = Callable[[SendProgress], None]


@dataclass(frozen=True)
class SendOptions:
    """What every create of a run carries besides the row's own params."""

    delivery: str = "none"
    callback_url: str | None = None
    test: bool = False


@dataclass
class SendResult:
    """What sending did: the creates made and refused, whether a stop ended it, and the
    rows' problems (refused, changed since sent). The run's counts are ``RunCounts``'."""

    sent: int = 0
    failed: int = 0
    stopped: bool = False
    problems: list[tuple[int, Problem]] = field(default_factory=list)


class Sender:
    """Sends planned rows to one form for one job (see ``send``)."""

    def __init__(self, client: FormClient, store: Store, documents: Documents, *, job: str, form_id: str,
                 options: SendOptions, stop: asyncio.Event | None = None) -> None:
        self.client, self.store, self.ledger, self.documents = client, store, store.ledger, documents
        self.job, self.form_id, self.options, self.stop = job, form_id, options, stop

    async def send(self, rows: Sequence[PlannedRow], progress: ProgressCallback | None = None) -> SendResult:
        """Send the rows not sent yet, in order, all recorded ``pending`` first. A set
        ``stop`` ends the run between rows (a wait for the rate window is cut short); the
        rows left stay pending and a re-run sends them."""
        result = SendResult()
        todo = self.ledger.rows_to_send(self.job, {r.identity: r.content_hash for r in rows})
        claims = self.ledger.record_pending(self.job, [
            PendingRow(r.identity, r.number, r.content_hash, r.key) for r in rows if r.identity in todo])
        total = list(claims.values()).count("send")

        def waiting(seconds: float) -> None:
            if progress is not None:
                progress(SendProgress(result.sent + result.failed, total, result.sent, waiting=seconds))
        # Every changed row is marked so by ``record_pending``: all are reported, stopped or not.
        result.problems += [(r.number, changed_problem(r)) for r in rows if claims.get(r.identity) == "changed"]
        for row in (r for r in rows if claims.get(r.identity) == "send"):
            if (self.stop is not None and self.stop.is_set()) or not await self._send(row, result, waiting):
                result.stopped = True
                break
            if progress is not None:
                progress(SendProgress(result.sent + result.failed, total, result.sent))
        return result

    async def _send(self, row: PlannedRow, result: SendResult, waiting: Callable[[float], None]) -> bool:
        """Create one recorded row and mark it; False when a stop came while waiting to create."""
        if await stopped_while_waiting(self.client, self.stop, waiting):
            return False  # still pending with no request: the next run sends it, same key
        self.ledger.mark_sending(self.job, row.identity)
        try:
            created = await self._create(row)
        except (FormsyncError, DocumentUnreadable) as e:  # refused, or a file gone since validation
            result.failed += 1
            self.ledger.mark_failed(self.job, row.identity, str(e))
            result.problems.append((row.number, Problem(column="", problem=f"create failed: {e}")))
            return True
        # Stored as pending (with its form, as a form's poll job looks for it) before the row is
        # marked sent: if this fails, the next run sends the row again, deduplicated by its key.
        # With the recipient it was sent to, so the contact rule knows the address before any poll.
        self.store.upsert_requests([{"recipient": row.params.recipient, **created.model_dump(exclude_none=True),
                                     "formId": self.form_id}], source="poll")
        self.ledger.mark_sent(self.job, row.identity, created.id)
        result.sent += 1
        return True

    async def _create(self, row: PlannedRow) -> RequestCreated:
        extra: dict[str, Any] = {}
        if row.params.documents:
            extra["documents"] = await self.documents.refs(row.params)
        return await self.client.create_request(
            self.form_id, recipient=row.params.recipient or {}, **create_params(row.params, self.options),
            **extra, idempotency_key=row.key)


def changed_problem(row: PlannedRow) -> Problem:
    """The report line of a row changed since it was recorded."""
    return Problem(column="externalId" if row.params.externalId else "",
                   problem=f"changed since it was recorded ({row.identity}); not sent again",
                   accepted="the row as first sent, or a new externalId (or a new job) for a new request")


async def stopped_while_waiting(client: FormClient, stop: asyncio.Event | None,
                                waiting: Callable[[float], None] | None = None) -> bool:
    """Wait until the client's pacer would admit a create (telling ``waiting`` how long,
    when there is a wait), unless ``stop`` is set first; True when stopped."""
    pacer = client.pacer
    delay = pacer.delay(create=True) if pacer is not None else 0.0
    if delay > 0 and waiting is not None:
        waiting(delay)
    if stop is None:
        return False  # the client's own pacer does the wait
    if delay > 0 and not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), delay)
        except TimeoutError:
            pass
    return stop.is_set()


def create_params(params: RowParams, options: SendOptions) -> dict[str, Any]:
    """The create params a row sets, leaving out the empty ones (so the body, and so the
    idempotency fingerprint, is the same on every run)."""
    out: dict[str, Any] = {"delivery": options.delivery}
    optional = {"prefill": params.prefill, "context": params.context, "metadata": params.metadata,
                "readonly": params.readonly, "external_id": params.externalId, "callback_url": options.callback_url}
    out.update((name, value) for name, value in optional.items() if value)
    if params.expiresAt is not None:
        out["expires_at"] = params.expiresAt
    if options.test:
        out["test"] = True
    return out
