"""Jobs built on the connector: outreach, polling, sync, export, load, scheduling, and the CLI.

Each job is importable from here (``from pipelines import run_outreach, poll_once``),
imported on first use so the ``formsync`` CLI starts without loading them all. The export
function keeps its module's name, so it is ``pipelines.export.export`` (a package
attribute named ``export`` is the module once the module is imported)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector.lazy import lazy_exports

if TYPE_CHECKING:
    from .export import ExportReport as ExportReport
    from .load import LoadReport as LoadReport
    from .load import warehouse_source as warehouse_source
    from .outreach import OutreachReport as OutreachReport
    from .outreach import run_outreach as run_outreach
    from .poll import PollReport as PollReport
    from .poll import poll_once as poll_once
    from .scheduler import SchedulerOptions as SchedulerOptions
    from .scheduler import serve as serve
    from .status import StatusReport as StatusReport
    from .status import collect_status as collect_status
    from .sync import SyncAllReport as SyncAllReport
    from .sync import SyncReport as SyncReport
    from .sync import sync_all as sync_all
    from .sync import sync_form as sync_form

# Each public name and the module that defines it.
_SOURCES: dict[str, str] = {
    "ExportReport": "export", "LoadReport": "load", "warehouse_source": "load",
    "OutreachReport": "outreach", "run_outreach": "outreach",
    "PollReport": "poll", "poll_once": "poll",
    "SchedulerOptions": "scheduler", "serve": "scheduler",
    "StatusReport": "status", "collect_status": "status",
    "SyncAllReport": "sync", "SyncReport": "sync", "sync_all": "sync", "sync_form": "sync",
}

__all__ = [
    "ExportReport", "LoadReport", "OutreachReport", "PollReport", "SchedulerOptions", "StatusReport",
    "SyncAllReport", "SyncReport", "collect_status", "poll_once", "run_outreach", "serve", "sync_all", "sync_form",
    "warehouse_source",
]


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())
