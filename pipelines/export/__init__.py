"""The export journey: the store's tables as files, frames, typed views and a warehouse.

``write.py`` (CSV, XLSX and Parquet; ``--since-last``, ``--out``'s placeholders) reads
the store through the data contract's mappers (``columns.py``) and the JSON shaping
(``wide_json.py``, ``long_json.py``, ``json_text.py``); ``frames.py`` gives pandas
DataFrames of the same batches, ``views.py`` each form's typed SQL view and ``load.py``
the store into a warehouse through dlt. ``pipelines.export.export`` is the export
function, imported on first use like the package's other names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connector._lazy import lazy_exports

if TYPE_CHECKING:
    from .write import ExportReport as ExportReport
    from .write import export as export
    from .write import export_files as export_files
    from .write import table_batches as table_batches

_SOURCES: dict[str, str] = {
    "ExportReport": "write", "export": "write", "export_files": "write", "table_batches": "write",
}

__all__ = ["ExportReport", "export", "export_files", "table_batches"]

__getattr__, __dir__ = lazy_exports(__name__, _SOURCES, globals())
