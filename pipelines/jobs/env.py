"""What a job runs with besides its params: the settings, the store, the token source, the
service's clock, a stop signal and the hooks a command shows progress through. A command,
the scheduler, the demo and the Python API each make one and hand it to the job."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connector.client.grant import note_token_use
from connector.client.rpc import FormClient, TokenSource
from connector.config.settings import Settings
from connector.store import Store

if TYPE_CHECKING:
    from pipelines.export.write import Format
    from pipelines.outreach import Prepared
    from pipelines.outreach.send import ProgressCallback
    from pipelines.rules.contact import ContactRule


class TokenMissing(ValueError):
    """A job that talks to the service has neither ``service.token`` nor a sign-in."""


@dataclass
class Hooks:
    """What a command shows while a job runs; the scheduler leaves them unset. None of them
    changes what the job does."""

    # Hears the plan before the first send (the estimate) and gives the send's progress callback.
    outreach_prepared: Callable[[Prepared], ProgressCallback | None] | None = None
    load_rows: Callable[[str, int], None] | None = None  # table, rows read
    files_done: Callable[[int, int], None] | None = None  # total, done
    mapping_setting: str = "outreach.mapping"  # where outreach.mapping is set, for its messages


@dataclass
class JobEnv:
    """One job run's surroundings. ``tokens`` is the stored grant when ``service.token`` is
    not set; ``client`` a client the caller keeps (the demo's, a test's), used as it is;
    ``clock`` the service's time in epoch ms (default: the client's ``service_now``);
    ``targets`` an export's (format, file) pairs a command chose before opening the store
    (``check_before_store``), which the export then writes (None: the export chooses them)."""

    settings: Settings
    store: Store
    tokens: TokenSource | None = None
    client: FormClient | None = None
    clock: Callable[[], Awaitable[int]] | None = None
    stop: asyncio.Event | None = None
    hooks: Hooks = field(default_factory=Hooks)
    targets: list[tuple[Format, Path]] | None = None
    _rule: ContactRule | None = field(default=None, init=False, repr=False)

    def contact_rule(self) -> ContactRule:
        """The contact rule of this run, built once from the settings and the store."""
        from pipelines.rules.contact import contact_rule

        if self._rule is None:
            self._rule = contact_rule(self.store, self.settings.outreach)
        return self._rule

    def check_token(self) -> None:
        """``TokenMissing`` unless a call to the service can be authorised."""
        if self.client is None and self.settings.service.token is None and self.tokens is None:
            raise TokenMissing("service.token is not set: put it in the [service] section or in "
                               "FORMSYNC_SERVICE__TOKEN, or run `formsync login`")

    async def now(self, fc: FormClient) -> int:
        """The service's time in epoch ms."""
        return await (self.clock() if self.clock is not None else fc.service_now())

    @asynccontextmanager
    async def service(self, **overrides: Any) -> AsyncIterator[FormClient]:
        """A client of the service: ``client`` when given, else one made from the settings
        and the token source (a static token's first use recorded)."""
        if self.client is not None:
            yield self.client
            return
        self.check_token()
        if self.tokens is None:
            await asyncio.to_thread(note_token_use, self.store, self.settings.service)
        async with FormClient.from_settings(self.settings.service, self.tokens, **overrides) as fc:
            yield fc
