"""The ``formsync outreach`` command's run: prepare, say the estimate, send with a progress
bar (a log line at most every 30 s without a terminal) while Ctrl-C and SIGTERM ask for a
graceful stop, then the summary, the last line (``done: sent 494 of 495 rows; 1 rejected
(see ...)``) and the exit code (0 done, 3 rows in the report, 130 / 143 stopped by a
signal, with the command that resumes)."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from connector.process.signals import stop_on_signals

from .context import Context, print_report
from .errors import ExitCode, Failure

if TYPE_CHECKING:
    from connector.client.rpc import FormClient
    from pipelines.outreach import OutreachReport, Prepared, SheetOptions


@dataclass(frozen=True)
class OutreachCall:
    """What the command was asked: enough to run it, and to say how to run it again."""

    sheet: Path
    form: str
    job: str
    config: Path | None
    dry_run: bool
    test: bool
    report: Path
    options: SheetOptions

    def resume(self) -> str:
        """The command that sends the rows this run did not."""
        args = ["formsync", "outreach", str(self.sheet), "--form", self.form, "--job", self.job]
        args += ["--config", str(self.config)] if self.config is not None else []
        args += ["--test"] if self.test else []
        o = self.options
        for flag, value in (("--encoding", o.encoding), ("--delimiter", o.delimiter), ("--sheet", o.sheet),
                            ("--header-row", o.header_row), ("--date-format", o.date_format),
                            ("--decimal", o.decimal)):
            args += [flag, str(value)] if value is not None else []
        return shlex.join(args)


async def _run(fc: FormClient, ctx: Context, call: OutreachCall, caught: list[signal.Signals]
               ) -> tuple[Prepared, OutreachReport]:
    from pipelines.outreach import outreach_report, prepare_outreach, send_outreach
    from pipelines.outreach.show import estimate_line, progress_bar, progress_log

    settings = ctx.service_settings()
    out, store, per_minute = settings.outreach, ctx.store(), settings.service.creates_per_minute
    prepared = await prepare_outreach(fc, store, call.sheet, call.form, job=call.job, mapping=out.mapping,
                                      delivery=out.delivery, report_path=call.report, sheet_options=call.options,
                                      mapping_setting=_mapping_place(call.config),
                                      suppression_file=out.suppression_file, suppress_bounced=out.suppress_bounced,
                                      allow_duplicates=out.allow_duplicates)
    if call.dry_run:
        return prepared, outreach_report(prepared)
    if prepared.to_send:
        typer.echo(estimate_line(prepared, per_minute), err=True)
    stop = asyncio.Event()
    with stop_on_signals(stop, caught), progress_bar(show=prepared.to_send > 0 and _on_terminal()) as bar:
        progress = bar or (progress_log(lambda line: typer.echo(line, err=True)) if prepared.to_send else None)
        report = await send_outreach(fc, store, prepared, delivery=out.delivery, callback_url=out.callback_url,
                                     test=call.test, progress=progress, stop=stop)
    return prepared, report


def _on_terminal() -> bool:
    """Whether stderr is a terminal (a bar redrawn in a log file is noise)."""
    from rich.console import Console

    return Console(stderr=True).is_terminal


def _mapping_place(config: Path | None) -> str:
    """Where ``outreach.mapping`` is set, for a message naming it: the file and line, or
    the environment variable."""
    from .config_errors import setting_place

    text = None
    if config is not None:
        try:
            text = config.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = None  # the settings loaded, so this is a race; the setting's name is enough
    return setting_place(["outreach", "mapping"], str(config) if config else None, text, os.environ)


def verdict(call: OutreachCall, prepared: Prepared, report: OutreachReport,
            caught: list[signal.Signals]) -> Failure | None:
    """How the run ends when it did not send every row it could: stopped by a signal (with
    the resume command), rows refused by the service, or nothing to send; or a dry run
    with rows in its report (with where the report is). None when it did."""
    if report.stopped:
        code = ExitCode.TERMINATED if signal.SIGTERM in caught else ExitCode.INTERRUPTED
        return Failure(code, f"interrupted: {report.outcome(report.report_path)}",
                       hint=f"run again to continue: {call.resume()}")
    if report.failed or (report.problems and (call.dry_run or not prepared.plan.valid)):
        first = report.lines[0] if report.lines else None
        said = f"; first: row {first[0]}: {first[1].column + ': ' if first[1].column else ''}{first[1].problem}" \
            if first else ""
        nothing = " (nothing to send)" if not prepared.plan.valid else ""
        return Failure(ExitCode.REJECTED, f"{report.outcome(dry_run=call.dry_run)}{nothing}{said}",
                       where=str(call.sheet), hint=f"all in {report.report_path}; fix them and run again")
    return None


def done_line(report: OutreachReport) -> str:
    """The last line of a run that sent every row it could: ``done: sent 494 of 495 rows;
    1 rejected (see ...)``."""
    return f"done: {report.outcome(report.report_path if report.problems else None)}"


def run_command(ctx: Context, call: OutreachCall) -> int:
    """Run the command: summary and first rejected rows on stdout, the verdict on stderr,
    the report's JSON as the last line of stdout. Returns the exit code."""
    from pipelines.outreach.show import summary_lines

    caught: list[signal.Signals] = []
    prepared, report = ctx.with_client(lambda fc: _run(fc, ctx, call, caught))
    per_minute = ctx.service_settings().service.creates_per_minute
    delivery = ctx.service_settings().outreach.delivery
    for line in summary_lines(prepared, report, dry_run=call.dry_run, per_minute=per_minute, delivery=delivery):
        typer.echo(line)
    failure = verdict(call, prepared, report, caught)
    if failure is not None:
        # A dry run's rejected rows are what it was run to find: its result, not an error.
        label = "dry run" if call.dry_run and failure.code == ExitCode.REJECTED else "error"
        typer.echo(failure.line(ctx.secrets(), label=label), err=True)
    elif not call.dry_run:
        typer.echo(done_line(report), err=True)
    print_report(report)
    if failure is not None:
        return int(failure.code)
    return int(ExitCode.REJECTED) if report.problems else 0
