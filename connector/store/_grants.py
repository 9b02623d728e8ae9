"""The sign-in kept by ``formsync login`` (``store.grants``) and the first use of each
static token (``formsync_token_uses``). Rows hold secrets only as the store's key sealed
them (``connector.client.grant`` seals and opens them); each write is one short transaction, so
a new token pair is durable the moment ``save_tokens`` returns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Table, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from ._database import Database
from ._tables import OAuthGrant, TokenUse

GRANT_LOCK = "formsync-grant"  # the store lock one refresh at a time is taken under


def holds_grant(row: OAuthGrant | None) -> bool:
    """Whether ``row`` holds a sign-in (its tokens), not only a registered client."""
    return row is not None and (row.refresh_token is not None or row.access_token is not None)


GRANTS: Table = OAuthGrant.__table__  # type: ignore[attr-defined]


def holds_any_grant(conn: Connection) -> bool:
    """Whether any row holds a sign-in sealed with the store's key."""
    if not conn.dialect.has_table(conn, GRANTS.name):
        return False
    g = GRANTS.c
    return conn.execute(select(g.service_url).where(or_(g.access_token.is_not(None), g.refresh_token.is_not(None)))
                        .limit(1)).first() is not None


def forget_grants(conn: Connection) -> int:
    """Drop every sign-in and registered client (their secrets were sealed with a key
    being replaced); returns how many rows held a sign-in."""
    if not conn.dialect.has_table(conn, GRANTS.name):
        return 0
    signed_in = len(list(conn.execute(select(GRANTS.c.service_url).where(or_(
        GRANTS.c.access_token.is_not(None), GRANTS.c.refresh_token.is_not(None))))))
    conn.execute(GRANTS.delete())
    return signed_in


class GrantRows:
    """The sign-in repository (``store.grants``)."""

    def __init__(self, db: Database, clock: Callable[[], int]) -> None:
        self._db = db
        self._clock = clock

    def _exists(self) -> bool:
        return OAuthGrant.__tablename__ in self._db.table_names()

    def get(self, service_url: str) -> OAuthGrant | None:
        """The row of ``service_url`` (its client, and its grant while signed in)."""
        if not self._exists():
            return None
        with self._db.reader() as s:
            return s.get(OAuthGrant, service_url)

    def save_client(self, service_url: str, client_id: str, client_secret: bytes | None, key_id: str) -> None:
        """Keep a newly registered client (the grant, if any, is dropped with the old client)."""
        with self._db.session() as s:
            row = s.get(OAuthGrant, service_url)
            if row is None:
                row = OAuthGrant(service_url=service_url, client_id=client_id, key_id=key_id)
            _clear_grant(row)
            row.client_id, row.client_secret, row.key_id = client_id, client_secret, key_id
            s.add(row)

    def sign_in(self, service_url: str, *, workspace_id: str, scope: str, tokens: dict[str, Any]) -> int:
        """Store a new grant (sealed tokens and their expiry times in ``tokens``) in one
        transaction; returns its generation."""
        now = self._clock()
        with self._db.session() as s:
            row = s.get(OAuthGrant, service_url)
            if row is None:
                raise LookupError(f"no client registered for {service_url}")
            row.workspace_id, row.scope, row.signed_in_at, row.refreshed_at = workspace_id, scope, now, now
            row.failure = row.failed_at = None
            for name, value in tokens.items():
                setattr(row, name, value)
            row.generation += 1
            s.add(row)
            return row.generation

    def save_tokens(self, service_url: str, generation: int, tokens: dict[str, Any]) -> bool:
        """Replace the token pair of ``generation`` by a new one, in one write; False when
        the grant is no longer at ``generation`` (forgotten, or signed in again)."""
        values = {**tokens, "generation": generation + 1, "refreshed_at": self._clock(), "failure": None,
                  "failed_at": None}
        with self._db.session() as s:
            done = s.exec(update(OAuthGrant).where(col(OAuthGrant.service_url) == service_url,
                                                   col(OAuthGrant.generation) == generation).values(**values))
            return bool(done.rowcount == 1)

    def mark_failed(self, service_url: str, generation: int, reason: str) -> None:
        """Record that the service refused the grant of ``generation`` for good."""
        with self._db.session() as s:
            s.exec(update(OAuthGrant).where(col(OAuthGrant.service_url) == service_url,
                                            col(OAuthGrant.generation) == generation)
                   .values(failure=reason, failed_at=self._clock()))

    def forget(self, service_url: str) -> bool:
        """Drop the grant of ``service_url`` (its client is kept); False when none was stored."""
        if not self._exists():
            return False
        with self._db.session() as s:
            row = s.get(OAuthGrant, service_url)
            if row is None or not holds_grant(row):
                return False
            _clear_grant(row)
            row.generation += 1
            s.add(row)
            return True

    def note_token_use(self, fingerprint: str, kind: str) -> int:
        """Record a use of the static token ``fingerprint``; returns when it was first used.
        Processes noting the same token at once all succeed: an insert that loses the race
        to another's is done again as an update of the row that won."""
        try:
            return self._note_use(fingerprint, kind)
        except IntegrityError:
            return self._note_use(fingerprint, kind)

    def _note_use(self, fingerprint: str, kind: str) -> int:
        now = self._clock()
        with self._db.session() as s:
            row = s.get(TokenUse, fingerprint)
            if row is None:
                row = TokenUse(fingerprint=fingerprint, kind=kind, first_used_at=now, last_used_at=now)
            row.last_used_at = now
            s.add(row)
            return row.first_used_at

    def token_first_used(self, fingerprint: str) -> int | None:
        """When the static token ``fingerprint`` was first used (None: never)."""
        if TokenUse.__tablename__ not in self._db.table_names():
            return None
        with self._db.reader() as s:
            row = s.get(TokenUse, fingerprint)
            return None if row is None else row.first_used_at


def _clear_grant(row: OAuthGrant) -> None:
    row.workspace_id = row.scope = None
    row.access_token = row.refresh_token = None
    row.access_expires_at = row.refresh_expires_at = row.signed_in_at = row.refreshed_at = None
    row.failure = row.failed_at = None
