"""Receiver fuzzing: thousands of generated bad deliveries over real HTTP to a running
receiver (connector.receiver on a SQLite file): mutated body bytes, headers,
signatures, timestamps, secrets, encodings, sizes, truncated bodies, duplicated and
missing headers. None may be accepted (2xx), none may be answered with a 5xx, and no
row may land in any table.

The deliveries come from a seeded generator (``FUZZ_SEED``), so a failure replays
exactly; each names its family and case in the assertion message."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import hmac
import json
import logging
import random
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connector.receiver.app import event_paths
from connector.signing import LEGACY_SIGNATURE_HEADER, sign_formstep, standard_headers
from connector.store import Store
from tests.connector.test_receiver import (
    CB_SECRET,
    KINDS,
    PROP_BODY,
    SIG_LENGTH,
    WH_SECRET,
    apply,
    encode,
    envelope,
    metric,
    receiver_settings,
    running,
)

from .support import report_figures, table_counts

FUZZ_SEED = 20261123
HTTP_DELIVERIES = 5200
RAW_DELIVERIES = 300
MAX_BODY = 8192
CONCURRENCY = 24
SIG = "X-Formstep-Signature"

Headers = list[tuple[str, str]]


@dataclass
class Delivery:
    """One generated bad delivery and the answers it may get."""

    family: str
    case: str
    channel: str
    body: bytes
    headers: Headers
    expect: frozenset[int]


def _sig(secret: str, body: bytes, t: int) -> Headers:
    return [("Content-Type", "application/json"), (SIG, sign_formstep(secret, body, t))]


def _body(rng: random.Random) -> bytes:
    """A valid envelope of a random kind and size (valid: signed right, it is stored)."""
    i = rng.randrange(10**9)
    kind = rng.choice(["request.completed", "submission.completed", "form.archived"])
    answers = {f"q{k}": rng.choice(["yes", "no", "Zoë", "日本", "x" * rng.randrange(1, 200), 42, None, [1, 2]])
               for k in range(rng.randrange(1, 8))}
    if kind == "form.archived":
        return encode({"id": f"evt_f{i}", "type": kind, "createdAt": "2026-05-01T10:00:00Z", "data": {"n": i}})
    return encode(envelope(f"evt_f{i}", type=kind, data={**envelope()["data"], "answers": answers}))


# -- the families --------------------------------------------------------------------------------
# Each takes the generator and the signing time and returns one delivery.


def body_bytes(rng: random.Random, t: int) -> Delivery:
    """Signed, then its bytes changed: the signature no longer matches."""
    body = _body(rng)
    headers = _sig(CB_SECRET, body, t)
    how = rng.choice(["flip", "insert", "delete", "truncate", "append", "swap", "prefix_bom", "trailing_newline"])
    b = bytearray(body)
    if how == "flip":
        at = rng.randrange(len(b))
        b[at] ^= rng.randrange(1, 256)
    elif how == "insert":
        at = rng.randrange(len(b) + 1)
        b[at:at] = rng.randbytes(rng.randrange(1, 16))
    elif how == "delete":
        at = rng.randrange(len(b))
        del b[at:at + rng.randrange(1, 16)]
    elif how == "truncate":
        del b[rng.randrange(len(b)):]
    elif how == "append":
        b += rng.choice([b" ", b"\n", b"{}", b"\x00", rng.randbytes(8)])
    elif how == "swap":
        i, j = sorted(rng.sample([k for k in range(len(b)) if b[k] != b[0]] or [1], 1) + [0])
        b[i], b[j] = b[j], b[i]
    elif how == "prefix_bom":
        b[0:0] = b"\xef\xbb\xbf"
    else:
        b += b"\r\n"
    assert bytes(b) != body
    return Delivery("body bytes", how, rng.choice(["any", "callbacks"]), bytes(b), headers, frozenset({401}))


def signature(rng: random.Random, t: int) -> Delivery:
    """The mutations of the connector's property test (tests/connector/test_receiver.py),
    with their parameters drawn from this generator."""
    kind = rng.choice(KINDS)
    p: dict[str, Any] = {}
    if kind == "flip":
        p = {"at": rng.randrange(len(PROP_BODY)), "xor": rng.randrange(1, 256)}
    elif kind == "insert":
        p = {"at": rng.randrange(len(PROP_BODY) + 1), "bytes": rng.randbytes(rng.randrange(1, 5))}
    elif kind == "truncate_body":
        p = {"to": rng.randrange(len(PROP_BODY))}
    elif kind == "timestamp":
        p = {"delta": rng.choice([-1, 1]) * rng.randrange(1, 10**6)}
    elif kind == "stale":
        p = {"delta": rng.randrange(301, 10**7) * rng.choice([-1, 1])}
    elif kind == "truncate_sig":
        p = {"to": rng.randrange(SIG_LENGTH)}
    elif kind == "case":
        p = {"letters": set(rng.sample(range(31), rng.randrange(1, 10)))}
    elif kind == "space":
        p = {"at": rng.randrange(1, SIG_LENGTH), "n": rng.randrange(1, 4)}
    elif kind == "duplicate":
        p = {"name": rng.choice([SIG, SIG.lower(), SIG.upper()]),
             "other": rng.choice([None, _ascii(rng)])}
    elif kind in ("garbage", "legacy_garbage"):
        p = {"value": _ascii(rng)}
    elif kind == "wrong_secret":
        p = {"secret": _ascii(rng)}
    body, headers = apply(kind, p, t)
    return Delivery("signature", kind, rng.choice(["any", "callbacks"]), body, headers, frozenset({401}))


def _ascii(rng: random.Random, n: int = 80) -> str:
    return "".join(chr(rng.randrange(0x21, 0x7F)) for _ in range(rng.randrange(1, n)))


def timestamp(rng: random.Random, t: int) -> Delivery:
    """Timestamps out of tolerance or out of form."""
    body = _body(rng)
    digest = sign_formstep(CB_SECRET, body, t).split("sha256=")[1]
    how = rng.choice(["stale", "future", "far_past", "zero", "negative", "float", "sixteen_digits", "hex", "missing",
                      "twice", "leading_plus", "spaces"])
    if how in ("stale", "future", "far_past", "zero"):
        at = {"stale": t - rng.randrange(301, 10**6), "future": t + rng.randrange(301, 10**6),
              "far_past": rng.randrange(0, 10**8), "zero": 0}[how]
        value = sign_formstep(CB_SECRET, body, at)  # a right signature, at the wrong time
    else:
        value = {"negative": f"t=-{t},sha256={digest}", "float": f"t={t}.5,sha256={digest}",
                 "sixteen_digits": f"t={t:016d},sha256={digest}", "hex": f"t={t:x},sha256={digest}",
                 "missing": f"sha256={digest}", "twice": f"t={t},t={t},sha256={digest}",
                 "leading_plus": f"t=+{t},sha256={digest}", "spaces": f"t = {t}, sha256 = {digest}"}[how]
    return Delivery("timestamp", how, "callbacks", body, [("Content-Type", "application/json"), (SIG, value)],
                    frozenset({401}))


def secret(rng: random.Random, t: int) -> Delivery:
    """Signed right, with a secret this path does not hold."""
    body = _body(rng)
    how = rng.choice(["random", "one_char_off", "no_prefix", "prefix_only", "upper", "webhook_on_callbacks",
                      "callback_on_webhooks", "empty", "secret_with_newline", "both_concatenated"])
    channel = "callbacks"
    if how == "random":
        key = "whsec_" + rng.randbytes(32).hex()
    elif how == "one_char_off":
        at = rng.randrange(6, len(CB_SECRET))
        key = CB_SECRET[:at] + ("0" if CB_SECRET[at] != "0" else "1") + CB_SECRET[at + 1:]
    elif how == "no_prefix":
        key = CB_SECRET.removeprefix("whsec_")
    elif how == "prefix_only":
        key = "whsec_"
    elif how == "upper":
        key = CB_SECRET.upper()
    elif how == "webhook_on_callbacks":
        key = WH_SECRET
    elif how == "callback_on_webhooks":
        key, channel = CB_SECRET, "webhooks"
    elif how == "empty":  # signing refuses an empty key, so the digest is made here
        digest = hmac.new(b"", f"{t}.".encode() + body, hashlib.sha256).hexdigest()
        return Delivery("secret", how, channel, body, [(SIG, f"t={t},sha256={digest}")], frozenset({401}))
    elif how == "secret_with_newline":
        key = CB_SECRET + "\n"
    else:
        key = CB_SECRET + WH_SECRET
    return Delivery("secret", how, channel, body, _sig(key, body, t), frozenset({401}))


def headers(rng: random.Random, t: int) -> Delivery:
    """Signature headers missing, misnamed, repeated, of another scheme or too long."""
    body = _body(rng)
    good = sign_formstep(CB_SECRET, body, t)
    how = rng.choice(["missing", "misnamed", "duplicate_same", "duplicate_other", "legacy_and_forged", "two_values",
                      "standard_scheme", "too_long", "empty_value", "only_event_headers", "sha1_prefix"])
    h: Headers = [("Content-Type", "application/json")]
    if how == "misnamed":
        h.append((rng.choice(["X-Formstep-Signatures", "X-Form-Signature", "Formstep-Signature", "X-Signature"]), good))
    elif how == "duplicate_same":
        h += [(SIG, good), (SIG, good)]
    elif how == "duplicate_other":
        h += [(SIG, good), (SIG.lower(), sign_formstep(CB_SECRET, body, t - 1))]
    elif how == "legacy_and_forged":  # the primary header wins; the legacy one is not a fallback for a bad one
        h += [(SIG, f"t={t},sha256={'0' * 64}"), (LEGACY_SIGNATURE_HEADER, good)]
    elif how == "two_values":
        h.append((SIG, f"{good},{good}"))
    elif how == "standard_scheme":
        h += list(standard_headers("whsec_" + "QUJD" * 8, "msg_1", body, t).items())
    elif how == "too_long":
        h.append((SIG, good + "," + "a" * rng.randrange(4100, 7000)))
    elif how == "empty_value":
        h.append((SIG, ""))
    elif how == "only_event_headers":
        h += [("X-Formstep-Event-Id", "evt_1"), ("X-Formstep-Event-Type", "request.completed")]
    elif how == "sha1_prefix":
        h.append((SIG, good.replace("sha256=", "sha1=")))
    return Delivery("headers", how, rng.choice(["any", "callbacks", "webhooks"]), body, h, frozenset({401}))


SET_ASIDE = frozenset({"nul", "lone_surrogate", "deep", "huge_number"})  # events of what no database can store


def _deep(n: int) -> bytes:
    return b'{"id":"evt_deep","type":"x","createdAt":"2026-05-01T10:00:00Z","data":' + b"[" * n + b"]" * n + b"}"


def encoding(rng: random.Random, t: int) -> Delivery:
    """Signed right with the right secret, but not a storable UTF-8 JSON event."""
    env = envelope(f"evt_e{rng.randrange(10**9)}", data={**envelope()["data"], "answers": {"name": "Zoë 日本"}})
    text = json.dumps(env, ensure_ascii=False)
    how = rng.choice(["utf16", "utf32", "latin1", "bom", "invalid_utf8", "gzip_signed_compressed", "nan", "infinity",
                      "nul", "lone_surrogate", "not_json", "truncated_json", "array", "string", "number", "null",
                      "no_id", "no_type", "no_created_at", "numeric_id", "long_id", "id_with_space", "bad_data_shape",
                      "deep", "huge_number", "empty"])
    h: Headers = []
    body: bytes
    if how == "utf16":
        body = text.encode("utf-16")
    elif how == "utf32":
        body = text.encode("utf-32")
    elif how == "latin1":
        body = text.encode("latin-1", errors="replace").replace(b"?", b"\xe9")
    elif how == "bom":
        body = b"\xef\xbb\xbf" + text.encode()
    elif how == "invalid_utf8":
        raw = bytearray(text.encode())
        ascii_at = [k for k, c in enumerate(raw) if c < 0x80]  # a lone byte there is never valid UTF-8
        raw[rng.choice(ascii_at)] = rng.choice([0xFF, 0xFE, 0xC0, 0x80])
        body = bytes(raw)
    elif how == "gzip_signed_compressed":  # the signature covers the compressed bytes, the receiver sees plain ones
        body = gzip.compress(text.encode())
        h.append(("Content-Encoding", "gzip"))
    elif how == "nan":
        body = text.replace('"editCount": 0', '"editCount": NaN').encode()
    elif how == "infinity":
        body = text.replace('"editCount": 0', '"editCount": -Infinity').encode()
    elif how == "nul":
        body = text.replace("Zoë", "Zo\\u0000").encode()
    elif how == "lone_surrogate":
        body = text.replace("Zoë", "Zo\\udc00").encode()
    elif how == "not_json":
        body = rng.choice([b"hello", b"<xml/>", b"id=evt_1&type=x", rng.randbytes(40)])
    elif how == "truncated_json":
        raw = text.encode()
        body = raw[:rng.randrange(1, len(raw) - 1)]
    elif how in ("array", "string", "number", "null"):
        body = {"array": b"[1,2]", "string": b'"evt_1"', "number": b"42", "null": b"null"}[how]
    elif how in ("no_id", "no_type", "no_created_at"):
        drop = {"no_id": "id", "no_type": "type", "no_created_at": "createdAt"}[how]
        body = encode({k: v for k, v in env.items() if k != drop})
    elif how == "numeric_id":
        body = encode({**env, "id": rng.randrange(10**6)})
    elif how == "long_id":
        body = encode({**env, "id": "evt_" + "x" * rng.randrange(253, 600)})
    elif how == "id_with_space":
        body = encode({**env, "id": "evt 1"})
    elif how == "bad_data_shape":
        body = encode({**env, "data": rng.choice([{"form": "f"}, {"request": "r"}, {"answers": [1]}, [], "x"])})
    elif how == "deep":
        body = _deep(rng.choice([70, 200, 3000]))
    elif how == "huge_number":
        body = text.replace('"editCount": 0', '"editCount": 1e400').encode()
    else:
        body = b""
    h = [("Content-Type", "application/json"), (SIG, sign_formstep(CB_SECRET, body, t)), *h]
    # Compressed: 401 when the server inflates the body (the signature was over other bytes), 400 when not. An
    # event no database can store is set aside and acknowledged (200, "set_aside"): never stored as an event.
    # Nesting past the JSON parser's own limit (3,000 levels) is not read as JSON at all: 400.
    expect = frozenset({400, 401}) if how == "gzip_signed_compressed" else frozenset(
        {200, 400} if how == "deep" else {200} if how in SET_ASIDE else {400})
    return Delivery("encoding", how, rng.choice(["any", "callbacks"]), body, h, expect)


def size(rng: random.Random, t: int) -> Delivery:
    """Bodies over the limit, signed right: 413 before anything is parsed."""
    filler = "x" * rng.randrange(MAX_BODY, 4 * MAX_BODY)
    body = encode(envelope(f"evt_s{rng.randrange(10**9)}", data={**envelope()["data"], "answers": {"note": filler}}))
    return Delivery("size", "over the limit", "callbacks", body, _sig(CB_SECRET, body, t), frozenset({413}))


FAMILIES: list[tuple[Callable[[random.Random, int], Delivery], int]] = [
    (body_bytes, 5), (signature, 5), (timestamp, 3), (secret, 3), (headers, 3), (encoding, 4), (size, 1)]


def generate(rng: random.Random, n: int, t: int) -> list[Delivery]:
    makers, weights = zip(*FAMILIES, strict=True)
    return [rng.choices(makers, weights)[0](rng, t) for _ in range(n)]


# -- truncated and broken framing, sent as raw bytes ------------------------------------------------


def raw_request(rng: random.Random, t: int, path: str) -> tuple[str, bytes]:
    """A request whose body is cut short or whose framing is broken, as bytes on the wire."""
    body = _body(rng)
    sig = sign_formstep(CB_SECRET, body, t)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{SIG}: {sig}\r\n"
    how = rng.choice(["short_content_length", "bad_chunk_size", "chunk_cut", "no_last_chunk", "cl_and_te",
                      "negative_length", "garbage_line"])
    if how == "short_content_length":
        wire = f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body[:rng.randrange(len(body))]
    elif how == "bad_chunk_size":
        wire = f"{head}Transfer-Encoding: chunked\r\n\r\nzz\r\n".encode() + body + b"\r\n0\r\n\r\n"
    elif how == "chunk_cut":
        wire = f"{head}Transfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n".encode() + body[:len(body) // 2]
    elif how == "no_last_chunk":
        wire = f"{head}Transfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n".encode() + body + b"\r\n"
    elif how == "cl_and_te":
        wire = (f"{head}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n{len(body):x}\r\n".encode() + body
                + b"\r\n0\r\n\r\n")
    elif how == "negative_length":
        wire = f"{head}Content-Length: -{len(body)}\r\n\r\n".encode() + body
    else:
        wire = b"POST " + path.encode() + b" HTTP/1.1\r\n\x00\x01garbage\r\n\r\n" + body
    return how, wire


async def send_raw(port: int, wire: bytes, *, eof: bool = False) -> tuple[int | None, bytes]:
    """Write ``wire`` (then close our sending side when ``eof``: a body cut short ends
    there) and read the answer: its status and body (None: the connection closed without
    an answer). Raw bytes, so every header goes out exactly as generated (an HTTP client
    library would merge repeated names)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(wire)
        await writer.drain()
        if eof:
            writer.write_eof()
        data = await asyncio.wait_for(reader.read(), 15)
    except ConnectionError:
        return None, b""
    finally:
        writer.close()
    if not data:
        return None, b""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def http_request(path: str, d: Delivery) -> bytes:
    """``d`` as an HTTP/1.1 request on the wire, with its Content-Length."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", f"Content-Length: {len(d.body)}",
             *(f"{name}: {value}" for name, value in d.headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + d.body


# -- the test --------------------------------------------------------------------------------------


@pytest.mark.slow
async def test_no_generated_bad_delivery_is_accepted_answered_5xx_or_stored(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.ERROR)
    store = Store(f"sqlite:///{tmp_path / 'fuzz.db'}")
    store.migrate()
    rng = random.Random(FUZZ_SEED)
    started = time.monotonic()
    statuses: Counter[int] = Counter()
    by_family: Counter[str] = Counter()
    set_aside: set[bytes] = set()
    try:
        async with running(store, receiver_settings(max_body_bytes=MAX_BODY)) as rx:
            t = int(time.time())
            deliveries = generate(rng, HTTP_DELIVERIES, t)
            semaphore = asyncio.Semaphore(CONCURRENCY)
            port = int(rx.base.rsplit(":", 1)[1])
            paths = event_paths(rx.settings)

            async def send(d: Delivery) -> None:
                async with semaphore:
                    # Signatures are made at ``t``: re-sign nothing, but stay well inside the tolerance.
                    assert time.time() - t < 200, "the run is too slow for its signing time"
                    status, text = await send_raw(port, http_request(paths[d.channel], d))
                    statuses[status or 0] += 1
                    by_family[d.family] += 1
                    assert status in d.expect, f"{d.family} / {d.case}: {status} {text[:300]!r}"
                    answer = json.loads(text)
                    if status == 200:
                        assert answer["status"] == "set_aside" and answer["reason"], (d.family, d.case, answer)
                        set_aside.add(d.body)
                    else:
                        assert answer["ok"] is False and answer["error"]["message"], (d.family, d.case, answer)

            await asyncio.gather(*(send(d) for d in deliveries))

            raw_cases: Counter[str] = Counter()
            for _ in range(RAW_DELIVERIES):
                how, wire = raw_request(rng, t, paths["any"])
                status, _ = await send_raw(port, wire, eof=True)
                raw_cases[how] += 1
                statuses[status or 0] += 1
                assert status is None or 400 <= status < 500, f"raw {how}: {status}"
            metrics = await rx.metrics()
            health = await rx.get("/healthz")
        assert health[0] == 200, "the receiver is still healthy after the fuzzing"
        for status in ("201", "202", "204", "500", "502", "503"):
            assert metric(metrics, "formsync_receiver_responses_total", status=status) == 0, status
        assert metric(metrics, "formsync_receiver_responses_total", status="200") == statuses[200] > 0
        assert metric(metrics, "formsync_receiver_set_aside_total") == statuses[200]
        # Bodies cut short of their Content-Length reach the handler and are refused as such.
        assert metric(metrics, "formsync_receiver_rejected_total", reason="incomplete_body") >= \
            raw_cases["short_content_length"] > 0
        assert metric(metrics, "formsync_receiver_stored_total", source="callback") == 0
        assert metric(metrics, "formsync_receiver_stored_total", source="webhook") == 0
        counts = table_counts(store)
        assert counts.pop("formsync_dead_letters") == len(set_aside)  # each distinct body kept once
        assert counts.pop("formsync_arrival") == 1  # the arrival order's counter, made by its migration
        assert set(counts.values()) == {0}, counts
        # A body cut short is a client error of its own, never an unhandled exception in the handler.
        handler_errors = [r for r in caplog.records if r.name == "aiohttp.server" and r.exc_info
                          and any("connector" in f.filename for f in traceback.extract_tb(r.exc_info[2]))]
        assert handler_errors == [], handler_errors[0].exc_info
    finally:
        store.close()
    report_figures("receiver fuzzing", seed=FUZZ_SEED, http_deliveries=HTTP_DELIVERIES, raw_deliveries=RAW_DELIVERIES,
                   set_aside=statuses[200], accepted=sum(n for s, n in statuses.items() if 201 <= s < 300),
                   server_errors=sum(n for s, n in statuses.items() if s >= 500),
                   rows_stored=sum(counts.values()), statuses=dict(sorted(statuses.items())),
                   families=dict(sorted(by_family.items())), raw_cases=dict(sorted(raw_cases.items())),
                   seconds=round(time.monotonic() - started, 1))


def test_the_generator_is_seeded_and_its_deliveries_differ_from_a_valid_one() -> None:
    """The same seed gives the same deliveries, and the generator's base bodies are
    valid (so what is refused is the mutation, not the base)."""
    t = 1_800_000_000
    a = generate(random.Random(7), 300, t)
    b = generate(random.Random(7), 300, t)
    assert [(d.family, d.case, d.body, d.headers) for d in a] == [(d.family, d.case, d.body, d.headers) for d in b]
    assert {d.family for d in a} == {f.__name__.replace("_", " ") for f, _ in FAMILIES}
    from connector.receiver.app import parse_event
    rng = random.Random(1)
    for _ in range(50):
        parse_event(_body(rng))  # raises if a base body were not a valid event
