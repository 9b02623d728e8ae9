"""The scheduler's persistent jobs in the store's database: APScheduler's own job store
(its table, e.g. ``apscheduler_formsync_jobs``, is APScheduler's, not a migration's) on
the store's engine, and the next run times ``formsync status`` shows."""

from __future__ import annotations

from typing import Any

from sqlalchemy import MetaData, Table, select

from ._database import Database

# The table the scheduler keeps its jobs in and ``formsync status`` reads their next runs
# from. Not "formsync_*": the store's migrations own those names; APScheduler creates this one.
JOBSTORE_TABLE = "apscheduler_formsync_jobs"


class ScheduledJobs:
    """The scheduled jobs repository (``store.scheduled_jobs``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def jobstore(self, table: str) -> Any:
        """An APScheduler ``SQLAlchemyJobStore`` keeping its jobs in ``table``. It stays
        open when the scheduler shuts down (the receiver, the running jobs and a later
        term as leader use the same engine); it closes with the store."""
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

        class _StoreJobStore(SQLAlchemyJobStore):  # type: ignore[misc]
            def shutdown(self) -> None:
                pass  # APScheduler would dispose of the store's engine

        return _StoreJobStore(engine=self._db.engine, tablename=table)

    def next_run_times(self, table: str) -> dict[str, int]:
        """Job id -> next run time (epoch ms) of the jobs in ``table``; a paused job has
        none. Empty while the table does not exist."""
        if table not in self._db.table_names():
            return {}
        with self._db.reader() as s:
            t = Table(table, MetaData(), autoload_with=s.connection())
            return {job_id: int(nxt * 1000) for job_id, nxt in s.execute(select(t.c.id, t.c.next_run_time))
                    if nxt is not None}
