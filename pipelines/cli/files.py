"""``formsync files``: archive the bytes of the stored file and signature answers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from .context import command, print_report
from .errors import ExitCode, UsageError, WorkFailed
from .options import ConfigOption


def files(
    to: Annotated[str, typer.Option("--to", help="A folder, or an fsspec URL (file://, s3://, gs://, ...): where "
                                                 "the files go, each named by the sha256 of its bytes.")],
    config: ConfigOption = None,
    form: Annotated[list[str] | None, typer.Option("--form", help="Only this form id (repeat for several).")] = None,
    concurrency: Annotated[int, typer.Option(help="Downloads at once (1-64).")] = 8,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Download every stored file and signature answer that is not archived yet, from the
    service's own host only, and record where each went (formsync_archived_files). Safe to
    stop and run again: a file is whole or absent, and the next run fetches the rest. Prints
    a last line (done: 12 files archived, 30 already) and the report as JSON; exit 3 when
    files could not be fetched (each in the report, fetched again by the next run).

    Example: [bold]formsync files --config formsync.toml --to /srv/formsync-files[/bold]
    """
    with command(config) as ctx:
        if not to.strip():
            raise UsageError("is empty", where="--to", hint="name a folder or an fsspec URL, e.g. --to ./formsync-files")
        if not 1 <= concurrency <= 64:
            raise UsageError(f"--concurrency {concurrency} is out of range", where="--concurrency",
                             hint="use 1 to 64")
        from pipelines.jobs import FilesParams, Hooks
        from pipelines.lifecycle.archive import LocationError

        params = ctx.params(FilesParams, to=to, form=form, concurrency=concurrency)
        with _progress(quiet) as on_file:
            try:
                report = ctx.job("files", params, Hooks(files_done=on_file))
            except LocationError as e:
                raise WorkFailed(str(e), where="--to") from None
        typer.echo(report.outcome(), err=True)
        for p in report.problems[:10]:
            typer.echo(f"  {p.submission_id} {p.path}: {p.problem}", err=True)
        print_report(report)
    if report.failed:
        raise typer.Exit(int(ExitCode.REJECTED))


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A bar on stderr while files download: files done of the total, and files a second."""
    if quiet:
        yield None
        return
    import time

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("files"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                   TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    task = bar.add_task("files", total=None, rate="")
    start = time.monotonic()

    def update(total: int, done: int) -> None:
        elapsed = time.monotonic() - start
        rate = f"{done / elapsed:,.0f} files/s" if done and elapsed > 0 else ""
        bar.update(task, total=total, completed=done, rate=rate)

    with bar:
        yield update
