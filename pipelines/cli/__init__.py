"""The ``formsync`` command (Typer + Rich).

``context`` holds what every command shares (settings, store, client, running a
coroutine) and ``errors`` the exit codes and the one mapping from an exception to its
code and message; ``servers`` has the commands that serve until stopped and ``batch``
the ones that do one piece of work and exit.
"""

from __future__ import annotations

import typer

from . import batch, servers

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode="rich",
                  help="formsync: connect your data to the Form Collection Service.")

app.command()(servers.sandbox)
app.command()(servers.receive)
app.command()(batch.poll)
app.command()(batch.sync)
app.command("export")(batch.export)
app.command()(batch.outreach)
app.command()(batch.demo)
app.command()(servers.run)
app.command()(batch.status)


@app.callback()
def _root() -> None:
    """formsync: connect your data to the Form Collection Service."""


def main() -> None:
    """The console script ``formsync``."""
    app()
