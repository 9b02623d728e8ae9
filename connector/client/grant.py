"""The grant: which token a call uses now, when no static ``service.token`` is set.

``formsync login`` stores an OAuth grant in the store (``store.grants``), its tokens sealed
with the store's key. :class:`GrantTokens` hands every client of every process (commands,
the scheduler, receivers) the current access token: refreshed before it expires, and once
more when the service answers 401. One refresh at a time per database, under the store's
lock (an advisory lock on PostgreSQL, a named lock on MySQL / MariaDB, a lease row on
SQLite); a process that finds a newer token there uses it instead of presenting a refresh
token already spent. The new refresh token is written in the one short transaction that
follows the token endpoint's answer, so a kill at any other moment leaves a usable chain.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from pydantic import SecretStr

from ..config.keyfile import key_changed, key_id, key_path, load_key, seal, unseal
from ..store._grants import GRANT_LOCK, holds_grant
from . import oauth
from ._pacing import token_key

if TYPE_CHECKING:
    from ..config.settings import ServiceSettings, Settings
    from ..store import Store
    from ..store._leader import LeaderLock
    from ..store._tables import OAuthGrant

log = logging.getLogger("formsync.grant")
REFRESH_TTL_MS = 30 * 24 * 3600 * 1000  # a refresh token unused this long expires (the service's rule)
LOGIN_HINT = "run `formsync login` to sign in again"


class GrantError(Exception):
    """The stored grant cannot give a token: the message says why and names ``formsync
    login``; ``lost`` when the service refused the chain for good (``invalid_grant``)."""

    def __init__(self, message: str, *, lost: bool = False) -> None:
        super().__init__(message)
        self.lost = lost


def refused(reason: str) -> GrantError:
    """The error of a sign-in the service refused for good (``invalid_grant``)."""
    return GrantError(f"the service refused the stored sign-in ({reason}): {LOGIN_HINT}", lost=True)


def now_ms() -> int:
    return int(time.time() * 1000)


def note_token_use(store: Store, service: ServiceSettings) -> None:
    """Record a use of the static ``service.token`` by its fingerprint (never the token):
    an API token expires 30 days after it was made, so its first use bounds what is left."""
    if service.token is not None:
        value = service.token.get_secret_value()
        store.grants.note_token_use(token_key(value), token_kind(value))


def token_kind(value: str) -> str:
    """``oauth`` for an OAuth access token (``fbo_``, one hour), else ``api`` (30 days)."""
    return "oauth" if value.startswith("fbo_") else "api"


def stored_grant(store: Store, settings: Settings, config: Path | None = None) -> GrantTokens | None:
    """Where every command, the scheduler and each receiver get their tokens: None when
    ``service.token`` is set (it wins) or no sign-in is stored, else the stored grant.
    A key file that is missing or not the sign-in's is a ``KeyFileError``."""
    if settings.service.token is not None:
        return None
    url = settings.service.base_url.rstrip("/")
    if not holds_grant(store.grants.get(url)):
        return None
    path = key_path(settings.store, config)
    return GrantTokens(store, url, load_key(path), key_where=str(path), timeout=settings.service.timeout_seconds)


def grant_key(service_url: str, client_id: str) -> str:
    """What shares a pacer between the clients of one grant (its tokens change hourly)."""
    return token_key(f"grant:{service_url}:{client_id}")


def sealed_tokens(key: bytes, service_url: str, tokens: oauth.TokenSet, now: int) -> dict[str, Any]:
    """A token pair as ``store.grants`` keeps it: sealed, with its expiry times."""
    return {"access_token": seal(key, tokens.access_token.get_secret_value(), f"{service_url}:access"),
            "access_expires_at": tokens.expires_at,
            "refresh_token": (seal(key, tokens.refresh_token.get_secret_value(), f"{service_url}:refresh")
                              if tokens.refresh_token is not None else None),
            "refresh_expires_at": now + REFRESH_TTL_MS if tokens.refresh_token is not None else None}


@dataclass(frozen=True)
class Current:
    """The access token this process uses, and the generation it came from."""

    generation: int
    token: SecretStr
    expires_at: int


class GrantTokens:
    """The token source of every client when the stored grant is used (``FormClient``
    takes it in place of a token). ``key`` is the store's key; ``lock_ttl_seconds`` is
    how long a lease (SQLite) outlives a process killed while refreshing."""

    def __init__(self, store: Store, service_url: str, key: bytes, *, key_where: str,
                 clock: Callable[[], int] = now_ms, lock_wait_seconds: float = 60.0,
                 lock_ttl_seconds: float = 30.0, timeout: float = 30.0) -> None:
        self._store, self.service_url, self._key, self._key_where = store, service_url.rstrip("/"), key, key_where
        self._clock, self._lock_wait, self._lock_ttl, self._timeout = clock, lock_wait_seconds, lock_ttl_seconds, timeout
        self._current: Current | None = None
        self._meta: oauth.ServerMeta | None = None
        self._mutex = asyncio.Lock()
        row = self._row(check_failure=False)
        self.key = grant_key(self.service_url, row.client_id)
        self.workspace_id = row.workspace_id

    def _row(self, *, check_failure: bool = True) -> OAuthGrant:
        row = self._store.grants.get(self.service_url)
        if row is None or not holds_grant(row):
            raise GrantError(f"no sign-in is stored for {self.service_url}: run `formsync login`, or set "
                             "service.token")
        if row.failure is not None and check_failure:
            raise refused(row.failure)
        if row.key_id != key_id(self._key):
            raise key_changed(self._key_where)
        return row

    def _open(self, row: OAuthGrant) -> Current:
        if row.access_token is None:
            return Current(row.generation, SecretStr(""), 0)
        value = unseal(self._key, row.access_token, f"{self.service_url}:access", self._key_where)
        return Current(row.generation, SecretStr(value), row.access_expires_at or 0)

    async def token(self) -> SecretStr:
        """The access token to send now, refreshed first when it is about to expire."""
        async with self._mutex:
            cur = self._current
            if cur is None or oauth.refresh_due(cur.expires_at, self._clock()):
                cur = await self._fresh(stale=None)
            return cur.token

    async def renew(self, stale: SecretStr) -> SecretStr:
        """After a 401 to ``stale``: a newer token another process stored, else a refresh."""
        async with self._mutex:
            cur = self._current
            if cur is not None and cur.token.get_secret_value() != stale.get_secret_value():
                return cur.token
            return (await self._fresh(stale=stale)).token

    async def _fresh(self, stale: SecretStr | None) -> Current:
        """A usable token: the stored one when it is newer than ``stale`` and not due,
        else one refreshed under the store's lock."""
        cur = self._open(await asyncio.to_thread(self._row))
        if self._usable(cur, stale):
            self._current = cur
            return cur
        lock = self._store.leader_lock(GRANT_LOCK, ttl_seconds=self._lock_ttl)
        await self._acquire(lock)
        try:
            row = await asyncio.to_thread(self._row)
            cur = self._open(row)
            if not self._usable(cur, stale):
                cur = await self._refresh(row)
        finally:
            await asyncio.to_thread(lock.release)
        self._current = cur
        return cur

    def _usable(self, cur: Current, stale: SecretStr | None) -> bool:
        if not cur.token.get_secret_value():
            return False
        if stale is not None and cur.token.get_secret_value() == stale.get_secret_value():
            return False
        return not oauth.refresh_due(cur.expires_at, self._clock())

    async def _acquire(self, lock: LeaderLock) -> None:
        deadline = time.monotonic() + self._lock_wait
        while not await asyncio.to_thread(lock.try_acquire):
            if time.monotonic() > deadline:
                raise GrantError(f"another process held the sign-in's refresh lock for {self._lock_wait:.0f} s; "
                                 "run again shortly")
            await asyncio.sleep(0.05)

    async def _refresh(self, row: OAuthGrant) -> Current:
        """Spend the stored refresh token (the lock is held) and store its successor in one write."""
        if row.refresh_token is None:
            raise GrantError(f"the stored sign-in has no refresh token left: {LOGIN_HINT}", lost=True)
        where = self._key_where
        form = {"grant_type": "refresh_token",
                "refresh_token": unseal(self._key, row.refresh_token, f"{self.service_url}:refresh", where),
                **oauth.client_form(row.client_id, self._client_secret(row))}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout)) as http:
            meta = self._meta or await oauth.discover(http, self.service_url)
            self._meta = meta
            try:
                tokens = await oauth.token_call(http, meta, form, self._clock())
            except oauth.OAuthRefused as e:
                if e.error not in ("invalid_grant", "invalid_client"):
                    raise
                await asyncio.to_thread(self._store.grants.mark_failed, self.service_url, row.generation, e.error)
                log.error("%s", refused(e.error))
                raise refused(e.error) from None
        values = sealed_tokens(self._key, self.service_url, tokens, self._clock())
        if not await asyncio.to_thread(self._store.grants.save_tokens, self.service_url, row.generation, values):
            raise GrantError(f"the stored sign-in changed while it was refreshed (a login or logout): {LOGIN_HINT}")
        log.info("access token refreshed (generation %d)", row.generation + 1)
        return Current(row.generation + 1, tokens.access_token, tokens.expires_at)

    def _client_secret(self, row: OAuthGrant) -> SecretStr | None:
        if row.client_secret is None:
            return None
        return SecretStr(unseal(self._key, row.client_secret, f"{self.service_url}:client", self._key_where))

