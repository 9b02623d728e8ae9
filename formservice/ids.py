"""Identifiers and secrets: a prefix plus 22 base62 characters, as the hosted service mints them."""

from __future__ import annotations

import hashlib
import secrets
import string

BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
ALNUM = string.ascii_letters + string.digits


def new_id(prefix: str, length: int = 22) -> str:
    """``<prefix>_`` followed by ``length`` random base62 characters."""
    return f"{prefix}_" + "".join(secrets.choice(BASE62) for _ in range(length))


def new_api_token() -> str:
    """An API token: ``fb_`` and 32 alphanumerics (35 characters)."""
    return "fb_" + "".join(secrets.choice(ALNUM) for _ in range(32))


def new_oauth_token(prefix: str = "fbo") -> str:
    return f"{prefix}_" + "".join(secrets.choice(ALNUM) for _ in range(40))


def new_signing_secret() -> str:
    """A signing secret in the shape connectors generate: ``whsec_`` and 64 hex digits."""
    return "whsec_" + secrets.token_hex(32)


def sha256_hex(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()
