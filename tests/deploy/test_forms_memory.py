"""The receiver's memory and ``/metrics`` stay bounded in the number of forms it has seen:
a real ``formsync receive`` process (commits in its own thread, so one process holds all a
worker holds) takes one signed event with a request on each of a few thousand forms
(``bench/forms_memory.py``, which measures 1,000 -> 10,000)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.forms_memory import measure
from pipelines.operate.status import OTHER_FORM, TOP_FORMS, form_series


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


def rows(*counts: tuple[str, int]) -> dict[str, dict[str, int]]:
    return {f: {"completed": n, "pending": 1} for f, n in counts}


def test_the_top_forms_and_the_kept_ones_have_series_the_rest_are_summed() -> None:
    got = form_series(rows(("a", 5), ("b", 9), ("c", 1), ("d", 9)), keep=["c"], top=2)
    assert [(f.form_id, f.completed, f.pending) for f in got] == [("b", 9, 1), ("c", 1, 1), ("d", 9, 1),
                                                                  (OTHER_FORM, 5, 1)]
    # Ties go by form id; nothing summed: no "other" series.
    assert [f.form_id for f in form_series(rows(("b", 1), ("a", 1)), top=1)] == ["a", OTHER_FORM]
    assert [f.form_id for f in form_series(rows(("b", 1), ("a", 1)), keep=["b"], top=0)] == ["b", OTHER_FORM]
    assert [f.form_id for f in form_series(rows(("a", 1)), top=1)] == ["a"]
