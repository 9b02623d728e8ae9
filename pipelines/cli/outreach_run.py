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
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from connector._process.signals import stop_on_signals

from .context import Context, print_report
from .errors import ExitCode, Failure

if TYPE_CHECKING:
    from pipelines.jobs import OutreachParams
    from pipelines.outreach import OutreachReport, Prepared
    from pipelines.outreach.send import ProgressCallback


@dataclass(frozen=True)
class OutreachCall:
    """What the command was asked (the job's params): enough to run it, and to say how to
    run it again."""

    params: OutreachParams
    config: Path | None

    @property
    def job(self) -> str:
        return self.params.job or self.params.sheet.stem

    def resume(self) -> str:
        """The command that sends the rows this run did not."""
        p = self.params
        args = ["formsync", "outreach", str(p.sheet), "--form", p.form, "--job", self.job]
        args += ["--config", str(self.config)] if self.config is not None else []
        args += ["--test"] if p.test else []
        for flag, value in (("--encoding", p.encoding), ("--delimiter", p.delimiter), ("--sheet", p.sheet_name),
                            ("--header-row", p.header_row), ("--date-format", p.date_format),
                            ("--decimal", p.decimal)):
            args += [flag, str(value)] if value is not None else []
        return shlex.join(args)


def _run(ctx: Context, call: OutreachCall, caught: list[signal.Signals]) -> tuple[Prepared, OutreachReport]:
    """The outreach job, with the estimate said before the first send, a progress bar (or
    a log line at most every 30 s) while it sends, and SIGINT / SIGTERM asking it to stop."""
    from pipelines.jobs import Hooks, kinds
    from pipelines.outreach.show import estimate_line, progress_bar, progress_log

    per_minute = ctx.service_settings().service.creates_per_minute
    planned: list[Prepared] = []

    async def go() -> OutreachReport:
        with ExitStack() as stack:
            def prepared(p: Prepared) -> ProgressCallback | None:
                planned.append(p)
                if call.params.dry_run or not p.to_send:
                    return None
                typer.echo(estimate_line(p, per_minute), err=True)
                bar = stack.enter_context(progress_bar(show=_on_terminal()))
                return bar or progress_log(lambda line: typer.echo(line, err=True))

            stop = asyncio.Event()
            stack.enter_context(stop_on_signals(stop, caught))
            hooks = Hooks(outreach_prepared=prepared, mapping_setting=_mapping_place(call.config))
            return await kinds.outreach(call.params, ctx.job_env(hooks, stop))

    report = ctx.run(go())
    return planned[0], report


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
    if report.failed or (report.problems and (call.params.dry_run or not prepared.plan.valid)):
        first = report.lines[0] if report.lines else None
        said = f"; first: row {first[0]}: {first[1].column + ': ' if first[1].column else ''}{first[1].problem}" \
            if first else ""
        nothing = " (nothing to send)" if not prepared.plan.valid else ""
        return Failure(ExitCode.REJECTED, f"{report.outcome(dry_run=call.params.dry_run)}{nothing}{said}",
                       where=str(call.params.sheet), hint=f"all in {report.report_path}; fix them and run again")
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
    ctx.keyed_store()  # before any write, the token's first use included
    prepared, report = _run(ctx, call, caught)
    per_minute = ctx.service_settings().service.creates_per_minute
    delivery = ctx.service_settings().outreach.delivery
    for line in summary_lines(prepared, report, dry_run=call.params.dry_run, per_minute=per_minute, delivery=delivery):
        typer.echo(line)
    failure = verdict(call, prepared, report, caught)
    if failure is not None:
        # A dry run's rejected rows are what it was run to find: its result, not an error.
        label = "dry run" if call.params.dry_run and failure.code == ExitCode.REJECTED else "error"
        typer.echo(failure.line(ctx.secrets(), label=label), err=True)
    elif not call.params.dry_run:
        typer.echo(done_line(report), err=True)
    print_report(report)
    if failure is not None:
        return int(failure.code)
    return int(ExitCode.REJECTED) if report.problems else 0
