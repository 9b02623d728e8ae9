"""Benchmark of the export pipeline against the bare writers, and its peak memory.

Run: ``.venv/bin/python bench/export.py [--rows 1000000] [--xlsx-rows 1000000]``

Fills a SQLite store in a temporary directory with completed submissions of 17 answer
rows each (12 answers: text, number, multi-choice, a three-row matrix, a two-instance
group, a file, three choices, ...) until it holds ``--rows`` answer rows, by bulk Core
inserts (then the form's field list is recorded, as ``formsync views`` does). Then,
for the long table (one row per answer) and the wide table (one row per submission):

* our export (``pipelines.export.export``: read in batches, shape, neutralise, write)
  beside the bare writer given the same final table: ``pyarrow.parquet.write_table``,
  ``pyarrow.csv.write_csv`` and xlsxwriter in ``constant_memory`` mode writing the same
  cells row by row. The bare side is charged the plain read of the same rows (one
  sqlite3 ``fetchall`` of the same query, turned into Arrow columns) plus its write; the
  shaping, the neutralising and the batching are ours. Each figure is the best of
  ``--repeat`` runs (two for XLSX), ours and bare interleaved; XLSX is measured on a
  store of ``--xlsx-rows`` answer rows when that is smaller.
* the peak resident memory (RSS high-water) of a fresh process exporting the long and
  the wide table as Parquet and CSV, for stores of 100,000, ``--rows``, twice and four
  times ``--rows`` answer rows (the last two past the batches in flight, so their
  difference is what more rows cost), and as XLSX for 100,000 and ``--xlsx-rows``.

Every export is read back and its row count checked. The last line is ``ratio <x>``:
the worst of the long table's three ratios (ours / bare) divided by its goal (Parquet
1.5, CSV 1.5, XLSX 1.3), so a value at or under 1 means every goal is met for the
million answer rows; the line before it gives the same for the wide table. The exit
status is 1 when a read-back row count is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import xlsxwriter
from sqlalchemy import insert

from connector.store import Store
from connector.store._mapping import answer_rows
from connector.store._tables import SubmissionRow
from pipelines.export.write import export, xlsx_columns

T0 = 1_780_000_000_000
ROWS_PER_SUBMISSION = 17
GOALS = {"parquet": 1.5, "csv": 1.5, "xlsx": 1.3}
# The plain reads charged to the bare writers: what the export reads, in the same order (the
# long table's rows are derived from each submission's answers and display: the store keeps
# them once, there).
RAW_SQL = {
    "long": "SELECT id, form_id, answers, display FROM formsync_submissions ORDER BY submitted_at, id",
    "wide": "SELECT s.id, s.form_id, s.request_id, r.external_id, s.submitted_at, s.updated_at, "
            "s.respondent_email, s.language, s.is_completed, s.edit_count, s.answers, s.display "
            "FROM formsync_submissions s LEFT JOIN formsync_requests r ON r.id = s.request_id "
            "ORDER BY s.submitted_at, s.id",
}
_CHOICES = [{"key": k, "label": k.upper()} for k in ("a", "b", "c")]
# The bench form's field list (fields.list), which types the wide table's columns.
FIELDS = [
    {"key": "name", "type": "text"}, {"key": "age", "type": "number"}, {"key": "note", "type": "textarea"},
    {"key": "colors", "type": "checkbox", "options": [{"key": "red", "label": "Red"}, {"key": "blue", "label": "Blue"}]},
    {"key": "grid", "type": "matrix", "rows": [{"key": k, "label": k.title()} for k in ("speed", "price", "support")]},
    {"key": "people", "type": "group", "members": [{"key": "first", "type": "text"}, {"key": "last", "type": "text"}]},
    {"key": "cv", "type": "file"}, {"key": "q1", "type": "select", "options": _CHOICES},
    {"key": "q2", "type": "select", "options": _CHOICES}, {"key": "q3", "type": "radio", "options": _CHOICES},
    {"key": "q4", "type": "number"}, {"key": "agree", "type": "switch"},
]


def answers_of(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    answers = {
        "name": f"Person {i}", "age": i % 90, "note": f"=note {i}", "colors": ["red", "blue"],
        "grid": {"speed": "good", "price": "bad", "support": "ok"},
        "people": [{"first": "Ann", "last": "Lee"}, {"first": "Bo", "last": "Ng"}],
        "cv": [{"name": f"cv{i}.pdf", "url": f"http://files.example/{i}", "size": 100, "type": "application/pdf"}],
        "q1": "a", "q2": "b", "q3": "c", "q4": 1.5, "agree": True,
    }
    display = {k: str(v) for k, v in answers.items()}
    display.update(grid="Speed: Good, Price: Bad, Support: Ok", people="Ann / Lee, Bo / Ng", cv=f"cv{i}.pdf")
    return answers, display


def build_store(path: Path, answer_rows_wanted: int) -> tuple[int, int]:
    """A store at ``path`` with ``ceil(answer_rows_wanted / 17)`` submissions, inserted in
    bulk with Core ``executemany``. Returns (submissions, answer rows)."""
    store = Store(f"sqlite:///{path}")
    store.migrate()
    n = -(-answer_rows_wanted // ROWS_PER_SUBMISSION)
    answers_total = 0
    with store.database.engine.begin() as conn:
        for start in range(0, n, 5000):
            subs, rows = [], []
            for i in range(start, min(start + 5000, n)):
                answers, display = answers_of(i)
                sid, at = f"sub_{i:08d}", T0 + i * 1000
                subs.append({"id": sid, "form_id": "form_bench", "form_name": "Bench", "submitted_at": at,
                             "updated_at": None, "edit_count": 0, "is_completed": True, "answers": answers,
                             "display": display, "source": "sync", "observed_at": at, "stored_at": at})
                rows += answer_rows(sid, answers, display)
            conn.execute(insert(SubmissionRow.__table__), subs)  # type: ignore[attr-defined]
            answers_total += len(rows)
    # The form's field list, as fields.list gives it (formsync views), types the wide table.
    store.record_fields("form_bench", FIELDS)
    store.close()
    return n, answers_total


def machine_load() -> str:
    """The machine's load, as ``uptime`` shows it: the measures are side by side, but a busy
    machine makes them noisier."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _raw_fetch(db: Path, table: str) -> float:
    """Seconds to read the table's rows with one plain sqlite3 query into Arrow columns."""
    def work() -> None:
        conn = sqlite3.connect(db)
        try:
            rows = conn.execute(RAW_SQL[table]).fetchall()
            pa.table({str(i): pa.array(c) for i, c in enumerate(zip(*rows, strict=True))})
        finally:
            conn.close()
    return _timed(work)


def _bare_xlsx(cells: list[tuple[Any, ...]], header: list[str], out: Path) -> None:
    book = xlsxwriter.Workbook(str(out), {"constant_memory": True, "strings_to_formulas": False,
                                          "strings_to_urls": False, "strings_to_numbers": False})
    ws = book.add_worksheet("sheet")
    ws.write_row(0, 0, header)
    for r, row in enumerate(cells, start=1):
        ws.write_row(r, 0, row)
    book.close()


def _bare_write(fmt: str, final: pa.Table, out: Path) -> float:
    """Seconds the bare writer takes to write ``final`` as ``fmt``."""
    if fmt == "parquet":
        return _timed(lambda: pq.write_table(final, out))
    if fmt == "csv":
        return _timed(lambda: pacsv.write_csv(final, out))
    # the very cells our XLSX holds (times as serial day numbers), prepared untimed
    cells = list(zip(*xlsx_columns(final.combine_chunks().to_batches()[0]), strict=True))
    return _timed(lambda: _bare_xlsx(cells, final.column_names, out))


def _rows_back(fmt: str, path: Path, table: str) -> int:
    if fmt == "parquet":
        return pq.read_metadata(path).num_rows
    if fmt == "csv":
        return pacsv.read_csv(path).num_rows
    from openpyxl import load_workbook
    wb = load_workbook(path, read_only=True)
    try:
        return sum(1 for _ in wb[table].iter_rows(min_row=2, values_only=True))
    finally:
        wb.close()


def compare(db: Path, work: Path, table: str, formats: list[str], repeat: int) -> tuple[dict[str, float], bool]:
    """Ours beside the bare writer for each format: prints a line each, returns the ratios
    and whether every read-back row count matched."""
    store = Store(f"sqlite:///{db}")
    ratios: dict[str, float] = {}
    ok = True
    for fmt in formats:
        out = work / f"{table}.{fmt}"
        bare_out = work / f"bare-{table}.{fmt}"
        fetches, ours_runs, writes = [], [], []
        for _ in range(min(repeat, 2) if fmt == "xlsx" else repeat):
            # interleaved, so a burst of load on the shared machine hits both sides alike
            fetches.append(_raw_fetch(db, table))
            ours_runs.append(_timed(lambda o=out, f=fmt: export(store, f, o, table=table)))  # type: ignore[misc]
            # the bare writer is given our very cells: the Parquet table (XLSX cells are made
            # from it untimed), or the CSV read back (a CSV holds lists and records as text)
            final = pacsv.read_csv(out) if fmt == "csv" else \
                pq.read_table(out if fmt == "parquet" else work / f"{table}.parquet")
            writes.append(_bare_write(fmt, final, bare_out))
        rows = _rows_back(fmt, out, table)
        ok &= rows == final.num_rows
        fetch, ours, write = min(fetches), min(ours_runs), min(writes)
        bare = fetch + write
        ratios[fmt] = ours / bare
        print(f"{table:5} {fmt:8} {final.num_rows:>9,} rows  ours {ours:7.2f} s  bare {bare:7.2f} s "
              f"(read {fetch:.2f} + write {write:.2f})  ratio {ratios[fmt]:.2f}  goal <= {GOALS[fmt]}"
              f"{'' if rows == final.num_rows else f'  READ BACK {rows} ROWS'}", flush=True)
    store.close()
    return ratios, ok


def hwm_kib() -> int:
    # VmHWM, not ru_maxrss: ru_maxrss survives fork and exec, so a child would report its parent's peak.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def memory_child(db: Path, work: Path, formats: list[str]) -> None:
    """Run in a fresh process: export the long and the wide table in ``formats``, then
    print the RSS high-water in MiB (after imports, and at the end) as JSON."""
    store = Store(f"sqlite:///{db}")
    before = hwm_kib()
    for fmt in formats:
        for table in ("long", "wide"):
            export(store, fmt, work / f"mem-{table}.{fmt}", table=table)  # type: ignore[arg-type]
    store.close()
    peak = hwm_kib()
    print(json.dumps({"before_mib": before / 1024, "peak_mib": peak / 1024}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="answer rows in the store")
    parser.add_argument("--xlsx-rows", type=int, default=200_000,
                        help="answer rows of the XLSX comparison (xlsxwriter writes ~10^5 cells/s)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each Parquet and CSV figure (best kept)")
    parser.add_argument("--memory-child", nargs=3, metavar=("DB", "DIR", "FORMATS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(Path(args.memory_child[0]), Path(args.memory_child[1]), args.memory_child[2].split(","))
        return 0
    print(f"load average (1, 5, 15 min) at the start: {machine_load()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="formsync-export-bench-"))
    # Memory is also measured at twice and four times the rows: once the batches in flight are
    # full (the wide table's reach two row groups of CHUNK_ROWS submissions), it must not grow.
    big = [2 * args.rows, 4 * args.rows]
    sizes = sorted({100_000, args.rows, *big, min(args.xlsx_rows, args.rows)})
    dbs: dict[int, Path] = {}
    for size in sizes:
        dbs[size] = work / f"store-{size}.db"
        started = time.perf_counter()
        subs, rows = build_store(dbs[size], size)
        print(f"store: {subs:,} submissions, {rows:,} answer rows, filled in {time.perf_counter() - started:.1f} s",
              flush=True)
    ok = True
    worst: dict[str, float] = {}
    for table in ("long", "wide"):
        ratios, good = compare(dbs[args.rows], work, table, ["parquet", "csv"], args.repeat)
        ok &= good
        if args.xlsx_rows >= args.rows:
            more, good = compare(dbs[args.rows], work, table, ["xlsx"], 1)
        else:
            (work / "x").mkdir(exist_ok=True)  # the smaller store's final table, for the bare side
            small = Store(f"sqlite:///{dbs[args.xlsx_rows]}")
            export(small, "parquet", work / "x" / f"{table}.parquet", table=table)  # type: ignore[arg-type]
            small.close()
            more, good = compare(dbs[args.xlsx_rows], work / "x", table, ["xlsx"], 1)
        ok &= good
        for fmt, r in {**ratios, **more}.items():
            worst[f"{table} {fmt}"] = r / GOALS[fmt]
    runs = [(size, "parquet,csv") for size in sorted({100_000, args.rows, *big})]
    runs += [(size, "xlsx") for size in sorted({100_000, min(args.xlsx_rows, args.rows)})]
    peaks: dict[int, float] = {}
    for size, formats in runs:
        child = subprocess.run([sys.executable, __file__, "--memory-child", str(dbs[size]), str(work), formats],
                               capture_output=True, text=True, timeout=1800, check=True)
        mem = json.loads(child.stdout.strip().splitlines()[-1])
        if formats == "parquet,csv":
            peaks[size] = mem["peak_mib"]
        print(f"peak memory, {size:>9,} answer rows, long and wide as {formats}: {mem['peak_mib']:.0f} MiB "
              f"(after imports {mem['before_mib']:.0f} MiB)", flush=True)
    print(f"peak memory from {big[0]:,} to {big[1]:,} answer rows: {peaks[big[1]] - peaks[big[0]]:+.0f} MiB",
          flush=True)
    shutil.rmtree(work, ignore_errors=True)
    for table in ("wide", "long"):
        name, value = max(((k, v) for k, v in worst.items() if k.startswith(table)), key=lambda kv: kv[1])
        print(f"{table} table: worst ratio over its goal {value:.2f} ({name})")
    print(f"load average (1, 5, 15 min) at the end: {machine_load()}")
    # The goals name the million answer rows: the long table's three ratios make the figure.
    print(f"ratio {value:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
