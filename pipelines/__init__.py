"""Jobs built on the connector, one folder per journey: ``export/`` (files, frames, views,
the warehouse), ``sync/`` (sync, poll, reconcile), ``outreach/`` and ``campaign/``,
``lifecycle/`` (files archived, purge, erase), ``operate/`` (scheduler, jobs, status,
health, metrics, notices, deploy), ``connect/`` (login, webhook subscriptions) and
``cli/`` (the ``formsync`` command and its demo).

Each job is importable from here (``from pipelines import run_outreach, poll_once``), and
``run_job`` with a ``JobEnv`` runs any kind as ``formsync`` and the scheduler do (``jobs/``),
imported on first use so the ``formsync`` CLI starts without loading them all. The export
function is ``pipelines.export.export`` (the ``export`` package names it; its module is
``pipelines.export.write``), and ``from pipelines import frames`` gives the frames module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector._lazy import lazy_exports

if TYPE_CHECKING:
    from .export.load import LoadReport as LoadReport
    from .export.load import read_deletions as read_deletions
    from .export.load import warehouse_source as warehouse_source
    from .export.write import ExportReport as ExportReport
    from .jobs import JobEnv as JobEnv
    from .jobs import run_job as run_job
    from .operate.scheduler import SchedulerOptions as SchedulerOptions
    from .operate.scheduler import serve as serve
    from .operate.status import StatusReport as StatusReport
    from .operate.status import collect_status as collect_status
    from .outreach import OutreachReport as OutreachReport
    from .outreach import run_outreach as run_outreach
    from .sync.poll import PollReport as PollReport
    from .sync.poll import poll_once as poll_once
    from .sync.submissions import SyncAllReport as SyncAllReport
    from .sync.submissions import SyncReport as SyncReport
    from .sync.submissions import sync_all as sync_all
    from .sync.submissions import sync_form as sync_form

# Each public name and the module that defines it.
_SOURCES: dict[str, str] = {
    "ExportReport": "export.write", "LoadReport": "export.load", "read_deletions": "export.load",
    "warehouse_source": "export.load",
    "JobEnv": "jobs", "run_job": "jobs",
    "OutreachReport": "outreach", "run_outreach": "outreach",
    "PollReport": "sync.poll", "poll_once": "sync.poll",
    "SchedulerOptions": "operate.scheduler", "serve": "operate.scheduler",
    "StatusReport": "operate.status", "collect_status": "operate.status",
    "SyncAllReport": "sync.submissions", "SyncReport": "sync.submissions",
    "sync_all": "sync.submissions", "sync_form": "sync.submissions",
}

# Modules that sat here before the folders by journey, still reachable by their short
# names (``from pipelines import frames``, ``pipelines.poll.poll_once``).
_MODULES: dict[str, str] = {
    "frames": "export.frames", "poll": "sync.poll", "scheduler": "operate.scheduler", "status": "operate.status",
}

__all__ = [
    "ExportReport", "JobEnv", "LoadReport", "OutreachReport", "PollReport", "SchedulerOptions", "StatusReport",
    "SyncAllReport", "SyncReport", "collect_status", "poll_once", "read_deletions", "run_job", "run_outreach", "serve", "sync_all",
    "sync_form", "warehouse_source",
]


__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals(), _MODULES)
