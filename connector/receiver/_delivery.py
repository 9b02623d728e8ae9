"""What a verified delivery holds: its event, or the refusal it gets.

A delivery is the signed body as received, the source whose secret verified it and the
time it arrived. ``parse_event`` reads the event in a body, refusing with 400 what is
not UTF-8 JSON, not an event envelope or not storable (``UnstorableError``: an event
the receiver sets aside in the dead letters rather than refuse); ``Refusal`` is every answer that
is not a 2xx, the receiver's own (413, 401) and the committer's (400, 500, 503) alike,
so one value crosses from the store process to the receiver and one function turns it
into a response."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import ValidationError
from pydantic_core import from_json

from ..models import Event
from ..store._mapping import Incoming, Source, Unstorable, event_integer_problem

__all__ = ["MAX_JSON_DEPTH", "QUEUE_FULL", "TOO_SLOW", "UNAVAILABLE", "Delivery", "Refusal", "RefusalError",
           "UnstorableError", "parse_event", "read_delivery", "store_failed"]

MAX_JSON_DEPTH = 64
"""Deeper JSON is refused: real envelopes nest a handful of levels."""

_ID_CHARS = range(0x21, 0x7F)  # visible ASCII, as signing accepts for message ids
_MAX_ID_LENGTH = 256
# Types the store maps to rows; their data blocks must have the documented shapes. Any
# other type is stored raw whatever its data holds.
_MAPPED_TYPES = frozenset({"submission.completed", "submission.updated", "request.completed", "request.expired",
                           "request.canceled"})


class Delivery(NamedTuple):
    """A delivery whose signature was verified: the body as received, the source whose
    secret matched, and when it arrived (epoch ms)."""

    body: bytes
    source: Source
    received_at: int


@dataclass(frozen=True)
class Refusal:
    """An answer that is not a 2xx: its HTTP ``status``, error ``code`` and ``message``,
    the ``label`` of the receiver's ``rejected`` metric, and ``details`` for the body."""

    status: int
    code: str
    label: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


class RefusalError(ValueError):
    """A delivery refused: ``refusal`` is its answer."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class UnstorableError(RefusalError):
    """An event envelope (``event_id`` and ``type`` read) holding what no database can
    store: it is set aside rather than refused (``Store.set_aside``)."""

    def __init__(self, refusal: Refusal, event_id: str, type: str) -> None:
        super().__init__(refusal)
        self.event_id, self.type = event_id, type


UNAVAILABLE = Refusal(503, "UNAVAILABLE", "unavailable", "the database is unavailable; nothing was stored, retry later")
TOO_SLOW = Refusal(503, "UNAVAILABLE", "timeout",
                   "the database did not answer in time; retry later (should the event be stored meanwhile, "
                   "the retry is answered 200 duplicate)")
QUEUE_FULL = Refusal(503, "UNAVAILABLE", "queue_full",
                     "the receiver already holds as many deliveries as it may while the database is slow or away; "
                     "nothing was stored, retry later")


def store_failed(event_id: str) -> Refusal:
    """The answer to an event the database refused (a constraint, a bug)."""
    return Refusal(500, "STORE_FAILED", "store_failed", f"event {event_id} could not be stored; nothing was stored")


def _refuse(code: str, label: str, message: str, **details: Any) -> RefusalError:
    return RefusalError(Refusal(400, code, label, message, details))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _parse_json(raw: bytes) -> Any:
    # pydantic-core's parser gives the values json.loads gives, in less than half the
    # time; whatever it refuses (a lone surrogate escape, say, which json.loads reads
    # and the walk then refuses) is read by json.loads, whose messages say what is wrong.
    # Keys only in its string cache (16,384 strings for the process's life): values are
    # mostly ids seen once, which would fill it with every form's and scatter the
    # long-lived strings over memory the process then cannot give back; keys repeat.
    try:
        return from_json(raw, allow_inf_nan=False, cache_strings="keys")
    except ValueError:
        pass
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _refuse("INVALID_JSON", "malformed_json",
                      f"the body is not UTF-8 (invalid byte at offset {e.start}); send UTF-8 JSON") from None
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except RecursionError:
        raise _refuse("INVALID_JSON", "malformed_json",
                      f"the body nests too deeply; at most {MAX_JSON_DEPTH} levels are accepted") from None
    except ValueError as e:
        raise _refuse("INVALID_JSON", "malformed_json", f"the body is not valid JSON: {e}") from None


def _unstorable(value: Any) -> str | None:
    """Why ``value`` cannot be stored as is (by SQLite and PostgreSQL alike), or None:
    a string with U+0000 or a lone surrogate, a non-finite number, or more than
    :data:`MAX_JSON_DEPTH` levels. Iterative, so no input can exhaust the stack."""
    stack: list[tuple[Any, str, int]] = [(value, "$", 1)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"{where} nests deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(item, str):
            if "\x00" in item:
                return f"{where} contains U+0000, which the database cannot store"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"{where} contains a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape)"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{where} is a number out of the double range"
        elif isinstance(item, dict):
            for key, member in item.items():
                stack.append((key, f"{where} (a key)", depth))
                stack.append((member, f"{where}.{key}"[:200], depth + 1))
        elif isinstance(item, list):
            stack.extend((member, f"{where}[{i}]"[:200], depth + 1) for i, member in enumerate(item))
    return None


# What in a body's bytes may make a parsed value unstorable: a \u escape of U+0000 or of
# a surrogate (JSON strings hold neither as raw bytes: control characters must be escaped
# and UTF-8 cannot encode a surrogate), a number that may overflow a double (an exponent
# of three digits or more, or 200 digits in a row: with an exponent below 100, at least
# 210 digits before the point are needed to reach 1e308), or as many brackets as a value
# too deep has. They are looked for in the body's shape, each byte written as its class
# (a digit "0", an exponent "e", a sign "+", a bracket "[", a backslash, anything else
# " "), with substring searches: far faster than a regular expression over every byte.
_ESCAPES = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_CLASSES = {**dict.fromkeys(b"0123456789", b"0"), **dict.fromkeys(b"eE", b"e"), **dict.fromkeys(b"+-", b"+"),
            **dict.fromkeys(b"{[", b"["), b"\\"[0]: b"\\"}
_SHAPE = b"".join(_CLASSES.get(c, b" ") for c in range(256))
_OVERFLOWS = (b"e000", b"e+000", b"0" * 200)


def surely_storable(raw: bytes) -> bool:
    """Whether the JSON in ``raw`` can be stored for sure, read off its bytes: then
    ``_unstorable`` would find nothing in its value, and the walk is skipped. False
    means only "walk it": the bytes hold something that may be unstorable."""
    shape = raw.translate(_SHAPE)
    if shape.count(b"[") >= MAX_JSON_DEPTH or (b"\\" in shape and _ESCAPES.search(raw)):
        return False
    return not any(number in shape for number in _OVERFLOWS)


def _check_token(payload: dict[str, Any], name: str) -> None:
    value = payload.get(name)
    if not isinstance(value, str) or not 1 <= len(value) <= _MAX_ID_LENGTH or any(
            ord(c) not in _ID_CHARS for c in value):
        raise _refuse("NOT_AN_EVENT", "not_an_event",
                      f"the body is JSON but not an event envelope: {name} must be a string of 1 to "
                      f"{_MAX_ID_LENGTH} visible ASCII characters", field=name)


def _envelope(payload: dict[str, Any]) -> dict[str, Any]:
    # An unknown type is kept whatever its data holds: only the envelope is read.
    return payload if payload["type"] in _MAPPED_TYPES else {k: v for k, v in payload.items() if k != "data"}


def parse_event(raw: bytes) -> Event:
    """The event in a verified body. Raises ``RefusalError`` (a ``ValueError``; its
    refusal has status 400 and a message saying what is wrong) for a body that is not
    UTF-8 JSON, not an event envelope, or not storable."""
    payload = _parse_json(raw)
    if not isinstance(payload, dict):
        raise _refuse("NOT_AN_EVENT", "not_an_event",
                      f"the body is JSON but not an event envelope: expected an object, got {type(payload).__name__}")
    _check_token(payload, "id")
    _check_token(payload, "type")
    problem = None if surely_storable(raw) else _unstorable(payload)
    if problem:
        raise _unstorable_error(payload["id"], payload["type"], problem)
    try:
        event = Event.model_validate(_envelope(payload))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(envelope)"
        raise _refuse("NOT_AN_EVENT", "not_an_event",
                      f"the body is JSON but not an event envelope: {where}: {first['msg']}", field=where) from None
    if problem := event_integer_problem(event):
        raise _unstorable_error(event.id, event.type, problem)
    return event


def _unstorable_error(event_id: str, type: str, problem: str) -> UnstorableError:
    # A problem starts with the field at fault: "$.data.answers.name contains U+0000",
    # "data.submission.editCount is 2**64, ...".
    details = {"field": problem.split(" ", 1)[0].removeprefix("$.")}
    return UnstorableError(Refusal(400, "UNSTORABLE_EVENT", "unstorable", f"the event cannot be stored: {problem}",
                                   details), event_id, type)


def read_delivery(delivery: Delivery) -> Incoming | Unstorable | Refusal:
    """What the store is given for ``delivery``: its event, or the event to set aside
    (``Unstorable``), or else the refusal its body gets."""
    try:
        event = parse_event(delivery.body)
    except UnstorableError as unstorable:
        refusal = unstorable.refusal
        return Unstorable(unstorable.event_id, unstorable.type, delivery.source, delivery.body, delivery.received_at,
                          refusal.code, refusal.message, refusal.details.get("field"))
    except RefusalError as refused:
        return refused.refusal
    return Incoming(event, delivery.source, delivery.body, delivery.received_at)
