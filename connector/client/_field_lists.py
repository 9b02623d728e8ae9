"""Each form's field list read from the service when an answer names a key the store
has no descriptor for: until then that key is held back from every typed output (views,
exports, frames, loads; the long answers table carries it), so a column's type and place
always come from ``fields.list``, never from values.

``learn_field_lists`` is what ``poll`` and ``sync`` call in the run that stored the data;
``FieldListLearner`` is the receiver's: a background task woken after commits, never on
the acknowledgement path. Both ask about a new key at once (one read per form covers all
its new keys), and about the same held keys once a minute at most, whichever process asks
(``Store.claim_field_list_reads``); without a service token the receiver names in its log,
once, each form that holds new keys back, and how to fix it (``formsync status`` says so too)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from .._process.repeats import RepeatedWarning
from ..config.settings import ServiceSettings
from ..errors import FormsyncError
from ..store import Store
from .rpc import FormClient, TokenSource

log = logging.getLogger("formsync.fields")
READ_EVERY_MS = 60_000  # the same held keys: a form's fields.list is read (or tried) once a minute at most
# A write holding keys back commits within this of reading its clock (SQLite waits 30 s for its
# lock): each look without a token reads again the keys held this long before the last one.
HELD_MARGIN_MS = 120_000
HELD_BACK_FIX = "set service.token (the receiver, sync and poll then read fields.list), or run formsync views with it"


async def learn_field_lists(client: FormClient, store: Store, form_ids: Iterable[str] | None = None) -> list[str]:
    """Read ``fields.list`` once for each form among ``form_ids`` (None: every form) that
    holds back answered keys no read asked about yet, or was not read in the last minute
    (``Store.claim_field_list_reads``), and store it
    (``Store.record_fields``: its view is rebuilt, the keys it lists get their columns).
    Returns the forms read. A form the service will not list is logged and asked again
    a minute later at the earliest."""
    wanted = None if form_ids is None else sorted(set(form_ids))
    if wanted == []:
        return []
    learnt = []
    for form_id in await asyncio.to_thread(store.claim_field_list_reads, wanted, every_ms=READ_EVERY_MS):
        try:
            listed = await client.list_fields(form_id)
        except FormsyncError as e:
            log.warning("cannot read the fields of form %s (%s); its new fields stay held back from the typed "
                        "outputs", form_id, e)
            continue
        if listed.published or listed.items:
            await asyncio.to_thread(store.record_fields, form_id, listed.items)
            learnt.append(form_id)
    return learnt


class FieldListLearner:
    """The receiver's background reading of field lists (see the module docstring).
    ``poke`` after each commit costs setting an event; the store is looked at once per
    ``every`` seconds at most while deliveries come in, and once a minute otherwise while
    keys are held back (a service that was away is asked again)."""

    def __init__(self, store: Store, service: ServiceSettings | None, tokens: TokenSource | None = None, *,
                 every: float = 2.0) -> None:
        self.store, self.every, self.tokens = store, every, tokens
        self.service = service if service is not None and (service.token is not None or tokens is not None) else None
        self._wake = asyncio.Event()
        # No token: when the last look began, and the forms it or the looks before named in the log
        # (those named before what a look reads again are forgotten: memory bounded in the forms).
        self._looked: int | None = None
        self._said: dict[str, int] = {}  # form id -> when it was named (store clock, epoch ms)
        self._task: asyncio.Task[None] | None = None
        self._repeats = RepeatedWarning(log)

    def poke(self) -> None:
        """Data was committed: look for held-back keys soon."""
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="formsync-field-lists")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), READ_EVERY_MS / 1000)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.round()
            except Exception as e:  # a database or service hiccup: try again after the next commit
                self._repeats.warn("cannot read the field lists of forms with new fields: %s", e)
            await asyncio.sleep(self.every)

    async def round(self) -> list[str]:
        """One look at the forms holding keys back: with a token, read their field lists
        (returns the forms read); without, name in the log those holding keys back
        since the last look (all of them at the first) that it did not name already."""
        if self.service is None:
            await self._name_held()
            return []
        held = await asyncio.to_thread(self.store.held_back_fields)
        if not held:
            return []
        async with FormClient.from_settings(self.service, self.tokens) as client:
            return await learn_field_lists(client, self.store, list(held))

    async def _name_held(self) -> None:
        since = None if self._looked is None else self._looked - HELD_MARGIN_MS
        held = await asyncio.to_thread(self.store.held_back_fields, since=since)
        # After the read: no key it returned was held later than this.
        self._looked = now = self.store.clock()
        if since is not None:  # a form named before ``since`` is named again only for keys held after
            self._said = {f: at for f, at in self._said.items() if at >= since}
        new = [f for f in held if f not in self._said]
        if new:
            self._said.update(dict.fromkeys(new, now))
            log.warning("new fields held back from the typed outputs (no field list read) for form(s) %s: %s",
                        ", ".join(new), HELD_BACK_FIX)
