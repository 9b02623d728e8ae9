"""Benchmark of the export pipeline: rows per second for each table and format.

Run: ``/work/venv/bin/python bench/export.py [--submissions 20000]``

Fills a SQLite store in a temporary directory with ``--submissions`` completed
submissions (12 answers each: text, number, multi-choice, a three-row matrix, a two-
instance group, a file), then exports the wide and long tables as CSV, XLSX and Parquet
and prints, for each, the rows written, the seconds taken and rows/s. Every export is
read back and its row count checked; the exit status is 1 when one is wrong.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from connector.models import Event
from connector.store import Store
from pipelines.export import export

T0 = 1_780_000_000_000


def _event(i: int) -> Event:
    at = T0 + i * 1000
    answers = {
        "name": f"Person {i}", "age": i % 90, "note": f"=note {i}", "colors": ["red", "blue"],
        "grid": {"speed": "good", "price": "bad", "support": "ok"},
        "people": [{"first": "Ann", "last": "Lee"}, {"first": "Bo", "last": "Ng"}],
        "cv": [{"name": f"cv{i}.pdf", "url": f"http://files.example/{i}", "size": 100, "type": "application/pdf"}],
        "q1": "a", "q2": "b", "q3": "c", "q4": 1.5, "agree": True,
    }
    display = {k: str(v) for k, v in answers.items()}
    display.update(grid="Speed: Good, Price: Bad, Support: Ok", people="Ann / Lee, Bo / Ng", cv=f"cv{i}.pdf")
    stamp = datetime.fromtimestamp(at / 1000, tz=UTC).isoformat()
    return Event.model_validate({
        "id": f"evt_{i}", "type": "submission.completed", "createdAt": stamp,
        "data": {"form": {"id": "form_bench", "name": "Bench"},
                 "submission": {"id": f"sub_{i:08d}", "submittedAt": stamp},
                 "answers": answers, "display": display}})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=20_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="formsync-export-bench-"))
    store = Store(f"sqlite:///{work / 'store.db'}")
    store.migrate()
    started = time.perf_counter()
    for start in range(0, args.submissions, 1000):
        store.store_events([_event(i) for i in range(start, min(start + 1000, args.submissions))])
    print(f"filled {args.submissions} submissions in {time.perf_counter() - started:.1f} s")
    failed = False
    for table in ("wide", "long"):
        for fmt in ("csv", "parquet", "xlsx"):
            out = work / f"{table}.{fmt}"
            started = time.perf_counter()
            report = export(store, fmt, out, table=table)  # type: ignore[arg-type]
            took = time.perf_counter() - started
            rows = report.rows[table]
            back = {"csv": lambda p: len(pd.read_csv(p)), "parquet": lambda p: len(pd.read_parquet(p)),
                    "xlsx": lambda p, t=table: len(pd.read_excel(p, sheet_name=t))}[fmt](out)
            ok = back == rows
            failed |= not ok
            print(f"{table:5} {fmt:8} {rows:>9} rows {took:7.2f} s {rows / took:>10.0f} rows/s"
                  f"{'' if ok else f'  READ BACK {back} ROWS'}")
    store.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
