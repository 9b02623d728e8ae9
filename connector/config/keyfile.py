"""The store's key (``[store] key_file``): 32 random bytes in a file only its owner may
read, and the one way the store keeps a secret with it (AES-256-GCM, the secret's place in
the store bound as associated data). A key that is missing, readable by others, of the
wrong size, or not the one a secret was sealed with is a :class:`KeyFileError` in one
line naming the file and the fix; the key itself never appears in a message."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12
KEY_FILE_NAME = "formsync.key"


class KeyFileError(Exception):
    """The store's key cannot be used: ``where`` names the file (or setting), the
    message says what is wrong and how to fix it."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(f"{where}: {message}")
        self.message, self.where = message, where


def default_key_file(store_url: str, config: Path | None) -> Path:
    """Where the key lives when ``store.key_file`` is not set: beside the SQLite database
    file, else beside the settings file, else in the current directory."""
    prefix = "sqlite:///"
    if store_url.startswith(prefix) and store_url != prefix + ":memory:":
        return Path(store_url[len(prefix):].split("?", 1)[0]).parent / KEY_FILE_NAME
    return (config.parent if config is not None else Path(".")) / KEY_FILE_NAME


def key_id(key: bytes) -> str:
    """A short hash naming the key (kept beside what it sealed), never the key."""
    return hashlib.sha256(b"formsync-key-id:" + key).hexdigest()[:16]


def create_key(path: Path) -> bytes:
    """A new key written to ``path`` with mode 0600 (the file must not exist yet)."""
    key = os.urandom(KEY_BYTES)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


def load_key(path: Path, *, create: bool = False) -> bytes:
    """The key in ``path``; made there when missing and ``create`` is true (``formsync
    login`` does). Refused when missing, readable by group or others, or not 32 bytes."""
    if not path.exists():
        if create:
            return create_key(path)
        raise KeyFileError("the store's key file is missing: run `formsync login` to sign in again "
                           "(or restore the file, or set store.key_file)", str(path))
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise KeyFileError(f"the store's key file has mode {mode:04o}: others may read it; run chmod 600 {path}",
                           str(path))
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise KeyFileError(f"the store's key file holds {len(key)} bytes, not {KEY_BYTES}: it is not a formsync "
                           "key; restore it, or remove it and run `formsync login`", str(path))
    return key


def seal(key: bytes, secret: str, context: str) -> bytes:
    """``secret`` encrypted with ``key``; ``context`` (the secret's place in the store)
    must be given again to open it."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, secret.encode(), context.encode())


def unseal(key: bytes, sealed: bytes, context: str, where: str) -> str:
    """The secret ``seal`` made; a :class:`KeyFileError` when ``key`` is not the key
    that sealed it (the key file was changed or replaced)."""
    try:
        return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], context.encode()).decode()
    except (InvalidTag, ValueError):
        raise key_changed(where) from None


def key_changed(where: str) -> KeyFileError:
    """The error of a key that is not the one the store's secrets were sealed with."""
    return KeyFileError("the store's key file is not the key the stored sign-in was kept with (it was changed or "
                        "replaced): restore it, or run `formsync login` again", where)
