"""``formsync load``: the store into a warehouse through dlt (``pipelines.export.load``), with a
progress bar of the rows read and their rate."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from .context import command, print_report
from .errors import UsageError, WorkFailed
from .options import ConfigOption


def load_command(
    destination: Annotated[str | None, typer.Option(help="A dlt destination: duckdb (formsync.duckdb here), "
                                                         "postgres, bigquery, snowflake, filesystem, ... "
                                                         "(default: load.destination). Credentials come from "
                                                         "dlt's configuration.")] = None,
    dataset: Annotated[str | None, typer.Option(help="The dataset (schema) to load into (default: "
                                                     "load.dataset, formsync_data).")] = None,
    table_format: Annotated[str | None, typer.Option(help="delta: Delta tables, with --destination filesystem (in "
                                                          "formsync-delta/ beside the store unless dlt's "
                                                          "configuration gives a bucket_url; default: "
                                                          "load.table_format).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count the rows a load would send; send nothing.")]
    = False,
    config: ConfigOption = None,
) -> None:
    """Load the rows stored since the last load into a warehouse through dlt: one table
    per form (its columns and types from the field list), the answers (long), the
    requests and the campaign rows. An edit replaces its row; a new field adds a column.
    Prints the report as JSON.

    Example: [bold]formsync load --destination postgres --dataset forms --config formsync.toml[/bold]
    """
    with command(config) as ctx:
        from importlib.util import find_spec

        if find_spec("dlt") is None:
            from pipelines.export.load import EXTRA_MISSING

            raise UsageError(EXTRA_MISSING)
        from pipelines.export.load import LoadFailed, LoadSettingError, destination_problem
        from pipelines.jobs import Hooks, LoadParams

        settings = ctx.settings().load
        if dataset is not None and not dataset.strip():
            raise UsageError("is empty", where="--dataset",
                             hint=f"name a dataset, or leave --dataset out for load.dataset ({settings.dataset})")
        if (problem := destination_problem(destination or settings.destination)) is not None:
            raise UsageError(str(problem), where="--destination" if destination else "load.destination")
        params = ctx.params(LoadParams, destination=destination, dataset=dataset, table_format=table_format,
                            dry_run=dry_run)
        try:
            with _progress(not dry_run) as on_rows:
                report = ctx.job("load", params, Hooks(load_rows=on_rows))
        except LoadSettingError as e:
            raise UsageError(str(e), where="--destination" if destination else "load.destination") from None
        except LoadFailed as e:
            raise WorkFailed(str(e)) from None
        print_report(report)
        if report.held_back is not None:
            typer.echo(f"note: {report.held_back}", err=True)


@contextmanager
def _progress(shown: bool) -> Iterator[Callable[[str, int], None] | None]:
    """A Rich progress line on a terminal's stderr: the rows read so far and their rate."""
    if not shown or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text("" if task.speed is None else f"{task.speed:,.0f} rows/s")

    bar = Progress(SpinnerColumn(), TextColumn("load {task.fields[table]}"), TextColumn("{task.completed:,.0f} rows"),
                   Rate(), TimeElapsedColumn(), console=Console(stderr=True), transient=True)
    task = bar.add_task("load", total=None, table="")
    with bar:
        yield lambda table, rows: bar.update(task, advance=rows, table=table)
