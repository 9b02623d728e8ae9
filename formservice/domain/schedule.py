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
