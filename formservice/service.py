"""The running service: its store, clock, limits and rate windows. Both bindings
(JSON-RPC and MCP) authenticate, throttle and invoke domain methods through it."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import event
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, SQLModel, create_engine

from . import tables
from .clock import MINUTE_MS, Clock
from .domain import auth
from .domain.base import METHODS, Ctx, Method
from .errors import ApiError
from .faults import FaultInjector
from .ratelimit import SlidingWindow
from .validation import parse_params

log = logging.getLogger("formservice")


@dataclass
class Limits:
    """Rate limits; the hosted service's values by default. The sandbox can change them
    (raise them for a benchmark, shrink them to test a 429 storm)."""

    calls_per_minute: int = 120
    creates_per_minute: int = 60
    failed_auth: int = 30
    failed_auth_window_ms: int = 15 * MINUTE_MS
    # The window of the two limits above; a sandbox can shorten it, so a benchmark or a
    # test sees several full windows in seconds.
    rate_window_ms: int = MINUTE_MS


@dataclass
class Caller:
    token_id: str
    user_id: str
    workspace_id: str


def import_domain() -> None:
    """Register every method the service offers (importing a resource module registers
    its methods); the service calls it on start, and a caller listing them may too."""
    from .domain import documents, forms, misc, requests, settings, sharelinks, submissions, webhooks  # noqa: F401
    _import_agent_domain()


def _import_agent_domain() -> None:
    # The folders methods, and the agent endpoint's own operations (editor, themes, ...).
    from .domain import analytics, editor, editor_inserts, folders, themes, translation_drafts  # noqa: F401


class Service:
    def __init__(self, data_dir: Path | str | None = None, limits: Limits | None = None,
                 base_url: str = "http://127.0.0.1") -> None:
        import_domain()
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self._seed_copy: sqlite3.Connection | None = None  # the seeded state, in memory (no data dir)
        if data_dir is None:  # in memory: one shared connection
            self.engine = create_engine("sqlite://", connect_args={"check_same_thread": False},
                                        poolclass=StaticPool)
        else:
            path = Path(data_dir)
            path.mkdir(parents=True, exist_ok=True)
            self.engine = create_engine(f"sqlite:///{path / 'formservice.db'}",
                                        connect_args={"check_same_thread": False})
        event.listen(self.engine, "connect", _sqlite_pragmas)
        SQLModel.metadata.create_all(self.engine, tables=_service_tables())
        self.limits = limits or Limits()
        self._initial_limits = replace(self.limits)
        self.base_url = base_url.rstrip("/")
        self.clock = Clock(offset_ms=int(self.meta("clock_offset_ms") or 0))
        self.calls = SlidingWindow(self.limits.calls_per_minute, self.limits.rate_window_ms)
        self.creates = SlidingWindow(self.limits.creates_per_minute, self.limits.rate_window_ms)
        self.failed_auth = SlidingWindow(self.limits.failed_auth, self.limits.failed_auth_window_ms)
        self.call_log: list[tuple[int, str, str]] = []  # (ms, token id, method): counted by tests
        self.worker: Any = None  # the DeliveryWorker, attached by the app
        self.snapshots: Any = None  # the sandbox's SnapshotStore (formservice/sandbox/snapshots.py)
        self.faults = FaultInjector()  # the sandbox's injected faults (faults.set); none by default
        self.dialect = "full"  # how much of each /api/v1 answer is sent (formservice/dialect.py)

    # -- store ------------------------------------------------------------------
    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as s:
            yield s

    def meta(self, key: str) -> str | None:
        """The stored value of the service's setting ``key`` (None when unset)."""
        with self.session() as s:
            row = s.get(tables.Meta, key)
            return row.value if row else None

    def set_meta(self, session: Session, key: str, value: str) -> None:
        row = session.get(tables.Meta, key)
        if row is None:
            session.add(tables.Meta(key=key, value=value))
        else:
            row.value = value

    # -- the seeded state (the sandbox's reset) ----------------------------------------
    SEED_COPY = "seed-state.db"

    def save_seed_state(self) -> None:
        """Keep a copy of the store as it is now (just seeded), for :meth:`restore_seed_state`."""
        target = (sqlite3.connect(self.data_dir / self.SEED_COPY) if self.data_dir is not None
                  else sqlite3.connect(":memory:", check_same_thread=False))
        self.copy_store(into=target)
        if self.data_dir is not None:
            target.close()
        else:
            self._seed_copy = target

    def restore_seed_state(self) -> None:
        """Put the store back as :meth:`save_seed_state` kept it, and the clock, limits,
        rate windows, call log and fault plan as a new sandbox has them. Raises
        LookupError when no seeded state was kept (a data dir seeded by an older version)."""
        if self._seed_copy is not None:
            source = self._seed_copy
        elif self.data_dir is not None and (self.data_dir / self.SEED_COPY).exists():
            source = sqlite3.connect(self.data_dir / self.SEED_COPY)
        else:
            raise LookupError("no copy of the seeded state was kept")
        try:
            self.load_store(source)
        finally:
            if source is not self._seed_copy:
                source.close()
        self.clock.offset_ms = int(self.meta("clock_offset_ms") or 0)
        self.set_limits(**vars(self._initial_limits))
        for window in (self.calls, self.creates, self.failed_auth):
            window.reset()
        self.call_log.clear()
        self.faults.clear()

    def copy_store(self, into: sqlite3.Connection) -> None:
        """Copy the whole store into ``into`` consistently (SQLite's backup API)."""
        raw = self.engine.raw_connection()
        try:
            raw.driver_connection.backup(into)  # type: ignore[union-attr]
        finally:
            raw.close()

    def load_store(self, source: sqlite3.Connection) -> None:
        """Replace the whole store by the database of ``source`` (SQLite's backup API)."""
        raw = self.engine.raw_connection()
        try:
            source.backup(raw.driver_connection)  # type: ignore[arg-type]
        finally:
            raw.close()

    def runtime_state(self) -> dict[str, Any]:
        """What the service holds in memory besides its store: the clock offset, the
        limits, the rate windows' send times and the call log (:meth:`load_runtime_state`)."""
        return {"clockOffsetMs": self.clock.offset_ms, "limits": vars(self.limits).copy(),
                "windows": {"calls": self.calls.state(), "creates": self.creates.state(),
                            "failedAuth": self.failed_auth.state()},
                "callLog": [list(c) for c in self.call_log]}

    def load_runtime_state(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`runtime_state` returned (the clock offset is also stored)."""
        self.clock.offset_ms = int(state["clockOffsetMs"])
        self.set_limits(**{k: int(v) for k, v in state["limits"].items()})
        windows = state["windows"]
        self.calls.load(windows["calls"])
        self.creates.load(windows["creates"])
        self.failed_auth.load(windows["failedAuth"])
        self.call_log[:] = [(int(at), str(tok), str(m)) for at, tok, m in state["callLog"]]
        with self.session() as s:
            self.set_meta(s, "clock_offset_ms", str(self.clock.offset_ms))
            s.commit()

    def now(self) -> int:
        return self.clock.now_ms()

    def advance_clock(self, ms: int) -> int:
        now = self.clock.advance(ms)
        with self.session() as s:
            self.set_meta(s, "clock_offset_ms", str(self.clock.offset_ms))
            s.commit()
        return now

    def set_limits(self, **values: int) -> Limits:
        for k, v in values.items():
            setattr(self.limits, k, v)
        self.calls.limit = self.limits.calls_per_minute
        self.creates.limit = self.limits.creates_per_minute
        self.calls.window_ms = self.creates.window_ms = self.limits.rate_window_ms
        self.failed_auth.limit = self.limits.failed_auth
        return self.limits

    # -- the call path ----------------------------------------------------------------
    def authenticate(self, header: str | None, ip: str, *, allow_expired: bool = False) -> Caller:
        """The caller behind a bearer header. Failed attempts count per IP; past the
        limit a bad token sees RATE_LIMITED instead of UNAUTHORIZED. ``allow_expired``:
        a token past its lifetime still authenticates (for ``/api/sandbox`` only)."""
        now = self.now()
        with self.session() as s:
            try:
                token, user, workspace = auth.authenticate(s, header, now, allow_expired=allow_expired)
            except ApiError as err:
                wait = self.failed_auth.check(ip, now)
                if wait:
                    raise ApiError(
                        "RATE_LIMITED",
                        f"Too many failed authentications from this address; retry in {wait // 1000 + 1} s.",
                        reason="AUTH_RATE_LIMITED",
                        retryAfterMs=wait,
                    ) from err
                self.failed_auth.record(ip, now)
                raise
            s.commit()
            return Caller(token.id, user.id, workspace.id)

    def throttle(self, caller: Caller, bucket: str | None) -> None:
        """Admit one call against the per-token window (and the method's own bucket), or
        raise RATE_LIMITED with the wait that the window demands."""
        now = self.now()
        wait = self.calls.check(caller.token_id, now)
        which = f"{self.limits.calls_per_minute} calls per minute"
        if not wait and bucket == "create":
            wait = self.creates.check(caller.token_id, now)
            which = f"{self.limits.creates_per_minute} request creations per minute"
        if wait:
            raise ApiError("RATE_LIMITED", f"Rate limit of {which} reached; retry in {wait} ms.",
                           reason="RATE_LIMITED", retryAfterMs=wait)
        self.calls.record(caller.token_id, now)
        if bucket == "create":
            self.creates.record(caller.token_id, now)

    def invoke(self, caller: Caller, name: str, params: Any, *, throttle: bool = True,
               registry: dict[str, Method] = METHODS) -> Any:
        """Run one method for ``caller``: throttle, validate params, call the domain
        function in one transaction, and return its JSON-ready result. Any failure rolls
        the transaction back, so a refused call stores nothing."""
        m = lookup(name, registry)
        if m.is_async:
            raise TypeError(f"{name} is a coroutine method: call it with invoke_async")
        p = self._admit(caller, m, params, throttle)
        with self.session() as s:
            ctx = self.context(s, caller)
            try:
                result = m.fn(ctx, p)
                s.commit()
            except Exception:
                s.rollback()
                raise
        for hook in ctx.after_commit:
            hook()
        return dump(result)

    async def invoke_async(self, caller: Caller, name: str, params: Any, *, throttle: bool = True,
                           registry: dict[str, Method] = METHODS) -> Any:
        """As :meth:`invoke`, for a registry that also holds coroutines: those are awaited
        with the service and their params, outside any transaction."""
        m = lookup(name, registry)
        if not m.is_async:
            return self.invoke(caller, name, params, throttle=throttle, registry=registry)
        p = self._admit(caller, m, params, throttle)
        return dump(await m.fn(self, p))

    def _admit(self, caller: Caller, m: Method, params: Any, throttle: bool) -> Any:
        """Throttle and log the call (when ``throttle``) and return its validated params."""
        if throttle:
            self.throttle(caller, m.bucket)
            self.call_log.append((self.now(), caller.token_id, m.name))
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise ApiError("VALIDATION_ERROR", "params must be a JSON object (or omitted).",
                           field="params", reason="INVALID_TYPE", expectedType="object")
        return parse_params(m.params, params)

    def context(self, session: Session, caller: Caller) -> Ctx:
        return Ctx(
            session=session,
            now=self.now(),
            workspace=tables.referenced(session, tables.Workspace, caller.workspace_id),
            user=tables.referenced(session, tables.User, caller.user_id),
            token=tables.referenced(session, tables.ApiToken, caller.token_id),
            base_url=self.base_url,
            service=self,
        )


def lookup(name: str, registry: dict[str, Method] = METHODS) -> Method:
    m = registry.get(name)
    if m is None:
        import difflib

        shown = name if len(name) <= 100 else name[:100] + "…"
        close = difflib.get_close_matches(name[:100], list(registry), n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise ApiError("METHOD_NOT_FOUND", f"Unknown method: {shown}.{hint} Call methods.list for the available "
                       "names.", reason="UNKNOWN_METHOD")
    return m


def dump(result: Any) -> Any:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", exclude_unset=True)
    return result


def _service_tables() -> list[Any]:
    return [t.__table__ for t in vars(tables).values()
            if isinstance(t, type) and issubclass(t, SQLModel) and hasattr(t, "__table__")]


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()
