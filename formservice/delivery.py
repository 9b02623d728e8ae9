"""The delivery worker: takes due deliveries from the outbox, signs each POST as the
hosted service does and records every attempt; failed attempts are retried on a fixed
schedule, re-signed each time with a fresh timestamp and the same event id."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import logging
import ssl
import time
from pathlib import Path
from typing import Any

import aiohttp
from sqlmodel import col, select

from .clock import HOUR_MS, MINUTE_MS
from .domain.requests import timeline_add
from .tables import Delivery, DeliveryAttempt, Event, Request, Subscription, Workspace

log = logging.getLogger("formservice.delivery")
# Waits after the 1st, 2nd, ... failed attempt; after the last one the delivery is given up.
RETRY_SCHEDULE_MS = (5_000, 5 * MINUTE_MS, 30 * MINUTE_MS, 2 * HOUR_MS, 5 * HOUR_MS, 10 * HOUR_MS, 10 * HOUR_MS)
ATTEMPT_TIMEOUT_S = 15
SIGNATURE_HEADER = "X-Formstep-Signature"


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """``t=<unix seconds>,sha256=<hex HMAC-SHA256 of "<t>.<raw body>">``, keyed with the
    secret string's UTF-8 bytes."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},sha256={mac}"


def encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def trusting(ca_file: Path) -> ssl.SSLContext:
    """The TLS context deliveries use: the system's authorities and the one(s) in
    ``ca_file`` (PEM), so an https receiver with a private or self-signed certificate can be
    reached. ``ValueError`` saying what is wrong with the file."""
    if not ca_file.is_file():
        raise ValueError(f"{ca_file} {'is a directory' if ca_file.is_dir() else 'does not exist'}")
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (ssl.SSLError, UnicodeDecodeError):
        raise ValueError(f"{ca_file} holds no PEM certificate") from None
    except OSError as e:
        raise ValueError(f"cannot read {ca_file}: {e.strerror}") from None


class DeliveryWorker:
    """Sends due deliveries for one Service. ``flush()`` attempts everything due now;
    ``run()`` loops forever doing the time-driven work and flushing. ``tls`` is the TLS
    context of https deliveries (default: the system's authorities)."""

    def __init__(self, service: Any, interval_s: float = 0.2, tls: ssl.SSLContext | None = None) -> None:
        self.service = service
        self.interval_s = interval_s
        self.tls: ssl.SSLContext | bool = tls if tls is not None else True
        self._in_flight: dict[str, asyncio.Task[dict[str, Any] | None]] = {}
        self._http: aiohttp.ClientSession | None = None

    async def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ATTEMPT_TIMEOUT_S),
                                               connector=aiohttp.TCPConnector(ssl=self.tls))
        return self._http

    async def close(self) -> None:
        """Stop the attempts under way (their deliveries stay pending) and the HTTP client."""
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()

    def due(self) -> list[str]:
        now = self.service.now()
        with self.service.session() as s:
            ids = s.exec(select(Delivery.id).where(Delivery.state == "pending", Delivery.next_attempt_at <= now)
                         .order_by(col(Delivery.next_attempt_at))).all()
        return list(ids)

    def start(self, delivery_id: str) -> asyncio.Task[dict[str, Any] | None]:
        """The attempt of ``delivery_id`` under way, or a new one: one delivery never has
        two attempts in flight."""
        task = self._in_flight.get(delivery_id)
        if task is None:
            task = asyncio.create_task(self._guarded(delivery_id))
            self._in_flight[delivery_id] = task
            task.add_done_callback(functools.partial(self._forget, delivery_id))
        return task

    def _forget(self, delivery_id: str, task: asyncio.Task[dict[str, Any] | None]) -> None:
        if self._in_flight.get(delivery_id) is task:
            del self._in_flight[delivery_id]

    async def flush(self) -> list[dict[str, Any]]:
        """Attempt every delivery that is due now (on the service clock), concurrently,
        and wait for those and any attempt already under way: when this returns, every
        due delivery has had its attempt recorded."""
        tasks = {self.start(i) for i in self.due()} | set(self._in_flight.values())
        results = await asyncio.gather(*tasks)
        return [r for r in results if r is not None]

    async def settle(self) -> None:
        """Wait for the attempts under way to be recorded, starting none."""
        await asyncio.gather(*self._in_flight.values(), return_exceptions=True)

    async def attempt(self, delivery_id: str) -> dict[str, Any] | None:
        """Attempt one delivery now (or join the attempt under way)."""
        return await self.start(delivery_id)

    async def _guarded(self, delivery_id: str) -> dict[str, Any] | None:
        # a broken row must not take the worker (or a flush waiting on it) down with it;
        # the delivery stays pending and is tried again on the next pass
        try:
            return await self._attempt(delivery_id)
        except Exception:
            log.exception("delivery %s: attempt failed", delivery_id)
            return None

    async def _attempt(self, delivery_id: str) -> dict[str, Any] | None:
        svc = self.service
        with svc.session() as s:
            d = s.get(Delivery, delivery_id)
            if d is None or d.state != "pending":
                return None
            event = s.get(Event, d.event_id)
            secret = s.get(Workspace, d.workspace_id).signing_secret
            if d.subscription_id:
                sub = s.get(Subscription, d.subscription_id)
                secret = (sub.signing_secret if sub and sub.signing_secret else secret)
            url, payload = d.target_url, event.payload
        body = encode(payload)
        # Signatures carry wall-clock time, so real receivers can check the tolerance even
        # while the test clock runs ahead.
        signature = sign(secret, body, int(time.time()))
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature,
                   "X-Formstep-Event-Id": payload["id"], "X-Formstep-Event-Type": payload["type"],
                   "User-Agent": "formsync-sandbox/1"}
        started = time.monotonic()
        status: int | None = None
        error: str | None = None
        try:
            http = await self._session()
            async with http.post(url, data=body, headers=headers, allow_redirects=False) as resp:
                status = resp.status
                await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        took = int((time.monotonic() - started) * 1000)
        ok = status is not None and 200 <= status < 300
        now = svc.now()
        with svc.session() as s:
            d = s.get(Delivery, delivery_id)
            d.attempt_count += 1
            d.last_status = status
            d.last_error = error if error else (None if ok else f"HTTP {status}")
            s.add(DeliveryAttempt(delivery_id=d.id, at=now, status=status, error=d.last_error, signature=signature,
                                  duration_ms=took))
            if ok:
                d.state = "delivered"
                d.delivered_at = now
                d.next_attempt_at = None
            elif d.attempt_count > len(RETRY_SCHEDULE_MS):
                d.state = "failed"
                d.failed_at = now
                d.next_attempt_at = None
            else:
                d.next_attempt_at = now + RETRY_SCHEDULE_MS[d.attempt_count - 1]
            if d.kind == "callback" and d.request_id and d.state != "pending":
                req = s.get(Request, d.request_id)
                if d.state == "failed":
                    req.callback_failed_at = now
                timeline_add(req, "callback", now, attemptCount=d.attempt_count, eventType=event.type,
                             detail=d.state)
            s.commit()
            return {"deliveryId": d.id, "eventId": payload["id"], "status": status, "error": d.last_error,
                    "state": d.state, "attemptCount": d.attempt_count}

    def tick(self) -> dict[str, int]:
        from .domain.timework import run_due

        with self.service.session() as s:
            counts = run_due(s, self.service.now(), self.service.base_url)
            s.commit()
        return counts

    async def run(self) -> None:
        while True:
            try:
                self.tick()
                for delivery_id in self.due():
                    self.start(delivery_id)
            except Exception:  # the worker must outlive any single bad row
                log.exception("delivery worker iteration failed")
            await asyncio.sleep(self.interval_s)
