"""The sync journey: the service's records into the store without a receiver, or beside it.

``submissions.py`` reads submissions.list from a high-water mark (``formsync sync``),
``poll.py`` refreshes the stored pending requests (``formsync poll``) and
``reconcile.py`` compares every id the service lists with the store's
(``formsync sync --reconcile``). Each name is imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector._lazy import lazy_exports

if TYPE_CHECKING:
    from .poll import PollReport as PollReport
    from .poll import poll_once as poll_once
    from .submissions import SyncAllReport as SyncAllReport
    from .submissions import SyncReport as SyncReport
    from .submissions import sync_all as sync_all
    from .submissions import sync_form as sync_form

_SOURCES: dict[str, str] = {
    "PollReport": "poll", "poll_once": "poll",
    "SyncAllReport": "submissions", "SyncReport": "submissions", "sync_all": "submissions", "sync_form": "submissions",
}

__all__ = ["PollReport", "SyncAllReport", "SyncReport", "poll_once", "sync_all", "sync_form"]

__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())
