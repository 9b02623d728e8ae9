"""The store's state as Prometheus metrics: the scheduler's heartbeat, each job's last run,
outreach progress, requests by status, the events set aside and the problems ``formsync status`` reports.

The same figures as ``formsync status`` (one report, :func:`pipelines.operate.status.collect_status`),
read at each scrape: served on the receiver's ``/metrics`` by ``formsync receive`` and
``formsync run``, and written in the text format by ``formsync status --format prometheus``
(for node_exporter's textfile collector). ``config/alerts/formsync-rules.yml`` alerts on them.
A job is labelled ``job_id``: Prometheus keeps ``job`` for the scrape job. ``formsync_requests``
is labelled by form for the forms of ``receiver.metrics_forms`` and the ``TOP_FORMS`` forms with
the most requests; the others are summed as ``form="other"`` (``status.form_series``), so a scrape
stays small however many forms the workspace has."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from connector._process.repeats import RepeatedWarning
from connector.config.settings import NoticeKind, Settings
from connector.store import Store

from .health import problems
from .status import STATUSES, StatusReport, collect_status

log = logging.getLogger("formsync.metrics")

PROBLEM_KINDS: tuple[NoticeKind, ...] = ("scheduler_stopped", "job_failed", "outreach_stalled", "events_set_aside",
                                         "token_expiring", "sign_in_lost")
OUTREACH_STATES = ("sent", "pending", "failed", "changed", "rejected", "suppressed")
def report_metrics(report: StatusReport) -> Iterator[GaugeMetricFamily]:
    """The metric families of one status report (pure): read with ``collect_status``'s
    ``forms`` (``receiver.metrics_forms``), its requests are a few series whatever the
    number of forms."""
    sched = report.scheduler
    alive = GaugeMetricFamily("formsync_scheduler_alive", "1 while a scheduler beats on this database.")
    alive.add_metric([], 1.0 if sched.alive else 0.0)
    yield alive
    if sched.last_beat_at is not None:
        beat = GaugeMetricFamily("formsync_scheduler_last_beat_timestamp_seconds",
                                 "When the scheduler last beat (unix time).")
        beat.add_metric([], sched.last_beat_at / 1000)
        yield beat
    yield from _job_metrics(report)
    yield from _outreach_metrics(report)
    requests = GaugeMetricFamily("formsync_requests", "Stored requests by form and status.", labels=["form", "status"])
    for f in report.requests:
        for status in STATUSES:
            requests.add_metric([f.form_id, status], float(getattr(f, status)))
    yield requests
    events = GaugeMetricFamily("formsync_events_stored", "Events the receiver has stored.")
    events.add_metric([], float(report.events_received))
    yield events
    aside = GaugeMetricFamily("formsync_dead_letters", "Correctly signed events set aside: no database can "
                                                       "store them (formsync dead-letters list).")
    aside.add_metric([], float(report.dead_letters))
    yield aside
    by = report.credentials.token_expires_by
    if by is not None:
        left = GaugeMetricFamily("formsync_api_token_expiry_seconds", "Seconds until the API token (service.token) "
                                 "expires at the latest: 30 days after formsync first used it.")
        left.add_metric([], (by - report.credentials.now(report.at)) / 1000)
        yield left
    found = problems(report)
    family = GaugeMetricFamily("formsync_problems", "Problems formsync status reports, by kind.", labels=["kind"])
    for kind in PROBLEM_KINDS:
        family.add_metric([kind], float(sum(1 for p in found if p.kind == kind)))
    yield family


def _job_metrics(report: StatusReport) -> Iterator[GaugeMetricFamily]:
    failed = GaugeMetricFamily("formsync_job_last_run_failed", "1 when the job's last run ended with an error.",
                               labels=["job_id", "kind"])
    finished = GaugeMetricFamily("formsync_job_last_run_finished_timestamp_seconds",
                                 "When the job's last run ended (unix time).", labels=["job_id", "kind"])
    runs = GaugeMetricFamily("formsync_job_runs", "Runs of the job recorded in the store.", labels=["job_id", "kind"])
    for job in report.jobs:
        labels = [job.id, job.kind]
        failed.add_metric(labels, 1.0 if job.last_outcome == "error" else 0.0)
        runs.add_metric(labels, float(job.runs))
        if job.last_finished_at is not None:
            finished.add_metric(labels, job.last_finished_at / 1000)
    yield from (failed, finished, runs)


def _outreach_metrics(report: StatusReport) -> Iterator[GaugeMetricFamily]:
    rows = GaugeMetricFamily("formsync_outreach_rows", "Rows of each outreach job by state.", labels=["job_id", "state"])
    changed = GaugeMetricFamily("formsync_outreach_last_change_timestamp_seconds",
                                "When a row of the outreach job last changed (unix time).", labels=["job_id"])
    for p in report.outreach:
        c = p.counts
        held = {"sent": c.sent_total, "pending": c.left, "failed": c.failed, "changed": c.changed,
                "rejected": c.invalid, "suppressed": c.suppressed}
        for state in OUTREACH_STATES:
            rows.add_metric([p.job, state], float(held[state]))
        if p.last_change_at is not None:
            changed.add_metric([p.job], p.last_change_at / 1000)
    yield from (rows, changed)


class StoreCollector(Collector):
    """A Prometheus collector reading ``store`` at every scrape (a few small queries), in a
    thread of its own and for ``wait_seconds`` at most: a database away never holds or
    fails a scrape, whose other metrics (the receiver's) matter most then. One read at a
    time: a scrape while a read hangs waits on that read rather than starting another.
    ``formsync_store_read_ok`` says whether this scrape's figures came from the store."""

    def __init__(self, settings: Settings, store: Store, *, wait_seconds: float = 2.0) -> None:
        self.settings, self.store, self.wait_seconds = settings, store, wait_seconds
        self._reading: Future[list[GaugeMetricFamily]] | None = None
        self._lock = threading.Lock()
        self._repeats = RepeatedWarning(log)

    def _read(self) -> Future[list[GaugeMetricFamily]]:
        # A daemon thread: a read hung on a dead network never holds the process's exit.
        # It keeps the families, not the report: what stays between scrapes is as small as
        # a scrape, however many forms the report named.
        done: Future[list[GaugeMetricFamily]] = Future()

        def run() -> None:
            try:
                report = collect_status(self.settings, self.store, forms=self.settings.receiver.metrics_forms)
                done.set_result(list(report_metrics(report)))
            except Exception as e:
                done.set_exception(e)

        threading.Thread(target=run, name="formsync-metrics-read", daemon=True).start()
        return done

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            if self._reading is None or self._reading.done():
                self._reading = self._read()
            reading = self._reading
        ok = GaugeMetricFamily("formsync_store_read_ok", "1 when this scrape read the store's figures in time.")
        try:
            families = reading.result(timeout=self.wait_seconds)
        except Exception as e:  # the database is away or slow: the receiver's own metrics still go out
            self._repeats.warn("metrics: the store could not be read for /metrics (%s)", type(e).__name__)
            ok.add_metric([], 0.0)
            yield ok
            return
        ok.add_metric([], 1.0)
        yield ok
        yield from families


def render(report: StatusReport) -> bytes:
    """``report`` in Prometheus' text format."""

    class _Once(Collector):
        def collect(self) -> Iterator[GaugeMetricFamily]:
            yield from report_metrics(report)

    registry = CollectorRegistry()
    registry.register(_Once())
    return generate_latest(registry)
