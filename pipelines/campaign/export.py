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
                    sheet_options: SheetOptions | None = None,
                    answer_keys: Sequence[str] | None = None) -> CampaignExportReport:
    """Write ``job``'s campaign table (see ``campaign_table``) to ``out``. The sheet is
    ``sheet``, else the file the job was sent from; a ``sheet`` that cannot be read is a
    ``SheetError`` (before anything else), the job's own file that cannot be read leaves
    its columns out and says why in the report. Its date and number columns are written
    typed, read as the job's run read them. ``answer_keys`` orders the answer columns
    (default: the form's stored field list, else the answers' own keys)."""
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
    problem = None
    try:
        read = named or load_sheet(source, sheet_options)
        columns, cells = read.columns, dict(zip(read.numbers, read.rows, strict=True))
    except (SheetError, OSError) as e:
        problem = str(e)
    keys = answer_keys if answer_keys is not None else (_field_keys(store, record.form_id) or None)
    table = campaign_table(columns, cells, rows, answers, keys, (record.settings or {}).get("typed_columns"))
    written = write_table(table, fmt, out)
    return CampaignExportReport(job=job, path=str(out), format=fmt, rows=written, columns=table.column_names,
                                sheet_problem=problem)


def _field_keys(store: Store, form_id: str) -> list[str]:
    """The form's field keys in its schema's order (the wide export's)."""
    return list(dict.fromkeys(c.field_key for c in store.schema(form_id).fields() if c.field_key is not None))
