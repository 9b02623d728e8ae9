"""The job kinds' parameters: one pydantic model per kind, named as the options of the
matching ``formsync`` command. The same model validates a ``[[jobs]]`` entry's ``params``
and is filled from the command's flags, so a setting is wired once."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from pipelines.outreach.sheet import SheetOptions


class JobParams(BaseModel):
    """What every kind's params share: no key outside the model."""

    model_config = ConfigDict(extra="forbid")


class OutreachParams(JobParams):
    """``formsync outreach SHEET --form F [--job J] [--test] [--report R]`` and the sheet
    options: ``encoding``, ``delimiter``, ``sheet`` (name or number from 1), ``header_row``,
    ``date_format``, ``decimal``."""

    sheet: Path
    form: str = Field(min_length=1)
    job: str | None = Field(None, min_length=1)  # default: the scheduler job's id, the command's sheet name
    test: bool = False
    dry_run: bool = False
    report: Path | None = None
    encoding: str | None = Field(None, min_length=1)
    delimiter: str | None = Field(None, min_length=1)
    sheet_name: str | None = Field(None, min_length=1)  # the workbook sheet: "sheet" is the file
    header_row: int | None = Field(None, ge=1)
    date_format: str | None = None  # dd/mm/yyyy, mm/dd/yyyy, dd.mm.yyyy
    decimal: str | None = None  # point, comma

    def sheet_options(self) -> SheetOptions:
        """How to read the sheet, as ``formsync outreach``'s sheet options."""
        from pipelines.outreach.sheet import SheetOptions

        return SheetOptions(encoding=self.encoding, delimiter=self.delimiter, sheet=self.sheet_name,
                            header_row=self.header_row, date_format=self.date_format, decimal=self.decimal)

    @field_validator("date_format")
    @classmethod
    def _date_format(cls, v: str | None) -> str | None:
        from pipelines.outreach.formats import date_format_name

        return v if v is None else (date_format_name(v) and v)

    @field_validator("decimal")
    @classmethod
    def _decimal(cls, v: str | None) -> str | None:
        from pipelines.outreach.formats import decimal_name

        return v if v is None else (decimal_name(v) and v)

    @field_validator("sheet")
    @classmethod
    def _sheet_type(cls, v: Path) -> Path:
        if v.suffix.lower() not in (".csv", ".xlsx", ".xlsm"):
            raise ValueError(f"unsupported sheet type {v.suffix!r}; use .csv or .xlsx")
        return v


class PollParams(JobParams):
    """``formsync poll [--form F]``."""

    form: str | None = Field(None, min_length=1)


class SyncParams(JobParams):
    """``formsync sync [--form F] [--full] [--drafts] [--reconcile]``; without ``form``,
    every form of ``service.workspace_id`` (or of the token's workspace)."""

    form: str | None = Field(None, min_length=1)
    full: bool = False
    drafts: bool = False
    reconcile: bool = False
    # Read each form whole when its last full read is this old (edits come); a scheduled sync
    # job takes sync.full_every_hours when unset, ``formsync sync`` by hand stays incremental.
    full_every_hours: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _reconcile_alone(self) -> SyncParams:
        if self.reconcile and (self.full or self.drafts):
            raise ValueError("reconcile reads every id already: it takes no full or drafts; run the sync and the "
                             "reconcile as two jobs")
        return self


class ExportParams(JobParams):
    """``formsync export --format F --out O [--table T] [--form F] [--since S | --since-last N] [--status S]
    [--display]``: ``out`` may hold ``{date}``, ``{time}``, ``{form}`` and ``{run}``, so each night
    writes its own file."""

    format: Literal["csv", "xlsx", "parquet"] | None = None  # default: out's suffix, else export.formats
    out: Path | None = None  # default: export.out_dir/TABLE.FORMAT
    table: Literal["wide", "long", "requests", "all"] = "wide"
    form: str | None = Field(None, min_length=1)
    since: datetime | None = None
    status: Literal["pending", "completed", "expired", "canceled"] | None = None
    display: bool = False
    include_gone: bool = False
    since_last: str | None = Field(None, min_length=1)


class LoadParams(JobParams):
    """``formsync load [--destination D] [--dataset S] [--table-format delta]`` (default: the
    ``[load]`` settings), say ``after`` the sync job: the rows stored since the last load."""

    destination: str | None = Field(None, min_length=1)
    dataset: str | None = Field(None, min_length=1)
    table_format: Literal["delta"] | None = None
    dry_run: bool = False


class RemindParams(JobParams):
    """``formsync campaign remind JOB [--idle 3d]``: on its schedule (say every 3 days),
    remind the outreach job's pending requests (idle for at least ``idle``)."""

    job: str = Field(min_length=1)
    idle: str | None = None
    dry_run: bool = False

    @field_validator("idle")
    @classmethod
    def _idle(cls, v: str | None) -> str | None:
        if v is not None:
            from pipelines.campaign.actions import parse_idle

            parse_idle(v)
        return v


class CloseParams(JobParams):
    """``formsync campaign close JOB [--reason R]``, from ``at`` on (a scheduled close
    needs it): a run before ``at`` does nothing; the first one after cancels every request
    still pending, later ones find none (run it on an interval, say hourly)."""

    job: str = Field(min_length=1)
    at: datetime | None = None
    reason: str | None = Field(None, min_length=1)
    dry_run: bool = False


class FilesParams(JobParams):
    """``formsync files --to LOCATION [--form F] [--concurrency N]``: archive the file
    answers not archived yet (run it after sync)."""

    to: str = Field(min_length=1)
    form: list[str] | None = None
    concurrency: int = Field(8, ge=1, le=64)


class PurgeParams(JobParams):
    """``formsync purge [--form F]``: each form's retention, read from the service in the
    run, applied to the store (run it daily)."""

    form: list[str] | None = None
    dry_run: bool = False


class ViewsParams(JobParams):
    """``formsync views [--form F]``: each form's typed view made or brought up to date,
    typed from its fields.list when a token or sign-in is there (run it after sync)."""

    form: str | None = Field(None, min_length=1)


PARAMS: dict[str, type[JobParams]] = {
    "outreach": OutreachParams, "poll": PollParams, "sync": SyncParams, "export": ExportParams, "load": LoadParams,
    "remind": RemindParams, "close": CloseParams, "files": FilesParams, "purge": PurgeParams, "views": ViewsParams}
