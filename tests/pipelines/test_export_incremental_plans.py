"""An incremental export (``--since-last``) costs what its new rows cost, not what the
store holds: every statement it runs reads the submissions and requests through an
index (the query plans of SQLite and PostgreSQL, asked with EXPLAIN for the very
statements run, with their parameters), and on SQLite the work the database does for
the same new rows is the same on a store ten times larger (counted in virtual-machine
steps), while a whole export's grows with the store."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, insert

from connector.store import Store
from connector.store._tables import RequestRow, SubmissionRow
from pipelines.export import export
from tests.connector.conftest import PG_HOST, PG_PORT, PG_USER, db_url, migrated_db_url, mysql_database  # noqa: F401  (fixtures)
from tests.items import list_item

FORMS = ("form_a", "form_b")
FIELDS = [{"key": "q", "type": "text", "title": "Q"}, {"key": "n", "type": "number", "title": "N"}]
NEW = 20  # submissions stored after the cursor
# (table, form): each export the tests run, twice under one name
EXPORTS: list[tuple[str, str | None]] = [("long", None), ("long", "form_a"), ("wide", None), ("wide", "form_b"),
                                         ("requests", None), ("requests", "form_a")]


def fill(store: Store, submissions: int) -> None:
    """``submissions`` stored rows over two forms, and a request for every tenth, inserted
    in bulk (as rows stored before the arrival order: place 0); the forms' field lists."""
    store.migrate()
    subs, reqs = [], []
    for i in range(submissions):
        form = FORMS[i % 2]
        answers = {"q": f"answer {i}", "n": i}
        subs.append({"id": f"sub_{i:06d}", "form_id": form, "form_name": form.upper(), "submitted_at": i,
                     "edit_count": 0, "is_completed": True, "answers": answers, "display": {"q": answers["q"]},
                     "source": "sync", "observed_at": i, "stored_at": i})
        if i % 10 == 0:
            reqs.append({"id": f"req_{i:06d}", "form_id": form, "status": "pending", "created_at": i,
                         "updated_at": i, "source": "poll", "stored_at": i})
    with store.database.engine.begin() as conn:
        conn.execute(insert(SubmissionRow.__table__), subs)  # type: ignore[attr-defined]
        conn.execute(insert(RequestRow.__table__), reqs)  # type: ignore[attr-defined]
    for form in FORMS:
        store.record_fields(form, FIELDS)


def add_new(store: Store) -> None:
    """``NEW`` submissions stored through the store's own writes (each takes its place)."""
    for form in FORMS:
        store.upsert_submissions([list_item(f"sub_new_{form}_{i}", {"q": f"new {i}", "n": i})
                                  for i in range(NEW // 2)], form, form.upper())


def export_all(store: Store, out: Path, name: str | None) -> None:
    for table, form in EXPORTS:
        numbered = "-{run}" if name else ""  # an incremental export never replaces a file
        export(store, "parquet", out / f"{table}-{form}{numbered}.parquet", table=table,  # type: ignore[arg-type]
               form_id=form, since_last=name)


class _Recording:
    """A DB-API cursor that notes each statement it runs, then runs it."""

    def __init__(self, cursor: Any, seen: list[tuple[str, Any]]) -> None:
        self._cursor, self._seen = cursor, seen

    def execute(self, sql: str, params: Any = None) -> Any:
        self._seen.append((sql, params))
        return self._cursor.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@contextmanager
def statements(store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """Every statement (text, parameters) run on the store inside the block: those
    SQLAlchemy runs, and the exports' streamed reads (run on a cursor of their own)."""
    seen: list[tuple[str, Any]] = []
    writer = store.database.writer
    streamed = writer.stream_cursor

    def recording(dbapi_conn: Any, name: str) -> _Recording:
        return _Recording(streamed(dbapi_conn, name), seen)

    def noted(_conn: Any, _cursor: Any, sql: str, params: Any, _context: Any, _many: bool) -> None:
        seen.append((sql, params))

    monkeypatch.setattr(writer, "stream_cursor", recording)
    event.listen(store.database.engine, "before_cursor_execute", noted)
    try:
        yield seen
    finally:
        event.remove(store.database.engine, "before_cursor_execute", noted)


_STORE_TABLES = re.compile(r"\bformsync_(submissions|requests)\b")


def _reads_rows(sql: str) -> bool:
    """A read of the submissions or requests, other than the snapshot's opening read of
    one row (a limit, in no order and with no condition: it stops at the first row)."""
    text = " ".join(sql.split()).upper()
    if not text.startswith(("SELECT", "WITH")) or not _STORE_TABLES.search(sql):
        return False
    return not (" LIMIT " in text and " WHERE " not in text and " ORDER BY " not in text)


def _after_place(sql: str) -> bool:
    """Whether the statement reads the rows placed after a cursor."""
    return re.search(r"\barrival\s*>", sql) is not None


def _one_of_a_sort(sql: str) -> bool:
    """Whether the statement takes the first rows in an order (a sort of every row
    before the limit would read them all)."""
    text = " ".join(sql.split()).upper()
    return " LIMIT " in text and " ORDER BY " in text


def _sqlite_full_reads(db: Path, sql: str, params: Any) -> list[str]:
    """What SQLite's plan reads beyond the rows wanted: a scan of a table or of a whole
    index (the recursive CTE's own rows are no table), no search seeking the places
    after the cursor, a sort before a limit."""
    conn = sqlite3.connect(db)
    try:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params or ())]
    finally:
        conn.close()
    found = [p for p in plan if p.startswith("SCAN ") and not p.startswith("SCAN answered")]
    if _after_place(sql) and not any(p.startswith("SEARCH ") and "arrival>" in p for p in plan):
        found.append("no search of the places after the cursor")
    if _one_of_a_sort(sql):
        found += [p for p in plan if "TEMP B-TREE FOR ORDER BY" in p]
    return found


def _pg_full_reads(dbname: str, sql: str, params: Any) -> list[str]:
    """What PostgreSQL's plan reads beyond the rows wanted: a sequential scan of the
    submissions or requests, no index condition on the place after the cursor, a sort
    before a limit."""
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=dbname) as conn:
        [(plan,)] = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchall()  # type: ignore[arg-type]
    nodes: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        nodes.append(node)
        for child in node.get("Plans", []):
            walk(child)

    walk((plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"])
    found = [f"Seq Scan on {n.get('Relation Name')}" for n in nodes  # (the cursors' own small table may be)
             if n.get("Node Type") == "Seq Scan" and _STORE_TABLES.fullmatch(n.get("Relation Name", ""))]
    if _after_place(sql) and not any("arrival" in n.get("Index Cond", "") for n in nodes):
        found.append("no index condition on arrival")
    if _one_of_a_sort(sql):
        found += ["Sort before the limit" for n in nodes if n.get("Node Type") == "Sort"]
    return found


def _check_plans(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 scans: Callable[[str, Any], list[str]]) -> None:
    export_all(store, tmp_path, "nightly")  # every cursor at the end
    add_new(store)
    with statements(store, monkeypatch) as seen:
        export_all(store, tmp_path, "nightly")
    reads = [(sql, params) for sql, params in seen if _reads_rows(sql)]
    assert len(reads) >= 2 * len(EXPORTS), "the cursor's place and the rows, for each table"
    full = {" ".join(sql.split()): found for sql, params in reads if (found := scans(sql, params))}
    assert full == {}, "every read of an incremental export goes through an index"
    last = max(tmp_path.glob("long-None-*.parquet"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))  # {run}: the name's
    assert pq_rows(last) == NEW * 2  # two answers each: the new rows only


def pq_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.read_metadata(path).num_rows)


def test_every_read_of_an_incremental_export_uses_an_index_on_sqlite(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "plans.db"
    store = Store(f"sqlite:///{db}")
    try:
        fill(store, 2000)
        _check_plans(store, tmp_path, monkeypatch, lambda sql, params: _sqlite_full_reads(db, sql, params))
    finally:
        store.close()


def test_every_read_of_an_incremental_export_uses_an_index_on_postgresql(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_database: str) -> None:
    store = Store(pg_database)
    dbname = pg_database.rsplit("/", 1)[1]
    try:
        fill(store, 20_000)
        with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=dbname, autocommit=True) as conn:
            conn.execute("ANALYZE")  # as autovacuum does after a bulk load: the planner knows the tables
        _check_plans(store, tmp_path, monkeypatch, lambda sql, params: _pg_full_reads(dbname, sql, params))
    finally:
        store.close()


@contextmanager
def vm_steps(store: Store) -> Iterator[list[int]]:
    """SQLite's virtual-machine steps on the store's connections inside the block (in
    hundreds): the work the database does, whatever the machine's load."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0  # go on

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.set_progress_handler(count, 100)

    engine = store.database.engine
    engine.dispose()  # connections made from here on count
    event.listen(engine, "connect", on_connect)
    try:
        yield steps
    finally:
        event.remove(engine, "connect", on_connect)
        engine.dispose()


def test_an_incremental_exports_work_does_not_grow_with_the_store(tmp_path: Path) -> None:
    work: dict[int, tuple[int, int]] = {}
    for size in (1000, 10_000):
        store = Store(f"sqlite:///{tmp_path / f'store{size}.db'}")
        try:
            fill(store, size)
            out = tmp_path / str(size)
            out.mkdir()
            export_all(store, out, "nightly")
            add_new(store)
            with vm_steps(store) as incremental:
                export_all(store, out, "nightly")
            with vm_steps(store) as whole:
                export_all(store, out, None)
            work[size] = incremental[0], whole[0]
        finally:
            store.close()
    (small, small_whole), (big, big_whole) = work[1000], work[10_000]
    assert big_whole > 5 * small_whole, "the count sees a read that grows with the store"
    assert big <= small * 1.1 + 10, f"the same new rows cost {small} and {big} hundred steps"


def test_the_rows_after_the_cursor_on_every_database(db_url: str, tmp_path: Path) -> None:  # noqa: F811
    """The cursor and the last place after it, read in one statement, on SQLite,
    PostgreSQL and MariaDB: each run writes exactly the rows stored since the last."""
    store = Store(db_url)
    try:
        fill(store, 200)
        for table, form in EXPORTS:
            first = export(store, "parquet", tmp_path / f"first-{table}-{form}.parquet", table=table,  # type: ignore[arg-type]
                           form_id=form, since_last=f"{table}-{form}")
            assert {c.run for c in first.cursors} == {1} and sum(first.rows.values()) > 0
        add_new(store)
        for table, form in EXPORTS:
            again = export(store, "parquet", tmp_path / f"again-{table}-{form}.parquet", table=table,  # type: ignore[arg-type]
                           form_id=form, since_last=f"{table}-{form}")
            new = {"long": NEW * 2 // (1 if form is None else 2), "wide": NEW // (1 if form is None else 2),
                   "requests": 0}[table]
            assert sum(again.rows.values()) == new, (table, form)
            assert {c.run for c in again.cursors} == ({2} if new else set()), "nothing new: no cursor moves"
            last = export(store, "parquet", tmp_path / f"last-{table}-{form}.parquet", table=table,  # type: ignore[arg-type]
                          form_id=form, since_last=f"{table}-{form}")
            assert sum(last.rows.values()) == 0 and last.nothing_new and last.cursors == []
            assert not (tmp_path / f"last-{table}-{form}.parquet").exists(), "nothing new: no file"
    finally:
        store.close()
