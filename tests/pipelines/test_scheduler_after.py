"""A scheduled export sees what finished before it: an export job declared ``after`` a
sync job runs each time a sync run finishes and writes every row that run committed (a
real scheduler, a real sandbox on loopback, a SQLite file; wall time, bounded); and an
export's reads come from one snapshot, on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import asyncio
import csv
from pathlib import Path

from sqlalchemy import MetaData, Table
from sqlalchemy import select as sa_select
from sqlmodel import select

from connector.config.settings import load_settings
from connector.store import ExportFilter, Store
from connector.store._jobstore import JOBSTORE_TABLE
from connector.store._tables import SubmissionRow
from pipelines.operate.jobs import schedule_text
from pipelines.operate.scheduler import SchedulerOptions, serve
from tests.conftest import Sandbox
from tests.connector.conftest import db_url, migrated_db_url, mysql_database, pg_database, store  # noqa: F401  (fixtures)
from tests.pipelines.test_scheduler import config, fast, runs, wait_for  # noqa: F401  (fast: a fixture)


async def test_an_export_after_a_sync_runs_when_it_finishes_and_writes_what_it_committed(
        fast: Sandbox, tmp_path: Path) -> None:  # noqa: F811
    sandbox = fast
    form = sandbox.pro.forms["Contact"]
    out = tmp_path / "answers.csv"
    db = f"sqlite:///{tmp_path / 's.db'}"
    jobs = f"""
[[jobs]]
id = "sync-contact"
kind = "sync"
interval_seconds = 1
params = {{ form = "{form}" }}

[[jobs]]
id = "export-contact"
kind = "export"
after = "sync-contact"
params = {{ format = "csv", out = "{out}", form = "{form}" }}
"""
    settings = load_settings(config(tmp_path, sandbox, db, jobs))
    assert schedule_text(settings.jobs[1]) == "after sync-contact"
    st = Store(db)
    st.migrate()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, st, stop=stop, options=SchedulerOptions(lock_poll_seconds=0.5)))
    try:
        await wait_for(lambda: any(r.outcome == "ok" for r in runs(st, "export-contact")), 8, "a first export")
        for name in ("Barbara Liskov", "Ken Thompson"):  # new answers between runs
            assert (await sandbox.helper("submissions.create", {"formId": form, "answers": {
                "name": name, "email": "someone@example.test"}})).ok
        await wait_for(lambda: len([r for r in runs(st, "export-contact") if r.outcome == "ok"]) >= 3, 8,
                       "two more exports")
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
    syncs = [r for r in runs(st, "sync-contact") if r.finished_at is not None]
    exports = [r for r in runs(st, "export-contact") if r.outcome == "ok"]
    assert all(r.outcome == "ok" for r in syncs)
    for e in exports:  # each export began once a sync run had finished, never on its own
        assert any(s.finished_at is not None and s.finished_at <= e.started_at for s in syncs)
    assert len(exports) <= len(syncs)
    # The last export holds every submission a sync committed before it started.
    last = exports[-1]
    with st.database.reader() as s:
        before = {r.id for r in s.exec(select(SubmissionRow)) if r.stored_at <= last.started_at}
    with out.open(newline="", encoding="utf-8-sig") as f:
        written = {r["submission_id"] for r in csv.DictReader(f)}
    assert len(before) >= 5 and before <= written
    with st.database.reader() as s:  # a job that only follows another has no schedule of its own
        t = Table(JOBSTORE_TABLE, MetaData(), autoload_with=s.connection())
        assert set(s.execute(sa_select(t.c.id)).scalars()) == {"sync-contact"}
    st.close()


def item(n: int) -> dict[str, object]:
    return {"id": f"sub_{n:03d}", "submittedAt": f"2024-01-01 10:00:{n:02d}", "createdAt": "2024-01-01 10:00:00",
            "isCompleted": True, "answers": {"n": str(n)}, "display": {}}


def test_an_export_snapshot_reads_what_was_committed_before_it_and_nothing_after(store: Store) -> None:  # noqa: F811
    store.upsert_submissions([item(n) for n in range(5)], "form_snap")
    f = ExportFilter(form_id="form_snap")
    with store.exports.snapshot():
        first = store.exports.wide_rows(f, display=False, batch_rows=2)
        seen = [r[0] for r in next(first)]
        # committed while the export is reading: in no read of this export
        store.upsert_submissions([item(n) for n in range(5, 8)], "form_snap")
        seen += [r[0] for part in first for r in part]
        assert seen == [f"sub_{n:03d}" for n in range(5)]
        assert store.exports.count_answers(f) == 5
        assert sum(len(p) for p in store.exports.answer_documents(f, batch_rows=100)) == 5
    # a read after the export sees them
    assert sum(len(p) for p in store.exports.wide_rows(f, display=False, batch_rows=100)) == 8
