"""The secrets file: which webhook signing secrets exist. A secret is never dropped unseen:
the secrets an environment file holds (``FORMSYNC_RECEIVER__WEBHOOK_SECRETS='[...]'``, the
file systemd's ``EnvironmentFile`` and a shell's ``set -a; . FILE`` read) and the ones the
settings hold are one list, and a file whose secrets cannot be read is refused rather
than written over. Pure functions; the file is read and written by the caller."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Sequence

from dotenv.parser import parse_stream

SECRETS_VARIABLE = "FORMSYNC_RECEIVER__WEBHOOK_SECRETS"


class SecretsFileError(ValueError):
    """An environment file whose secrets cannot be known: ``line`` (1-based) and why."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line, self.reason = line, reason


def secrets_line(secrets: Sequence[str]) -> str:
    """The secrets as the shell (and a systemd EnvironmentFile) reads them:
    ``FORMSYNC_RECEIVER__WEBHOOK_SECRETS='["whsec_…", …]'``."""
    return f"{SECRETS_VARIABLE}='{json.dumps(list(secrets))}'"


def file_secrets(text: str) -> list[str]:
    """The secrets ``text`` (an environment file) holds in ``SECRETS_VARIABLE``, in order;
    none when it does not set it. A line that is not ``NAME=value``, or the variable's
    value not a JSON list of texts, is a ``SecretsFileError`` (never echoing a value)."""
    found: list[str] = []
    for binding in parse_stream(io.StringIO(text)):
        line = binding.original.line
        if binding.error:
            raise SecretsFileError(line, "not a NAME=value line (a comment starts with #)")
        if binding.key != SECRETS_VARIABLE:
            continue
        try:
            value = json.loads(binding.value or "")
        except ValueError:
            value = None
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise SecretsFileError(line, f"{SECRETS_VARIABLE} is not a JSON list of secrets "
                                         f"(write it as {SECRETS_VARIABLE}='[\"whsec_...\"]')")
        found = value  # the shell and systemd keep the last assignment
    return found


def signing_secrets(*sources: Iterable[str]) -> list[str]:
    """Every secret of ``sources`` once, in the order first seen (the newest last): the
    one list of the signing secrets that exist."""
    return list(dict.fromkeys(s for source in sources for s in source if s))


def with_secrets(text: str, secrets: Sequence[str]) -> str:
    """``text`` (an environment file, checked by :func:`file_secrets`) with its secrets
    line set to ``secrets``: every other line kept as it was, the line added at the end
    when it had none."""
    kept, said = [], False
    for binding in parse_stream(io.StringIO(text)):
        if binding.key == SECRETS_VARIABLE:
            if not said:
                kept.append(secrets_line(secrets) + "\n")
                said = True
            continue
        original = binding.original.string
        kept.append(original if original.endswith("\n") or not original else original + "\n")
    if not said:
        kept.append(secrets_line(secrets) + "\n")
    return "".join(kept)


def reloaded(configured: Sequence[str], at_start: Sequence[str], now: Sequence[str]) -> list[str]:
    """The signing secrets once the secrets file, which held ``at_start`` when the process
    started, holds ``now``: the configured secrets (``configured``, the settings' and the
    environment's) that did not come from the file, then the file's now. A secret dropped
    from the file is dropped though the environment read from the file still holds it."""
    came_from_file = set(at_start)
    return signing_secrets([s for s in configured if s not in came_from_file], now)
