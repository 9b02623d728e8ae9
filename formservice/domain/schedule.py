"""Idle offsets (``12h``, ``1d``, ``3d``, ``1w``) of reminder schedules."""

from __future__ import annotations

import re

from ..clock import DAY_MS, HOUR_MS

OFFSET_RE = re.compile(r"^([1-9][0-9]{0,3})([hdw])$")
UNIT_MS = {"h": HOUR_MS, "d": DAY_MS, "w": 7 * DAY_MS}
MAX_STEPS = 5


def offset_ms(offset: str) -> int:
    """Milliseconds of an idle offset; ValueError for anything but ``<n>h|d|w``."""
    m = OFFSET_RE.match(offset)
    if not m:
        raise ValueError(f"{offset!r} is not an idle offset such as 12h, 1d, 3d or 1w")
    return int(m.group(1)) * UNIT_MS[m.group(2)]


def normalize_steps(steps: list[str]) -> list[str]:
    """Steps sorted by duration and deduplicated (``1d`` and ``24h`` are one step)."""
    seen: dict[int, str] = {}
    for s in steps:
        seen.setdefault(offset_ms(s), s)
    return [seen[k] for k in sorted(seen)]


MAX_OFFSET_MS = 365 * DAY_MS  # a request lives at most 365 days; a later step could never fire


def check_steps(steps: list[str], param: str) -> list[str]:
    """Validate a schedule sent as ``param``: each step an idle offset of at most 365
    days, at most MAX_STEPS distinct steps. Returns it sorted and deduplicated, or raises
    VALIDATION_ERROR naming the step."""
    from ..errors import validation

    for i, step in enumerate(steps):
        try:
            too_late = offset_ms(step) > MAX_OFFSET_MS
        except ValueError:
            raise validation(f"{param}.{i}: {step!r} is not an idle offset; write a positive whole number "
                             "followed by h, d or w, such as 12h, 1d, 3d, 1w.", field=f"{param}.{i}",
                             reason="INVALID_FORMAT") from None
        if too_late:
            raise validation(f"{param}.{i}: {step!r} is past 365 days, the longest a request lives.",
                             field=f"{param}.{i}", reason="OUT_OF_RANGE")
    out = normalize_steps(steps)
    if len(out) > MAX_STEPS:
        raise validation(f"{param} holds {len(out)} distinct steps; at most {MAX_STEPS} are allowed.",
                         field=param, reason="OUT_OF_RANGE")
    return out
