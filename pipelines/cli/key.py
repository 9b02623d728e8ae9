"""``formsync key reset --forget-erasures``: the one way to a new store key while
tombstones or a sign-in are kept (``Store.reset_key``); it says what is lost."""

from __future__ import annotations

from typing import Annotated

import typer

from .context import command
from .errors import UsageError
from .options import ConfigOption

app = typer.Typer(no_args_is_help=True, help="The store's key (store.key_file): make a new one, forgetting what "
                                             "the old one kept.")


def reset(
    forget_erasures: Annotated[bool, typer.Option("--forget-erasures", help="Required: say that every erasure "
                                                                          "and the sign-in are forgotten.")]
    = False,
    config: ConfigOption = None,
) -> None:
    """Make a new store key in store.key_file, replacing the file there, and forget every
    erasure and every sign-in the old key kept: their hashes and sealed tokens cannot be
    checked or opened with another key. Erased people can then come back on a full sync
    (erase them again), and `formsync login` signs in again. To keep the erasures,
    restore the key file from the backup kept with the database instead.

    Example: [bold]formsync key reset --config formsync.toml --forget-erasures[/bold]
    """
    with command(config) as ctx:
        if not forget_erasures:
            raise UsageError("a new key forgets every erasure (erased people can come back on a full sync) and the "
                             "sign-in", where="formsync key reset",
                             hint="restore the key file from the backup kept with the database to keep them, or "
                                  "give --forget-erasures")
        store = ctx.store()
        erasures, sign_ins = store.reset_key()
        typer.echo(f"new key in {store.key_file}; forgot {erasures} erasure hash(es) and {sign_ins} sign-in(s): "
                   "erased people can come back on a full sync (erase them again)"
                   + ("; run `formsync login` to sign in again" if sign_ins else ""))


app.command("reset")(reset)
