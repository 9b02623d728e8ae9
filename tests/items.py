"""Shared test data: ``submissions.list`` items as the service lists them."""

from __future__ import annotations

from typing import Any


def list_item(sid: str, answers: dict[str, Any], *, edits: int = 0) -> dict[str, Any]:
    """A completed submission ``sid`` with ``answers``; ``edits`` > 0 makes it that many
    edits later (``updatedAt``, ``editCount``), so it ranks above the unedited version."""
    it: dict[str, Any] = {"id": sid, "submittedAt": "2026-05-01 10:00:00", "createdAt": "2026-05-01 09:59:00",
                          "isCompleted": True, "answers": answers, "display": {}}
    if edits:
        it |= {"updatedAt": f"2026-05-01 11:00:0{edits}", "editCount": edits}
    return it
