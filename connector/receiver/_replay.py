"""The dead letters, read back: exported as JSON lines, and replayed through the current
reading and storing of events (``parse_event``, ``Store.store_events``) once a release
can store them. An event that now stores leaves the dead letters in the transaction that
stores it; one that still cannot stays, with its reason."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from typing import Any, cast

from pydantic import BaseModel
from sqlalchemy.exc import DataError, IntegrityError

from ..store import Store
from ..store._mapping import Incoming, Source
from ..store._tables import DeadLetter
from ._delivery import RefusalError, parse_event

__all__ = ["ReplayReport", "dead_letter_line", "export_lines", "replay_dead_letters"]

log = logging.getLogger("connector.replay")


class ReplayReport(BaseModel):
    """What a replay did: ``stored`` (new), ``duplicate`` (stored already: the dead letter
    is removed all the same), ``remaining`` (still cannot be stored, kept)."""

    stored: int = 0
    duplicate: int = 0
    remaining: int = 0


def dead_letter_line(letter: DeadLetter, *, with_body: bool) -> dict[str, Any]:
    """One dead letter as JSON: its id, event, why it was set aside, and when; with the
    body as received (``body``, or ``bodyBase64`` when it is not UTF-8)."""
    line: dict[str, Any] = {"id": letter.id, "eventId": letter.event_id, "type": letter.type,
                            "source": letter.source, "code": letter.code, "reason": letter.reason,
                            "field": letter.field, "receivedAt": letter.received_at,
                            "setAsideAt": letter.set_aside_at}
    if with_body:
        body = letter.body
        try:
            line["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            line["bodyBase64"] = base64.b64encode(body).decode("ascii")
    return line


def export_lines(store: Store) -> Iterator[str]:
    """Every dead letter with its raw body, one JSON document per line, oldest first."""
    for letter in store.dead_letters:
        yield json.dumps(dead_letter_line(letter, with_body=True), ensure_ascii=False)


def replay_dead_letters(store: Store) -> ReplayReport:
    """Run each dead letter's body through the current ``parse_event`` and store: what
    stores now is removed from the dead letters in the same transaction. Raises what the
    database raises when it cannot be used (nothing is lost: a dead letter only goes
    with its event's commit)."""
    report = ReplayReport()
    for letter in store.dead_letters:
        try:
            event = parse_event(letter.body)
        except RefusalError:
            report.remaining += 1
            continue
        item = Incoming(event, cast(Source, letter.source), letter.body, letter.received_at)
        try:
            [outcome] = store.store_events([item], settles=[letter.id])
        except (IntegrityError, DataError) as error:  # this database still refuses it
            log.warning("dead letter %s (event %s) still cannot be stored: %s", letter.id, letter.event_id,
                        type(error).__name__)
            report.remaining += 1
            continue
        if outcome.status == "stored":
            report.stored += 1
        else:
            report.duplicate += 1
    return report
