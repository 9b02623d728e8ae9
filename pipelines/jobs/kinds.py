"""One function per job kind: its params and a ``JobEnv`` in, its report out, no printing.
``formsync`` commands, the scheduler, the demo and the Python API all call these (``JOBS``
maps each kind to its function), so a flag or a setting is wired in one place."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from connector.config.settings import Settings
from connector.store import Store

from .env import JobEnv
from .params import (
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

if TYPE_CHECKING:
    from pipelines.campaign.actions import ActionReport
    from pipelines.export.load import LoadReport
    from pipelines.export.views import ViewsReport
    from pipelines.export.write import ExportRun, Format
    from pipelines.lifecycle.archive import ArchiveReport
    from pipelines.lifecycle.purge import PurgeReport
    from pipelines.outreach import OutreachReport
    from pipelines.sync.poll import PollReport
    from pipelines.sync.reconcile import ReconcileReport
    from pipelines.sync.submissions import SyncAllReport, SyncReport

SUFFIX_FORMATS = {".csv": "csv", ".xlsx": "xlsx", ".parquet": "parquet"}


class TargetError(ValueError):
    """A job's files or forms cannot be chosen as asked (an export's file, a form the store
    never saw): the text says why, ``where`` names the param or setting, ``hint`` the fix."""

    def __init__(self, message: str, *, where: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.where, self.hint = where, hint


def check_forms(store: Store, forms: str | Sequence[str] | None) -> None:
    """A ``TargetError`` naming ``formsync sync --form ID`` for the first form id the store
    has never seen (no submission, request, field list or sync of it); nothing when every one
    is known (a known form with no rows is no mistake)."""
    for form_id in [forms] if isinstance(forms, str) else (forms or ()):
        if not store.knows_form(form_id):
            raise TargetError(f"the store holds nothing of form {form_id!r} (no submission, request or field list)",
                              where="--form",
                              hint=f"check the form id, or copy its submissions first: formsync sync --form {form_id}")


def check_before_store(kind: str, params: JobParams, settings: Settings) -> list[tuple[Format, Path]] | None:
    """What a job of ``kind`` refuses before its store is opened (a command says it before
    a database file is made): an export's files that cannot be chosen. The export's files
    as chosen, for its ``JobEnv.targets`` (so they are chosen once); None for other kinds."""
    if isinstance(params, ExportParams):
        return export_targets(params.format, params.out, params.table, settings)
    return None


async def outreach(p: OutreachParams, env: JobEnv) -> OutreachReport:
    """Send one request per valid row of the sheet (``pipelines.outreach.run_outreach``'s
    promises), under the contact rule of the settings; the form's pending requests whose
    address the rule now refuses are canceled first. ``env.hooks.outreach_prepared`` hears
    the plan before the first send and may return a progress callback."""
    from pipelines.outreach import outreach_report, prepare_outreach, send_outreach
    from pipelines.outreach.suppression import cancel_blocked

    if not p.sheet.is_file():
        raise FileNotFoundError(f"sheet {p.sheet} does not exist")
    job = p.job or p.sheet.stem
    out, store, rule = env.settings.outreach, env.store, env.contact_rule()
    async with env.service() as fc:
        prepared = await prepare_outreach(fc, store, p.sheet, p.form, job=job, mapping=out.mapping,
                                          delivery=out.delivery, report_path=p.report or out.report_dir / f"{job}-report.csv",
                                          sheet_options=p.sheet_options(), mapping_setting=env.hooks.mapping_setting,
                                          rule=rule)
        progress = env.hooks.outreach_prepared(prepared) if env.hooks.outreach_prepared is not None else None
        if p.dry_run:
            return outreach_report(prepared)
        canceled = await cancel_blocked(fc, store, rule, form_id=p.form)
        report = await send_outreach(fc, store, prepared, delivery=out.delivery, callback_url=out.callback_url,
                                     test=p.test, progress=progress, stop=env.stop)
    report.canceled = canceled
    return report


async def poll(p: PollParams, env: JobEnv) -> PollReport:
    """Bring the stored pending requests (of ``p.form``) up to date; cancel those of the
    polled forms whose address the contact rule refuses."""
    from pipelines.sync.poll import poll_once

    check_forms(env.store, p.form)
    async with env.service() as fc:
        now = await env.clock() if env.clock is not None else None
        return await poll_once(fc, env.store, form_id=p.form, now_ms=now, rule=env.contact_rule())


async def sync(p: SyncParams, env: JobEnv) -> SyncReport | SyncAllReport | ReconcileReport:
    """New submissions of ``p.form`` (default: every form of the workspace) into the store;
    with ``reconcile``, the stored ones the service no longer has marked instead."""
    from pipelines.sync.reconcile import reconcile
    from pipelines.sync.submissions import HOUR_MS, sync_all, sync_form

    every = round(p.full_every_hours * HOUR_MS) if p.full_every_hours is not None else None
    async with env.service() as fc:
        if p.reconcile:
            return await reconcile(fc, env.store, None if p.form is None else [p.form])
        if p.form is not None:
            return await sync_form(fc, env.store, p.form, full=p.full, include_drafts=p.drafts, full_every_ms=every)
        ws = env.settings.service.workspace_id or (await fc.list_workspaces())[0].id
        return await sync_all(fc, env.store, ws, full=p.full, include_drafts=p.drafts, full_every_ms=every)


async def export(p: ExportParams, env: JobEnv) -> ExportRun:
    """Write the export's files (``pipelines.export.export_files``): every read from one
    snapshot taken as it starts, so every file holds the same rows, consistent across its
    tables however long it takes while other jobs write. Off the event loop."""
    from pipelines.export.views import held_back_line
    from pipelines.export.write import ExportRun, export_files

    targets = env.targets if env.targets is not None else export_targets(p.format, p.out, p.table, env.settings)
    check_forms(env.store, p.form)
    make_out_dir(targets)
    reports = await asyncio.to_thread(
        export_files, env.store, targets, since_last=p.since_last, table=p.table, form_id=p.form, since=p.since,
        status=p.status, display=p.display, include_gone=p.include_gone)
    held = held_back_line(env.store, p.form) if p.table in ("wide", "all") else None
    return ExportRun(files=reports, held_back=held)


def export_targets(fmt: str | None, out: Path | None, table: str, settings: Settings) -> list[tuple[Format, Path]]:
    """The (format, file) pairs an export writes: ``out`` in ``fmt`` or its suffix's
    format, else ``export.out_dir/TABLE.FORMAT`` for ``fmt`` or each of
    ``export.formats``. A ``TargetError`` when that cannot be told or made."""
    if out is not None:
        if out.is_dir():
            raise TargetError(f"{out} is a directory", where="--out",
                              hint=f"give a file such as {out / (table + '.' + (fmt or 'csv'))}, or leave --out out "
                                   f"to write export.out_dir/{table}.FORMAT")
        if not out.parent.is_dir():
            raise TargetError(f"the directory {out.parent} does not exist", where="--out",
                              hint=f"create it first (mkdir -p {out.parent}) or write elsewhere")
        named = SUFFIX_FORMATS.get(out.suffix.lower())
        if fmt is not None and named is not None and fmt != named:
            raise TargetError(f"--format {fmt} disagrees with --out {out.name!r}, which names {named}",
                              where="--format", hint=f"drop --format, or end --out in .{fmt}")
        picked = fmt or named
        if picked is None:
            raise TargetError(f"cannot tell the format from {out.name!r}", where="--format",
                              hint="give --format csv, xlsx or parquet, or an --out ending in one of them")
        return [(cast("Format", picked), out)]
    if fmt is not None and fmt not in SUFFIX_FORMATS.values():
        raise TargetError(f"format must be one of csv, xlsx, parquet, got {fmt!r}", where="--format")
    formats = [fmt] if fmt is not None else list(settings.export.formats)
    return [(cast("Format", f), settings.export.out_dir / f"{table}.{f}") for f in formats]


def make_out_dir(targets: list[tuple[Format, Path]]) -> None:
    """The directory of the files to write, made when missing (``export.out_dir``)."""
    for _, path in targets:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TargetError(f"cannot make the directory {path.parent}: {(e.strerror or str(e)).lower()}",
                              where="export.out_dir",
                              hint="give --out, or set export.out_dir to a directory you can write") from None


async def load(p: LoadParams, env: JobEnv) -> LoadReport:
    """The rows stored since the last load into the warehouse (``pipelines.export.load``),
    off the event loop."""
    from pipelines.export.load import load as run_load
    from pipelines.export.views import held_back_line

    settings = env.settings.load
    report = await asyncio.to_thread(run_load, env.store, destination=p.destination or settings.destination,
                                     dataset=p.dataset or settings.dataset, dry_run=p.dry_run,
                                     on_rows=env.hooks.load_rows, table_format=p.table_format or settings.table_format)
    report.held_back = held_back_line(env.store)
    return report


async def files(p: FilesParams, env: JobEnv) -> ArchiveReport:
    """Archive the file answers not archived yet; downloads from the service's storage
    need no token."""
    from pipelines.lifecycle.archive import archive_files

    check_forms(env.store, p.form)
    return await archive_files(env.store, env.settings.service.base_url, p.to, form_ids=p.form,
                               concurrency=p.concurrency, on_file=env.hooks.files_done)


async def purge(p: PurgeParams, env: JobEnv) -> PurgeReport:
    """Each form's retention, read from the service now, applied to the store."""
    from pipelines.lifecycle.purge import purge as run_purge

    async with env.service() as fc:
        return await run_purge(fc, env.store, p.form, dry_run=p.dry_run)


async def remind(p: RemindParams, env: JobEnv) -> ActionReport:
    """Remind the job's pending requests (idle for ``p.idle``) that the contact rule allows."""
    from pipelines.campaign.actions import act, parse_idle

    idle = parse_idle(p.idle) if p.idle is not None else None
    async with env.service() as fc:
        now = await env.clock() if env.clock is not None else None
        return await act(fc, env.store, p.job, "remind", idle_ms=idle, dry_run=p.dry_run, now_ms=now, stop=env.stop,
                         rule=env.contact_rule())


async def close(p: CloseParams, env: JobEnv) -> ActionReport:
    """Cancel every request of the job still pending, from ``p.at`` on (the service's time
    decides); before it, a report that says when."""
    from pipelines.campaign.actions import ActionReport, act

    async with env.service() as fc:
        now = await env.now(fc)
        if p.at is not None:
            at = p.at if p.at.tzinfo is not None else p.at.replace(tzinfo=UTC)
            if now < at.timestamp() * 1000:
                return ActionReport(job=p.job, action="close", not_before=at.isoformat())
        return await act(fc, env.store, p.job, "close", reason=p.reason, dry_run=p.dry_run, now_ms=now,
                         stop=env.stop, rule=env.contact_rule())


async def views(p: ViewsParams, env: JobEnv) -> ViewsReport:
    """Each form's typed view made or brought up to date; typed from its fields.list when a
    token or sign-in is there, else from what the store knows (answered keys no list named
    stay held back)."""
    from pipelines.export.views import refresh_views

    check_forms(env.store, p.form)
    if env.client is None and env.settings.service.token is None and env.tokens is None:
        return await refresh_views(env.store, None, form_id=p.form)
    async with env.service() as fc:
        return await refresh_views(env.store, fc, form_id=p.form)


# The kinds that bring data in or send: refused when the store's key is missing or not the
# one its erasures were hashed with, since erased people are recognised by keyed hash.
KEYED = frozenset({"outreach", "poll", "sync", "remind", "close"})

JobFunction = Callable[[Any, JobEnv], Awaitable[BaseModel]]

# Each kind and its one function; the scheduler's dispatch is this table.
JOBS: dict[str, JobFunction] = {
    "outreach": outreach, "poll": poll, "sync": sync, "export": export, "load": load, "files": files,
    "purge": purge, "remind": remind, "close": close, "views": views}


async def run_job(kind: str, params: JobParams, env: JobEnv) -> BaseModel:
    """Run one job of ``kind`` with its checked ``params``; its report."""
    return await JOBS[kind](params, env)
