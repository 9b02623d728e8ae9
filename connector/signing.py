"""Pure sign and verify functions for signed deliveries.

Three families of schemes are supported:

* ``"formstep"`` (the default): the hosted service's own scheme,
  ``X-Formstep-Signature: t=<unix seconds>,sha256=<hex>``; HMAC-SHA256 keyed with the
  secret string's UTF-8 bytes (a ``whsec_`` prefix is part of the key, nothing is
  base64-decoded) over ``<t>.<raw body>``. The legacy ``X-formbase-Signature`` header is
  accepted when the current one is absent.
* ``"standard"``: Standard Webhooks, ``v1`` (HMAC-SHA256 with the base64 key of a
  ``whsec_`` secret) and ``v1a`` (Ed25519; ``whsk_`` signing keys, ``whpk_`` public keys),
  over ``<webhook-id>.<webhook-timestamp>.<raw body>``.
* :class:`CustomScheme`: a configurable HMAC scheme (header names, prefix, encoding,
  digest, signed-content template); :data:`GITHUB` is the GitHub-style preset.

Error style: every ``verify_*`` function returns a :class:`Verification`; whatever arrives
in the headers or the body (missing, malformed, stale, forged) yields ``ok=False`` with a
:class:`Reason` and a readable ``detail``, and never raises. Exceptions are kept for the
caller's own mistakes, which are configuration bugs rather than hostile input:
:class:`SigningConfigError` (a ``ValueError``) for an unusable secret, key, scheme,
tolerance, timestamp or id, and ``TypeError`` for a body that is not bytes.

Nothing here does I/O or reads the clock unless ``now`` is left out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import re
import string
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, SecretStr, field_validator, model_validator

__all__ = [
    "DEFAULT_TOLERANCE",
    "FORMSTEP_EVENT_ID_HEADER",
    "FORMSTEP_EVENT_TYPE_HEADER",
    "FORMSTEP_SIGNATURE_HEADER",
    "GITHUB",
    "LEGACY_EVENT_ID_HEADER",
    "LEGACY_EVENT_TYPE_HEADER",
    "LEGACY_SIGNATURE_HEADER",
    "MAX_HEADER_LENGTH",
    "STANDARD_ID_HEADER",
    "STANDARD_SIGNATURE_HEADER",
    "STANDARD_TIMESTAMP_HEADER",
    "CustomScheme",
    "Reason",
    "Scheme",
    "SigningConfigError",
    "Verification",
    "custom_headers",
    "formstep_headers",
    "generate_standard_keypair",
    "sign_custom",
    "sign_formstep",
    "sign_standard",
    "standard_headers",
    "standard_public_key",
    "verify",
    "verify_custom",
    "verify_formstep",
    "verify_standard",
]

DEFAULT_TOLERANCE = 300
"""Seconds a signed timestamp may differ from now, in either direction."""

MAX_HEADER_LENGTH = 4096
"""Longer header values are refused as malformed before any parsing."""

FORMSTEP_SIGNATURE_HEADER = "X-Formstep-Signature"
FORMSTEP_EVENT_ID_HEADER = "X-Formstep-Event-Id"
FORMSTEP_EVENT_TYPE_HEADER = "X-Formstep-Event-Type"
LEGACY_SIGNATURE_HEADER = "X-formbase-Signature"
LEGACY_EVENT_ID_HEADER = "X-formbase-Event-Id"
LEGACY_EVENT_TYPE_HEADER = "X-formbase-Event-Type"

STANDARD_ID_HEADER = "webhook-id"
STANDARD_TIMESTAMP_HEADER = "webhook-timestamp"
STANDARD_SIGNATURE_HEADER = "webhook-signature"

# Explicit ASCII classes: Python's \d would also match other scripts' digits. Fifteen
# digits reach far past any plausible clock and keep int() away from huge inputs.
_MAX_TIMESTAMP = 10**15
_TIMESTAMP = re.compile(r"[0-9]{1,15}")
_FORMSTEP_VALUE = re.compile(r"t=([0-9]{1,15}),sha256=([0-9a-f]{64})")
_MESSAGE_ID = re.compile(r"[\x21-\x7e]{1,256}")
_STANDARD_ENTRY = re.compile(r"(v[0-9]{1,3}[a-z]?),([A-Za-z0-9+/]+={0,2})")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

_FORMSTEP_FORM = "t=<unix seconds>,sha256=<64 lowercase hex digits>"
_ED25519_SIGNATURE_SIZE = 64
_ED25519_KEY_SIZE = 32

SecretLike = str | SecretStr
"""A secret or key as text; pydantic ``SecretStr`` is unwrapped."""

Secrets = SecretLike | Sequence[SecretLike] | None
"""One secret, several (rotation: any may match), or none configured."""

Body = bytes | bytearray | memoryview


class Reason(StrEnum):
    """Why a verification failed."""

    MISSING_HEADER = "missing_header"
    MALFORMED_HEADER = "malformed_header"
    TIMESTAMP_OUT_OF_TOLERANCE = "timestamp_out_of_tolerance"
    SIGNATURE_MISMATCH = "signature_mismatch"
    NO_SECRET = "no_secret"


class SigningConfigError(ValueError):
    """The caller's own input is unusable: a malformed secret or key, an invalid scheme,
    a negative tolerance, or a timestamp or id that cannot be signed.

    Never raised because of what a received request contains.
    """


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of one verification.

    ``ok`` is true only when a configured secret or key produced a signature found in the
    request and the signed timestamp (when the scheme has one) is within tolerance; then
    ``reason`` is None. Otherwise ``reason`` says why and ``detail`` says what was wrong
    and what is accepted. ``timestamp`` and ``message_id`` are the signed values when they
    were parsed; ``secret_index`` is the position of the secret that matched.
    """

    ok: bool
    scheme: str
    reason: Reason | None = None
    detail: str = ""
    timestamp: int | None = None
    message_id: str | None = None
    secret_index: int | None = None

    def __bool__(self) -> bool:
        # A dataclass is otherwise always truthy, so `if verify(...):` would accept forgeries.
        return self.ok


class _Failure(Exception):
    """Internal: carries a failure from the parsing helpers to the verify function."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail

    def result(self, scheme: str) -> Verification:
        return Verification(ok=False, scheme=scheme, reason=self.reason, detail=self.detail)


# ---------------------------------------------------------------- shared helpers


def _body_bytes(body: Body) -> bytes:
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    raise TypeError(f"body must be the raw request bytes, not {type(body).__name__}")


def _secret_texts(secrets: Secrets) -> list[str]:
    """The configured secrets as text, in order; empty strings count as not configured."""
    if secrets is None:
        items: list[object] = []
    elif isinstance(secrets, str | SecretStr):
        items = [secrets]
    elif isinstance(secrets, bytes | bytearray):
        raise TypeError("secrets must be text (str or SecretStr), or a sequence of them, not bytes")
    else:
        items = list(secrets)
    texts: list[str] = []
    for item in items:
        text = item.get_secret_value() if isinstance(item, SecretStr) else item
        if not isinstance(text, str):
            raise TypeError(f"each secret must be a str or SecretStr, not {type(text).__name__}")
        if text:
            texts.append(text)
    return texts


def _one_secret(secret: SecretLike) -> str:
    texts = _secret_texts(secret)
    if not texts:
        raise SigningConfigError("the secret is empty; signing needs a non-empty secret")
    return texts[0]


def _check_tolerance(tolerance: float) -> float:
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 <= tolerance < math.inf:
        raise SigningConfigError(f"tolerance must be a finite number of seconds >= 0, got {tolerance!r}")
    return tolerance


def _clock(now: float | None) -> float:
    if now is None:
        return time.time()
    # NaN would make every tolerance comparison false, so a stale timestamp would pass.
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        raise SigningConfigError(f"now must be finite unix seconds (int or float), got {now!r}")
    return now


def _timestamp_text(timestamp: int) -> str:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not 0 <= timestamp < _MAX_TIMESTAMP:
        raise SigningConfigError(f"timestamp must be whole unix seconds in [0, 10**15), got {timestamp!r}")
    return str(timestamp)


def _message_id_text(message_id: str, what: str) -> str:
    if not isinstance(message_id, str) or not _MESSAGE_ID.fullmatch(message_id):
        raise SigningConfigError(f"{what} must be 1 to 256 visible ASCII characters, got {message_id!r}")
    return message_id


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header ``name`` (case-insensitive), or None when absent.

    Works on any mapping, including multi-dicts whose ``items()`` repeat a name; a name
    present more than once, a non-text value, a value over :data:`MAX_HEADER_LENGTH` or a
    non-ASCII value is a failure.
    """
    wanted = name.lower()
    values = [value for key, value in headers.items() if isinstance(key, str) and key.lower() == wanted]
    if not values:
        return None
    if len(values) > 1:
        raise _Failure(Reason.MALFORMED_HEADER, f"header {name} appears {len(values)} times; exactly one is accepted")
    value = values[0]
    if not isinstance(value, str):
        raise _Failure(Reason.MALFORMED_HEADER, f"header {name} is not text")
    if len(value) > MAX_HEADER_LENGTH:
        raise _Failure(
            Reason.MALFORMED_HEADER,
            f"header {name} is {len(value)} characters long; at most {MAX_HEADER_LENGTH} are accepted",
        )
    if not value.isascii():
        raise _Failure(Reason.MALFORMED_HEADER, f"header {name} contains non-ASCII characters")
    return value


def _required(headers: Mapping[str, str], name: str) -> str:
    value = _header(headers, name)
    if value is None:
        raise _Failure(Reason.MISSING_HEADER, f"header {name} is missing")
    return value


def _parse_timestamp(text: str, header: str) -> str:
    if not _TIMESTAMP.fullmatch(text):
        raise _Failure(Reason.MALFORMED_HEADER, f"header {header} must be 1 to 15 ASCII digits of unix seconds")
    return text


def _parse_message_id(text: str, header: str) -> str:
    if not _MESSAGE_ID.fullmatch(text):
        raise _Failure(
            Reason.MALFORMED_HEADER,
            f"header {header} must be 1 to 256 visible ASCII characters (no spaces or control characters)",
        )
    return text


def _within_tolerance(timestamp_text: str, tolerance: float, now: float) -> int:
    timestamp = int(timestamp_text)
    drift = now - timestamp
    if abs(drift) > tolerance:
        direction = "old" if drift > 0 else "in the future"
        raise _Failure(
            Reason.TIMESTAMP_OUT_OF_TOLERANCE,
            f"signed timestamp {timestamp} is {abs(drift):g} s {direction}; at most {tolerance:g} s "
            "either way is accepted",
        )
    return timestamp


def _strict_b64decode(text: str) -> bytes | None:
    """Decode canonical standard base64 with padding, or return None.

    Canonical means re-encoding gives the same text, so no two accepted spellings decode
    to the same bytes (otherwise changing a padding bit would leave a signature valid).
    """
    if not _BASE64.fullmatch(text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != text:
        return None
    return raw


def _secret_b64decode(text: str, what: str) -> bytes:
    raw = _strict_b64decode(text)
    if not raw:
        raise SigningConfigError(f"{what} must be non-empty standard base64 with padding")
    return raw


def _mismatch(count: int, what: str) -> _Failure:
    noun = "secret" if count == 1 else "secrets"
    return _Failure(Reason.SIGNATURE_MISMATCH, f"{what}: no match under any of the {count} configured {noun}")


def _run(scheme: str, check: Callable[[], Verification]) -> Verification:
    try:
        return check()
    except _Failure as failure:
        return failure.result(scheme)


# ---------------------------------------------------------------- the hosted scheme


def _formstep_hex(key: bytes, timestamp_text: str, body: bytes) -> str:
    return hmac.new(key, timestamp_text.encode("ascii") + b"." + body, hashlib.sha256).hexdigest()


def sign_formstep(secret: SecretLike, body: Body, timestamp: int) -> str:
    """The ``X-Formstep-Signature`` value the hosted service sends for ``body`` at ``timestamp``.

    Keyed with the secret's UTF-8 bytes exactly as written (``whsec_`` included); returns
    ``t=<timestamp>,sha256=<64 lowercase hex digits>``. Raises :class:`SigningConfigError`
    for an empty secret or a timestamp outside [0, 10**15).
    """
    key = _one_secret(secret).encode("utf-8")
    timestamp_text = _timestamp_text(timestamp)
    return f"t={timestamp_text},sha256={_formstep_hex(key, timestamp_text, _body_bytes(body))}"


def formstep_headers(
    secret: SecretLike, body: Body, timestamp: int, *, event_id: str, event_type: str
) -> dict[str, str]:
    """The headers of a hosted-service delivery: content type, event id, event type, signature.

    Raises :class:`SigningConfigError` as :func:`sign_formstep` does, and for an id or type
    that is not 1 to 256 visible ASCII characters.
    """
    return {
        "Content-Type": "application/json",
        FORMSTEP_EVENT_ID_HEADER: _message_id_text(event_id, "event_id"),
        FORMSTEP_EVENT_TYPE_HEADER: _message_id_text(event_type, "event_type"),
        FORMSTEP_SIGNATURE_HEADER: sign_formstep(secret, body, timestamp),
    }


def verify_formstep(
    headers: Mapping[str, str],
    body: Body,
    secrets: Secrets,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> Verification:
    """Check a hosted-service delivery.

    Reads ``X-Formstep-Signature`` (or, when absent, the legacy ``X-formbase-Signature``),
    which must match ``^t=([0-9]{1,15}),sha256=([a-f0-9]{64})$`` exactly; ``t`` must be
    within ``tolerance`` seconds of ``now`` (default: the current time) in either
    direction; the digest must equal HMAC-SHA256 of ``<t>.<body>`` under one of
    ``secrets`` (each keyed with its UTF-8 bytes), compared in constant time.
    Never raises for anything in ``headers`` or ``body``.
    """
    raw = _body_bytes(body)
    keys = [text.encode("utf-8") for text in _secret_texts(secrets)]
    limit, clock = _check_tolerance(tolerance), _clock(now)

    def check() -> Verification:
        if not keys:
            raise _Failure(Reason.NO_SECRET, "no signing secret is configured, so nothing can be verified")
        name = FORMSTEP_SIGNATURE_HEADER
        value = _header(headers, name)
        if value is None:
            name = LEGACY_SIGNATURE_HEADER
            value = _header(headers, name)
        if value is None:
            raise _Failure(
                Reason.MISSING_HEADER,
                f"header {FORMSTEP_SIGNATURE_HEADER} (or the legacy {LEGACY_SIGNATURE_HEADER}) is missing",
            )
        match = _FORMSTEP_VALUE.fullmatch(value)
        if match is None:
            raise _Failure(Reason.MALFORMED_HEADER, f"header {name} must be exactly {_FORMSTEP_FORM}")
        timestamp_text, given = match.groups()
        timestamp = _within_tolerance(timestamp_text, limit, clock)
        for index, key in enumerate(keys):
            expected = _formstep_hex(key, timestamp_text, raw)
            if hmac.compare_digest(expected.encode("ascii"), given.encode("ascii")):
                return Verification(ok=True, scheme="formstep", timestamp=timestamp, secret_index=index)
        raise _mismatch(len(keys), f"the signature in {name}")

    return _run("formstep", check)


# ---------------------------------------------------------------- Standard Webhooks


@dataclass(frozen=True, slots=True)
class _StandardKey:
    """A verification key: ``v1`` with an HMAC key, or ``v1a`` with an Ed25519 public key."""

    version: Literal["v1", "v1a"]
    material: bytes

    def accepts(self, content: bytes, signature: bytes) -> bool:
        if self.version == "v1":
            expected = hmac.new(self.material, content, hashlib.sha256).digest()
            return hmac.compare_digest(expected, signature)
        try:
            Ed25519PublicKey.from_public_bytes(self.material).verify(signature, content)
        except InvalidSignature:
            return False
        return True


def _ed25519_private(secret: str) -> Ed25519PrivateKey:
    """The signing key of a ``whsk_`` secret: a 32-byte seed, or seed plus public key (64 bytes)."""
    raw = _secret_b64decode(secret.removeprefix("whsk_"), "a whsk_ key")
    if len(raw) not in (_ED25519_KEY_SIZE, 2 * _ED25519_KEY_SIZE):
        raise SigningConfigError(f"a whsk_ key must decode to 32 or 64 bytes, got {len(raw)}")
    private = Ed25519PrivateKey.from_private_bytes(raw[:_ED25519_KEY_SIZE])
    if len(raw) == 2 * _ED25519_KEY_SIZE and private.public_key().public_bytes_raw() != raw[_ED25519_KEY_SIZE:]:
        raise SigningConfigError("the last 32 bytes of this whsk_ key are not the public key of its seed")
    return private


def _hmac_key(secret: str) -> bytes:
    return _secret_b64decode(secret.removeprefix("whsec_"), "a Standard Webhooks secret (whsec_<base64>)")


def _standard_verify_key(secret: str) -> _StandardKey:
    if secret.startswith("whpk_"):
        raw = _secret_b64decode(secret.removeprefix("whpk_"), "a whpk_ key")
        if len(raw) != _ED25519_KEY_SIZE:
            raise SigningConfigError(f"a whpk_ key must decode to 32 bytes, got {len(raw)}")
        try:
            Ed25519PublicKey.from_public_bytes(raw)
        except ValueError as error:
            raise SigningConfigError(f"this whpk_ key is not a valid Ed25519 public key: {error}") from None
        return _StandardKey("v1a", raw)
    if secret.startswith("whsk_"):
        raise SigningConfigError(
            "a whsk_ key is an Ed25519 signing key; verify with its whpk_ public key (standard_public_key())"
        )
    return _StandardKey("v1", _hmac_key(secret))


def _standard_content(message_id: str, timestamp_text: str, body: bytes) -> bytes:
    return f"{message_id}.{timestamp_text}.".encode("ascii") + body


def _parse_standard_signatures(value: str) -> list[tuple[str, bytes]]:
    """The ``v1`` and ``v1a`` entries of a ``webhook-signature`` value.

    Entries are ``<version>,<base64>`` separated by single spaces; entries of other
    versions are skipped (the standard lets senders add new ones), but every entry must
    be well formed and ``v1``/``v1a`` ones must carry a signature of the right length.
    """
    entries: list[tuple[str, bytes]] = []
    for position, entry in enumerate(value.split(" "), start=1):
        match = _STANDARD_ENTRY.fullmatch(entry)
        if match is None:
            raise _Failure(
                Reason.MALFORMED_HEADER,
                f"entry {position} of header {STANDARD_SIGNATURE_HEADER} must be <version>,<base64>, "
                "entries separated by single spaces",
            )
        version, encoded = match.groups()
        if version not in ("v1", "v1a"):
            continue
        size = hashlib.sha256().digest_size if version == "v1" else _ED25519_SIGNATURE_SIZE
        signature = _strict_b64decode(encoded)
        if signature is None or len(signature) != size:
            raise _Failure(
                Reason.MALFORMED_HEADER,
                f"entry {position} of header {STANDARD_SIGNATURE_HEADER} must hold the canonical base64 of "
                f"{size} bytes for {version}",
            )
        entries.append((version, signature))
    return entries


def sign_standard(
    secrets: SecretLike | Sequence[SecretLike], message_id: str, body: Body, timestamp: int
) -> str:
    """The ``webhook-signature`` value for ``body`` under one or several secrets.

    Each ``whsec_<base64>`` secret (or bare base64) gives a ``v1,<base64 HMAC-SHA256>``
    entry; each ``whsk_<base64>`` key gives a ``v1a,<base64 Ed25519>`` entry; entries are
    joined by single spaces in the order given. Raises :class:`SigningConfigError` for no
    secret, a ``whpk_`` public key, malformed base64, or an unusable id or timestamp.
    """
    texts = _secret_texts(secrets)
    if not texts:
        raise SigningConfigError("no secret given; signing needs at least one")
    content = _standard_content(
        _message_id_text(message_id, "message_id"), _timestamp_text(timestamp), _body_bytes(body)
    )
    entries: list[str] = []
    for text in texts:
        if text.startswith("whpk_"):
            raise SigningConfigError("a whpk_ key is public and cannot sign; sign with its whsk_ key")
        if text.startswith("whsk_"):
            signature = _ed25519_private(text).sign(content)
            entries.append("v1a," + base64.b64encode(signature).decode("ascii"))
        else:
            digest = hmac.new(_hmac_key(text), content, hashlib.sha256).digest()
            entries.append("v1," + base64.b64encode(digest).decode("ascii"))
    return " ".join(entries)


def standard_headers(
    secrets: SecretLike | Sequence[SecretLike], message_id: str, body: Body, timestamp: int
) -> dict[str, str]:
    """The ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` headers of a delivery.

    Raises as :func:`sign_standard` does.
    """
    return {
        STANDARD_ID_HEADER: message_id,
        STANDARD_TIMESTAMP_HEADER: str(timestamp),
        STANDARD_SIGNATURE_HEADER: sign_standard(secrets, message_id, body, timestamp),
    }


def generate_standard_keypair() -> tuple[str, str]:
    """A fresh Ed25519 key pair for ``v1a``: ``(whsk_<base64 seed>, whpk_<base64 public key>)``."""
    private = Ed25519PrivateKey.generate()
    secret = "whsk_" + base64.b64encode(private.private_bytes_raw()).decode("ascii")
    return secret, standard_public_key(secret)


def standard_public_key(signing_key: SecretLike) -> str:
    """The ``whpk_`` public key that verifies signatures made with a ``whsk_`` key.

    Raises :class:`SigningConfigError` when ``signing_key`` is not a valid ``whsk_`` key.
    """
    text = _one_secret(signing_key)
    if not text.startswith("whsk_"):
        raise SigningConfigError("expected a whsk_ signing key")
    public = _ed25519_private(text).public_key().public_bytes_raw()
    return "whpk_" + base64.b64encode(public).decode("ascii")


def verify_standard(
    headers: Mapping[str, str],
    body: Body,
    secrets: Secrets,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> Verification:
    """Check a Standard Webhooks delivery (``v1`` HMAC and ``v1a`` Ed25519).

    ``secrets`` may mix ``whsec_`` HMAC secrets (checked against ``v1`` entries) and
    ``whpk_`` public keys (checked against ``v1a`` entries). ``webhook-id`` must be 1 to 256
    visible ASCII characters, ``webhook-timestamp`` 1 to 15 ASCII digits within
    ``tolerance`` seconds of ``now`` either way, and ``webhook-signature`` well-formed
    entries; ``ok`` when any entry matches any key. Raises :class:`SigningConfigError` for
    a malformed secret or a ``whsk_`` signing key, never for the request's content.
    """
    raw = _body_bytes(body)
    keys = [_standard_verify_key(text) for text in _secret_texts(secrets)]
    limit, clock = _check_tolerance(tolerance), _clock(now)

    def check() -> Verification:
        if not keys:
            raise _Failure(Reason.NO_SECRET, "no secret or public key is configured, so nothing can be verified")
        values = {
            name: _header(headers, name)
            for name in (STANDARD_ID_HEADER, STANDARD_TIMESTAMP_HEADER, STANDARD_SIGNATURE_HEADER)
        }
        missing = [name for name, value in values.items() if value is None]
        if missing:
            raise _Failure(Reason.MISSING_HEADER, f"header(s) {', '.join(missing)} missing")
        message_id = _parse_message_id(values[STANDARD_ID_HEADER] or "", STANDARD_ID_HEADER)
        timestamp_text = _parse_timestamp(values[STANDARD_TIMESTAMP_HEADER] or "", STANDARD_TIMESTAMP_HEADER)
        entries = _parse_standard_signatures(values[STANDARD_SIGNATURE_HEADER] or "")
        timestamp = _within_tolerance(timestamp_text, limit, clock)
        if not entries:
            raise _Failure(Reason.SIGNATURE_MISMATCH, f"header {STANDARD_SIGNATURE_HEADER} has no v1 or v1a entry")
        content = _standard_content(message_id, timestamp_text, raw)
        for index, key in enumerate(keys):
            for version, signature in entries:
                if version == key.version and key.accepts(content, signature):
                    return Verification(
                        ok=True, scheme="standard", timestamp=timestamp, message_id=message_id, secret_index=index
                    )
        raise _mismatch(len(keys), f"the entries of {STANDARD_SIGNATURE_HEADER}")

    return _run("standard", check)


# ---------------------------------------------------------------- configurable HMAC scheme

_PLACEHOLDERS = ("id", "timestamp", "body")


def _template_parts(template: str) -> list[tuple[str, str | None]]:
    """``(literal text, placeholder or None)`` pairs; raises ValueError on a bad template."""
    parts: list[tuple[str, str | None]] = []
    for literal, field, spec, conversion in string.Formatter().parse(template):
        if field is not None and (field not in _PLACEHOLDERS or spec or conversion):
            raise ValueError(
                f"template placeholder {{{field}}} is not allowed; use {{id}}, {{timestamp}} and {{body}} "
                "(write {{ and }} for literal braces)"
            )
        parts.append((literal, field))
    return parts


class CustomScheme(BaseModel):
    """A configurable HMAC signature scheme.

    The signature header holds ``prefix`` followed by the ``encoding`` (lowercase hex or
    canonical base64) of an HMAC with ``digest`` over ``template``, in which ``{id}``,
    ``{timestamp}`` and ``{body}`` stand for the id header's value, the timestamp header's
    value and the raw body. ``{body}`` must appear exactly once, and a header is named
    exactly when its placeholder is used, so every header read is also signed. With
    ``secret_encoding="raw"`` the key is the secret's UTF-8 bytes; with ``"base64"`` a
    ``whsec_`` prefix is dropped and the rest base64-decoded. Without a timestamp header
    there is no replay protection. An inconsistent scheme is refused at construction with
    pydantic's ``ValidationError`` (a ``ValueError``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    signature_header: str
    timestamp_header: str | None = None
    id_header: str | None = None
    prefix: str = ""
    encoding: Literal["hex", "base64"] = "hex"
    digest: Literal["sha256", "sha1", "sha512"] = "sha256"
    template: str = "{body}"
    secret_encoding: Literal["raw", "base64"] = "raw"

    @field_validator("signature_header", "timestamp_header", "id_header")
    @classmethod
    def _header_name(cls, value: str | None) -> str | None:
        if value is not None and not _HEADER_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")
        return value

    @field_validator("prefix")
    @classmethod
    def _printable_prefix(cls, value: str) -> str:
        if not re.fullmatch(r"[\x21-\x7e]*", value):
            raise ValueError("prefix must be visible ASCII characters without spaces")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> CustomScheme:
        fields = [field for _, field in _template_parts(self.template) if field is not None]
        if fields.count("body") != 1:
            raise ValueError("template must contain {body} exactly once")
        for placeholder, header, option in (
            ("timestamp", self.timestamp_header, "timestamp_header"),
            ("id", self.id_header, "id_header"),
        ):
            if (placeholder in fields) != (header is not None):
                raise ValueError(f"template uses {{{placeholder}}} if and only if {option} is set")
        return self

    def signed_content(self, body: bytes, *, timestamp: str | None = None, message_id: str | None = None) -> bytes:
        """The bytes the HMAC covers: the template with its placeholders filled in."""
        values = {"id": message_id or "", "timestamp": timestamp or ""}
        out = bytearray()
        for literal, field in _template_parts(self.template):
            out += literal.encode("utf-8")
            if field == "body":
                out += body
            elif field is not None:
                out += values[field].encode("ascii")
        return bytes(out)

    def key(self, secret: str) -> bytes:
        """The HMAC key of ``secret`` under this scheme; raises :class:`SigningConfigError` if unusable."""
        if self.secret_encoding == "raw":
            return secret.encode("utf-8")
        return _secret_b64decode(secret.removeprefix("whsec_"), f"a secret of scheme {self.name}")

    def mac(self, key: bytes, content: bytes) -> bytes:
        """The raw HMAC of ``content``."""
        return hmac.new(key, content, self.digest).digest()

    def encode(self, mac: bytes) -> str:
        """The signature header value for ``mac``."""
        text = mac.hex() if self.encoding == "hex" else base64.b64encode(mac).decode("ascii")
        return self.prefix + text


GITHUB = CustomScheme(name="github", signature_header="X-Hub-Signature-256", prefix="sha256=")
"""GitHub style: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``, no timestamp."""


def sign_custom(
    scheme: CustomScheme,
    secret: SecretLike,
    body: Body,
    *,
    timestamp: int | None = None,
    message_id: str | None = None,
) -> str:
    """The signature header value ``scheme`` expects for ``body``.

    ``timestamp`` and ``message_id`` are required exactly when the scheme names a
    timestamp or id header. Raises :class:`SigningConfigError` otherwise, and for an
    empty or undecodable secret.
    """
    key = scheme.key(_one_secret(secret))
    if (timestamp is None) != (scheme.timestamp_header is None):
        raise SigningConfigError(f"scheme {scheme.name} needs a timestamp exactly when it has a timestamp_header")
    if (message_id is None) != (scheme.id_header is None):
        raise SigningConfigError(f"scheme {scheme.name} needs a message_id exactly when it has an id_header")
    content = scheme.signed_content(
        _body_bytes(body),
        timestamp=None if timestamp is None else _timestamp_text(timestamp),
        message_id=None if message_id is None else _message_id_text(message_id, "message_id"),
    )
    return scheme.encode(scheme.mac(key, content))


def custom_headers(
    scheme: CustomScheme,
    secret: SecretLike,
    body: Body,
    *,
    timestamp: int | None = None,
    message_id: str | None = None,
) -> dict[str, str]:
    """The signature header and, when the scheme names them, the timestamp and id headers.

    Raises as :func:`sign_custom` does.
    """
    headers = {scheme.signature_header: sign_custom(scheme, secret, body, timestamp=timestamp, message_id=message_id)}
    if scheme.timestamp_header is not None:
        headers[scheme.timestamp_header] = str(timestamp)
    if scheme.id_header is not None and message_id is not None:
        headers[scheme.id_header] = message_id
    return headers


def _parse_custom_signature(scheme: CustomScheme, value: str) -> bytes:
    size = hashlib.new(scheme.digest).digest_size
    form = f"{size * 2} lowercase hex digits" if scheme.encoding == "hex" else f"the canonical base64 of {size} bytes"
    failure = _Failure(
        Reason.MALFORMED_HEADER,
        f"header {scheme.signature_header} must be {scheme.prefix!r} followed by {form}",
    )
    if not value.startswith(scheme.prefix):
        raise failure
    encoded = value[len(scheme.prefix) :]
    if scheme.encoding == "hex":
        if not re.fullmatch(f"[0-9a-f]{{{size * 2}}}", encoded):
            raise failure
        return bytes.fromhex(encoded)
    signature = _strict_b64decode(encoded)
    if signature is None or len(signature) != size:
        raise failure
    return signature


def verify_custom(
    headers: Mapping[str, str],
    body: Body,
    secrets: Secrets,
    scheme: CustomScheme,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> Verification:
    """Check a delivery signed with a :class:`CustomScheme`.

    The signature header must be exactly the prefix and one encoded digest of the right
    length; a timestamp header (when named) 1 to 15 ASCII digits within ``tolerance``
    seconds of ``now`` either way; an id header (when named) 1 to 256 visible ASCII
    characters. ``ok`` when the HMAC under any of ``secrets`` matches (constant time).
    Raises :class:`SigningConfigError` for an undecodable secret, never for the request.
    """
    raw = _body_bytes(body)
    keys = [scheme.key(text) for text in _secret_texts(secrets)]
    limit, clock = _check_tolerance(tolerance), _clock(now)

    def check() -> Verification:
        if not keys:
            raise _Failure(Reason.NO_SECRET, "no signing secret is configured, so nothing can be verified")
        signature = _parse_custom_signature(scheme, _required(headers, scheme.signature_header))
        timestamp_text = message_id = None
        if scheme.id_header is not None:
            message_id = _parse_message_id(_required(headers, scheme.id_header), scheme.id_header)
        if scheme.timestamp_header is not None:
            timestamp_text = _parse_timestamp(_required(headers, scheme.timestamp_header), scheme.timestamp_header)
        timestamp = None if timestamp_text is None else _within_tolerance(timestamp_text, limit, clock)
        content = scheme.signed_content(raw, timestamp=timestamp_text, message_id=message_id)
        for index, key in enumerate(keys):
            if hmac.compare_digest(scheme.mac(key, content), signature):
                return Verification(
                    ok=True, scheme=scheme.name, timestamp=timestamp, message_id=message_id, secret_index=index
                )
        raise _mismatch(len(keys), f"the signature in {scheme.signature_header}")

    return _run(scheme.name, check)


# ---------------------------------------------------------------- dispatch

Scheme = Literal["formstep", "standard"] | CustomScheme
"""``"formstep"`` (the hosted service), ``"standard"`` (Standard Webhooks) or a :class:`CustomScheme`."""


def verify(
    headers: Mapping[str, str],
    body: Body,
    secrets: Secrets,
    scheme: Scheme = "formstep",
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> Verification:
    """Check a delivery under ``scheme``; see :func:`verify_formstep`, :func:`verify_standard`
    and :func:`verify_custom` for what each promises. Raises :class:`SigningConfigError`
    for an unknown scheme.
    """
    if isinstance(scheme, CustomScheme):
        return verify_custom(headers, body, secrets, scheme, tolerance=tolerance, now=now)
    if scheme == "formstep":
        return verify_formstep(headers, body, secrets, tolerance=tolerance, now=now)
    if scheme == "standard":
        return verify_standard(headers, body, secrets, tolerance=tolerance, now=now)
    raise SigningConfigError(f"unknown scheme {scheme!r}; use 'formstep', 'standard' or a CustomScheme")
