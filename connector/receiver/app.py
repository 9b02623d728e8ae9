"""The receiver: an aiohttp application that takes signed callbacks and webhook
deliveries, verifies them, persists them with the store and only then acknowledges.

Routes (``path`` is ``ReceiverSettings.path``, ``/formsync/events`` by default):

* ``POST {path}/callbacks``: request callbacks (``callbackUrl``), verified with
  ``callback_secrets`` only; stored with source ``callback``.
* ``POST {path}/webhooks``: subscription deliveries (``webhooks.create``), verified with
  ``webhook_secrets`` only; stored with source ``webhook``.
* ``POST {path}``: either kind, verified with both lists; the source is that of the list
  whose secret matched (the callback list is tried first, so a secret present in both
  lists counts as a callback). Use it when one URL must serve both.
* ``GET /healthz``: 200 when the database answers and can be written, 503 otherwise
  with the reason (``"database": "unavailable"``, ``"not writable (disk full: 0 KiB
  free)"``, ``"not writable (read-only file system)"``, ``"locked by another process"``).
* ``GET /readyz``: 200 when a delivery would be stored now: the database as for
  ``/healthz``, a callback or webhook secret configured (``"secrets"`` says none is),
  and room in the commit queue for a body of ``max_body_bytes`` (``"queue": "full: ..."``);
  503 with the reasons otherwise.
* ``GET /metrics``: Prometheus text format, from a registry of this application only.

What each delivery gets, in this order:

=====  =======================================================================
413    the body is larger than ``max_body_bytes`` (Content-Length, then while reading)
401    a missing, malformed, stale, future or forged signature (nothing is parsed)
400    the body ended before its declared length (a connection closed early, broken
       chunked framing), or the signed body is not UTF-8 JSON, or is JSON but not an event envelope
       (``id`` and ``type`` of 1 to 256 visible ASCII characters, ``createdAt``;
       a known type's ``data`` blocks in their documented shapes)
200    stored (``"status": "stored"``; an unknown type is stored raw) or already
       stored (``"status": "duplicate"``; nothing is written the second time), or
       set aside (``"status": "set_aside"`` with its ``reason``): an event holding what
       no database can store (U+0000, lone surrogates, non-finite numbers, nesting
       deeper than 64, a mapped integer such as ``editCount`` beyond 64 bits) is kept
       in the dead letters, body and reason, and acknowledged so the sender stops
       retrying; ``formsync dead-letters replay`` stores it once a release can
503    the database is unavailable, or the commit has not ended within
       ``answer_timeout_seconds`` (5 s by default; should it commit later, the
       retry is a duplicate), or ``max_queued_bytes`` of bodies already wait for a
       commit (at once): the sender should retry later
500    the database refused this one event (a constraint, a bug): it is logged,
       and the other events of its batch are stored one by one
=====  =======================================================================

Answers are JSON: ``{"ok": true, "status", "eventId", "type"}``, or ``{"ok": false,
"error": {"code", "message", "details"?}}`` (503 adds ``Retry-After``). A 2xx is only
ever sent after the event's transaction has committed. Concurrent
deliveries are group-committed: a single writer task hands up to ``max_batch`` verified
deliveries to its committer, in a process of its own by default (``connector.receiver._committer``)
or in a worker thread, which reads each body (``parse_event``: an event no database can store is set aside, a
400 comes back for a body that is not an event) and stores the events with one ``Store.store_events``
call; each waiter is then answered with its own outcome. Log lines carry the event id, type, source and
outcome, never a header value, secret or body; a refusal is logged once per cause and path
(then once an hour with the count held back), a signature refusal with the secret setting
tried and what to check (``connector.receiver._refusals``).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import logging
import signal
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.registry import Collector
from pydantic import SecretStr

from .._process.serverlog import quiet_malformed_requests
from .._process.signals import stop_on_signals
from ..client._field_lists import FieldListLearner
from ..client.rpc import TokenSource
from ..config.secrets_file import signing_secrets
from ..config.settings import ReceiverSettings, ServiceSettings
from ..signing import CustomScheme, Scheme, SigningConfigError, Verification, verify
from ..store import Store
from ..store._mapping import Source
from ._committer import Committer, Result, committer_for
from ._delivery import (
    MAX_JSON_DEPTH,
    QUEUE_FULL,
    TOO_SLOW,
    UNAVAILABLE,
    Delivery,
    Refusal,
    RefusalError,
    parse_event,
)
from ._refusals import Channel, RefusalLog, signature_advice
from ._secrets import WebhookSecrets
from .tls import server_context

__all__ = [
    "Channel",
    "DEFAULT_MAX_BATCH",
    "MAX_JSON_DEPTH",
    "Receiver",
    "ReceiverMetrics",
    "create_receiver_app",
    "event_paths",
    "parse_event",
    "run_receiver",
]

log = logging.getLogger("connector.receiver")

DEFAULT_MAX_BATCH = 256
"""The most events one group commit stores."""

HEALTH_TIMEOUT_S = 5.0
_COMMIT_TIMEOUT_ANSWERS = 3  # a store process's batch may take this many answer bounds

# ======================================================================================
# Metrics
# ======================================================================================


@dataclass
class ReceiverMetrics:
    """The receiver's Prometheus metrics, in a registry of their own (several receivers
    in one process do not clash)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.received = Counter("formsync_receiver_received", "Deliveries that reached an event path.",
                                ["channel"], registry=r)
        self.stored = Counter("formsync_receiver_stored", "Events stored for the first time.", ["source"],
                              registry=r)
        self.set_aside = Counter("formsync_receiver_set_aside",
                                 "Correctly signed events no database can store, kept in the dead letters.",
                                 registry=r)
        self.duplicates = Counter("formsync_receiver_duplicates", "Deliveries of an event id already stored.",
                                  registry=r)
        self.rejected = Counter("formsync_receiver_rejected", "Deliveries refused, by reason.", ["reason"],
                                registry=r)
        self.responses = Counter("formsync_receiver_responses", "Answers to deliveries, by HTTP status.",
                                 ["status"], registry=r)
        self.commit_seconds = Histogram(
            "formsync_receiver_commit_seconds", "Time of one group commit (store_events call).", registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
        self.batch_size = Histogram(
            "formsync_receiver_batch_size", "Deliveries per group commit (bodies refused with 400 included).", registry=r,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
        self.queued = Gauge("formsync_receiver_queued", "Deliveries waiting for the writer.", registry=r)
        self.held_bytes = Gauge("formsync_receiver_held_bytes",
                                "Body bytes of the deliveries waiting for or in a commit.", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


# ======================================================================================
# Group commit
# ======================================================================================


class _Waiting:
    """A delivery in the writer's hands, and the future its handler awaits (equal only
    to itself, so the queue finds it by identity)."""

    __slots__ = ("delivery", "done")

    def __init__(self, delivery: Delivery, done: asyncio.Future[Result]) -> None:
        self.delivery, self.done = delivery, done


class _Writer:
    """One task that drains the pending deliveries: up to ``max_batch`` events per
    commit by its ``Committer``, ``committer.depth`` commits in flight at most; each
    waiter gets its own result. Per delivery it costs one future and a list append
    (the group commit's hot path)."""

    def __init__(self, committer: Committer, metrics: ReceiverMetrics, max_batch: int, *, answer_within: float,
                 max_held_bytes: int, after_commit: Callable[[], None] = lambda: None) -> None:
        self.committer, self.metrics, self.max_batch = committer, metrics, max_batch
        self.answer_within, self.max_held_bytes = answer_within, max_held_bytes
        self.after_commit = after_commit  # cheap and never raising: it runs once per batch
        self.pending: deque[_Waiting] = deque()
        self.held_bytes = 0  # the bodies pending or in a commit: what a database away makes pile up
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        metrics.queued.set_function(lambda: len(self.pending))
        metrics.held_bytes.set_function(lambda: self.held_bytes)

    async def start(self) -> None:
        await self.committer.start()
        self.task = asyncio.create_task(self._run(), name="formsync-receiver-writer")

    async def close(self) -> None:
        """Store everything pending so far, then stop."""
        if self.task is None or self.closed:
            return
        self.closed = True
        self.wake.set()
        try:
            await self.task
        finally:
            await self.committer.close()

    async def submit(self, delivery: Delivery) -> Result:
        """The delivery's result, or 503 (``TOO_SLOW``) once ``answer_within`` seconds
        have passed without one, or at once (``QUEUE_FULL``) when the bodies held would
        pass ``max_held_bytes``. A delivery answered ``TOO_SLOW`` may still be committed
        by a batch already on its way: the sender's retry is then a duplicate."""
        if self.closed or self.task is None or self.task.done():
            return UNAVAILABLE
        size = len(delivery.body)
        if self.held_bytes + size > self.max_held_bytes:
            return QUEUE_FULL
        self.held_bytes += size
        loop = asyncio.get_running_loop()
        waiting = _Waiting(delivery, loop.create_future())
        self.pending.append(waiting)
        self.wake.set()
        expiry = loop.call_later(self.answer_within, self._expire, waiting)
        # A handler cancelled mid-wait cancels only this future: its event stays in the
        # batch and is stored (the writer skips a future already done).
        try:
            return await waiting.done
        finally:
            expiry.cancel()

    def _expire(self, waiting: _Waiting) -> None:
        """Answer 503 to a delivery not committed in time, and take it out of the queue
        unless a batch has it already (the oldest expire first: it is near the front)."""
        if waiting.done.done():
            return
        waiting.done.set_result(TOO_SLOW)
        try:
            self.pending.remove(waiting)
        except ValueError:
            return  # in a batch on its way: released when the batch ends
        self.held_bytes -= len(waiting.delivery.body)

    async def _run(self) -> None:
        slots = asyncio.Semaphore(self.committer.depth)
        flying: set[asyncio.Task[None]] = set()

        def landed(task: asyncio.Task[None]) -> None:
            flying.discard(task)
            slots.release()

        try:
            while self.pending or not self.closed:
                if not self.pending:
                    self.wake.clear()
                    await self.wake.wait()
                    continue
                await slots.acquire()  # meanwhile more deliveries join the next batch
                batch = [self.pending.popleft() for _ in range(min(len(self.pending), self.max_batch))]
                task = asyncio.create_task(self._deliver(batch))
                flying.add(task)
                task.add_done_callback(landed)
            if flying:
                await asyncio.wait(flying)
        finally:
            # Cancelled mid-way: nobody may wait forever. "Unavailable" is always a safe
            # answer, since the sender's retry of a committed event is a duplicate.
            for task in flying:
                task.cancel()
            pending, self.pending = self.pending, deque()
            for waiting in pending:
                if not waiting.done.done():
                    waiting.done.set_result(UNAVAILABLE)

    async def _deliver(self, batch: list[_Waiting]) -> None:
        try:
            try:
                results = await self._commit([waiting.delivery for waiting in batch])
            except Exception:  # the writer must outlive anything a batch does
                log.exception("group commit failed unexpectedly")
                results = [UNAVAILABLE] * len(batch)
            for waiting, result in zip(batch, results, strict=True):
                if not waiting.done.done():
                    waiting.done.set_result(result)
            self.after_commit()
        finally:
            self.held_bytes -= sum(len(waiting.delivery.body) for waiting in batch)
            for waiting in batch:
                if not waiting.done.done():
                    waiting.done.set_result(UNAVAILABLE)

    async def _commit(self, deliveries: list[Delivery]) -> list[Result]:
        self.metrics.batch_size.observe(len(deliveries))
        started = time.perf_counter()
        try:
            return await self.committer.commit(deliveries)
        finally:
            self.metrics.commit_seconds.observe(time.perf_counter() - started)


# ======================================================================================
# The application
# ======================================================================================


def _secrets(values: Iterable[SecretStr]) -> list[SecretStr]:
    # The secrets file's rule: each once, empty entries left out (they would shift the index
    # that tells a callback secret from a webhook one).
    return [SecretStr(s) for s in signing_secrets(v.get_secret_value() for v in values)]


def _json(status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, text=json.dumps(payload), content_type="application/json", headers=headers)


class Receiver:
    """The state behind one receiver application: store, secrets, writer, metrics."""

    def __init__(self, store: Store, settings: ReceiverSettings, *, custom_scheme: CustomScheme | None = None,
                 max_batch: int = DEFAULT_MAX_BATCH, now: Callable[[], float] | None = None,
                 store_process: bool | None = None, service: ServiceSettings | None = None,
                 tokens: TokenSource | None = None) -> None:
        if not 1 <= max_batch <= 100_000:
            raise ValueError(f"max_batch must be between 1 and 100000, got {max_batch}")
        self.store, self.settings, self.now = store, settings, now
        if settings.scheme == "custom":
            custom_scheme = custom_scheme or settings.custom
            if custom_scheme is None:
                raise ValueError('receiver scheme "custom" needs its definition: a [receiver.custom] table in the '
                                 'settings (signature_header, prefix, encoding, digest, template, ...) or '
                                 'custom_scheme=CustomScheme(...)')
            self.scheme: Scheme = custom_scheme
        else:
            self.scheme = settings.scheme
        self.callback_secrets = _secrets(settings.callback_secrets)
        # A malformed secret is a configuration error: refuse to start, not 500 per request
        # (and a reload that brings one keeps the secrets held).
        self._webhook = WebhookSecrets(_secrets(settings.webhook_secrets), settings.secrets_file, self._usable)
        self.metrics = m = ReceiverMetrics()
        self.refusal_log = RefusalLog()
        self._pinging: asyncio.Future[str | None] | None = None
        # The labelled series of every delivery, looked up once (a lookup takes a lock).
        self._received = {ch: m.received.labels(ch) for ch in ("callbacks", "webhooks", "any")}
        self._stored = {source: m.stored.labels(source) for source in ("callback", "webhook")}
        self._answered_200 = m.responses.labels("200")
        in_process = settings.store_process if store_process is None else store_process
        # Each new form's field list, learnt after commits (never on the acknowledgement path).
        self.field_lists = FieldListLearner(store, service, tokens)
        # A batch still not committed a few answer bounds later: its database stopped answering.
        committer = committer_for(store, process=in_process,
                                  commit_timeout=_COMMIT_TIMEOUT_ANSWERS * settings.answer_timeout_seconds)
        self.writer = _Writer(committer, m, max_batch, answer_within=settings.answer_timeout_seconds,
                              max_held_bytes=settings.max_queued_bytes, after_commit=self.field_lists.poke)

    def _usable(self, webhook: list[SecretStr]) -> None:
        try:
            verify({}, b"", self.callback_secrets + webhook, self.scheme)
        except SigningConfigError as e:
            raise ValueError(f"receiver secrets are unusable with scheme {self.settings.scheme!r}: {e}") from None

    @property
    def webhook_secrets(self) -> list[SecretStr]:
        """The webhook secrets now (``receiver.secrets_file`` re-read when it changed)."""
        return self._webhook.get()

    def reload_secrets(self) -> bool:
        """Read the secrets file again now (SIGHUP); whether the secrets changed."""
        return self._webhook.reload()

    # -- lifecycle ------------------------------------------------------------------

    async def _lifecycle(self, _app: web.Application) -> AsyncIterator[None]:
        await self.writer.start()
        self.field_lists.start()
        # What start-up made lives as long as the process: keep it out of the cyclic
        # collector's passes, which otherwise rescan it under load.
        gc.collect()
        gc.freeze()
        yield
        # Runs after the server stopped taking requests and those in flight ended.
        await self.field_lists.close()
        await self.writer.close()

    # -- deliveries -----------------------------------------------------------------

    def _refuse(self, refusal: Refusal, channel: Channel, path: str) -> web.Response:
        self.metrics.rejected.labels(refusal.label).inc()
        self.metrics.responses.labels(str(refusal.status)).inc()
        held_back = self.refusal_log.admit(refusal.label, path)
        if held_back is not None:
            advice = self._advice(refusal, channel)
            more = f" ({held_back} more like it since the last such line)" if held_back else ""
            log.warning("delivery to %s refused: %s %s%s%s", path, refusal.status, refusal.label,
                        f": {advice}" if advice else "", more)
        error: dict[str, Any] = {"code": refusal.code, "message": refusal.message}
        if refusal.details:
            error["details"] = refusal.details
        headers = {"Retry-After": "30"} if refusal.status == 503 else None
        return _json(refusal.status, {"ok": False, "error": error}, headers)

    def _advice(self, refusal: Refusal, channel: Channel) -> str | None:
        if refusal.status != 401:
            return None
        tried = {"callbacks": len(self.callback_secrets), "webhooks": len(self.webhook_secrets),
                 "any": len(self.callback_secrets) + len(self.webhook_secrets)}[channel]
        return signature_advice(refusal.label, channel, tried, self.settings.tolerance_seconds)

    async def _read(self, request: web.Request) -> bytes:
        limit = self.settings.max_body_bytes
        too_large = RefusalError(Refusal(413, "PAYLOAD_TOO_LARGE", "too_large",
                                         f"the body is larger than {limit} bytes, the most this receiver accepts",
                                         {"maxBytes": limit}))
        if request.content_length is not None and request.content_length > limit:
            raise too_large
        body = bytearray()
        try:
            async for chunk in request.content.iter_any():
                body += chunk
                if len(body) > limit:
                    raise too_large
        except (ConnectionError, HttpProcessingError):
            # The sender closed the connection before its Content-Length, or broke the chunked
            # framing: a client error (the answer may never arrive), not a server failure.
            raise RefusalError(Refusal(
                400, "INCOMPLETE_BODY", "incomplete_body",
                f"the body ended after {len(body)} bytes, before its declared length or its last chunk; "
                "send the whole body")) from None
        return bytes(body)

    def _verify(self, request: web.Request, body: bytes, channel: Channel) -> Source:
        def attempt() -> Verification:
            webhook = self.webhook_secrets
            secrets = {"callbacks": self.callback_secrets, "webhooks": webhook,
                       "any": self.callback_secrets + webhook}[channel]
            return verify(request.headers, body, secrets, self.scheme, tolerance=self.settings.tolerance_seconds,
                          now=self.now() if self.now is not None else None)

        result = attempt()
        # Signed with a secret just written to the secrets file: taken at once, not a second later.
        if not result.ok and channel != "callbacks" and self._webhook.reload(only_if_changed=True):
            result = attempt()
        if not result.ok:
            reason = result.reason.value if result.reason else "signature"
            raise RefusalError(Refusal(401, "UNAUTHORIZED", reason, f"signature rejected: {result.detail}",
                                       {"reason": reason}))
        if channel == "callbacks":
            return "callback"
        if channel == "webhooks":
            return "webhook"
        return "callback" if (result.secret_index or 0) < len(self.callback_secrets) else "webhook"

    async def handle(self, request: web.Request, channel: Channel) -> web.Response:
        received_at = time.time_ns() // 1_000_000
        self._received[channel].inc()
        try:
            body = await self._read(request)
            source = self._verify(request, body, channel)
        except RefusalError as refused:
            return self._refuse(refused.refusal, channel, request.path)
        # The committer reads the body (a 400 comes back from it): off this event loop.
        outcome = await self.writer.submit(Delivery(body, source, received_at))
        if isinstance(outcome, Refusal):
            return self._refuse(outcome, channel, request.path)
        self._answered_200.inc()
        answer = {"ok": True, "status": outcome.status, "eventId": outcome.event_id, "type": outcome.type}
        if outcome.status == "set_aside":
            self.metrics.set_aside.inc()
            log.warning("event %s type %s from %s set aside: %s", outcome.event_id, outcome.type, source,
                        outcome.reason)
            return _json(200, {**answer, "reason": outcome.reason})
        if outcome.status == "stored":
            self._stored[source].inc()
        else:
            self.metrics.duplicates.inc()
        log.info("event %s type %s from %s: %s (client %s over %s)", outcome.event_id, outcome.type, source,
                 outcome.status, request.remote, request.scheme)
        return _json(200, answer)

    # -- health and metrics -----------------------------------------------------------

    def _ping(self) -> str | None:
        # SQLite's file system and write lock first: a read-only one may not even open.
        problem = self.store.write_problem()
        if problem is None:
            self.store.ping()
        return problem

    def _ping_once(self) -> asyncio.Future[str | None]:
        """The ping in flight, or a new one: a database that stops answering holds a
        ping's thread until the driver gives up, and health checks must not pile them up."""
        if self._pinging is None or self._pinging.done():
            self._pinging = asyncio.ensure_future(asyncio.to_thread(self._ping))
        return self._pinging

    async def _database(self) -> str | None:
        """Why the database cannot take a write now (``unavailable``, or the store's words); None when it can."""
        try:
            problem = await asyncio.wait_for(asyncio.shield(self._ping_once()), HEALTH_TIMEOUT_S)
        except Exception as error:
            log.warning("health check: database unavailable (%s)", type(error).__name__)
            return "unavailable"
        if problem is not None:  # it answers, but no write can succeed: deliveries get 503
            log.warning("health check: database %s", problem)
        return problem

    async def healthz(self, _request: web.Request) -> web.Response:
        if (problem := await self._database()) is not None:
            return _json(503, {"ok": False, "database": problem})
        return _json(200, {"ok": True, "database": "up", "queued": len(self.writer.pending)})

    async def readyz(self, _request: web.Request) -> web.Response:
        """Whether a delivery sent now would be stored: what /healthz checks, plus a secret
        to verify it with and room in the commit queue for the largest body. A load
        balancer or a container platform sends deliveries only to a ready receiver."""
        answer: dict[str, Any] = {"database": await self._database() or "up"}
        if not self.callback_secrets and not self.webhook_secrets:
            answer["secrets"] = "none: every delivery is refused with 401"
        if self.writer.held_bytes + self.settings.max_body_bytes > self.writer.max_held_bytes:
            answer["queue"] = "full: deliveries wait for the database's commits"
        ready = answer["database"] == "up" and len(answer) == 1
        return _json(200 if ready else 503, {"ok": ready, **answer, "queued": len(self.writer.pending)})

    async def metrics_view(self, _request: web.Request) -> web.Response:
        # Off the loop: an added collector may read the database.
        body = await asyncio.to_thread(self.metrics.render)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


RECEIVER_KEY = web.AppKey("formsync_receiver", Receiver)


@web.middleware
async def _forwarded(request: web.Request, handler: Handler) -> web.StreamResponse:
    """With ``receiver.trust_proxy``: the client address and scheme the proxy passes on.
    The proxy appends the address it saw to X-Forwarded-For, so the last one is trusted
    (any before it came from the client and may be forged)."""
    changes: dict[str, str] = {}
    if forwarded_for := request.headers.get("X-Forwarded-For", "").rsplit(",", 1)[-1].strip():
        changes["remote"] = forwarded_for
    if (proto := request.headers.get("X-Forwarded-Proto", "").strip().lower()) in ("http", "https"):
        changes["scheme"] = proto
    return await handler(request.clone(**changes) if changes else request)  # type: ignore[arg-type]


def event_paths(settings: ReceiverSettings) -> dict[Channel, str]:
    """The URL path of each channel: ``any`` is the plain path."""
    base = "/" + settings.path.strip("/")
    prefix = base.rstrip("/")
    return {"any": base, "callbacks": f"{prefix}/callbacks", "webhooks": f"{prefix}/webhooks"}


def create_receiver_app(store: Store, settings: ReceiverSettings, *, custom_scheme: CustomScheme | None = None,
                        max_batch: int = DEFAULT_MAX_BATCH, now: Callable[[], float] | None = None,
                        store_process: bool | None = None, service: ServiceSettings | None = None,
                        tokens: TokenSource | None = None, collectors: Iterable[Collector] = ()) -> web.Application:
    """An aiohttp application that verifies, stores and acknowledges deliveries (see the
    module docstring for routes and answers). ``store`` must be migrated; the application
    does not close it. When ``settings.scheme`` is ``"custom"`` the scheme is
    ``custom_scheme``, else ``settings.custom`` (one is required); ``now`` (unix seconds)
    replaces the clock used for the signature tolerance. ``store_process`` (default:
    ``settings.store_process``) commits in a process of its own that opens
    ``Store(store.url)``; false commits with ``store`` itself in a worker thread (keep
    that for a store with its own clock or behaviour). ``service`` with a token (or
    ``tokens``, the stored grant) lets the receiver read a form's ``fields.list`` in the
    background when an answer names a key the store has no descriptor for
    (``connector.client._field_lists``); without one it logs the forms holding such keys back.
    ``collectors`` add their metrics to ``/metrics`` (``formsync receive``
    and ``run`` add the store's: jobs, scheduler). Raises ``ValueError`` for a configuration that cannot work (a malformed
    secret, a custom scheme without its definition)."""
    receiver = Receiver(store, settings, custom_scheme=custom_scheme, max_batch=max_batch, now=now,
                        store_process=store_process, service=service, tokens=tokens)
    quiet_malformed_requests()
    # aiohttp's own body limit is not used: _read enforces max_body_bytes while streaming.
    for collector in collectors:
        receiver.metrics.registry.register(collector)
    app = web.Application(middlewares=[_forwarded] if settings.trust_proxy else [])
    app[RECEIVER_KEY] = receiver
    app.cleanup_ctx.append(receiver._lifecycle)
    for channel, path in event_paths(settings).items():
        app.router.add_post(path, functools.partial(receiver.handle, channel=channel))
    app.router.add_get("/healthz", receiver.healthz)
    app.router.add_get("/readyz", receiver.readyz)
    app.router.add_get("/metrics", receiver.metrics_view)
    if not receiver.callback_secrets and not receiver.webhook_secrets:
        log.warning("no callback or webhook secret is configured: every delivery will be refused with 401%s",
                    f" until {settings.secrets_file} holds one" if settings.secrets_file else "")
    return app


async def run_receiver(store: Store, settings: ReceiverSettings, *, host: str | None = None, port: int | None = None,
                       on_ready: Callable[[str], None] | None = None, stop: asyncio.Event | None = None,
                       custom_scheme: CustomScheme | None = None, max_batch: int = DEFAULT_MAX_BATCH,
                       shutdown_timeout: float = 30.0, handle_signals: bool = True,
                       service: ServiceSettings | None = None, tokens: TokenSource | None = None,
                       collectors: Iterable[Collector] = ()) -> None:
    """Serve the receiver on ``host``:``port`` (default: the settings') until SIGINT or
    SIGTERM (or until ``stop`` is set; with ``handle_signals`` false the caller owns the
    signals and sets ``stop``). ``on_ready`` gets the base URL once listening
    (``port`` 0 picks a free port). On shutdown the server stops taking connections, the
    requests in flight finish within ``shutdown_timeout`` seconds, and every queued
    event is committed before this returns. The store is not migrated or closed here."""
    tls = server_context(settings.tls_cert, settings.tls_key)
    app = create_receiver_app(store, settings, custom_scheme=custom_scheme, max_batch=max_batch, service=service,
                              tokens=tokens, collectors=collectors)
    stop = stop or asyncio.Event()
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=shutdown_timeout)
    with stop_on_signals(stop) if handle_signals else nullcontext(), \
            _reload_on_hangup(app[RECEIVER_KEY]) if handle_signals else nullcontext():
        await runner.setup()
        try:
            site = web.TCPSite(runner, host or settings.host, settings.port if port is None else port,
                               ssl_context=tls)
            await site.start()
            bound_host, bound_port = runner.addresses[0][:2]
            url = f"{'https' if tls else 'http'}://{bound_host}:{bound_port}"
            log.info("receiver listening on %s%s", url, event_paths(settings)["any"])
            if on_ready is not None:
                on_ready(url)
            await stop.wait()
            log.info("receiver stopping: finishing requests in flight and pending commits")
        finally:
            await runner.cleanup()


@contextmanager
def _reload_on_hangup(receiver: Receiver) -> Iterator[None]:
    """SIGHUP re-reads the secrets file at once, while the server runs (only the main
    thread's loop takes signals: elsewhere the file is still looked at once a second)."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGHUP, receiver.reload_secrets)
    except (NotImplementedError, RuntimeError, ValueError):
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGHUP)
