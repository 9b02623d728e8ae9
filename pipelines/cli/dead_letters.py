"""``formsync dead-letters list|export|replay``: the correctly signed events the receiver
set aside because no database can store them (connector/receiver/_replay.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .context import command, print_report
from .helptext import summary
from .options import ConfigOption

app = typer.Typer(no_args_is_help=True, help="The events set aside: correctly signed, but holding what no "
                                             "database can store (list, export, replay).")


def list_(config: ConfigOption = None) -> None:
    """List the events set aside, one JSON document per line (id, eventId, type, source,
    code, reason, field, receivedAt, setAsideAt), oldest first. Reads the database only.

    Example: [bold]formsync dead-letters list --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        from connector.receiver._replay import dead_letter_line

        for letter in ctx.store(migrate=False).dead_letters:
            typer.echo(json.dumps(dead_letter_line(letter, with_body=False)))


def export(
    config: ConfigOption = None,
    out: Annotated[Path | None, typer.Option(help="Write the lines to this file (default: standard output).")]
    = None,
) -> None:
    """Write every event set aside with its body as received, one JSON document per line
    (body, or bodyBase64 when it is not UTF-8). Reads the database only.

    Example: [bold]formsync dead-letters export --config formsync.toml --out dead-letters.jsonl[/bold]
    """
    with command(config) as ctx:
        from connector.receiver._replay import export_lines

        lines = export_lines(ctx.store(migrate=False))
        if out is None:
            for line in lines:
                typer.echo(line)
            return
        partial = out.with_name(out.name + ".partial")
        with partial.open("w", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
        partial.replace(out)  # the file appears under its name only when complete


def replay(config: ConfigOption = None) -> None:
    """Store the events set aside that this release can store (each body read and stored
    as the receiver does); each leaves the dead letters in the transaction that stores
    it, the others stay. Prints the report as JSON: stored, duplicate, remaining.

    Example: [bold]formsync dead-letters replay --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        from connector.receiver._replay import replay_dead_letters

        print_report(replay_dead_letters(ctx.keyed_store()))


for _fn, _name in ((list_, "list"), (export, "export"), (replay, "replay")):
    app.command(_name, short_help=summary(_fn))(_fn)
