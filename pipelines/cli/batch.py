"""The commands that do one piece of work and exit: ``poll``, ``sync``, ``export``,
``views``, ``migrate``, ``outreach``, ``status`` and ``demo``. Each is a thin call to its pipeline inside the
shared context (``pipelines.cli.context``)."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .context import Context, command, print_report
from .errors import ExitCode, UsageError
from .forms import service_forms
from .options import ConfigOption

if TYPE_CHECKING:
    from pipelines.operate.status import StatusReport


def poll(
    config: ConfigOption = None,
    form: Annotated[str | None, typer.Option(help="Only the pending requests of this form id.")] = None,
) -> None:
    """Bring the stored pending requests up to date from the service (for setups without
    a receiver): completions with their answers, expiries and cancellations. Prints the
    report as JSON.

    Example: [bold]formsync poll --config formsync.toml --form form_123[/bold]
    """
    with command(config) as ctx:
        from pipelines.jobs import PollParams

        params = ctx.params(PollParams, form=form)
        ctx.service_settings()  # a missing token is said before the database is created
        report = ctx.job("poll", params)
        print_report(report)
        if report.pending_before == 0:
            whose = f" of form {form!r}" if form else ""
            typer.echo(f"note: the store holds no pending request{whose}: nothing to poll", err=True)


def sync(
    config: ConfigOption = None,
    form: Annotated[str | None, typer.Option(help="Only this form id (default: every form of "
                                                  "service.workspace_id, or of the token's workspace).")] = None,
    full: Annotated[bool, typer.Option("--full", help="Read every submission again, not only the new ones.")]
    = False,
    drafts: Annotated[bool, typer.Option("--drafts", help="Include drafts (Pro and Business).")] = False,
    reconcile: Annotated[bool, typer.Option("--reconcile", help="Instead: mark the stored submissions the service "
                                                                "no longer has (one call per 100 submissions).")]
    = False,
) -> None:
    """Copy new submissions into the store: newest first down to the last sync's
    high-water mark (one call per form when nothing is new). Prints the report as JSON;
    its last line (stderr) says how edits of stored submissions are caught: a sync job
    reads each form whole every sync.full_every_hours (ceil(N/100) calls), --full now.
    With --reconcile, compare every stored form's submission ids with the service's and
    mark those it no longer has (deleted, form trashed; views and exports leave them out),
    un-marking those back (form restored); it says what it cost in calls.

    Example: [bold]formsync sync --config formsync.toml --form form_123 --full[/bold]
    """
    with command(config) as ctx:
        from pipelines.jobs import SyncParams

        if reconcile and (full or drafts):
            raise UsageError("--reconcile reads every id already: it takes no --full or --drafts",
                             where="--reconcile", hint="run the sync and the reconcile as two commands")
        params = ctx.params(SyncParams, form=form, full=full, drafts=drafts, reconcile=reconcile)
        ctx.service_settings()
        with service_forms(form):
            report = ctx.job("sync", params)
        if reconcile:
            typer.echo(report.outcome(), err=True)
        print_report(report)
        if not reconcile:  # how edits are caught, and when a sync job's next full read is due
            from pipelines.sync.submissions import edits_note

            typer.echo(edits_note(ctx.store(), report, ctx.settings().sync.full_every_hours), err=True)


def export(
    format: Annotated[str | None, typer.Option("--format", help="csv, xlsx or parquet (default: from --out's "
                                                                "suffix, else export.formats).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="The file to write (default: export.out_dir/TABLE.FORMAT "
                                                           "for each format).")] = None,
    table: Annotated[str, typer.Option(help="wide (one row per submission), long (one row per answer), "
                                            "requests, or all (xlsx only: one sheet each).")] = "wide",
    form: Annotated[str | None, typer.Option(help="Only this form id.")] = None,
    since: Annotated[str | None, typer.Option(help="Only submissions submitted (requests created) at or after "
                                                   "this ISO date or time; UTC unless it has an offset.")] = None,
    status: Annotated[str | None, typer.Option(help="Only requests in this status (pending, completed, "
                                                    "expired, canceled).")] = None,
    display: Annotated[bool, typer.Option("--display", help="The human-readable wide table: question titles as "
                                                            "headers, labels and display text as cells, numbers "
                                                            "kept numbers.")] = False,
    include_gone: Annotated[bool, typer.Option("--include-gone", help="Also the submissions the service no longer "
                                                                      "has (marked by formsync sync --reconcile), "
                                                                      "left out by default.")] = False,
    since_last: Annotated[str | None, typer.Option("--since-last", metavar="NAME", help=(
        "Only the rows stored or changed since the last export under NAME (a slug; its cursor moves once the files "
        "are complete), and the removals since in a file with .deletions before --out's suffix; one format per "
        "name, one run at a time; never replaces a file (put {run} in --out); nothing new: no file. Not with "
        "--since."))] = None,
    cursors: Annotated[bool, typer.Option("--cursors", help="List the --since-last cursors (one JSON line each) "
                                                            "and exit.")] = False,
    reset: Annotated[str | None, typer.Option("--reset", metavar="NAME", help="Forget the cursors of NAME: its "
                                                                              "next export writes every row; exit.")]
    = None,
    config: ConfigOption = None,
) -> None:
    """Export the stored submissions, answers or requests to CSV, XLSX or Parquet. Prints
    one JSON report per file written. Without --out, writes export.out_dir/TABLE.FORMAT
    for --format or each of export.formats. The wide table has the form's columns, in its
    field order, typed from its field list (no service call); with several forms and no
    --form, one file per form (TABLE.FORM_ID.FORMAT, or --out with {form}; one sheet each
    in XLSX). --out's file name may hold {date}, {time} (UTC), {form} (the form's name
    slug) and {run} (with --since-last: the run's number under its name).

    Example: [bold]formsync export --since-last nightly --out 'exports/{form}-{date}-{run}.parquet'[/bold]
    """
    with command(config) as ctx:
        from pipelines.export.write import check_out_template
        from pipelines.jobs import ExportParams

        if cursors or reset is not None:
            _export_cursors(ctx.store(), reset)
            return
        if since_last is not None and since is not None:
            raise UsageError("--since and --since-last exclude each other", where="--since",
                             hint="--since-last already picks the rows stored since its last export: drop --since")
        since_at = _iso_time(since)
        if out is not None:
            try:
                check_out_template(out, incremental=since_last is not None)
            except ValueError as e:
                raise UsageError(str(e), where="--out") from None
        params = ctx.params(ExportParams, format=format, out=out, table=table, form=form, since=since_at,
                            status=status, display=display, include_gone=include_gone, since_last=since_last)
        run = ctx.job("export", params)
        reports = run.files
        for report in reports:
            print_report(report)
        if run.held_back is not None:
            typer.echo(f"note: {run.held_back}", err=True)
        written = sum(sum(r.rows.values()) for r in reports)
        if since_last is not None:
            typer.echo(f"nothing new since the last export under {since_last!r}: no file written"
                       if reports[0].nothing_new else reports[0].outcome(), err=True)
        elif written == 0:
            typer.echo(f"note: nothing to export: the store {ctx.store_url()} holds no rows for this table "
                       f"yet; fill it with formsync sync or formsync poll, or run formsync receive", err=True)


def _export_cursors(store: Any, reset: str | None) -> None:
    """``--cursors``: each cursor as a JSON line; ``--reset NAME``: forget NAME's."""
    if reset is None:
        for mark in store.export_cursors.list():
            typer.echo(json.dumps(dataclasses.asdict(mark)))
        return
    from pipelines.export.nightly import refuse_load_name

    try:
        refuse_load_name(reset, "--reset")
    except ValueError as e:
        raise UsageError(str(e)) from None
    if not store.export_cursors.reset(reset):
        names = sorted({m.name for m in store.export_cursors.list()})
        raise UsageError(f"no export cursor is named {reset!r}", where="--reset",
                         hint=f"the names are: {', '.join(names)}" if names else "no --since-last export ran yet")
    typer.echo(f"reset {reset}: its next export writes every row again")


def views(
    config: ConfigOption = None,
    form: Annotated[str | None, typer.Option(help="Only this form id (default: every form the store knows).")]
    = None,
) -> None:
    """Create or update the typed view of each form in your database
    ([bold]formsync_<form name>_<hash>[/bold]: one row per submission, one typed column per
    field) and list them as JSON. With service.token, each form's fields.list types and
    orders the columns; without it, answered fields no list named stay held back.

    Example: [bold]formsync views --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        from pipelines.jobs import ViewsParams

        print_report(ctx.job("views", ctx.params(ViewsParams, form=form)))


def migrate(config: ConfigOption = None) -> None:
    """Bring the database's tables to this release's schema, then exit. Every command
    does it before its work; run it alone once before the receivers and the scheduler
    of a new release start (compose.yaml's migrate service does). Safe to run again, and
    from several processes at once (the migrations take a lock).

    Example: [bold]formsync migrate --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        from alembic.script import ScriptDirectory

        from connector.store._facade import alembic_config

        store = ctx.store()
        head = ScriptDirectory.from_config(alembic_config(store.url)).get_current_head()
        typer.echo(f"the database {ctx.store_url()} has this release's schema (migration {head})")


def _iso_time(text: str | None) -> datetime | None:
    """``--since`` as a time; a ``UsageError`` when it is not ISO 8601."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"expected an ISO date or time such as 2026-01-31 or 2026-01-31T08:00:00Z, "
                         f"got {text!r}", where="--since") from None


def outreach(
    sheet: Annotated[Path, typer.Argument(help="CSV or XLSX file, one recipient per row.")],
    form: Annotated[str, typer.Option("--form", help="The form id to send.")],
    job: Annotated[str | None, typer.Option(help="Job name: a re-run with the same name sends only the rows "
                                                 "not sent yet (default: the sheet's file name).")] = None,
    config: ConfigOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check the sheet and print what would be sent; "
                                                            "create nothing.")] = False,
    test: Annotated[bool, typer.Option("--test", help="Create test requests.")] = False,
    report: Annotated[Path | None, typer.Option("--report", help="Where to write the CSV of bad rows "
                                                                 "(default: outreach.report_dir/JOB-report.csv).")]
    = None,
    encoding: Annotated[str | None, typer.Option(help="The CSV's encoding, e.g. utf-8, utf-16, cp1252, latin-1 "
                                                      "(default: detected).")] = None,
    delimiter: Annotated[str | None, typer.Option(help="The CSV's delimiter: , ; | or tab (default: sniffed "
                                                       "from the header line).")] = None,
    sheet_name: Annotated[str | None, typer.Option("--sheet", help="The XLSX sheet, by name or number from 1 "
                                                                  "(default: the first with data).")] = None,
    header_row: Annotated[int | None, typer.Option(help="The row holding the column names, from 1 "
                                                        "(default: detected).")] = None,
    date_format: Annotated[str | None, typer.Option(help="How the sheet writes dates: dd/mm/yyyy, mm/dd/yyyy or "
                                                         "dd.mm.yyyy (default: detected per column; ISO dates and "
                                                         "Excel serials are always read).")] = None,
    decimal: Annotated[str | None, typer.Option(help="The sheet's decimal mark: point or comma (default: "
                                                     "detected per column).")] = None,
) -> None:
    """Send one request per valid sheet row. The form and the sheet's columns are checked
    first, then every row against the form's fields; bad rows go to the report and are
    not sent. Prints an estimate, a progress bar, a summary with the first rejected rows,
    a last line (done: sent 494 of 495 rows; 1 rejected) and the run report as JSON.
    Exit 3 when rows are in the report (rejected, changed or refused); on Ctrl-C (130) or SIGTERM
    (143) the rows sent so far are kept and the same command sends the rest.

    Example: [bold]formsync outreach contacts.csv --form form_123 --job spring --report bad.csv[/bold]
    """
    with command(config) as ctx:
        from pipelines.jobs import OutreachParams
        from pipelines.outreach import SheetError
        from pipelines.outreach.sheet import check_sheet_path
        from pipelines.rules.names import SLUG_RULE, name_problem

        from .outreach_run import OutreachCall, run_command

        try:
            check_sheet_path(sheet)
        except SheetError as e:
            raise UsageError(str(e), where="SHEET") from None
        if job is not None and (why := name_problem(job)) is not None:
            raise UsageError(f"{why}; a job name is {SLUG_RULE}", where="--job")
        params = ctx.params(OutreachParams, sheet=sheet, form=form, job=job or sheet.stem, test=test, dry_run=dry_run,
                            report=report, encoding=encoding, delimiter=delimiter, sheet_name=sheet_name,
                            header_row=header_row, date_format=date_format, decimal=decimal)
        ctx.service_settings()
        call = OutreachCall(params, config)
        code = run_command(ctx, call)
    if code:
        raise typer.Exit(code)


def status(
    config: Annotated[Path, typer.Option(help="The TOML settings file that `formsync run` uses.")],
    format: Annotated[str, typer.Option("--format", help="`text` (the table) or `prometheus` (metrics in the "
                                                         "text format, for node_exporter's textfile collector).")
                      ] = "text",
    notify: Annotated[bool, typer.Option("--notify", help="Send the problems found to \\[notify] (the same "
                                                          "problems again only after notify.repeat_minutes).")
                      ] = False,
) -> None:
    """Show what runs and what needs attention, at a glance. Within 80 columns: whether
    a scheduler is alive, the jobs (next and last run, outcome), each outreach job's
    progress, the requests of each form by status, deliveries received and the last
    errors. Reads the database only (no
    service.token needed; with --notify, it records what it sent). Exits with 4 when
    something needs attention (a job whose last run failed, a scheduler that stopped, an
    outreach that stalled, events set aside), each said in an `attention:` line on
    stderr; 0 otherwise. With --format prometheus it exits 0 once the metrics are written
    (formsync_problems carries the problems), so `> tmp && mv tmp formsync.prom` works.

    Example: [bold]formsync status --config formsync.toml || page-on-call[/bold]
    """
    with command(config) as ctx:
        if format not in ("text", "prometheus"):
            raise UsageError(f"unknown format {format!r}", where="--format", hint="use text or prometheus")
        from pipelines.operate.health import problems
        from pipelines.operate.jobs import check_jobs
        from pipelines.operate.status import collect_status

        settings = ctx.settings()
        check_jobs(settings, to_run=False)
        store = ctx.store(migrate=False)
        # The metrics name the top forms and receiver.metrics_forms; the text shows every form.
        report = collect_status(settings, store, _service_time(ctx),
                                forms=settings.receiver.metrics_forms if format == "prometheus" else None)
        found = problems(report)
        _show_status(report, format, ctx.store_url())
        if notify and found:
            from pipelines.operate.notify import send_problems

            ctx.run(send_problems(settings.notify, store, found))
        for p in found:
            typer.echo(p.line(), err=True)
        if report.credentials.token_kind is not None and report.credentials.signed_in:
            typer.echo("warning: service.token is set beside a stored sign-in: the token wins; remove it to use the "
                       "sign-in", err=True)
    if found and format != "prometheus":
        raise typer.Exit(int(ExitCode.ATTENTION))


def _service_time(ctx: Context) -> int | None:
    """The service's time for the token's age, asked only when a token or a sign-in is set."""
    from connector.client.grant import GrantError
    from connector.config.keyfile import KeyFileError
    from pipelines.operate.status import read_service_time

    service = ctx.settings().service
    if service.token is None and not ctx.signed_in():
        return None
    try:
        tokens = ctx.grant()
    except (KeyFileError, GrantError):  # said by the commands that use the sign-in: here, this machine's clock
        return None
    return ctx.run(read_service_time(service, tokens))


def _show_status(report: StatusReport, format: str, store_url: str) -> None:
    if format == "prometheus":
        from pipelines.operate.metrics import render

        sys.stdout.buffer.write(render(report))
        return
    from rich.console import Console

    from pipelines.operate.status import render_status

    if report.store_empty:
        typer.echo(f"note: the store {store_url} is new or empty: nothing has run against it yet", err=True)
    elif report.nothing_ran:
        held = " (it holds the sign-in of formsync login)" if report.credentials.signed_in else ""
        typer.echo(f"note: no scheduled job, outreach or delivery is recorded in the store {store_url} yet{held}",
                   err=True)
    Console().print(render_status(report))


def demo(
    out: Annotated[Path, typer.Option("--out", help="Directory for the exports, the summary and the demo's state "
                                                    "(.state/); created if missing.")] = Path("formsync-demo"),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Run everything end to end on this machine: the sandbox and a receiver on free
    loopback ports, outreach from its sheet of contacts, recipients answering on their
    pages, one request canceled and one expired, signed callbacks and webhooks verified
    and stored, poll, sync, and exports to CSV, XLSX and Parquet. Prints a summary (also in
    OUT/summary.json). Run it again in the same directory: nothing new is sent.

    Example: [bold]formsync demo --out /tmp/formsync-demo[/bold]
    """
    with command(log_level=logging.WARNING) as ctx:
        from rich.console import Console

        from pipelines.cli.demo import render_summary, run_demo

        console = Console()
        # What the demo cannot do (a port, the disk, a call refused) ends it with one line; the
        # state under OUT/.state is consistent, and the next run goes on from it.
        render_summary(ctx.run(run_demo(out, console=console, progress=not quiet)), console)
