"""The store's arrival order, on SQLite, PostgreSQL and MariaDB: every write that changes a
submission or request row gives it the next place, an edit moves its row forward, a
losing write does not; and on the server databases, where writers run at once, a writer
that began first but commits last still gets a later place than what was read before its
commit, so an incremental export after it never misses its row. The deletion log takes
its places the same way: a removal that began first and commits last is not left behind
a load's cursor."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlmodel import select

from connector.store import ExportFilter, Store
from connector.store._cursors import CursorMark
from connector.store._tables import RequestRow, SubmissionRow
from pipelines.export.load import read_deletions
from tests.items import list_item

from .conftest import my_connect, pg_connect

FORM = "form_arrival"


def places(store: Store) -> dict[str, int]:
    with store.database.reader() as s:
        return {r.id: r.arrival for r in s.exec(select(SubmissionRow))}


def new_since(store: Store, after: int | None) -> tuple[list[str], int | None]:
    """The ids an incremental export after ``after`` reads, and where its cursor goes."""
    f = ExportFilter(form_id=FORM, after=after)
    with store.exports.snapshot():
        ids = [row[0] for part in store.exports.wide_rows(f, display=False, batch_rows=100) for row in part]
        return sorted(ids), store.exports.last_arrival(f, "wide")


def test_each_write_takes_the_next_place_and_an_edit_moves_its_row_forward(store: Store) -> None:
    assert places(store) == {}
    store.upsert_submissions([list_item("sub_a", {"q": 1}), list_item("sub_b", {"q": 2})], FORM)
    store.upsert_submissions([list_item("sub_c", {"q": 3})], FORM)
    first = places(store)
    assert first["sub_a"] == first["sub_b"] < first["sub_c"], "one place per transaction, in order"

    store.upsert_submissions([list_item("sub_a", {"q": 10}, edits=1)], FORM)
    edited = places(store)
    assert edited["sub_a"] > edited["sub_c"] and edited["sub_b"] == first["sub_b"]

    store.upsert_submissions([list_item("sub_c", {"q": 3}) | {"submittedAt": "2026-04-01 10:00:00"}], FORM)
    assert places(store) == edited, "an older version loses and keeps its place"

    ids, last = new_since(store, first["sub_c"])
    assert ids == ["sub_a"] and last == edited["sub_a"]

    store.upsert_requests([{"id": "req_1", "status": "pending", "formId": FORM, "createdAt": 1_780_000_000_000}])
    with store.database.reader() as s:
        request = s.get(RequestRow, "req_1")
        assert request is not None and request.arrival > edited["sub_a"]
    assert store.exports.last_arrival(ExportFilter(form_id=FORM), "requests") == request.arrival


class _RowLock:
    """A transaction of another session holding ``sub_id``'s row lock (SELECT … FOR UPDATE),
    as a concurrent writer does until it commits."""

    def __init__(self, db_url: str, sub_id: str) -> None:
        dbname = db_url.rsplit("/", 1)[1]
        self.conn: Any
        if db_url.startswith("postgresql"):
            self.conn = pg_connect(dbname)
            self.conn.autocommit = False
            self.conn.execute("SELECT id FROM formsync_submissions WHERE id = %s FOR UPDATE", (sub_id,))
        else:
            self.conn = my_connect(dbname)
            self.conn.begin()
            with self.conn.cursor() as cur:
                cur.execute("SELECT id FROM formsync_submissions WHERE id = %s FOR UPDATE", (sub_id,))

    def release(self) -> None:
        self.conn.commit()
        self.conn.close()


@pytest.fixture(params=["postgresql", "mysql"])
def server_store(request: pytest.FixtureRequest) -> Any:
    if request.param == "mysql":
        url = str(request.getfixturevalue("mysql_database"))
    else:
        url = str(request.getfixturevalue("pg_database"))
        with pg_connect(url.rsplit("/", 1)[1]) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
    store = Store(url)
    store.migrate()
    yield store
    store.close()


def test_a_writer_committing_after_a_later_one_is_not_missed(server_store: Store) -> None:
    store = server_store
    clock = iter(range(1_780_000_000_000, 1_780_000_100_000, 1000))
    store.clock = lambda: next(clock)
    store.upsert_submissions([list_item("sub_slow", {"q": 1})], FORM)
    _, cursor = new_since(store, None)

    # The slow writer begins first (its stored_at is the earlier) and waits on a row lock
    # another session holds; the quick one begins later and commits first.
    lock = _RowLock(store.url, "sub_slow")
    slow = threading.Thread(target=store.upsert_submissions, args=([list_item("sub_slow", {"q": 2}, edits=1)], FORM))
    slow.start()
    try:
        slow.join(0.5)
        assert slow.is_alive(), "the slow writer waits on the row lock"
        store.upsert_submissions([list_item("sub_quick", {"q": 3})], FORM)
        ids, cursor = new_since(store, cursor)
        assert ids == ["sub_quick"]
    finally:
        lock.release()
        slow.join(10)
    assert not slow.is_alive()

    with store.database.reader() as s:
        rows = {r.id: r for r in s.exec(select(SubmissionRow))}
    assert rows["sub_slow"].stored_at < rows["sub_quick"].stored_at, "a wall-clock cursor would miss it"
    ids, _ = new_since(store, cursor)
    assert ids == ["sub_slow"], "stored later than the last read: the next one has it"
    assert rows["sub_slow"].answers == {"q": 2}


def _hold_the_counter(store: Store) -> Any:
    """Another session's transaction holding the arrival counter's row, as a writer that
    has taken its place and not yet committed."""
    dbname = store.url.rsplit("/", 1)[1]
    holder: Any
    if store.backend == "postgresql":
        holder = pg_connect(dbname)
        holder.autocommit = False
        holder.execute("UPDATE formsync_arrival SET last_place = last_place + 1")
    else:
        holder = my_connect(dbname)
        holder.begin()
        with holder.cursor() as cur:
            cur.execute("UPDATE formsync_arrival SET last_place = last_place + 1")
    return holder


def _loaded_deletions(store: Store) -> list[str]:
    """The submissions a load reads from the deletion log past its cursor, the cursor moved on."""
    found = read_deletions(store, "load:duckdb/test")
    if found.mark is not None:
        store.export_cursors.advance([found.mark])
    return sorted(sid for ids in found.submissions.values() for sid in ids)


def test_a_removal_committing_after_a_later_one_is_not_left_behind_a_load(server_store: Store) -> None:
    """A reconcile begins first and commits last (it waits for the arrival counter after
    its removal is written, as it restores a submission); a purge begins later and, were
    the log read on its own ids, would commit first with the later id: a load between
    the two would pass the purge's id and never send the reconciled removal."""
    store = server_store
    store.upsert_submissions([list_item(f"sub_{c}", {"q": 1}) for c in "abc"], FORM)
    # An earlier load sent the form's rows: a removal from now on is the destination's to apply.
    store.export_cursors.advance([CursorMark("load:duckdb/test", "wide", FORM, 0, 3, 1)])
    store.reconcile(FORM, {"sub_a", "sub_b"})  # sub_c marked gone: it comes back below
    assert _loaded_deletions(store) == ["sub_c"]

    holder = _hold_the_counter(store)
    first = threading.Thread(target=store.reconcile, args=(FORM, {"sub_b", "sub_c"}))  # sub_a gone, sub_c back
    later = threading.Thread(target=store.remove_submissions, args=({"sub_b": FORM},), kwargs={"reason": "purge"})
    try:
        first.start()
        first.join(0.5)
        assert first.is_alive(), "the first removal waits for its place"
        later.start()
        later.join(0.5)
        between = _loaded_deletions(store)  # a load while the first is not committed
    finally:
        holder.commit()
        holder.close()
        first.join(10)
        later.join(10)
    assert not first.is_alive() and not later.is_alive()
    after = _loaded_deletions(store)
    assert sorted(between + after) == ["sub_a", "sub_b"], "each removal is sent once, none left behind"
    assert _loaded_deletions(store) == []


def test_a_place_taken_and_not_yet_committed_holds_later_writers_back(server_store: Store) -> None:
    """Places are taken in commit order: while a transaction holds a place it has not
    committed, a later writer waits, so no reader sees a later place before it."""
    store = server_store
    store.upsert_submissions([list_item("sub_0", {"q": 0})], FORM)
    holder = _hold_the_counter(store)
    later = threading.Thread(target=store.upsert_submissions, args=([list_item("sub_1", {"q": 1})], FORM))
    later.start()
    try:
        later.join(0.5)
        assert later.is_alive(), "the later writer waits for the place before it to commit"
        assert new_since(store, None)[0] == ["sub_0"]
    finally:
        holder.commit()
        holder.close()
        later.join(10)
    assert not later.is_alive()
    assert places(store)["sub_1"] == places(store)["sub_0"] + 2

