"""Telling someone that something went wrong: a failed job run, a stopped scheduler, a
stalled outreach (``[notify]`` in the settings).

A notice goes to a webhook URL as a JSON POST (``text`` is what a chat channel's incoming
webhook shows) and to a command, which gets the same JSON on its standard input and
``FORMSYNC_NOTICE_KIND``, ``FORMSYNC_NOTICE_SUBJECT`` and ``FORMSYNC_NOTICE_MESSAGE`` in its
environment. A notice that cannot be sent is logged as one warning; it never fails the job
or the command that sent it, and the webhook URL (a credential) is never logged."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from connector.config.settings import NoticeKind, NotifySettings
from connector.store import Store

log = logging.getLogger("formsync.notify")


@dataclass(frozen=True)
class Notice:
    """What happened (``kind``), to what (a job id, ``scheduler``) and one line about it."""

    kind: NoticeKind
    subject: str
    message: str

    def line(self) -> str:
        """The notice as ``formsync status`` says it on stderr."""
        return f"attention: {self.message}"


def payload(notice: Notice, *, host: str, at: datetime) -> dict[str, Any]:
    """The JSON body of ``notice`` as sent from ``host`` at ``at`` (pure)."""
    return {"text": f"formsync on {host}: {notice.message}", "kind": notice.kind, "subject": notice.subject,
            "message": notice.message, "host": host, "at": at.astimezone(UTC).isoformat(timespec="seconds")}


def wanted(settings: NotifySettings, notice: Notice) -> bool:
    """Whether ``settings`` send ``notice`` anywhere."""
    return notice.kind in settings.on and (settings.webhook_url is not None or bool(settings.command))


async def send(settings: NotifySettings, notice: Notice) -> bool:
    """Send ``notice`` to every target of ``settings`` that wants it; True when each took it."""
    if not wanted(settings, notice):
        return True
    body = payload(notice, host=socket.gethostname(), at=datetime.now(UTC))
    sent = []
    if settings.webhook_url is not None:
        sent.append(await _post(settings.webhook_url.get_secret_value(), body, settings.timeout_seconds))
    if settings.command:
        sent.append(await _run(settings.command, body, settings.timeout_seconds))
    return all(sent)


async def _post(url: str, body: dict[str, Any], seconds: float) -> bool:
    where = urlsplit(url).netloc  # the path of a chat webhook is its secret
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as http, \
                http.post(url, json=body) as resp:
            if resp.status < 300:
                return True
            log.warning("notify: the webhook at %s answered %d; the notice (%s) was not taken", where,
                        resp.status, body["kind"])
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        log.warning("notify: cannot reach the webhook at %s (%s); the notice (%s) was not sent", where,
                    type(e).__name__, body["kind"])
    return False


async def _run(command: list[str], body: dict[str, Any], seconds: float) -> bool:
    env = {**os.environ, "FORMSYNC_NOTICE_KIND": body["kind"], "FORMSYNC_NOTICE_SUBJECT": body["subject"],
           "FORMSYNC_NOTICE_MESSAGE": body["message"]}
    try:
        proc = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=asyncio.subprocess.DEVNULL, env=env)
    except OSError as e:
        log.warning("notify: cannot start notify.command %s: %s", command[0], e.strerror or e)
        return False
    try:
        await asyncio.wait_for(proc.communicate(json.dumps(body).encode()), seconds)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        log.warning("notify: notify.command %s did not finish within %g s; stopped it", command[0], seconds)
        return False
    if proc.returncode != 0:
        log.warning("notify: notify.command %s exited with %d", command[0], proc.returncode)
        return False
    return True


async def send_problems(settings: NotifySettings, store: Store, found: list[Notice]) -> None:
    """Send ``found`` (``formsync status --notify``), unless the same problems were sent less
    than ``settings.repeat_minutes`` ago."""
    notices = [n for n in found if wanted(settings, n)]
    if not notices:
        return
    fingerprint = hashlib.sha256("\n".join(sorted(f"{n.kind}:{n.subject}" for n in notices)).encode()).hexdigest()
    if not await asyncio.to_thread(store.runs.notice_due, fingerprint, repeat_ms=settings.repeat_minutes * 60_000):
        log.info("notify: the same %d problem(s) were sent less than %d min ago", len(notices),
                 settings.repeat_minutes)
        return
    for notice in notices:
        await send(settings, notice)
