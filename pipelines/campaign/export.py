"""``formsync campaign export``: the campaign table of a job written to a file, the sheet
read again from where the job was sent from (rows matched by their sheet row number)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from connector.store import Store

from ..outreach.sheet import SheetError, SheetOptions, load_sheet
from .actions import UnknownJob
from .table import campaign_table, write_table


class CampaignExportReport(BaseModel):
    """What a campaign export wrote: the file, its rows and columns, and the sheet's
    problem when it could not be read again (its columns are then left out)."""

    job: str
    path: str
    format: str
    rows: int
    columns: list[str]
    sheet_problem: str | None = None


def export_campaign(store: Store, job: str, fmt: str, out: Path, *, sheet: Path | None = None,
                    sheet_options: SheetOptions | None = None) -> CampaignExportReport:
    """Write ``job``'s campaign table (see ``campaign_table``) to ``out``. The sheet is
    ``sheet``, else the file the job was sent from; a ``sheet`` that cannot be read is a
    ``SheetError`` (before anything else), the job's own file that cannot be read leaves
    its columns out and says why in the report. Its date and number columns are written
    typed: those the job's run read as a date or number field's values as the run read
    them, and a workbook's columns of date or number cells (whatever they were mapped to).
    The answers are the form's columns (``store.schema``), typed as ``formsync export``
    types them; a form with no stored field list has one text column per answered key."""
    named = None
    if sheet is not None:  # named explicitly: one that cannot be read is a mistake to fix, said first
        try:
            named = load_sheet(sheet, sheet_options)
        except (SheetError, OSError) as e:
            raise SheetError(f"--sheet: {e}") from None
    record = store.campaign.job(job)
    if record is None:
        raise UnknownJob(job)
    source = sheet or Path(record.source_path)
    if out.resolve() == source.resolve():
        raise ValueError(f"{out} is the job's own sheet; write the export to another file")
    rows = store.campaign.rows(job)
    answers = store.campaign.answers([r.request_id for r in rows if r.request_id])
    columns: list[str] = []
    cells: dict[int, dict[str, str]] = {}
    types: dict[str, Sequence[str | None]] = {}
    problem = None
    try:
        read = named or load_sheet(source, sheet_options)
        columns, cells = read.columns, _not_erased(store, dict(zip(read.numbers, read.rows, strict=True)))
        types = {c: (kind, None) for c, kind in read.kinds.items()}  # a workbook's own dates and numbers: ISO text
    except (SheetError, OSError) as e:
        problem = str(e)
    types.update((record.settings or {}).get("typed_columns") or {})  # as the run read them
    answer_columns = store.schema(record.form_id).fields() or None
    table = campaign_table(columns, cells, rows, answers, answer_columns, types)
    written = write_table(table, fmt, out)
    return CampaignExportReport(job=job, path=str(out), format=fmt, rows=written, columns=table.column_names,
                                sheet_problem=problem)


def _not_erased(store: Store, cells: dict[int, dict[str, str]]) -> dict[int, dict[str, str]]:
    """The sheet's rows but those of a person erased since (``formsync erase``): the sheet
    is the user's file, but no export of formsync's brings the person back."""
    blocked = store.campaign.suppressed()
    if not blocked.erased:
        return cells
    return {n: row for n, row in cells.items()
            if not any(blocked.was_erased(v.strip().lower()) for v in row.values() if "@" in v)}
