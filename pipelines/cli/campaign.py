"""``formsync campaign``: the campaign after the send, per outreach job: its funnel, its
export, its HTML page, reminders, closing and the suppression list."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .context import Context, command, print_report
from .errors import ExitCode, Failure, UsageError
from .helptext import summary
from .options import ConfigOption
from .usage import FormsyncGroup

if TYPE_CHECKING:
    from pipelines.campaign.actions import ActionReport

app = typer.Typer(cls=FormsyncGroup, no_args_is_help=True, add_completion=False, rich_markup_mode="rich",
                  help="The campaign after the send: funnel, export, page, reminders, closing, suppression.")

JobArg = Annotated[str, typer.Argument(help="The outreach job (the --job name it was sent with).")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Say how many requests it would touch; call nothing.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of sentences.")]
FORMATS = {".csv": "csv", ".xlsx": "xlsx", ".parquet": "parquet"}


def funnel_command(job: JobArg, config: ConfigOption = None, json: JsonOption = False) -> None:
    """Show the job's funnel from the store: rows, sent, delivered, bounced, opened,
    started, completed, expired, canceled, response rate, median time to answer.

    Example: [bold]formsync campaign funnel spring --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        from rich.console import Console

        from pipelines.campaign import read_campaign
        from pipelines.campaign.show import funnel_table

        c = read_campaign(ctx.store(), job)
        if json:
            print_report(c.funnel)
            return
        Console().print(funnel_table(c.funnel))
        typer.echo(f"done: campaign {job}: {c.funnel.line()}", err=True)


def export_command(job: JobArg, out: Annotated[Path, typer.Option("--out", help="The file: .csv, .xlsx or "
                                                                               ".parquet.")],
                   config: ConfigOption = None,
                   sheet: Annotated[Path | None, typer.Option(help="The sheet to take the rows' own columns from "
                                                                   "(default: the file the job was sent from).")]
                   = None, json: JsonOption = False) -> None:
    """Write one row per sheet row: the sheet's own columns, its request's status and
    times, and the answers. Says what it wrote (the report as JSON with --json).

    Example: [bold]formsync campaign export spring --out spring.xlsx --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        from pipelines.campaign import export_campaign
        from pipelines.campaign.words import export_outcome

        fmt = FORMATS.get(out.suffix.lower())
        if fmt is None:
            raise UsageError(f"cannot tell the format from {out.name!r}", where="--out",
                             hint="end it in .csv, .xlsx or .parquet")
        _check_dir(out)
        report = export_campaign(ctx.store(), job, fmt, out, sheet=sheet)
        if json:
            print_report(report)
        if report.sheet_problem:
            typer.echo(f"note: the sheet's own columns are left out: {report.sheet_problem}; give it with --sheet",
                       err=True)
        if not json:
            typer.echo(f"done: {export_outcome(report)}", err=True)


def page_command(job: JobArg, out: Annotated[Path, typer.Option("--out", help="The HTML file to write.")],
                 config: ConfigOption = None, json: JsonOption = False) -> None:
    """Write the campaign's page: one self-contained HTML file with whether the campaign is
    open or closed (when, why), the form's name, the sheet's rows in every state, the
    funnel, the responses over time and what each reminder round brought, as of the
    service's time. Says what it wrote (the funnel as JSON with --json).

    Example: [bold]formsync campaign page spring --out spring.html --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        import aiohttp

        from connector.client._clock import service_now
        from pipelines.campaign import write_page
        from pipelines.campaign.words import page_outcome

        _check_dir(out)
        store, service = ctx.store(), ctx.settings().service
        try:
            now = ctx.run(service_now(service.base_url, seconds=service.timeout_seconds))
        except (OSError, ValueError, aiohttp.ClientError, TimeoutError) as e:
            now = store.clock()
            typer.echo(f"note: the service at {service.base_url} did not say its time ({type(e).__name__}); "
                       "the page is as of this machine's clock", err=True)
        record = store.campaign.job(job)
        name = _form_name(ctx, record.form_id) if record is not None else None
        c = write_page(store, job, out, now, form_name=name)
        if json:
            print_report(c.funnel)
        else:
            typer.echo(f"done: {page_outcome(str(out), c.funnel, now)}", err=True)


def _form_name(ctx: Context, form_id: str) -> str | None:
    """The form's name as the service says it now (one ``forms.get``), when a token is set
    or a sign-in stored; None without either or when the service cannot say (the page then
    names what the store knows)."""
    from connector.errors import FormsyncError

    if ctx.settings().service.token is None and ctx.grant() is None:
        return None
    try:
        return ctx.with_client(lambda fc: fc.get_form(form_id), max_retries=1).name or None
    except FormsyncError:
        return None


def remind_command(job: JobArg, config: ConfigOption = None,
                   idle: Annotated[str | None, typer.Option(help="Only requests idle at least this long: 30m, "
                                                                 "12h, 3d, 2w (on the service's clock).")] = None,
                   dry_run: DryRun = False, json: JsonOption = False) -> None:
    """Email a reminder to each pending request of the job (Pro plan or higher; one
    manual reminder per request per 10 minutes, 8 at most). A request reminded less than
    10 minutes ago is skipped without a call; one the service refuses is listed with its
    row and reason. Says what it did (the report as JSON with --json).

    Example: [bold]formsync campaign remind spring --idle 3d --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        from pipelines.jobs import RemindParams

        params = ctx.params(RemindParams, job=job, idle=idle, dry_run=dry_run)
        ctx.service_settings()
        _said(ctx, ctx.job("remind", params), json)


def close_command(job: JobArg, config: ConfigOption = None,
                  reason: Annotated[str | None, typer.Option(help="Why, kept on each canceled request.")] = None,
                  dry_run: DryRun = False, json: JsonOption = False) -> None:
    """Close the campaign: cancel every request of the job still pending (their links stop
    working). Safe to run again: it goes on where it stopped. Says what it did (the
    report as JSON with --json).

    Example: [bold]formsync campaign close spring --reason "survey closed" --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        from pipelines.jobs import CloseParams

        params = ctx.params(CloseParams, job=job, reason=reason, dry_run=dry_run)
        ctx.service_settings()
        _said(ctx, ctx.job("close", params), json)


def _said(ctx: Context, report: ActionReport, json: bool) -> None:
    """A remind or close run's end: its sentences and ``done:`` line (or its JSON), and
    exit 1 with one line when the service refused the workspace's plan."""
    from pipelines.campaign.words import action_lines, action_outcome, plan_refusal

    if json:
        print_report(report)
    else:
        for line in action_lines(report):
            typer.echo(line)
    refused = plan_refusal(report)
    if refused is not None:
        typer.echo(Failure(ExitCode.FAILED, refused, where=f"campaign {report.job}",
                           hint="upgrade the workspace to the Pro plan or higher").line(ctx.secrets()),
                   err=True)
        raise typer.Exit(int(ExitCode.FAILED))
    if not json:
        typer.echo(f"done: {action_outcome(report)}", err=True)


def suppress_command(addresses: Annotated[list[str] | None, typer.Argument(help="Email addresses never to send "
                                                                                  "to (or to take off the list).")]
                     = None,
                     config: ConfigOption = None,
                     reason: Annotated[str | None, typer.Option(help="Why (shown in outreach reports).")] = None,
                     list_: Annotated[bool, typer.Option("--list", help="List every suppressed address.")] = False,
                     remove: Annotated[bool, typer.Option("--remove", help="Take the addresses off the list.")]
                     = False,
                     json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False) -> None:
    """Add addresses to the store's suppression list: no job sends them anything again
    (outreach reports their rows as suppressed; remind leaves them out), and their
    pending requests are canceled with the reason, so the service's own reminders stop.
    [bold]--list[/bold] shows the list (and the addresses that bounced or complained);
    [bold]--remove[/bold] takes addresses off it.

    Example: [bold]formsync campaign suppress ada@example.com --reason "opted out"[/bold]
    """
    with command(config) as ctx:
        from pipelines.campaign import suppress

        given = addresses or []
        if list_ == bool(given) or (list_ and remove):
            raise UsageError("give addresses, or --list alone", where="ADDRESSES",
                             hint="formsync campaign suppress ADDRESS... [--remove], or --list")
        problem = suppress.email_problem(given)
        if problem is not None:
            raise UsageError(problem, where="ADDRESSES")
        store = ctx.store()
        if list_:
            report = suppress.listing(store)
        elif remove:
            report = suppress.remove(store, given)
        else:
            pending = store.requests.pending_to(given)
            if pending:
                ctx.service_settings()  # canceling calls the service: checked before anything is stored
            report = suppress.add(store, given, reason)
            if pending:
                from pipelines.rules.contact import contact_rule

                rule = contact_rule(store, ctx.settings().outreach)
                ctx.with_client(lambda fc: suppress.cancel_pending(fc, store, report, rule))
        if json:
            print_report(report)
        else:
            typer.echo("\n".join(report.sentences()))


def _check_dir(out: Path) -> None:
    if out.is_dir():
        raise UsageError(f"{out} is a directory", where="--out", hint="give a file name")
    if not out.parent.is_dir():
        raise UsageError(f"the directory {out.parent} does not exist", where="--out",
                         hint=f"create it first (mkdir -p {out.parent}) or write elsewhere")


for _fn, _name in ((funnel_command, "funnel"), (export_command, "export"), (page_command, "page"),
                   (remind_command, "remind"), (close_command, "close"), (suppress_command, "suppress")):
    app.command(_name, short_help=summary(_fn))(_fn)
