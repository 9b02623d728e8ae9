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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
