"""The sandbox's test helpers (state and rules; ``..binding`` serves them over HTTP).
Importing this package registers every helper in ``HELPERS``."""

from __future__ import annotations

from . import accounts, control, dialects, files, outbox, respondents, snapshots
from .registry import HELPERS, helper

__all__ = ["HELPERS", "accounts", "control", "dialects", "files", "helper", "outbox", "respondents", "snapshots"]
