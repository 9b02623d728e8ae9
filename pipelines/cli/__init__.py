"""The ``formsync`` command (Typer + Rich).

``context`` holds what every command shares (settings, store, client, running a
coroutine) and ``errors`` the exit codes and the one mapping from an exception to its
code and message; ``servers`` has the commands that serve until stopped, ``batch``
the ones that do one piece of work and exit, ``subscribe`` the group of commands for the
receiver's webhook subscriptions, ``dead_letters`` the commands on the events set aside,
``key`` the store key's reset, and ``deploy`` the one writing the systemd units and the
nginx site; ``demo`` is what ``formsync demo`` runs (its sheet in ``data/``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from . import batch, campaign, dead_letters, deploy, erase, files, key, login, purge, servers, subscribe
from .helptext import summary
from .load import load_command
from .usage import FormsyncGroup

# -h as well as --help, on every command (Click's subcommands inherit it).
app = typer.Typer(cls=FormsyncGroup, no_args_is_help=True, add_completion=False, rich_markup_mode="rich",
                  context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
                  help="formsync: connect your data to the Form Collection Service.")

# `formsync sandbox` serves; `formsync sandbox diff` compares a sandbox with its upstream.
sandbox_app = typer.Typer(cls=FormsyncGroup, invoke_without_command=True, add_completion=False,
                          rich_markup_mode="rich")
sandbox_app.callback()(servers.sandbox)
sandbox_app.command("diff", short_help=summary(servers.diff))(servers.diff)
app.add_typer(sandbox_app, name="sandbox", short_help=summary(servers.sandbox))
for _fn, _name in ((servers.receive, "receive"), (batch.poll, "poll"),
                   (batch.sync, "sync"), (batch.export, "export"), (load_command, "load"), (batch.views, "views"),
                   (batch.migrate, "migrate"),
                   (batch.outreach, "outreach"), (batch.demo, "demo"), (servers.run, "run"), (batch.status, "status"),
                   (files.files, "files"), (deploy.deploy, "deploy"), (login.login, "login"), (login.logout, "logout"),
                   (erase.erase, "erase"), (purge.purge, "purge")):
    app.command(_name, short_help=summary(_fn))(_fn)
app.add_typer(subscribe.app, name="subscribe", short_help="The receiver's webhook subscriptions: list, create, "
                                                          "secret, remove, check.")
app.add_typer(dead_letters.app, name="dead-letters")
app.add_typer(key.app, name="key", short_help="The store's key: reset it, forgetting the erasures and the sign-in.")
app.add_typer(campaign.app, name="campaign", short_help="The campaign after the send: funnel, export, page, "
                                                         "reminders, closing, suppression.")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"formsync {version('formsync')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("formsync (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_print_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """formsync: connect your data to the Form Collection Service.

    Example: [bold]formsync sandbox --port 0 --credentials-file creds.json[/bold]
    """


def main() -> None:
    """The console script ``formsync``."""
    app()
