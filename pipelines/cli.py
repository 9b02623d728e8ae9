"""The ``formsync`` command."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode="rich",
                  help="formsync: connect your data to the Form Collection Service.")


@app.callback()
def _root() -> None:
    """formsync: connect your data to the Form Collection Service."""


@app.command()
def sandbox(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind; 0 picks a free one.")] = 8787,
    data_dir: Annotated[Path, typer.Option(help="Where the sandbox keeps its SQLite store.")] = Path(
        ".formsync-sandbox"),
    seed: Annotated[Path | None, typer.Option(help="Seed YAML for a new data dir (default: the built-in seed).")]
    = None,
    credentials_file: Annotated[Path | None, typer.Option(
        help="Write baseUrl, workspaces, tokens and signing secrets here (JSON).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every request.")] = False,
) -> None:
    """Run the local Form Collection Service: JSON-RPC, agent endpoint, recipient pages
    and test helpers, on SQLite.

    Example: [bold]formsync sandbox --port 0 --data-dir /tmp/fs --credentials-file /tmp/fs/creds.json[/bold]
    """
    from formservice.sandbox import serve

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if seed is not None and not seed.exists():
        raise typer.BadParameter(f"seed file {seed} does not exist", param_hint="--seed")
    try:
        asyncio.run(serve(host, port, data_dir, seed, credentials_file))
    except KeyboardInterrupt:
        pass


@app.command()
def receive(
    config: Annotated[Path | None, typer.Option(
        help="TOML settings file (see config/formsync.example.toml); FORMSYNC_* variables win over it.")] = None,
    host: Annotated[str | None, typer.Option(help="Address to bind (default: receiver.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind; 0 picks a free one (default: receiver.port).")]
    = None,
    db: Annotated[str | None, typer.Option(
        help="Database URL, e.g. sqlite:///formsync.db or postgresql+psycopg://user@host/db "
             "(default: store.url).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every event received.")] = False,
) -> None:
    """Receive signed callbacks and webhook deliveries and store them: migrates the
    database, then serves POST {path} (either kind), {path}/callbacks (callback_secrets)
    and {path}/webhooks (webhook_secrets), plus /healthz and /metrics, until Ctrl-C or
    SIGTERM; pending events are committed before it exits.

    Example: [bold]formsync receive --config formsync.toml --port 8788 --db sqlite:///events.db[/bold]
    """
    from pydantic import ValidationError

    from connector.receiver import event_paths, run_receiver
    from connector.settings import load_settings
    from connector.store import Store

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = load_settings(config)
    except FileNotFoundError as e:
        raise typer.BadParameter(str(e), param_hint="--config") from None
    except ValidationError as e:
        raise typer.BadParameter(f"invalid settings: {e}", param_hint="--config") from None
    if port is not None and not 0 <= port <= 65535:
        raise typer.BadParameter(f"port must be between 0 and 65535, got {port}", param_hint="--port")
    rs = settings.receiver
    try:
        store = Store(db or settings.store.url)
    except Exception as e:  # SQLAlchemy refuses an unusable URL with several exception types
        raise typer.BadParameter(f"unusable database URL: {e}", param_hint="--db") from None
    try:
        store.migrate()
    except Exception as e:
        typer.echo(f"error: cannot prepare the database: {type(e).__name__}: {str(e).splitlines()[0]}", err=True)
        raise typer.Exit(1) from None

    def ready(url: str) -> None:
        paths = event_paths(rs)
        typer.echo(f"formsync receiver listening on {url}{paths['any']} "
                   f"(callbacks: {paths['callbacks']}, webhooks: {paths['webhooks']})", color=False)

    try:
        asyncio.run(run_receiver(store, rs, host=host, port=port, on_ready=ready))
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except OSError as e:
        typer.echo(f"error: cannot listen on {host or rs.host}:{rs.port if port is None else port}: {e}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass
    finally:
        store.close()


ConfigOption = Annotated[Path | None, typer.Option(
    help="TOML settings file (see config/formsync.example.toml); FORMSYNC_* variables win over it.")]


def _first_line(e: Exception) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(e)
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def _migrated_store(url: str) -> Any:
    """The store at ``url``, migrated to the newest schema; an unusable database is a clear
    error and exit code 1."""
    from connector.store import Store

    try:
        store = Store(url)
        store.migrate()
    except Exception as e:  # SQLAlchemy and Alembic refuse a bad database with many exception types
        typer.echo(f"error: cannot prepare the database {url!r}: {_first_line(e)}", err=True)
        raise typer.Exit(1) from None
    return store


def _open(config: Path | None) -> tuple[Any, Any]:
    """Settings and a migrated store for the poll and sync commands; a bad config file
    or database is a clear error and exit code 1 or 2."""
    from pydantic import ValidationError

    from connector.settings import load_settings

    try:
        settings = load_settings(config)
    except FileNotFoundError as e:
        raise typer.BadParameter(str(e), param_hint="--config") from None
    except ValidationError as e:
        raise typer.BadParameter(f"invalid settings: {e}", param_hint="--config") from None
    if settings.service.token is None:
        raise typer.BadParameter("service.token is not set: put it in the [service] section or in "
                                 "FORMSYNC_SERVICE__TOKEN", param_hint="--config")
    store = _migrated_store(settings.store.url)
    return settings, store


@app.command()
def poll(
    config: ConfigOption = None,
    form: Annotated[str | None, typer.Option(help="Only the pending requests of this form id.")] = None,
) -> None:
    """Bring the stored pending requests up to date from the service (for setups without
    a receiver): completions with their answers, expiries and cancellations. Prints the
    report as JSON.

    Example: [bold]formsync poll --config formsync.toml --form form_123[/bold]
    """
    from connector.client import FormClient
    from connector.errors import FormsyncError
    from pipelines.poll import poll_once

    settings, store = _open(config)

    async def run() -> str:
        async with FormClient.from_settings(settings.service) as fc:
            return (await poll_once(fc, store, form_id=form)).model_dump_json()

    try:
        typer.echo(asyncio.run(run()))
    except FormsyncError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    finally:
        store.close()


@app.command()
def sync(
    config: ConfigOption = None,
    form: Annotated[str | None, typer.Option(help="Only this form id (default: every form of "
                                                  "service.workspace_id, or of the token's workspace).")] = None,
    full: Annotated[bool, typer.Option("--full", help="Read every submission again, not only the new ones.")]
    = False,
    drafts: Annotated[bool, typer.Option("--drafts", help="Include drafts (Pro and Business).")] = False,
) -> None:
    """Copy new submissions into the store: newest first down to the last sync's
    high-water mark (one call per form when nothing is new). Prints the report as JSON.

    Example: [bold]formsync sync --config formsync.toml --form form_123 --full[/bold]
    """
    from connector.client import FormClient
    from connector.errors import FormsyncError
    from pipelines.sync import sync_all, sync_form

    settings, store = _open(config)

    async def run() -> str:
        async with FormClient.from_settings(settings.service) as fc:
            if form is not None:
                return (await sync_form(fc, store, form, full=full, include_drafts=drafts)).model_dump_json()
            ws = settings.service.workspace_id or (await fc.list_workspaces())[0].id
            return (await sync_all(fc, store, ws, full=full, include_drafts=drafts)).model_dump_json()

    try:
        typer.echo(asyncio.run(run()))
    except FormsyncError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    finally:
        store.close()


@app.command("export")
def export_cmd(
    format: Annotated[str, typer.Option("--format", help="csv, xlsx or parquet.")],
    out: Annotated[Path, typer.Option("--out", help="The file to write.")],
    table: Annotated[str, typer.Option(help="wide (one row per submission), long (one row per answer), "
                                            "requests, or all (xlsx only: one sheet each).")] = "wide",
    form: Annotated[str | None, typer.Option(help="Only this form id.")] = None,
    since: Annotated[str | None, typer.Option(help="Only submissions submitted (requests created) at or after "
                                                   "this ISO date or time; UTC unless it has an offset.")] = None,
    status: Annotated[str | None, typer.Option(help="Only requests in this status (pending, completed, "
                                                    "expired, canceled).")] = None,
    display: Annotated[bool, typer.Option("--display", help="Display text instead of raw answers.")] = False,
    labels: Annotated[bool, typer.Option("--labels", help="Question titles as the headers of the field columns, "
                                                          "in the form's field order (reads fields.list once: "
                                                          "needs --form and service.token).")] = False,
    config: ConfigOption = None,
) -> None:
    """Export the stored submissions, answers or requests to CSV, XLSX or Parquet. Prints
    the report as JSON. With --form and service.token, the wide table's field columns
    follow the form's field order (one fields.list call); else the order answers were
    first seen in.

    Example: [bold]formsync export --format xlsx --out results.xlsx --table all --form form_123[/bold]
    """
    from datetime import datetime

    from pydantic import ValidationError

    from connector.settings import load_settings
    from pipelines.export import export

    since_at = None
    if since is not None:
        try:
            since_at = datetime.fromisoformat(since)
        except ValueError:
            raise typer.BadParameter(f"expected an ISO date or time such as 2026-01-31 or "
                                     f"2026-01-31T08:00:00Z, got {since!r}", param_hint="--since") from None
    try:
        settings = load_settings(config)
    except FileNotFoundError as e:
        raise typer.BadParameter(str(e), param_hint="--config") from None
    except ValidationError as e:
        raise typer.BadParameter(f"invalid settings: {e}", param_hint="--config") from None
    store = _migrated_store(settings.store.url)
    titles: dict[str, str] | None = None
    picked: list[str] | None = None
    order: list[str] | None = None
    if labels:
        titles, picked = _field_titles(settings, form)
    elif form is not None and settings.service.token is not None:
        order = _field_order(settings, form)
    try:
        report = export(store, format, out, table=table, form_id=form,  # type: ignore[arg-type]
                        since=since_at, status=status, display=display, labels=titles, fields=picked,
                        order=order)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    finally:
        store.close()
    typer.echo(report.model_dump_json())


def _field_titles(settings: Any, form: str | None) -> tuple[dict[str, str], list[str]]:
    """Question titles by field key, and the keys in the form's order, from fields.list."""
    from connector.errors import FormsyncError

    if form is None:
        raise typer.BadParameter("--labels reads the titles of one form's fields: give --form", param_hint="--labels")
    if settings.service.token is None:
        raise typer.BadParameter("--labels reads fields.list, which needs service.token: put it in the [service] "
                                 "section or in FORMSYNC_SERVICE__TOKEN", param_hint="--labels")

    try:
        fields = _list_fields(settings, form)
    except FormsyncError as e:
        typer.echo(f"error: cannot read the fields of form {form} for --labels: {e}", err=True)
        raise typer.Exit(1) from None
    return {f.key: f.title or f.key for f in fields}, [f.key for f in fields]


def _list_fields(settings: Any, form: str, *, retries: int | None = None) -> list[Any]:
    """The form's fields from one fields.list call (a ``FormsyncError`` when it fails);
    ``retries`` overrides the configured retries."""
    from connector.client import FormClient

    overrides = {} if retries is None else {"max_retries": retries}

    async def fetch() -> list[Any]:
        async with FormClient.from_settings(settings.service, **overrides) as fc:
            return (await fc.list_fields(form)).items

    return asyncio.run(fetch())


def _field_order(settings: Any, form: str) -> list[str] | None:
    """The form's field keys in fields.list order, for the wide columns; None (columns in
    first-seen order, with a warning) when the service cannot be read: the export needs
    only the store."""
    from connector.errors import FormsyncError

    try:
        # A nicety for an export that needs only the store: one try, no waiting on retries.
        return [f.key for f in _list_fields(settings, form, retries=0)]
    except FormsyncError as e:
        typer.echo(f"warning: cannot read the field order of form {form} ({e}); the field columns follow "
                   f"the order in which answers were first seen", err=True)
        return None


@app.command()
def outreach(
    sheet: Annotated[Path, typer.Argument(help="CSV or XLSX file, one recipient per row.")],
    form: Annotated[str, typer.Option("--form", help="The form id to send.")],
    job: Annotated[str | None, typer.Option(help="Job name: a re-run with the same name sends only the rows "
                                                 "not sent yet (default: the sheet's file name).")] = None,
    config: ConfigOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and print the plan; create nothing.")]
    = False,
    test: Annotated[bool, typer.Option("--test", help="Create test requests.")] = False,
    report: Annotated[Path | None, typer.Option("--report", help="Where to write the CSV of bad rows "
                                                                 "(default: outreach.report_dir/JOB-report.csv).")]
    = None,
) -> None:
    """Send one request per valid sheet row. Every row is checked against the form's fields
    first; bad rows go to the report and are not sent. Prints the run report as JSON.

    Example: [bold]formsync outreach contacts.csv --form form_123 --job spring --report bad.csv[/bold]
    """
    from connector.client import FormClient
    from connector.errors import FormsyncError
    from pipelines.outreach import SHEET_SUFFIXES, run_outreach
    from pipelines.outreach.show import plan_lines, progress_bar

    if not sheet.is_file():
        raise typer.BadParameter(f"sheet {sheet} does not exist", param_hint="SHEET")
    if sheet.suffix.lower() not in SHEET_SUFFIXES:
        raise typer.BadParameter(f"unsupported sheet type {sheet.suffix!r}; use .csv or .xlsx", param_hint="SHEET")
    settings, store = _open(config)
    name = job or sheet.stem
    out = settings.outreach

    async def run() -> str:
        async with FormClient.from_settings(settings.service) as fc:
            with progress_bar(show=not dry_run) as progress:
                done = await run_outreach(
                    fc, store, sheet, form, job=name, mapping=out.mapping, delivery=out.delivery,
                    callback_url=out.callback_url, dry_run=dry_run, test=test,
                    report_path=report or out.report_dir / f"{name}-report.csv", progress=progress)
        return "\n".join([*(plan_lines(done.plan) if dry_run else []), done.model_dump_json()])

    try:
        typer.echo(asyncio.run(run()))
    except FormsyncError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    finally:
        store.close()


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", help="Directory for the exports, the summary and the demo's state "
                                                    "(.state/); created if missing.")] = Path("formsync-demo"),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Run everything end to end on this machine: the sandbox and a receiver on free
    loopback ports, outreach from config/demo/contacts.csv, recipients answering on their
    pages, one request canceled and one expired, signed callbacks and webhooks verified
    and stored, poll, sync, and exports to CSV, XLSX and Parquet. Prints a summary (also in
    OUT/summary.json). Run it again in the same directory: nothing new is sent.

    Example: [bold]formsync demo --out /tmp/formsync-demo[/bold]
    """
    import aiohttp
    from rich.console import Console

    from connector.errors import FormsyncError
    from pipelines.demo import DemoError, OutDirError, render_summary, run_demo

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    console = Console()
    try:
        summary = asyncio.run(run_demo(out, console=console, progress=not quiet))
    except OutDirError as e:
        raise typer.BadParameter(str(e), param_hint="--out") from None
    except (DemoError, FormsyncError, aiohttp.ClientError, OSError) as e:
        # What the demo cannot do (a port, the disk, a call refused) is said in one line; the
        # state under OUT/.state is consistent, and the next run goes on from it.
        typer.echo(f"error: the demo stopped: {e}", err=True)
        raise typer.Exit(1) from None
    render_summary(summary, console)


def _settings_for_run(config: Path) -> tuple[Any, dict[str, Any]]:
    """Settings and checked job params for ``run`` and ``status``; any problem is a clear
    error naming the job and key, and exit code 2, before anything starts."""
    from pydantic import ValidationError

    from connector.settings import load_settings
    from pipelines.jobs import ConfigError, check_jobs, describe_settings_error

    try:
        settings = load_settings(config)
    except FileNotFoundError as e:
        raise typer.BadParameter(str(e), param_hint="--config") from None
    except ValidationError as e:
        raise typer.BadParameter(f"invalid settings: {describe_settings_error(e, config)}",
                                 param_hint="--config") from None
    try:
        params = check_jobs(settings)
    except ConfigError as e:
        raise typer.BadParameter(str(e), param_hint="--config") from None
    return settings, params


@app.command()
def run(
    config: Annotated[Path, typer.Option(help="TOML settings file with the \\[\\[jobs]] to run (see "
                                              "config/formsync.example.toml); FORMSYNC_* variables win over it.")],
    lock_poll_seconds: Annotated[float, typer.Option(
        min=0.1, help="How often a waiting process tries to take over the scheduler (and the leader checks "
                      "that it still holds it).")] = 5.0,
    lease_seconds: Annotated[float, typer.Option(
        min=1, help="SQLite only: how long the scheduler lease lasts without renewal.")] = 30.0,
    stop_timeout: Annotated[float, typer.Option(
        min=0, help="On SIGTERM, how long to wait for running jobs before cancelling them.")] = 120.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug detail.")] = False,
) -> None:
    """Run the jobs the file declares (its \\[\\[jobs]] tables) on their schedules, and the
    receiver too when \\[receiver] enabled = true, until SIGTERM or Ctrl-C. Several processes may share one database:
    one schedules, the others wait and take over when it dies. On SIGTERM a running
    outreach finishes the row it is sending, and the next run resumes after it.

    Example: [bold]formsync run --config formsync.toml[/bold]
    """
    from pipelines.scheduler import SchedulerOptions, serve

    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings, _ = _settings_for_run(config)
    if not settings.jobs and not settings.receiver.enabled:
        raise typer.BadParameter("nothing to run: the file declares no [[jobs]] and [receiver] enabled is false",
                                 param_hint="--config")
    store = _migrated_store(settings.store.url)
    options = SchedulerOptions(lock_poll_seconds=lock_poll_seconds, lease_seconds=lease_seconds,
                               stop_timeout_seconds=stop_timeout)
    try:
        asyncio.run(serve(settings, store, options=options,
                          on_state=lambda state: typer.echo(f"formsync scheduler {state}", err=True),
                          on_receiver_ready=lambda url: typer.echo(f"formsync receiver listening on {url}",
                                                                   err=True)))
    except OSError as e:
        typer.echo(f"error: cannot listen on {settings.receiver.host}:{settings.receiver.port}: {e}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass
    finally:
        store.close()


@app.command()
def status(
    config: Annotated[Path, typer.Option(help="The TOML settings file that `formsync run` uses.")],
) -> None:
    """Show the jobs (schedule, next run, last run and outcome), outreach progress, pending
    requests, deliveries received and the last errors. Reads the database only.

    Example: [bold]formsync status --config formsync.toml[/bold]
    """
    from rich.console import Console

    from connector.store import Store
    from pipelines.status import collect_status, render_status

    settings, _ = _settings_for_run(config)
    try:
        store = Store(settings.store.url)
    except Exception as e:  # SQLAlchemy refuses an unusable URL with several exception types
        raise typer.BadParameter(f"unusable database URL: {e}", param_hint="--config") from None
    try:
        report = collect_status(settings, store)
    except Exception as e:  # the database is unreachable
        typer.echo(f"error: cannot read the database {settings.store.url!r}: {_first_line(e)}", err=True)
        raise typer.Exit(1) from None
    finally:
        store.close()
    Console().print(render_status(report))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
