"""The ``formsync`` command."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Annotated

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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
