"""The receiver's memory and ``/metrics`` stay bounded in the number of forms it has seen:
a real ``formsync receive`` process (commits in its own thread, so one process holds all a
worker holds) takes one signed event with a request on each of a few thousand forms
(``bench/forms_memory.py``, which measures 1,000 -> 10,000)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.forms_memory import measure
from connector.config.settings import Settings
from connector.store import Store
from pipelines.operate.status import OTHER_FORM, STATUSES, TOP_FORMS, collect_status, form_series
from tests.connector.test_store import T0, poll_record


@pytest.mark.slow
def test_memory_and_metrics_do_not_grow_with_the_forms_seen(tmp_path: Path) -> None:
    # 500 -> 2,500 forms: at the 12 KiB a form the receiver used to keep, 23 MiB; bounded
    # caches filling (SQLite's page cache, the JSON parser's strings, malloc's arenas) add a
    # few MiB whatever the number of forms.
    got = measure([500, 2500], tmp_path, extra='metrics_forms = ["form_mem0000000000000002499"]\n')
    first, last = got
    assert last["rss_anon_kib"] - first["rss_anon_kib"] < 5 * 1024, got
    # The top 50 forms and "other", then also the configured form once seen: 4 statuses each.
    assert first["requests_lines"] == (TOP_FORMS + 1) * 4 and last["requests_lines"] == (TOP_FORMS + 2) * 4, got
    assert last["metrics_lines"] - last["requests_lines"] == first["metrics_lines"] - first["requests_lines"]
    assert last["metrics_lines"] < 2000, got


def rows(*counts: tuple[str, int]) -> list[tuple[str, dict[str, int]]]:
    return [(f, {"completed": n, "pending": 1}) for f, n in counts]


def test_the_top_forms_and_the_kept_ones_have_series_the_rest_are_summed() -> None:
    got = form_series(rows(("a", 5), ("b", 9), ("c", 1), ("d", 9)), keep=["c"], top=2)
    assert [(f.form_id, f.completed, f.pending) for f in got] == [("b", 9, 1), ("c", 1, 1), ("d", 9, 1),
                                                                  (OTHER_FORM, 5, 1)]
    # Ties go by form id; nothing summed: no "other" series.
    assert [f.form_id for f in form_series(rows(("b", 1), ("a", 1)), top=1)] == ["a", OTHER_FORM]
    assert [f.form_id for f in form_series(rows(("b", 1), ("a", 1)), keep=["b"], top=0)] == ["b", OTHER_FORM]
    assert [f.form_id for f in form_series(rows(("a", 1)), top=1)] == ["a"]


def peak_kib(run: Callable[[], Any]) -> float:
    """The most memory Python held at once while ``run`` ran, above what it held before (KiB)."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 1024
    finally:
        tracemalloc.stop()


def test_the_form_series_hold_the_shown_forms_only_whatever_the_forms_read() -> None:
    def forms(n: int) -> Iterator[tuple[str, dict[str, int]]]:
        return ((f"form_{i:08d}", {"completed": i % 7, "pending": 1}) for i in range(n))

    got = form_series(forms(200_000), keep=["form_00000003"])
    assert len(got) == TOP_FORMS + 2 and got[-1].form_id == OTHER_FORM
    assert sum(f.pending for f in got) == 200_000 and sum(f.completed for f in got) == sum(i % 7 for i in range(200_000))
    # 200,000 forms held at once would be tens of MiB.
    assert peak_kib(lambda: form_series(forms(200_000))) < 256


def test_a_scrape_reads_the_request_counts_in_memory_bounded_in_the_forms(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate()
    try:
        store.upsert_requests([poll_record(f"req_{i}", "pending", T0, formId=f"form_{i:06d}") for i in range(20_000)])
        report = collect_status(Settings(), store, forms=["form_019999"])
        assert [f.form_id for f in report.requests][-2:] == ["form_019999", OTHER_FORM]
        assert sum(f.pending for f in report.requests) == 20_000
        assert {s for f in report.requests for s in STATUSES if getattr(f, s)} == {"pending"}
        # Every form's counts at once (what formsync status shows) take about 6 MiB here.
        assert peak_kib(lambda: collect_status(Settings(), store, forms=[])) < 1024
    finally:
        store.close()
