"""The store's key (``[store] key_file``): 32 random bytes in a file only its owner may
read, and the one way the store keeps a secret with it (AES-256-GCM, the secret's place in
the store bound as associated data). A key that is missing, readable by others, of the
wrong size, or not the one a secret was sealed with is a :class:`KeyFileError` in one
line naming the file and the fix; the key itself never appears in a message."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

if TYPE_CHECKING:
    from .settings import StoreSettings

KEY_BYTES = 32
NONCE_BYTES = 12
KEY_FILE_NAME = "formsync.key"
CONFIG_ENV = "FORMSYNC_CONFIG"  # the settings file a process without --config reads (the receiver's workers)
KEY_FILE_ENV = "FORMSYNC_STORE__KEY_FILE"  # store.key_file, as a variable
RESET = "formsync key reset --forget-erasures"
# What keeps the erasures when the key is lost or replaced: the file itself, from where it was backed up.
RESTORE = "restore the file from the backup kept with the database (or set store.key_file to where it is)"


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


def key_path(store: StoreSettings, config: Path | None) -> Path:
    """The store's key file: ``store.key_file``, else beside the SQLite database or the settings."""
    return store.key_file or default_key_file(store.url, config)


def library_key_path(store_url: str, config: Path | None = None) -> Path:
    """Where a ``Store`` opened without ``key_file`` finds the key: where ``key_path``
    puts it for a command given the same settings. The settings file is ``config``, else
    ``FORMSYNC_CONFIG``; ``FORMSYNC_STORE__KEY_FILE``, then the file's ``store.key_file``,
    win as they do for a command. Without either, the current directory (a server database)."""
    if os.environ.get(KEY_FILE_ENV):
        return Path(os.environ[KEY_FILE_ENV])
    if config is None and os.environ.get(CONFIG_ENV):
        config = Path(os.environ[CONFIG_ENV])
    if config is not None and config.is_file():
        from .settings import read_toml

        try:
            named = (read_toml(config).get("store") or {}).get("key_file")
        except Exception:  # a settings file that cannot be read is said where the settings are loaded
            named = None
        if isinstance(named, str) and named:
            return Path(named)
    return default_key_file(store_url, config)


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
        raise key_missing(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise KeyFileError(f"the store's key file has mode {mode:04o}: others may read it; run chmod 600 {path}",
                           str(path))
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise KeyFileError(f"the store's key file holds {len(key)} bytes, not {KEY_BYTES}: it is not a formsync "
                           f"key; {RESTORE}", str(path))
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


def key_missing(path: Path) -> KeyFileError:
    """The error of a key file the store needs (its erasures or sign-in) that is not there."""
    return KeyFileError(f"the store's key file is missing: {RESTORE}; `{RESET}` makes a new key and forgets "
                        "every erasure and the sign-in", str(path))


def key_changed(where: str, kept: str = "the stored sign-in") -> KeyFileError:
    """The error of a key that is not the one ``kept`` (the store's sign-in, or its
    erasures) was made with."""
    return KeyFileError(f"the store's key file is not the key that made {kept} (it was changed or replaced): "
                        f"{RESTORE}; `{RESET}` makes a new key and forgets them", where)


def bound_key(path: Path, bound: AbstractSet[str], *, create: bool = False, granted: bool = False) -> bytes:
    """The key in ``path`` for a store whose erasures were made with the keys ``bound``
    (their ``key_id``s) and that holds a sign-in when ``granted``. A new key is made only
    when ``create`` is true and neither exists (``RESET`` is the one way past them); a
    key other than the erasures' is a :class:`KeyFileError`, so no tombstone is checked
    with the wrong key (a person erased would come back)."""
    key = load_key(path, create=create and not bound and not granted)
    if bound and set(bound) != {key_id(key)}:
        raise key_changed(str(path), "the store's erasures")
    return key


def new_key(path: Path) -> bytes:
    """A new key in ``path``, replacing the file there (``RESET``): written beside it and
    renamed over it, so a crash leaves the old key or the new one."""
    tmp = path.with_name(path.name + ".new")
    tmp.unlink(missing_ok=True)
    key = create_key(tmp)
    os.replace(tmp, path)
    return key
