"""What ``webhooks.create`` takes (hosted-service notes sections 1 and 3): the event types
with the ``type`` their deliveries carry, the idle windows of ``submission_abandoned``,
the providers, and a signing secret made as the automation connectors make it. The
sandbox keeps its own list (``formservice/domain/events.py``) on purpose: the connector and
the service share no code, so a wire mistake on one side shows against the other."""

from __future__ import annotations

import secrets

# webhooks.create's eventType -> the ``type`` its deliveries carry.
EVENT_TYPES: dict[str, str] = {
    "submission_created": "submission.completed",
    "submission_updated": "submission.updated",
    "submission_abandoned": "submission.abandoned",
    "request_completed": "request.completed",
    "request_expired": "request.expired",
    "request_canceled": "request.canceled",
}
ABANDONED = "submission_abandoned"
DEFAULT_EVENTS = tuple(e for e in EVENT_TYPES if e != ABANDONED)
"""Every event type that needs no idle window."""
IDLE_WINDOWS = ("12h", "1d", "3d", "1w")
PROVIDERS = ("zapier", "make", "n8n")
DEFAULT_PROVIDER = "n8n"


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` and 64 hex digits (256 bits)."""
    return "whsec_" + secrets.token_hex(32)
