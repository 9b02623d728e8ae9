"""Reading an outreach sheet: the rows of a CSV or XLSX file as text cells. Encodings,
delimiters, sheet choice and header detection belong here."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

CSV_SUFFIXES = (".csv",)
EXCEL_SUFFIXES = (".xlsx", ".xlsm")
SHEET_SUFFIXES = CSV_SUFFIXES + EXCEL_SUFFIXES


def read_sheet(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV or XLSX file (first sheet), every cell as a string ('' when
    empty), column names stripped. Any other extension is a ``ValueError``."""
    suffix = path.suffix.lower()
    if suffix in CSV_SUFFIXES:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    elif suffix in EXCEL_SUFFIXES:
        df = pd.read_excel(path, dtype=str, keep_default_na=False, engine="openpyxl")
    else:
        raise ValueError(f"{path}: unsupported sheet type {suffix!r}; use .csv or .xlsx")
    return [{str(k).strip(): ("" if v is None else str(v)) for k, v in rec.items()}
            for rec in df.to_dict(orient="records")]
