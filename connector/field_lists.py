"""Each form's field list learnt from the service when its first data arrives, so the
form's typed view and its exports take their final shape from the first row: one
``fields.list`` call per form whose list the store holds only from answers (a
"provisional" schema, see ``Store.provisional_forms``).

``learn_field_lists`` is what ``poll`` and ``sync`` call in the run that stored the data;
``FieldListLearner`` is the receiver's: a background task woken after commits, never on
the acknowledgement path, that learns each such form once when a service token is
configured and otherwise says once, in the log, which forms are provisional and how to
fix it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable

from .client import FormClient, TokenSource
from .errors import FormsyncError
from .settings import ServiceSettings
from .store import Store

log = logging.getLogger("formsync.fields")
RETRY_SECONDS = 300.0  # a form the service would not list is asked again after this long
PROVISIONAL_FIX = "set service.token (then fields.list is read) or run formsync views"


async def learn_field_lists(client: FormClient, store: Store, form_ids: Iterable[str]) -> list[str]:
    """Read ``fields.list`` once for each form among ``form_ids`` whose schema is still
    provisional, and store it (``Store.record_fields``: the view is rebuilt). Returns the
    forms learnt. A form the service will not list is logged and left provisional."""
    wanted = set(form_ids)
    if not wanted:
        return []
    learnt = []
    for form_id in await asyncio.to_thread(store.provisional_forms, sorted(wanted)):
        try:
            listed = await client.list_fields(form_id)
        except FormsyncError as e:
            log.warning("cannot read the fields of form %s (%s); its schema stays provisional", form_id, e)
            continue
        if listed.items:
            await asyncio.to_thread(store.record_fields, form_id, listed.items)
            learnt.append(form_id)
    return learnt


class FieldListLearner:
    """The receiver's background learning of field lists (see the module docstring).
    ``poke`` after each commit costs setting an event; the store is looked at once per
    ``every`` seconds at most while deliveries come in."""

    def __init__(self, store: Store, service: ServiceSettings | None, tokens: TokenSource | None = None, *,
                 every: float = 2.0) -> None:
        self.store, self.every, self.tokens = store, every, tokens
        self.service = service if service is not None and (service.token is not None or tokens is not None) else None
        self._wake = asyncio.Event()
        self._said: set[str] = set()  # forms named in the log already (no token)
        self._retry_at: dict[str, float] = {}  # forms the service would not list: when to ask again
        self._task: asyncio.Task[None] | None = None

    def poke(self) -> None:
        """Data was committed: look for new provisional forms soon."""
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="formsync-field-lists")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.round()
            except Exception as e:  # a database or service hiccup: try again after the next commit
                log.warning("cannot learn the field lists of new forms: %s", e)
            await asyncio.sleep(self.every)

    async def round(self) -> list[str]:
        """One look at the provisional forms: with a token, learn them (returns those
        learnt); without, name the ones not named yet in the log."""
        forms = await asyncio.to_thread(self.store.provisional_forms)
        if self.service is None:
            new = [f for f in forms if f not in self._said]
            if new:
                self._said.update(new)
                log.warning("provisional schema (fields learnt from answers only) for form(s) %s: %s",
                            ", ".join(new), PROVISIONAL_FIX)
            return []
        now = time.monotonic()
        forms = [f for f in forms if self._retry_at.get(f, 0.0) <= now]
        if not forms:
            return []
        async with FormClient.from_settings(self.service, self.tokens) as client:
            learnt = await learn_field_lists(client, self.store, forms)
        self._retry_at.update(dict.fromkeys(set(forms) - set(learnt), now + RETRY_SECONDS))
        return learnt
