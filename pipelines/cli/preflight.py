"""What ``formsync run`` checks of each job before anything starts, beyond its params'
shape (``pipelines.operate.jobs.check_jobs``): the files the job reads or writes. Each problem is
a ``UsageError`` naming the job, so a schedule never starts only to fail at 2 a.m."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError, first_line

if TYPE_CHECKING:
    from pipelines.jobs import OutreachParams


def check_job_files(params: dict[str, Any], where: str) -> None:
    """Every outreach job's sheet exists and reads; every export job's directory exists
    (it is made when missing) and is writable."""
    from pipelines.jobs import ExportParams, OutreachParams

    for job_id, p in params.items():
        if isinstance(p, OutreachParams):
            _check_sheet(job_id, p, where)
        elif isinstance(p, ExportParams) and p.out is not None:  # else export.out_dir, made when it runs
            _check_out(job_id, p.out, where)


def _check_sheet(job_id: str, params: OutreachParams, where: str) -> None:
    from pipelines.outreach import SheetError, read_sheet
    from pipelines.outreach.sheet import check_sheet_path

    sheet = params.sheet
    try:
        check_sheet_path(sheet)
    except SheetError as e:
        raise UsageError(f"job {job_id!r} (outreach): {e}", where=where, hint="fix params.sheet") from None
    try:
        read_sheet(sheet, params.sheet_options())
    except Exception as e:  # pandas, openpyxl and the codecs fail in many ways: each is the sheet's fault here
        raise UsageError(f"job {job_id!r} (outreach): cannot read sheet {sheet}: {first_line(e)}",
                         where=where) from None


def _check_out(job_id: str, out: Path, where: str) -> None:
    if out.is_dir():
        raise UsageError(f"job {job_id!r} (export): out {out} is a directory", where=where,
                         hint=f"give a file in it, such as {out / 'wide.csv'}")
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"job {job_id!r} (export): cannot make the directory {parent}: "
                         f"{(e.strerror or str(e)).lower()}", where=where) from None
    if not os.access(parent, os.W_OK):
        raise UsageError(f"job {job_id!r} (export): the directory {parent} is not writable", where=where)
