"""The receiver's webhook signing secrets, re-read from the secrets file
(``receiver.secrets_file``) when it changes, so a rotation needs no restart: each process
looks at the file at most once a second (``RELOAD_EVERY_S``) when a delivery arrives,
and at once on ``reload()`` (SIGHUP for ``formsync receive``). A reload that fails (the
file unreadable, a line that is not ``NAME=value``, a secret the scheme cannot use) keeps
the secrets held and logs one line; the file's rule is ``connector.config.secrets_file``'s."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import SecretStr

from ..config.secrets_file import SecretsFileError, file_secrets, reloaded

log = logging.getLogger("connector.receiver")

RELOAD_EVERY_S = 1.0  # the most often a process looks whether the secrets file changed


def read_secrets_file(path: Path) -> list[str]:
    """The secrets ``path`` holds; one that cannot be read (missing, not text, a bad line)
    is a ``ValueError`` naming the file and line, never a secret."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"cannot read the secrets file {path} (receiver.secrets_file): {e.strerror or e}; "
                         f"write it with 'formsync subscribe secret', or fix the setting") from None
    except UnicodeDecodeError:
        raise ValueError(f"the secrets file {path} is not text") from None
    try:
        return file_secrets(text)
    except SecretsFileError as e:
        raise ValueError(f"the secrets file {path}:{e.line}: {e.reason}") from None


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What tells a changed file (a file replaced whole has another inode)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class WebhookSecrets:
    """One process's webhook signing secrets: the configured ones, and those of the
    secrets file ``path`` (re-read when it changed). ``usable`` raises ``ValueError`` for a
    set the receiver cannot verify with; a start with such a set or an unreadable file
    raises it."""

    def __init__(self, configured: Sequence[SecretStr], path: Path | None,
                 usable: Callable[[list[SecretStr]], None], clock: Callable[[], float] = time.monotonic) -> None:
        self._configured = [s.get_secret_value() for s in configured]
        self._path, self._usable, self._clock = path, usable, clock
        self._stamp = _stamp(path) if path is not None else None
        self._at_start = read_secrets_file(path) if path is not None else []
        self._held = self._made(self._at_start)
        usable(self._held)
        self._looked = clock()

    def _made(self, in_file: Sequence[str]) -> list[SecretStr]:
        return [SecretStr(s) for s in reloaded(self._configured, self._at_start, in_file)]

    def get(self) -> list[SecretStr]:
        """The secrets now: the file is looked at when a second has passed since last time."""
        if self._path is not None and self._clock() - self._looked >= RELOAD_EVERY_S:
            self.reload(only_if_changed=True)
        return self._held

    def reload(self, *, only_if_changed: bool = False) -> bool:
        """Read the secrets file again (``only_if_changed``: when it changed since last
        read); whether the secrets held were replaced. A failure is logged once per change
        of the file and keeps them."""
        if self._path is None:
            return False
        self._looked = self._clock()
        stamp = _stamp(self._path)
        if only_if_changed and stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            secrets = self._made(read_secrets_file(self._path))
            self._usable(secrets)
        except ValueError as e:
            log.warning("webhook secrets not reloaded, the %d held are kept: %s", len(self._held), e)
            return False
        if [s.get_secret_value() for s in secrets] != [s.get_secret_value() for s in self._held]:
            log.info("webhook secrets reloaded from %s: %d now", self._path, len(secrets))
        self._held = secrets
        return True
