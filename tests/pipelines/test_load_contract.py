"""The requests and the campaign rows reach DuckDB under the data contract: a store with an
outreach job sent against the sandbox (real HTTP on loopback, a SQLite store) loaded
twice, with new data in between (an answer, a reminder's poll, a second job), into a real
DuckDB file. Every declared column is there from the first load with its declared type
(times TIMESTAMP WITH TIME ZONE, a column null in every row included), and a later load
neither adds a column nor changes a type. A warehouse whose campaign rows an earlier
version typed from the values (epoch ms as BIGINT) is retyped by the next load."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from connector.client.rpc import FormClient
from connector.store import Store
from connector.store._schema import CAMPAIGN_COLUMNS, REQUEST_COLUMNS, Column
from formservice.sandbox.recipient import answer_request
from pipelines.export.load import (
    CAMPAIGN,
    DEFAULT_DATASET,
    DLT_TYPES,
    dlt_settings,
    load,
    pipeline_name,
    work_dir,
)
from pipelines.outreach import run_outreach
from pipelines.sync.poll import poll_once
from tests.conftest import Sandbox

# dlt's types as DuckDB names them.
DUCKDB: dict[str, str] = {"text": "VARCHAR", "double": "DOUBLE", "bigint": "BIGINT", "bool": "BOOLEAN",
                          "timestamp": "TIMESTAMP WITH TIME ZONE", "date": "DATE", "time": "TIME", "json": "JSON"}
COLUMNS_SQL = ("SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = "
               f"'{DEFAULT_DATASET}' AND table_name NOT LIKE '\\_dlt%' ESCAPE '\\' ORDER BY 1, 2")


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The working directory: ``formsync.duckdb`` lands there."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _sheet(path: Path, emails: list[str]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["externalId", "name", "email", "topic"])
        w.writerows([f"c-{i}", f"Person {i}", e, "sales"] for i, e in enumerate(emails))
    return path


def _columns(db: Path) -> dict[str, dict[str, str]]:
    """Table -> column -> DuckDB type, dlt's own tables and columns left out."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.sql(COLUMNS_SQL).fetchall()
    out: dict[str, dict[str, str]] = {}
    for table, column, kind in rows:
        if not column.startswith("_dlt") and column != "_formsync_deleted":
            out.setdefault(table, {})[column] = kind
    return out


def _declared(columns: tuple[Column, ...]) -> dict[str, str]:
    return {c.name: DUCKDB[DLT_TYPES[c.type]] for c in columns}


async def _client(sandbox: Sandbox) -> FormClient:
    await sandbox.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
    return FormClient(sandbox.base_url, sandbox.pro.token, calls_per_minute=10000, creates_per_minute=10000)


async def _store_with_a_campaign(fc: FormClient, sandbox: Sandbox, root: Path) -> Store:
    """A SQLite store beside ``root``'s DuckDB, with the job ``spring`` sent to two rows."""
    (root / "data").mkdir()
    store = Store(f"sqlite:///{root / 'data' / 's.db'}")
    store.migrate()
    sent = await run_outreach(fc, store, _sheet(root / "spring.csv", ["a@example.test", "b@example.test"]),
                              sandbox.pro.forms["Contact"], job="spring", report_path=root / "r.csv")
    assert sent.sent == 2
    return store


async def test_requests_and_campaign_rows_are_typed_from_the_first_load_and_never_change(
        sandbox: Sandbox, here: Path) -> None:
    async with await _client(sandbox) as fc:
        store = await _store_with_a_campaign(fc, sandbox, here)
        first = load(store)
        assert first.rows["requests"] == 2
        db = here / "formsync.duckdb"
        before = _columns(db)
        # Every declared column, answered or null in every row (nothing opened, completed
        # or canceled yet), with its declared type: times with their time zone.
        assert before["requests"] == _declared(REQUEST_COLUMNS)
        assert before[CAMPAIGN] == _declared(CAMPAIGN_COLUMNS)
        for table, columns in (("requests", REQUEST_COLUMNS), (CAMPAIGN, CAMPAIGN_COLUMNS)):
            times = {c.name for c in columns if c.type == "timestamp"}
            assert times and {before[table][t] for t in times} == {"TIMESTAMP WITH TIME ZONE"}, table
        with duckdb.connect(str(db), read_only=True) as con:
            assert con.sql(f"SELECT count(*), count(completed_at), count(created_at) FROM {DEFAULT_DATASET}."
                           f"{CAMPAIGN}").fetchall() == [(2, 0, 2)]

        # New data: one answer (polled in), a second job, then the next load.
        url = store.campaign.rows("spring")[0].url
        assert url is not None
        assert (await answer_request(sandbox.http, url, {"topic": "support", "message": "hi"})).thanked
        await poll_once(fc, store)
        again = await run_outreach(fc, store, _sheet(here / "autumn.csv", ["c@example.test"]),
                                   sandbox.pro.forms["Contact"], job="autumn", report_path=here / "r2.csv")
        assert again.sent == 1
    second = load(store)
    assert second.rows["requests"] >= 2
    after = _columns(db)
    assert {t: after[t] for t in before} == before, "no column appeared or changed type"
    with duckdb.connect(str(db), read_only=True) as con:
        done = con.sql(f"SELECT job, completed_at FROM {DEFAULT_DATASET}.{CAMPAIGN} WHERE completed_at IS NOT NULL"
                       ).fetchall()
        assert [j for j, _ in done] == ["spring"] and done[0][1].tzinfo is not None
        assert con.sql(f"SELECT count(*) FROM {DEFAULT_DATASET}.{CAMPAIGN}").fetchall() == [(3,)]


async def test_campaign_rows_an_earlier_load_typed_from_values_are_retyped(sandbox: Sandbox, here: Path) -> None:
    import dlt
    from dlt.common.schema import Schema

    from pipelines.export.load import destination_of

    async with await _client(sandbox) as fc:
        store = await _store_with_a_campaign(fc, sandbox, here)
    # As formsync loaded the campaign rows before they were declared: dicts, typed by dlt.
    rows: list[dict[str, Any]] = [{"job": "spring", "row_key": "ext:c-0", "row_number": 2, "created_at": 1_780_000_000_000,
                                   "is_test": False}]
    where = work_dir(store)
    with dlt_settings(where):
        old = dlt.pipeline(pipeline_name=pipeline_name("duckdb", DEFAULT_DATASET), pipelines_dir=str(where / "pipelines"),
                           destination=destination_of(None), dataset_name=DEFAULT_DATASET)

        @dlt.source(schema=Schema("formsync", normalizers={"names": "direct"}))
        def formsync() -> Any:
            return [dlt.resource(iter(rows), name=CAMPAIGN, write_disposition="replace")]

        old.run(formsync())
    assert _columns(here / "formsync.duckdb")[CAMPAIGN]["created_at"] == "BIGINT"

    load(store)
    assert _columns(here / "formsync.duckdb")[CAMPAIGN] == _declared(CAMPAIGN_COLUMNS)
    with duckdb.connect(str(here / "formsync.duckdb"), read_only=True) as con:
        assert con.sql(f"SELECT count(*) FROM {DEFAULT_DATASET}.{CAMPAIGN}").fetchall() == [(2,)]
