"""The commands that serve until stopped (Ctrl-C or SIGTERM, exit code 0): ``sandbox``,
``receive`` and ``run``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from .context import Context, command
from .errors import UsageError, WorkFailed, bind_failure
from .options import CONFIG_HELP
from .preflight import check_job_files

if TYPE_CHECKING:
    from connector.client.rpc import FormClient
    from pipelines.connect.shape_diff import CallDiff


class SandboxDialect(str, Enum):
    """How much of each answer the sandbox sends (formservice/dialect.py)."""

    full = "full"
    minimal = "minimal"


def sandbox(
    ctx_: typer.Context,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, metavar="PORT", help="Port to bind; 0 picks a free one.")] = 8787,
    data_dir: Annotated[Path, typer.Option(help="Where the sandbox keeps its SQLite store.")] = Path(
        ".formsync-sandbox"),
    seed: Annotated[Path | None, typer.Option(help="Seed YAML for a new data dir (default: the built-in seed).")]
    = None,
    credentials_file: Annotated[Path | None, typer.Option(
        help="Write baseUrl, workspaces, tokens and signing secrets here (JSON; default: "
             "credentials.json in the data dir).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every request.")] = False,
    dialect: Annotated[SandboxDialect, typer.Option(
        help="full: answer everything; minimal: only the fields and error parts the spec shows.")]
    = SandboxDialect.full,
    ca_file: Annotated[Path | None, typer.Option(
        help="A PEM file of certificate authorities its https deliveries also trust: the one that signed "
             "a receiver's certificate (a self-signed certificate itself).")] = None,
    snapshot_dir: Annotated[Path | None, typer.Option(
        help="Where the snapshot.save helper keeps snapshots, across restarts (default: snapshots in the "
             "data dir).")] = None,

    seed_from: Annotated[str | None, typer.Option(
        metavar="URL", help="Seed a new data dir with the forms of the workspace at this service URL, read with "
                            "read-only calls (token: service.token, FORMSYNC_SERVICE__TOKEN or a sign-in).")] = None,
    with_submissions: Annotated[bool, typer.Option(
        "--with-submissions", help="With --seed-from: copy the submissions too, their email answers masked.")] = False,
    config: Annotated[Path | None, typer.Option(
        help="TOML settings file, for --seed-from's token; FORMSYNC_* variables win over it.")] = None,
) -> None:
    """Run the local Form Collection Service: JSON-RPC, agent endpoint, recipient pages
    and test helpers, on SQLite.

    Example: [bold]formsync sandbox --port 0 --data-dir /tmp/fs --credentials-file /tmp/fs/creds.json[/bold]
    """
    if ctx_.invoked_subcommand is not None:
        return
    with command(config, log_level=logging.INFO if verbose else logging.WARNING) as ctx:
        if seed is not None and seed_from is not None:
            raise UsageError("--seed and --seed-from cannot go together", where="--seed-from", hint="give one of them")
        if with_submissions and seed_from is None:
            raise UsageError("--with-submissions copies submissions from a workspace", where="--with-submissions",
                             hint="give --seed-from URL too")
        if seed is not None and not seed.exists():
            raise UsageError(f"seed file {seed} does not exist", where="--seed")
        if data_dir.exists() and not data_dir.is_dir():
            raise UsageError(f"{data_dir} is a file", where="--data-dir", hint="give a directory (made if missing)")
        if snapshot_dir is not None and snapshot_dir.exists() and not snapshot_dir.is_dir():
            raise UsageError(f"{snapshot_dir} is a file", where="--snapshot-dir",
                             hint="give a directory (made if missing)")
        if ca_file is not None:
            from formservice.delivery import trusting

            try:
                trusting(ca_file)
            except ValueError as e:
                raise UsageError(str(e), where="--ca-file", hint="give the PEM certificate of the authority that "
                                                                 "signed the receiver's certificate") from None
        if seed_from is not None:
            from formservice.sandbox.seed import CREDENTIALS

            if (data_dir / CREDENTIALS).exists():
                raise UsageError(f"{data_dir} already holds a seeded sandbox; --seed-from seeds a new data dir",
                                 where="--data-dir", hint="give an empty or new --data-dir")
            seed = _seed_from(ctx, seed_from, data_dir, with_submissions)
        ctx.serve(_sandbox(host, port, data_dir, seed, credentials_file or data_dir / "credentials.json",
                           "minimal" if dialect is SandboxDialect.minimal else "full", ca_file, snapshot_dir))


def _seed_from(ctx: Context, url: str, data_dir: Path, with_submissions: bool) -> Path:
    """Read the workspace at ``url`` and write its seed into ``data_dir``; the seed file's path."""
    from pipelines.connect.seed_from import NOT_COPIED, build_seed, read_workspace, write_seed

    def plan(calls: int) -> None:
        more = " (and the submissions' pages)" if with_submissions else ""
        typer.echo(f"reading {url}: {calls} read-only calls{more}, paced within {_paced(ctx)} a minute", err=True)

    read = ctx.with_client(lambda fc: read_workspace(fc, with_submissions=with_submissions, on_plan=plan),
                           base_url=url, calls_per_minute=_paced(ctx))
    path = write_seed(build_seed(read), data_dir / "seed-from.yaml")
    typer.echo(f"{len(read.forms)} forms copied into {path}; not copied: " + "; ".join(NOT_COPIED), err=True)
    return path


def diff(
    upstream: Annotated[str, typer.Option(metavar="URL", help="The service whose answers the sandbox's are compared "
                                                               "with (token: service.token, FORMSYNC_SERVICE__TOKEN or a sign-in).")],
    sandbox_credentials: Annotated[Path | None, typer.Option(
        help="The credentials file of a running sandbox seeded from the upstream (default: a sandbox seeded "
             "from it now, stopped after the diff).")] = None,
    config: Annotated[Path | None, typer.Option(help=CONFIG_HELP)] = None,
) -> None:
    """Send the read-only calls to the upstream and to a sandbox seeded from it, and print,
    call by call, where the answers differ in shape (keys, JSON types, nulls, error codes and
    reasons; not ids, times, URLs or list lengths). Exit code 1 when they differ.

    Example: [bold]formsync sandbox diff --upstream https://forms.example.com[/bold]
    """
    with command(config) as ctx:
        creds = _credentials(sandbox_credentials) if sandbox_credentials is not None else None

        def plan(calls: int) -> None:
            typer.echo(f"sending at most {calls} read-only calls to each side, paced within {_paced(ctx)} a minute", err=True)

        async def work(up: FormClient) -> list[CallDiff]:
            if creds is not None:
                return await _compare_with(up, creds[0], creds[1], plan)
            return await _compare_seeded(up, plan)

        found = ctx.with_client(work, base_url=upstream, calls_per_minute=_paced(ctx))
        differing = [d for d in found if d.differences]
        for d in found:
            typer.echo(f"{d.call}: " + ("same shape" if not d.differences else f"{len(d.differences)} differences"))
            for line in d.differences:
                typer.echo(f"  {line}")
        typer.echo(f"{len(differing)} of {len(found)} calls differ in shape")
        if differing:
            raise typer.Exit(1)


def _paced(ctx: Context) -> int:
    """Calls a minute to the upstream: the configured pace, never above the service's 120."""
    return min(ctx.settings().service.calls_per_minute, 120)


def _credentials(path: Path) -> tuple[str, str]:
    """The base URL and first workspace's token of a sandbox's credentials file."""
    import json

    try:
        creds = json.loads(path.read_text(encoding="utf-8"))
        return str(creds["baseUrl"]), str(creds["workspaces"][0]["token"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        raise UsageError(f"{path} is not a sandbox's credentials file", where="--sandbox-credentials",
                         hint="give the file `formsync sandbox --credentials-file` wrote") from None


async def _compare_with(up: FormClient, base_url: str, token: str, plan: Callable[[int], None]) -> list[CallDiff]:
    from connector.client.rpc import FormClient as Client
    from pipelines.connect.shape_diff import compare

    async with Client(base_url, token, calls_per_minute=120) as sb:
        return await compare(up, sb, on_plan=plan)


async def _compare_seeded(up: FormClient, plan: Callable[[int], None]) -> list[CallDiff]:
    """A sandbox seeded from the upstream now, in a temporary directory, compared and stopped."""
    import tempfile

    from formservice.sandbox.runner import SandboxServer
    from pipelines.connect.seed_from import build_seed, read_workspace, write_seed

    seed = build_seed(await read_workspace(up))
    with tempfile.TemporaryDirectory(prefix="formsync-diff-") as tmp:
        path = write_seed(seed, Path(tmp) / "seed.yaml")
        server = await SandboxServer(Path(tmp) / "data", seed=path).start()
        try:
            ws = server.credentials["workspaces"][0]
            return await _compare_with(up, server.base_url, ws["token"], plan)
        finally:
            await server.stop()


async def _sandbox(host: str, port: int, data_dir: Path, seed: Path | None, credentials: Path,
                   dialect: Literal["full", "minimal"], ca_file: Path | None, snapshot_dir: Path | None) -> None:
    """The sandbox, saying where its credentials are once it listens."""
    import asyncio

    from formservice.sandbox.runner import serve
    from formservice.sandbox.seed import SeedError

    ready = asyncio.Event()

    async def say() -> None:
        await ready.wait()
        typer.echo(f"credentials (baseUrl, tokens, signing secrets) written to {credentials}")

    told = asyncio.create_task(say())
    try:
        await serve(host, port, data_dir, seed, credentials, ready=ready, dialect=dialect, ca_file=ca_file,
                    snapshot_dir=snapshot_dir)
    except OSError as exc:
        said = bind_failure(exc, "--port")
        if said is None:
            raise
        raise WorkFailed(said.message, hint=said.hint) from None
    except SeedError as e:
        raise UsageError(str(e), where="--seed") from None
    finally:
        told.cancel()


def receive(
    config: Annotated[Path | None, typer.Option(help=CONFIG_HELP)] = None,
    host: Annotated[str | None, typer.Option(help="Address to bind (default: receiver.host).")] = None,
    port: Annotated[int | None, typer.Option(
        min=0, max=65535, metavar="PORT", help="Port to bind; 0 picks a free one (default: receiver.port).")] = None,
    db: Annotated[str | None, typer.Option(
        help="Database URL such as sqlite:///events.db (default: store.url).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every event received.")] = False,
) -> None:
    """Receive signed callbacks and webhook deliveries and store them: migrates the
    database, then serves POST {path} (either kind), {path}/callbacks (callback_secrets)
    and {path}/webhooks (webhook_secrets), plus /healthz, /readyz and /metrics, until
    Ctrl-C or SIGTERM; pending events are committed before it exits.

    Example: [bold]formsync receive --config formsync.toml --port 8788 --db sqlite:///events.db[/bold]
    """
    with command(config, log_level=logging.INFO if verbose else logging.WARNING) as ctx:
        from connector.receiver.app import event_paths, run_receiver
        from connector.receiver.tls import server_context
        from pipelines.operate.metrics import StoreCollector

        rs, service = ctx.settings().receiver, ctx.settings().service
        server_context(rs.tls_cert, rs.tls_key)  # a TLS file that cannot serve: said before anything starts
        store = ctx.store(db, where="--db") if db is not None else ctx.store()
        store.check_key()

        def ready(url: str) -> None:
            paths = event_paths(rs)
            typer.echo(f"formsync receiver listening on {url}{paths['any']} "
                       f"(callbacks: {paths['callbacks']}, webhooks: {paths['webhooks']})", color=False)

        ctx.serve(run_receiver(store, rs, host=host, port=port, on_ready=ready, service=service, tokens=ctx.grant(),
                               collectors=[StoreCollector(ctx.settings(), store)]))


def run(
    config: Annotated[Path, typer.Option(help="TOML settings file with the \\[\\[jobs]] to run; FORMSYNC_* "
                                              "variables win over it.")],
    lock_poll_seconds: Annotated[float, typer.Option(
        min=0.1, metavar="SECONDS", help="How often a waiting process tries to take over the scheduler (and the leader checks "
                      "that it still holds it).")] = 5.0,
    lease_seconds: Annotated[float, typer.Option(
        min=1, metavar="SECONDS", help="SQLite only: how long the scheduler lease lasts without renewal.")] = 30.0,
    stop_timeout: Annotated[float, typer.Option(
        min=0, metavar="SECONDS", help="On SIGTERM, how long to wait for running jobs before cancelling them.")] = 120.0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug detail.")] = False,
) -> None:
    """Run the jobs the file declares (its \\[\\[jobs]] tables) on their schedules, and the
    receiver too when \\[receiver] enabled = true, until SIGTERM or Ctrl-C. Several processes may share one database:
    one schedules, the others wait and take over when it dies. On SIGTERM a running
    outreach finishes the row it is sending, and the next run resumes after it.

    Example: [bold]formsync run --config formsync.toml[/bold]
    """
    with command(config, log_level=logging.DEBUG if verbose else logging.INFO) as ctx:
        from pipelines.operate.jobs import check_jobs, job_warnings
        from pipelines.operate.scheduler import SchedulerOptions, serve

        settings = ctx.settings()
        # Before anything starts, not even the database (a sign-in is looked for, never made).
        checked = check_jobs(settings, signed_in=ctx.signed_in())
        check_job_files(checked, ctx.where)
        for warning in job_warnings(checked):
            typer.echo(f"warning: {warning}", err=True)
        if settings.receiver.enabled:
            from connector.receiver.tls import server_context

            server_context(settings.receiver.tls_cert, settings.receiver.tls_key)
        if not settings.jobs and not settings.receiver.enabled:
            raise UsageError("nothing to run: the file declares no [[jobs]] and [receiver] enabled is false",
                             where=ctx.where)
        options = SchedulerOptions(lock_poll_seconds=lock_poll_seconds, lease_seconds=lease_seconds,
                                   stop_timeout_seconds=stop_timeout)
        ctx.serve(serve(settings, ctx.keyed_store(), options=options, tokens=ctx.grant(),
                        on_state=lambda state: typer.echo(f"formsync scheduler {state}", err=True),
                        on_receiver_ready=lambda url: typer.echo(f"formsync receiver listening on {url}",
                                                                 err=True)))
