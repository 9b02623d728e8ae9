"""A warning that repeats while its cause lasts (a database away, a service that does not
answer) is logged once a minute with a count, in one line: a loop that retries every few
seconds would otherwise fill the log with the same several-line error."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

EVERY_SECONDS = 60.0


def one_line(value: object) -> object:
    """An exception as its first line (a database error carries its SQL and a link on the
    lines after); any other value as it is."""
    if isinstance(value, BaseException):
        text = str(value).strip()
        return text.splitlines()[0] if text else type(value).__name__
    return value


class RepeatedWarning:
    """Logs one warning (keyed by its format string) the first time, then at most once per
    ``every`` seconds, saying how many times it happened since it was last logged.
    ``clock`` is injectable (monotonic seconds) for tests."""

    def __init__(self, logger: logging.Logger, *, every: float = EVERY_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger, self.every, self.clock = logger, every, clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warn(self, msg: str, *args: object) -> bool:
        """Log ``msg % args`` (exceptions in their first line) unless it was logged less than
        ``every`` seconds ago; returns whether it was logged."""
        now = self.clock()
        last = self._last.get(msg)
        if last is not None and now - last < self.every:
            self._held[msg] = self._held.get(msg, 0) + 1
            return False
        held = self._held.pop(msg, 0)
        self._last[msg] = now
        said = tuple(one_line(a) for a in args)
        if held and last is not None:
            self.logger.warning(msg + " (%d more time(s) in the last %.0f s)", *said, held, now - last)
        else:
            self.logger.warning(msg, *said)
        return True
