"""What the receiver logs when it refuses a delivery: one warning per cause and path,
then at most one per ``window`` seconds with the count of the same refusals it held back,
so a sender retrying for hours leaves a few lines, not one per attempt.

A signature refusal names the setting whose secrets were tried and how many there are
(never a secret) and what to check for its cause. Pure but for the injectable clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Channel = Literal["callbacks", "webhooks", "any"]

WINDOW_SECONDS = 3600.0
"""How long identical refusals stay quiet after one was logged."""

_SETTING = {"callbacks": "receiver.callback_secrets", "webhooks": "receiver.webhook_secrets",
            "any": "receiver.callback_secrets and receiver.webhook_secrets"}
_VARIABLE = {"callbacks": "FORMSYNC_RECEIVER__CALLBACK_SECRETS", "webhooks": "FORMSYNC_RECEIVER__WEBHOOK_SECRETS",
             "any": "FORMSYNC_RECEIVER__CALLBACK_SECRETS / FORMSYNC_RECEIVER__WEBHOOK_SECRETS"}
_WHAT = {"callbacks": "the workspace's request signing secret",
         "webhooks": "the signingSecret the subscription was created with (formsync subscribe create prints it)",
         "any": "the workspace's request signing secret (callbacks) or the subscription's signingSecret (webhooks)"}


def signature_advice(reason: str, channel: Channel, secrets: int, tolerance: int) -> str:
    """Which setting was tried, with how many secrets, and what to check for ``reason``
    (a ``connector.signing.Reason`` value)."""
    tried = f"{_SETTING[channel]} ({secrets} secret{'' if secrets == 1 else 's'}, {_VARIABLE[channel]})"
    if reason == "no_secret" or secrets == 0:
        return f"{tried} is empty: set it to {_WHAT[channel]}"
    if reason == "timestamp_out_of_tolerance":
        return (f"the signature's time is more than {tolerance} s from this machine's clock: check the clock "
                "(NTP) or receiver.tolerance_seconds")
    if reason in ("missing_header", "malformed_header"):
        return ("the sender did not sign as receiver.scheme expects: check that the sender is the Form Collection "
                "Service (X-Formstep-Signature) or set receiver.scheme")
    return f"no secret of {tried} matches: check that it holds {_WHAT[channel]}"


@dataclass
class RefusalLog:
    """Decides which refusals are logged: the first of each (cause, path), then one per
    ``window`` seconds carrying the number held back since."""

    window: float = WINDOW_SECONDS
    clock: Callable[[], float] = time.monotonic
    _seen: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)

    def admit(self, cause: str, path: str) -> int | None:
        """None to stay quiet, else the number of identical refusals held back since the
        last line (0 for the first)."""
        now = self.clock()
        key = (cause, path)
        last = self._seen.get(key)
        if last is not None and now - last[0] < self.window:
            self._seen[key] = (last[0], last[1] + 1)
            return None
        self._seen[key] = (now, 0)
        return 0 if last is None else last[1]
