"""Deletions reach the warehouse: what ``formsync purge``, ``formsync erase`` and
``formsync sync --reconcile`` removed from the store is removed by the next ``formsync
load`` from the form's table, the long answers table and the requests, on DuckDB and on
the real PostgreSQL; a load with nothing new deletes nothing and writes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from connector.store import Store
from connector.store._erasure import Person
from pipelines.cli import app
from pipelines.export.load import DELETED, LoadReport, load
from pipelines.lifecycle.erase import erase_person
from pipelines.operate.jobs import summarise
from tests.connector.conftest import PG_HOST, PG_PORT, PG_USER, pg_connect
from tests.items import list_item
from tests.stores import migrated_store

FORM = "form_gone"
FIELDS = [{"key": "score", "type": "number", "title": "Score"}, {"key": "note", "type": "text", "title": "Note"}]
ADA = "ada@example.com"
Query = Callable[[str], list[tuple[Any, ...]]]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def store(here: Path) -> Store:
    """Four submissions of two answers each and two requests (one to Ada, one completed by sub_4)."""
    s = migrated_store(f"sqlite:///{here / 'formsync.db'}", key_file=here / "formsync.key")
    s.record_fields(FORM, FIELDS)
    subs = [list_item(f"sub_{i}", {"score": i, "note": f"n{i}"}) for i in range(1, 5)]
    subs[1]["respondentEmail"] = ADA
    s.upsert_submissions(subs, FORM, "Gone Test")
    s.upsert_requests([{"id": "req_ada", "status": "pending", "formId": FORM, "createdAt": 1_780_000_000_000,
                        "recipient": {"email": ADA}},
                       {"id": "req_bo", "status": "pending", "formId": FORM, "createdAt": 1_780_000_000_000,
                        "recipient": {"email": "bo@example.com"}}])
    return s


def _remove_three(store: Store) -> None:
    """sub_1 purged, Ada erased (sub_2 and req_ada), sub_3 gone from the service (reconciled)."""
    store.remove_submissions({"sub_1": FORM}, reason="purge")
    assert erase_person(store, Person(email=ADA)).matched
    assert store.reconcile(FORM, {"sub_2", "sub_4"}) == (["sub_3"], [])


def _remaining(query: Query, table: str, dataset: str) -> tuple[list[str], list[str], list[str]]:
    wide = [r[0] for r in query(f"SELECT submission_id FROM {dataset}.{table} ORDER BY 1")]
    long = [r[0] for r in query(f"SELECT DISTINCT submission_id FROM {dataset}.answers ORDER BY 1")]
    requests = [r[0] for r in query(f"SELECT request_id FROM {dataset}.requests ORDER BY 1")]
    return wide, long, requests


def _loads(query: Query, dataset: str) -> int:
    return int(query(f"SELECT count(*) FROM {dataset}._dlt_loads")[0][0])


def _duck(here: Path) -> Query:
    def query(sql: str) -> list[tuple[Any, ...]]:
        with duckdb.connect(str(here / "formsync.duckdb"), read_only=True) as con:
            return con.sql(sql).fetchall()
    return query


def test_purged_erased_and_reconciled_rows_leave_duckdb(store: Store, here: Path) -> None:
    table, query, dataset = store.schema(FORM).name, _duck(here), "formsync_data"
    assert load(store).rows == {table: 4, "answers": 8, "requests": 2}
    assert _remaining(query, table, dataset) == (["sub_1", "sub_2", "sub_3", "sub_4"],) * 2 + (["req_ada", "req_bo"],)

    _remove_three(store)
    assert load(store, dry_run=True).deleted == {table: 3, "answers": 3, "requests": 1}
    result = CliRunner().invoke(app, ["load"], env={"FORMSYNC_STORE__URL": store.url})
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["deleted"] == {table: 3, "answers": 3, "requests": 1}
    assert report["rows"] == {table: 0, "answers": 0, "requests": 0}
    assert _remaining(query, table, dataset) == (["sub_4"], ["sub_4"], ["req_bo"])
    assert query(f"SELECT score, note FROM {dataset}.{table}") == [(4.0, "n4")], "kept rows unchanged"
    assert query(f"SELECT count(*) FROM {dataset}.{table} WHERE {DELETED}")[0][0] == 0

    loads = _loads(query, dataset)
    again = load(store)
    assert again.deleted == {} and again.rows == {table: 0, "answers": 0, "requests": 0}
    assert _loads(query, dataset) == loads, "nothing new: no load written"
    assert _remaining(query, table, dataset) == (["sub_4"], ["sub_4"], ["req_bo"])


def test_the_first_load_into_a_fresh_dataset_reports_no_deletions(store: Store, here: Path) -> None:
    table, query, dataset = store.schema(FORM).name, _duck(here), "fresh"
    _remove_three(store)
    assert load(store, dataset=dataset, dry_run=True).deleted == {}
    first = load(store, dataset=dataset)
    assert first.deleted == {} and first.rows[table] == 1
    assert _remaining(query, table, dataset) == (["sub_4"], ["sub_4"], ["req_bo"])
    assert load(store, dataset=dataset).deleted == {}, "the log was moved past"


def test_deletions_and_new_rows_in_parts_of_one_batch_each(store: Store, here: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A load in parts (one batch a part, each loaded before the next) that also carries
    deletions: the removals, sent after their table's rows, leave the destination, and the
    rows stored meanwhile arrive, each once."""
    import pipelines.export.load as load_module

    table, query, dataset = store.schema(FORM).name, _duck(here), "formsync_data"
    load(store)
    _remove_three(store)
    store.upsert_submissions([list_item(f"sub_{i}", {"score": i, "note": f"n{i}"}) for i in range(5, 8)], FORM)
    monkeypatch.setattr(load_module, "PART_BYTES", 1)
    report = load(store)
    assert report.rows == {table: 3, "answers": 6, "requests": 0}
    assert report.deleted == {table: 3, "answers": 3, "requests": 1}
    assert _remaining(query, table, dataset) == (["sub_4", "sub_5", "sub_6", "sub_7"],) * 2 + (["req_bo"],)
    assert query(f"SELECT count(*) FROM {dataset}.answers")[0][0] == 8


def test_a_restored_submission_is_not_deleted_and_an_emptied_form_still_is(store: Store, here: Path) -> None:
    table, query, dataset = store.schema(FORM).name, _duck(here), "formsync_data"
    load(store)
    store.reconcile(FORM, {"sub_1", "sub_2"})  # sub_3 and sub_4: their form trashed...
    store.reconcile(FORM, {"sub_1", "sub_2", "sub_3", "sub_4"})  # ...and restored before the next load
    assert load(store).deleted == {}
    assert _remaining(query, table, dataset)[0] == ["sub_1", "sub_2", "sub_3", "sub_4"]

    store.reconcile(FORM, {"sub_1", "sub_2", "sub_4"})  # sub_3 gone, loaded as a deletion...
    assert load(store).deleted == {table: 1, "answers": 1}
    store.reconcile(FORM, {"sub_1", "sub_2", "sub_3", "sub_4"})  # ...then its form restored: it comes back
    assert load(store).rows == {table: 1, "answers": 2, "requests": 0}
    assert _remaining(query, table, dataset)[:2] == (["sub_1", "sub_2", "sub_3", "sub_4"],) * 2

    # every submission of the form purged: no form stream is left, its deletions still go
    store.remove_submissions({f"sub_{i}": FORM for i in range(1, 5)}, reason="purge")
    assert load(store).deleted == {table: 4, "answers": 4}
    assert _remaining(query, table, dataset) == ([], [], ["req_ada", "req_bo"])


def test_deletions_reach_postgresql(store: Store, pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    db = pg_database.rsplit("/", 1)[1]
    # dlt asks for a password; the server trusts loopback and ignores it
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", f"postgresql://{PG_USER}:trusted@{PG_HOST}:{PG_PORT}/{db}")
    table = store.schema(FORM).name

    def query(sql: str) -> list[tuple[Any, ...]]:
        with pg_connect(db) as conn:
            return conn.execute(sql).fetchall()

    load(store, destination="postgres", dataset="forms")
    _remove_three(store)
    store.upsert_submissions([list_item("sub_4", {"score": 8}, edits=1)], FORM)  # an edit in the same load
    report = load(store, destination="postgres", dataset="forms")
    assert report.deleted == {table: 3, "answers": 3, "requests": 1} and report.rows[table] == 1
    assert _remaining(query, table, "forms") == (["sub_4"], ["sub_4"], ["req_bo"])
    assert query(f"SELECT score, note FROM forms.{table}") == [(8.0, None)]
    loads = _loads(query, "forms")
    assert load(store, destination="postgres", dataset="forms").deleted == {}
    assert _loads(query, "forms") == loads


def test_a_scheduled_loads_summary_names_what_it_deleted() -> None:
    report = LoadReport(destination="duckdb", dataset="forms", rows={"answers": 0}, deleted={"answers": 2})
    assert summarise("load", report) == "loaded into duckdb/forms (answers 0; deleted answers 2)"
