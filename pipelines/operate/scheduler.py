"""``formsync run``: the configured ``[[jobs]]`` on APScheduler 3 (``AsyncIOScheduler``),
with the receiver in the same process when ``[receiver] enabled`` is set.

* Jobs live in a persistent job store (``SQLAlchemyJobStore``, table
  ``apscheduler_formsync_jobs``) in the store's own database, with explicit ids,
  ``coalesce``, ``max_instances = 1`` and the job's misfire grace time. The config is the
  source of truth: on start, a stored job whose definition is unchanged keeps its
  persisted next run time; a changed one is rescheduled; one no longer configured is
  removed.
* One scheduler acts per database (see ``connector.store._lease``): the others serve their
  receiver, poll for the lock and take over when the leader dies.
* Every run is recorded in ``formsync_job_runs`` (start, end, outcome, error, summary,
  pid) for ``formsync status``.
* A job with ``after = "<job id>"`` runs each time a run of that job finishes without
  failing (a job never runs twice at once: one still running runs again when it ends);
  after a failed or stopped run it is recorded ``skipped (after <job id> failed)``. An
  export job reads from one snapshot taken as it starts (``store.exports.snapshot``).
* Each run calls its kind's one function (``pipelines.jobs``), as the command does.
* SIGTERM or SIGINT: no new run starts; a running outreach finishes the row it is
  sending and stops (its rows' states are in the store, so the next run resumes); other
  runs finish; then the process exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from apscheduler.events import EVENT_JOB_MISSED, EVENT_JOB_SUBMITTED, JobEvent, JobSubmissionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from pydantic import BaseModel

from connector._process.repeats import RepeatedWarning
from connector.client.rpc import TokenSource
from connector.config.keyfile import KeyFileError
from connector.config.settings import JobSettings, Settings
from connector.store import Store
from connector.store._jobstore import JOBSTORE_TABLE
from connector.store._leader import LeaderLock, holder_id

from ..jobs import JOBS, KEYED, JobEnv, OutreachParams, SyncParams
from . import notify
from .jobs import check_jobs, fingerprint, followers, summarise, trigger_for
from .notify import Notice

log = logging.getLogger("formsync.scheduler")
_repeats = RepeatedWarning(log)  # a database away: its warnings once a minute, counted


@dataclass
class SchedulerOptions:
    """How often a waiting process tries for the lock (and the leader checks it still
    holds it), the lease length on SQLite, and how long a shutdown waits for running jobs
    before cancelling them."""

    lock_poll_seconds: float = 5.0
    lease_seconds: float = 30.0
    stop_timeout_seconds: float = 120.0


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class JobRuntime:
    """What the job runs of one leading term share: the settings, the store, the checked
    params, a stop signal and the running tasks."""

    settings: Settings
    store: Store
    params: dict[str, Any]
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    running: set[asyncio.Task[Any]] = field(default_factory=set)
    scheduled: dict[str, int] = field(default_factory=dict)  # job id -> planned fire time of the next run
    active: set[str] = field(default_factory=set)  # the jobs with a run going on
    due: set[str] = field(default_factory=set)  # followers to run again once their current run ends
    tokens: TokenSource | None = None  # the stored grant, when service.token is not set
    reports: dict[str, BaseModel] = field(default_factory=dict)  # job id -> the report of its last finished run

    @property
    def jobs(self) -> dict[str, JobSettings]:
        return {j.id: j for j in self.settings.jobs}

    def on_submitted(self, event: JobSubmissionEvent) -> None:
        # Fires just before the run's coroutine starts: keep its planned time for the record.
        if event.scheduled_run_times:
            self.scheduled[event.job_id] = int(event.scheduled_run_times[-1].timestamp() * 1000)

    def mark_interrupted(self) -> int:
        """Runs still marked running belong to a scheduler that died (only the lock holder
        runs jobs): record them as errors. Returns how many."""
        return self.store.runs.interrupt_running("interrupted: the scheduler process ended before the run finished")

    def _start(self, job: JobSettings) -> int:
        return self.store.runs.start(job.id, job.kind, scheduled_at=self.scheduled.pop(job.id, None),
                                     pid=os.getpid(), host=socket.gethostname())

    def _finish(self, run_id: int, outcome: str, summary: str | None = None, error: str | None = None) -> None:
        self.store.runs.finish(run_id, outcome, summary=summary, error=error)

    async def execute(self, job_id: str) -> None:
        """One run of a job (none while another run of it goes on), then the runs of
        the jobs that follow it (``after``): only after a run that did not fail or stop;
        otherwise each follower's run is recorded ``skipped``, naming this job."""
        job = self.jobs.get(job_id)
        if job is None:  # removed from the config since it was stored: reconciling removes it
            log.warning("job %s is not configured any more; skipped", job_id)
            return
        if job_id in self.active:
            log.info("job %s is still running; this run is skipped", job_id)
            return
        self.active.add(job_id)
        try:
            outcome = await self._run(job)
        finally:
            self.active.discard(job_id)
        if self.stopping.is_set():
            return
        again = job_id in self.due
        self.due.discard(job_id)
        for follower in followers(self.settings.jobs, job_id):
            if outcome in ("error", "stopped"):
                await asyncio.to_thread(self._skip, self.jobs[follower], job_id)
            else:
                self.follow(follower)
        if again:
            self.follow(job_id)

    def _skip(self, job: JobSettings, after: str) -> None:
        run_id = self._start(job)
        self._finish(run_id, "skipped", summary=f"skipped (after {after} failed)")
        log.warning("job %s skipped: the run of %s it follows failed", job.id, after)

    def follow(self, job_id: str) -> None:
        """Start a run of ``job_id`` now, because the job it follows finished; one
        already running runs again when it ends, so it sees what that run committed."""
        if job_id in self.active:
            self.due.add(job_id)
            return
        log.info("job %s starts after %s", job_id, self.jobs[job_id].after)
        asyncio.get_running_loop().create_task(run_job(job_id))

    async def _run(self, job: JobSettings) -> str:
        """One run of a job, recorded from start to end; an error is recorded, not raised.
        Returns the run's outcome (``ok``, ``skipped``, ``stopped``, ``error``). A job that
        needs the store's key is refused before any write when the key is missing or not
        the tombstones' (nothing recorded but the log line and the notice)."""
        if job.kind in KEYED and (refused := await asyncio.to_thread(key_refusal, self.store)) is not None:
            log.error("job %s (%s) refused: %s", job.id, job.kind, refused)  # before any write: nothing recorded
            await notify.send(self.settings.notify, Notice("job_failed", job.id,
                                                           f"job {job.id} ({job.kind}) refused: {refused}"))
            return "error"
        run_id = await asyncio.to_thread(self._start, job)  # database work off the loop
        log.info("job %s (%s) started", job.id, job.kind)
        try:
            report = await self._dispatch(job, self.params[job.id])
        except asyncio.CancelledError:
            self._finish(run_id, "error", error="cancelled: the scheduler stopped before the run finished")
            raise
        except Exception as e:  # any failure of a run is recorded for status, and the scheduler goes on
            reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            log.error("job %s (%s) failed: %s", job.id, job.kind, reason)
            log.debug("job %s failed", job.id, exc_info=True)  # the traceback, with --verbose
            await asyncio.to_thread(self._finish, run_id, "error", error=f"{type(e).__name__}: {e}")
            await notify.send(self.settings.notify, Notice("job_failed", job.id,
                                                           f"job {job.id} ({job.kind}) failed: {reason}"))
            return "error"
        self.reports[job.id] = report
        summary = summarise(job.kind, report)
        outcome = "stopped" if getattr(report, "stopped", False) else "skipped" if getattr(
            report, "skipped", None) else "ok"
        await asyncio.to_thread(self._finish, run_id, outcome, summary=summary)
        log.info("job %s %s: %s", job.id, outcome, summary)
        return outcome

    async def _dispatch(self, job: JobSettings, params: Any) -> BaseModel:
        """The job's one function (``pipelines.jobs``), with this runtime's settings, store,
        token source and stop signal; an outreach job without ``job`` is named by its id, a
        sync job reads each form whole every ``sync.full_every_hours`` unless it says."""
        if isinstance(params, OutreachParams) and params.job is None:
            params = params.model_copy(update={"job": job.id})
        if isinstance(params, SyncParams) and params.full_every_hours is None:
            params = params.model_copy(update={"full_every_hours": self.settings.sync.full_every_hours})
        env = JobEnv(self.settings, self.store, tokens=self.tokens, stop=self.stopping)
        report = await JOBS[job.kind](params, env)
        if (held := getattr(report, "held_back", None)) is not None:
            log.warning("job %s: %s", job.id, held)
        return report


# The kinds that bring data in or send: the tombstones' key is checked before their first write.
def key_refusal(store: Store) -> str | None:
    """Why the store's key refuses a keyed job now (``Store.check_key``), or None."""
    try:
        store.check_key()
    except KeyFileError as e:
        return str(e)
    return None


_active: JobRuntime | None = None  # the runtime of the scheduler leading in this process


async def run_job(job_id: str, fingerprint: str = "") -> None:
    """What APScheduler calls for every job (stored by reference, with the job id only,
    so the job store holds nothing but names and times). ``fingerprint`` identifies the
    job definition the stored job was made from."""
    rt = _active
    if rt is None:
        log.error("job %s fired with no scheduler leading in this process; skipped", job_id)
        return
    task = asyncio.current_task()
    assert task is not None
    rt.running.add(task)
    try:
        await rt.execute(job_id)
    finally:
        rt.running.discard(task)


def reconcile(scheduler: AsyncIOScheduler, jobs: list[JobSettings]) -> None:
    """Make the job store hold exactly the configured jobs; an unchanged job keeps its
    persisted next run time, except a ``run_at_start`` job, which runs now."""
    stored = {j.id: j for j in scheduler.get_jobs()}
    for job in jobs:
        fp = fingerprint(job)
        trigger = trigger_for(job)
        if trigger is None:  # runs only after another job: nothing to schedule (a stored one is removed)
            continue
        old = stored.pop(job.id, None)
        if old is not None and old.kwargs.get("fingerprint") == fp and not job.run_at_start:
            continue
        first = {"next_run_time": datetime.now(UTC)} if job.run_at_start else {}
        scheduler.add_job(run_job, trigger, id=job.id, name=f"{job.kind}:{job.id}", args=[job.id],
                          kwargs={"fingerprint": fp}, replace_existing=True, coalesce=True, max_instances=1,
                          misfire_grace_time=job.misfire_grace_seconds, **first)
    for job_id in stored:
        scheduler.remove_job(job_id)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


async def _lead(settings: Settings, store: Store, params: dict[str, Any], lock: LeaderLock, stop: asyncio.Event,
                options: SchedulerOptions, on_state: Callable[[str], None] | None,
                tokens: TokenSource | None = None) -> None:
    """Schedule the jobs while this process holds the lock and ``stop`` is not set; on
    the way out, let running jobs finish (``stop_timeout_seconds``) and stop the scheduler."""
    global _active
    rt = JobRuntime(settings, store, params, tokens=tokens)
    holder = holder_id()
    stale = await asyncio.to_thread(rt.mark_interrupted)
    if stale:
        log.warning("%d job run(s) of a previous scheduler were interrupted", stale)
        await notify.send(settings.notify, Notice(
            "scheduler_stopped", "scheduler",
            f"a scheduler stopped while {stale} job run(s) were running; {holder} took over"))
    scheduler = AsyncIOScheduler(
        jobstores={"default": store.scheduled_jobs.jobstore(JOBSTORE_TABLE)},
        job_defaults={"coalesce": True, "max_instances": 1}, timezone=UTC)
    scheduler.add_listener(rt.on_submitted, EVENT_JOB_SUBMITTED)
    scheduler.add_listener(_missed, EVENT_JOB_MISSED)
    _active = rt
    scheduler.start(paused=True)
    try:
        reconcile(scheduler, settings.jobs)
        scheduler.resume()
        log.info("scheduling %d job(s)", len(settings.jobs))
        if on_state is not None:
            on_state("leading")
        check = min(options.lock_poll_seconds, options.lease_seconds / 3)
        await _beat(store, holder, check)
        while not stop.is_set():
            await _pause(stop, check)
            if not stop.is_set() and not await asyncio.to_thread(lock.still_held):
                log.error("lost the scheduler lock; stopping the scheduler here")
                break
            await _beat(store, holder, check)
    finally:
        await _beat(store, holder, None)
        await notify.send(settings.notify, Notice("scheduler_stopped", "scheduler",
                                                  f"the scheduler {holder} stopped"))
        scheduler.pause()
        rt.stopping.set()
        if rt.running:
            log.info("waiting for %d running job(s) to stop", len(rt.running))
            await asyncio.wait(set(rt.running), timeout=options.stop_timeout_seconds)
        left = set(rt.running)
        scheduler.shutdown(wait=False)  # cancels the job tasks still running after the timeout
        if left:
            await asyncio.wait(left, timeout=5)
        _active = None


async def _beat(store: Store, holder: str, every: float | None) -> None:
    """The heartbeat ``formsync status`` reads: alive for three beats of ``every`` seconds;
    ``None`` says the scheduler stopped. A database that cannot take it is only logged."""
    try:
        if every is None:
            await asyncio.to_thread(store.runs.beat_stopped, holder)
        else:
            await asyncio.to_thread(store.runs.beat, holder, stale_after_ms=int(every * 3000))
    except Exception as e:  # the database is busy or gone: the lock check says what matters
        _repeats.warn("cannot record the scheduler's heartbeat: %s", e)


def _missed(event: JobEvent) -> None:
    log.warning("job %s missed its run at %s (past its misfire grace time)", event.job_id,
                getattr(event, "scheduled_run_time", "?"))


async def serve(settings: Settings, store: Store, *, stop: asyncio.Event | None = None,
                options: SchedulerOptions | None = None, on_state: Callable[[str], None] | None = None,
                on_receiver_ready: Callable[[str], None] | None = None, tokens: TokenSource | None = None) -> None:
    """Run the configured jobs (and the receiver when enabled) until SIGINT, SIGTERM or
    ``stop``. The store must be migrated. The jobs are checked first (``ConfigError``).
    ``on_state`` hears ``waiting`` and ``leading``; ``on_receiver_ready`` the receiver's URL.
    ``tokens`` (the stored grant, ``connector.client.grant.stored_grant``) serves every job and the
    receiver when ``service.token`` is not set."""
    from connector._process.signals import stop_on_signals
    from connector.receiver.app import run_receiver

    from .metrics import StoreCollector

    params = check_jobs(settings, signed_in=tokens is not None)
    # Each run logs its own start and outcome; APScheduler's "executed successfully" would
    # follow a failed run too, since a failure is recorded rather than raised.
    logging.getLogger("apscheduler.executors").setLevel(logging.WARNING)
    options = options or SchedulerOptions()
    stop = stop or asyncio.Event()
    with stop_on_signals(stop):
        receiver: asyncio.Task[None] | None = None
        if settings.receiver.enabled:
            receiver = asyncio.create_task(run_receiver(store, settings.receiver, stop=stop, on_ready=on_receiver_ready,
                                                        handle_signals=False, service=settings.service, tokens=tokens,
                                                        collectors=[StoreCollector(settings, store)]))
            # A receiver that ends (a port in use) stops the scheduler too, leading or not.
            receiver.add_done_callback(lambda _: stop.set())
        lock = store.leader_lock(ttl_seconds=options.lease_seconds)
        waiting_said = False
        try:
            while not stop.is_set():
                held = await asyncio.to_thread(lock.try_acquire) if settings.jobs else False
                if held:
                    waiting_said = False
                    await _lead(settings, store, params, lock, stop, options, on_state, tokens)
                    continue
                if settings.jobs and not waiting_said:
                    log.info("another process holds the scheduler lock; waiting to take over")
                    if on_state is not None:
                        on_state("waiting")
                    waiting_said = True
                await _pause(stop, options.lock_poll_seconds)
        finally:
            await asyncio.to_thread(lock.release)
            stop.set()
            if receiver is not None:
                await receiver  # raises the receiver's own error (a port in use) if it failed

