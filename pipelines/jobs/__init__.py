"""The job layer: one function per job kind (outreach, poll, sync, export, load, files,
purge, remind, close, views), each taking its params model and a ``JobEnv`` (settings,
store, token source, clock, stop, hooks) and returning its report. The ``formsync``
commands, the scheduler (``JOBS``: kind -> function), the demo and the Python API call
these and nothing else wires a job."""

from __future__ import annotations

from .env import Hooks, JobEnv, TokenMissing
from .kinds import JOBS, TargetError, run_job
from .params import (
    PARAMS,
    CloseParams,
    ExportParams,
    FilesParams,
    JobParams,
    LoadParams,
    OutreachParams,
    PollParams,
    PurgeParams,
    RemindParams,
    SyncParams,
    ViewsParams,
)

__all__ = [
    "JOBS", "PARAMS", "CloseParams", "ExportParams", "FilesParams", "Hooks", "JobEnv", "JobParams",
    "LoadParams", "OutreachParams", "PollParams", "PurgeParams", "RemindParams", "SyncParams", "TargetError",
    "TokenMissing", "ViewsParams", "run_job",
]
