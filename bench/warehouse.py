"""Benchmark of ``formsync load`` against a user's own dlt pipeline, and of an incremental
export against a whole export of a small store.

Run: ``.venv/bin/python bench/warehouse.py [--rows 1000000] [--new 1000] [--repeat 2] [--only load|delta|since_last]``

Fills a SQLite store as ``bench/export.py`` does (submissions of 17 answer rows each,
the form's field list recorded) until it holds ``--rows`` answer rows. Then:

* **load**: ``pipelines.export.load.load`` into a fresh ``formsync.duckdb`` beside the bare
  path, what a user writes instead. Both are timed from the first read of the store to
  the last row loaded, best of ``--repeat`` runs each, interleaved, with the same dlt
  settings (``dlt_settings``) and the same loader file format (``loader_format``:
  Parquet on DuckDB), each into a fresh DuckDB file. Goal: ours <= 1.3 x bare.

  - *ours* pays for everything ``formsync load`` does: the deletion log and the cursors
    read, the store read in batches with its own statements, the answer documents
    shaped into the form's wide table and the long answers table (Arrow), the nested
    columns as JSON text and the deletion flag, a dlt pipeline (its state restored from
    the destination) extracting the parts of ``PART_BYTES`` as load packages, each one
    normalised and loaded before the next is read (the form's table merged on ``submission_id``, the long
    table delete-insert per submission, requests merged on ``request_id``, the campaign
    rows replaced), and the cursors moved on; its DuckDB's memory capped at
    ``DUCKDB_MEMORY`` (what the load does on its default destination).
  - *bare* is a user's own dlt pipeline fed the same rows: the statements ``load`` reads
    the store's rows with (captured with sqlite3's trace from one read of the load's
    source before timing) run with plain sqlite3 and fetched, charged to it; then one
    ``pipeline.run`` of a resource per table the load sends (the form's table, answers,
    requests, campaign rows), each handed its rows as one Arrow table (the campaign rows
    as dicts) made before timing from the load's own source, with the load's write
    dispositions, keys and column hints (``WarehouseSource.hints``). It does not pay for
    turning the documents into those tables, which is ours; its DuckDB keeps its own
    memory setting.

  The peak resident memory of a fresh process loading ``--rows``, twice and four times
  ``--rows`` answer rows say whether memory grows with the rows: it stays flat past a
  part (the load hands dlt parts of ``PART_BYTES``, each loaded before the next is read),
  so the figure compares twice and four times ``--rows``, both past a part at the default
  1,000,000. A load of one part peaks lower: nothing is read ahead while it loads.
* **delta**: the same rows loaded as Delta tables (``load(store, destination="filesystem",
  table_format="delta")``, into ``formsync-delta/`` beside the store, removed with dlt's
  folder before each run) beside a user's own dlt pipeline on the filesystem destination
  writing the same resources with ``table_format="delta"`` into a fresh folder, fed as
  for **load** (the Delta source's batches: times as text, answers appended). A first
  load each: our delete of the parts' answers finds no table yet, as the bare one does
  none. Goal: ours <= 1.3 x bare; the peak memory at ``--rows``, twice and four times as
  for **load**.
* **export --since-last**: on the store of ``--rows`` answer rows, a cursor at its end,
  then ``--new`` new answer rows stored through the store's own writes; the incremental
  export of the long table (Parquet) beside a whole export of a store holding ``--new``
  answer rows. Goal: <= 1.2.

Each line is a figure; every figure comes with the machine's load (``uptime``). The last
line is ``ratio <x>``: the worst of the two ratios divided by its goal (<= 1: both met);
with ``--only``, the one measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from sqlalchemy import event

from connector.store import Store
from pipelines.export.load import (
    DEFAULT_DATASET,
    TableFormat,
    cursor_name,
    delta_target,
    dlt_settings,
    load,
    loader_format,
    read_deletions,
    warehouse_source,
)
from pipelines.export.write import export

sys.path.insert(0, str(Path(__file__).parent))
from export import ROWS_PER_SUBMISSION, answers_of, build_store, hwm_kib, machine_load  # noqa: E402

GOALS = {"load": 1.3, "delta": 1.3, "since_last": 1.2}
FORM = "form_bench"
LOAD_CURSOR = cursor_name("duckdb", DEFAULT_DATASET)
DELTA: TableFormat = "delta"


def _best(runs: list[float]) -> float:
    return min(runs)


def _timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


# The statements that read rows (not the cursors, field lists and probes a load also makes).
_ROW_READ = re.compile(r"^\s*SELECT (?!max\(|count\(|EXISTS|formsync_export_cursors).*\bFROM\s+formsync_(submissions|requests|outreach_\w+|deletions)\b"
                       r"(?!.*LIMIT 1 OFFSET)", re.S | re.I)
Fed = dict[str, tuple[list[Any], dict[str, Any]]]


def what_load_sends(db: Path, table_format: TableFormat | None = None) -> tuple[list[str], Fed]:
    """What a user's pipeline is fed, made before timing from one read of the load's own
    source (of Delta tables with ``table_format``): the statements it reads the store's
    rows with (sqlite3's trace), and per table the items it hands dlt (Arrow batches; the
    campaign rows as dicts) with the hints it gives them (write disposition, keys, column
    hints; the table format)."""
    store = Store(f"sqlite:///{db}")
    statements: list[str] = []

    @event.listens_for(store.database.engine, "connect")
    def trace(dbapi: sqlite3.Connection, _: Any) -> None:
        dbapi.set_trace_callback(lambda sql: statements.append(sql) if _ROW_READ.match(sql) else None)

    store.database.engine.dispose()
    try:
        store.export_cursors.reset(LOAD_CURSOR)  # as before each of our loads: everything is sent
        deletions = read_deletions(store, LOAD_CURSOR)
        with store.exports.snapshot():
            made = warehouse_source(store, LOAD_CURSOR, deletions=deletions, table_format=table_format)
            formats = {} if table_format is None else {"table_format": table_format}
            fed = {name: (list(res), {**made.hints[name], **formats}) for name, res in made.source.resources.items()}
    finally:
        store.close()
    return statements, fed


def _store_read(db: Path, statements: list[str]) -> None:
    conn = sqlite3.connect(db)
    try:
        for sql in statements:
            conn.execute(sql).fetchall()
    finally:
        conn.close()


def bare_load(db: Path, statements: list[str], fed: Fed, out: Path, table_format: TableFormat | None = None) -> float:
    """A user's own dlt pipeline: the store read with the load's statements (plain
    sqlite3), then one ``pipeline.run`` of a resource per table, each given its rows as
    one Arrow table (a list of dicts for the campaign rows) and the load's hints; into
    the DuckDB file ``out``, or with ``table_format`` into Delta tables in the folder ``out``."""
    import dlt

    def work() -> None:
        _store_read(db, statements)
        destination = (dlt.destinations.duckdb(str(out)) if table_format is None
                       else dlt.destinations.filesystem(bucket_url=out.as_uri()))
        pipeline = dlt.pipeline(pipeline_name="bare", pipelines_dir=str(out.parent / "bare-dlt"),
                                destination=destination, dataset_name=DEFAULT_DATASET)
        pipeline.run([dlt.resource(iter([pa.Table.from_batches(items)] if items and isinstance(items[0], pa.RecordBatch)
                                        else items), name=name, **hints) for name, (items, hints) in fed.items()],
                     loader_file_format=loader_format(pipeline))

    with dlt_settings(out.parent / "bare-dlt"):
        return _timed(work)


def our_load(store: Store, work: Path) -> float:
    os.chdir(work)
    return _timed(lambda: load(store))


def memory_child(db: Path, work: Path, table_format: TableFormat | None = None) -> None:
    """Run in a fresh process: one load (of Delta tables with ``table_format``), then the
    RSS high-water in MiB as JSON."""
    os.chdir(work)
    store = Store(f"sqlite:///{db}")
    before = hwm_kib()
    load(store, destination=None if table_format is None else "filesystem", table_format=table_format)
    print(json.dumps({"before_mib": before / 1024, "peak_mib": hwm_kib() / 1024}))


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for p in path.iterdir():
        if p.is_file():
            p.unlink()
        else:
            subprocess.run(["rm", "-rf", str(p)], check=True)
    return path


def _items(start: int, n: int) -> Iterator[dict[str, Any]]:
    for i in range(start, start + n):
        answers, display = answers_of(i)
        yield {"id": f"sub_new_{i:08d}", "submittedAt": "2026-05-01 10:00:00", "createdAt": "2026-05-01 09:59:00",
               "isCompleted": True, "answers": answers, "display": display}


def bench_since_last(tmp: Path, rows: int, new: int, repeat: int) -> tuple[float, float]:
    """Seconds of the incremental export of ``new`` answer rows on a store of ``rows`` (its
    cursor written back before each run, so each one exports the same new rows and moves
    the cursor), and of a whole export of a store of ``new`` answer rows; best of
    ``repeat`` * 10 runs each, interleaved."""
    big, small = tmp / "big.db", tmp / "small.db"
    build_store(big, rows)
    build_store(small, new)
    store, little = Store(f"sqlite:///{big}"), Store(f"sqlite:///{small}")
    export(store, "parquet", tmp / "skip.parquet", table="long", since_last="bench")  # the cursor at the end
    before = store.export_cursors.list("bench")
    store.upsert_submissions(list(_items(10_000_000, -(-new // ROWS_PER_SUBMISSION))), FORM)
    ours, whole = [], []
    for _ in range(10 * repeat):  # a run takes milliseconds: the best of many is steady
        store.export_cursors.advance(before)
        (tmp / "new.parquet").unlink(missing_ok=True)  # an incremental export never replaces a file
        ours.append(_timed(lambda: export(store, "parquet", tmp / "new.parquet", table="long", since_last="bench")))
        whole.append(_timed(lambda: export(little, "parquet", tmp / "all.parquet", table="long")))
    store.close()
    little.close()
    return _best(ours), _best(whole)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--new", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", choices=sorted(GOALS), help="measure this one only")
    parser.add_argument("--memory-child", nargs="+", metavar="DB WORK [FORMAT]", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(Path(args.memory_child[0]), Path(args.memory_child[1]), *args.memory_child[2:])
        return 0
    import dlt  # noqa: F401  # imported before either side is timed: neither pays for it

    with tempfile.TemporaryDirectory(prefix="formsync-bench-warehouse-") as name:
        tmp = Path(name)
        worst = [bench_load(tmp, args)] if args.only in (None, "load") else []
        if args.only in (None, "delta"):
            worst.append(bench_delta(tmp, args))
        if args.only in (None, "since_last"):
            inc, whole = bench_since_last(tmp, args.rows, args.new, args.repeat)
            since_ratio = inc / whole
            print(f"export --since-last of {args.new:,} new answer rows on a store of {args.rows:,}: "
                  f"{inc * 1000:.2f} ms; a store of {args.new:,} whole: {whole * 1000:.2f} ms; ratio {since_ratio:.2f} "
                  f"(goal {GOALS['since_last']}) (load {machine_load()})")
            worst.append(since_ratio / GOALS["since_last"])
    print(f"ratio {max(worst):.2f}")
    return 0


def bench_load(tmp: Path, args: argparse.Namespace) -> float:
    """The load beside the bare path, and its peak memory at ``--rows`` and twice that;
    the load's ratio divided by its goal."""
    db = tmp / "store.db"
    subs, answers = build_store(db, args.rows)
    print(f"store: {subs:,} submissions, {answers:,} answer rows (load {machine_load()})")
    statements, fed = what_load_sends(db)
    store = Store(f"sqlite:///{db}")
    ours, bare = [], []
    for r in range(args.repeat):
        store.export_cursors.reset(LOAD_CURSOR)
        ours.append(our_load(store, _fresh(tmp / f"ours{r}")))
        bare.append(bare_load(db, statements, fed, _fresh(tmp / f"bare{r}") / "bare.duckdb"))
    store.close()
    load_ratio = _best(ours) / _best(bare)
    print(f"load {answers:,} answer rows into DuckDB: ours {_best(ours):.2f} s, bare dlt {_best(bare):.2f} s, "
          f"ratio {load_ratio:.2f} (goal {GOALS['load']}) (load {machine_load()})")

    _memory(tmp, args.rows)
    return load_ratio / GOALS["load"]


def _memory(tmp: Path, rows: int, table_format: TableFormat | None = None) -> None:
    """The peak memory of a fresh process loading ``rows``, twice and four times ``rows``
    answer rows (into Delta tables with ``table_format``)."""
    peaks = []
    sizes = (rows, 2 * rows, 4 * rows)
    what = "load" if table_format is None else "Delta load"
    for size in sizes:
        mdb = _fresh(tmp / "mem") / "store.db"  # the Delta folder and dlt's beside it: fresh each time
        build_store(mdb, size)
        out = subprocess.run([sys.executable, __file__, "--memory-child", str(mdb), str(mdb.parent),
                              *([table_format] if table_format else [])], capture_output=True, text=True, check=True)
        mdb.unlink()
        peaks.append(json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"])
        print(f"memory: {what} of {size:,} answer rows peaks at {peaks[-1]:.0f} MiB (load {machine_load()})")
    print(f"memory from {sizes[1]:,} to {sizes[2]:,} answer rows ({what}, parts of PART_BYTES each): "
          f"{peaks[2] - peaks[1]:+.0f} MiB ({(peaks[2] / peaks[1] - 1) * 100:+.1f} %; flat: within a few percent)")


def bench_delta(tmp: Path, args: argparse.Namespace) -> float:
    """The load into Delta tables (``--destination filesystem --table-format delta``, a
    fresh folder each run) beside a user's own dlt pipeline writing the same rows as Delta
    tables, and its peak memory at ``--rows``, twice and four times that; the ratio
    divided by its goal."""
    db = _fresh(tmp / "delta") / "store.db"
    subs, answers = build_store(db, args.rows)
    print(f"store: {subs:,} submissions, {answers:,} answer rows (load {machine_load()})")
    statements, fed = what_load_sends(db, DELTA)
    store = Store(f"sqlite:///{db}")
    with dlt_settings(db.parent / "formsync-dlt"):
        name = cursor_name(delta_target(store, "filesystem").name, DEFAULT_DATASET)
    ours, bare = [], []
    for r in range(args.repeat):
        store.export_cursors.reset(name)
        for left in ("formsync-delta", "formsync-dlt"):  # a first load each time, as the bare one's
            subprocess.run(["rm", "-rf", str(db.parent / left)], check=True)
        ours.append(_timed(lambda: load(store, destination="filesystem", table_format=DELTA)))
        bare.append(bare_load(db, statements, fed, _fresh(tmp / f"bare-delta{r}") / "lake", DELTA))
    store.close()
    ratio = _best(ours) / _best(bare)
    print(f"load {answers:,} answer rows into Delta tables: ours {_best(ours):.2f} s, bare dlt {_best(bare):.2f} s, "
          f"ratio {ratio:.2f} (goal {GOALS['delta']}) (load {machine_load()})")
    _memory(tmp, args.rows, DELTA)
    return ratio / GOALS["delta"]


if __name__ == "__main__":
    sys.exit(main())
