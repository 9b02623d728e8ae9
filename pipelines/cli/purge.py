"""``formsync purge``: each form's retention, read from the service, applied to the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from .context import command, print_report
from .options import ConfigOption

if TYPE_CHECKING:
    from pipelines.lifecycle.purge import PurgeReport


def purge(
    config: ConfigOption = None,
    form: Annotated[list[str] | None, typer.Option("--form", help="Only this form id (repeat for several; "
                                                                 "default: every form with stored submissions).")]
    = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be removed.")] = False,
) -> None:
    """Mirror the service's retention: read each form's draftRetentionDays and
    submissionRetentionDays (formSettings.get, one call a form, in this run: never without
    them) and remove from the store what the service has purged by its own clock: drafts
    and submissions past them, with their events and archived files, and their requests'
    answers. Each removal goes to the deletion log (a load passes it on as a delete).
    Prints a last line and the report as JSON.

    Example: [bold]formsync purge --config formsync.toml --dry-run[/bold]
    """
    with command(config) as ctx:
        from pipelines.jobs import PurgeParams

        params = ctx.params(PurgeParams, form=form, dry_run=dry_run)
        ctx.service_settings()
        report: PurgeReport = ctx.job("purge", params)
        for f in report.forms:
            if f.submissions:
                typer.echo(f"  {f.form_id}: {f.submissions} submissions ({f.events} events, {f.archived_files} "
                           f"archived files, {f.request_answers} request answers)", err=True)
        typer.echo(report.outcome(), err=True)
        print_report(report)
