"""``formsync deploy grafana``: the dashboard it writes is the one committed under
``deploy/grafana/``, and every query names only metrics and labels formsync exports (a real
receiver's ``/metrics`` with some traffic and ``formsync status --format prometheus``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pipelines.operate.grafana import expressions, grafana_dashboard
from tests.alerts.test_alert_rules import exported

from .written import deploy

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "deploy" / "grafana" / "formsync.json"
PROMQL_WORDS = {"sum", "by", "rate", "increase", "histogram_quantile", "time", "without"}
SERIES = re.compile(r'^([a-z_:][a-z0-9_:]*)(?:\{([^}]*)\})? ', re.M)


def test_the_command_writes_the_committed_dashboard(tmp_path: Path) -> None:
    _, done = deploy(tmp_path, "grafana", "[receiver]\n")
    written = (tmp_path / "grafana" / "formsync.json").read_text()
    assert written == COMMITTED.read_text() == grafana_dashboard()
    assert str(tmp_path / "grafana" / "formsync.json") in done.stdout
    board = json.loads(written)
    titles = {p["title"] for p in board["panels"]}
    assert {"Deliveries", "Refusals", "Dead letters", "Commit latency", "Jobs", "Sync lag", "Token expiry",
            "Campaign funnel"} <= titles
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def names_in(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, label names) a PromQL expression uses."""
    labels: set[str] = set()
    for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        labels |= {x.strip() for x in group.split(",") if x.strip()}
    for matchers in re.findall(r"\{([^}]*)\}", expr):
        labels |= set(re.findall(r"([a-z_][a-z0-9_]*)\s*(?:=~|!~|!=|=)", matchers))
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\b(?:by|without)\s*\([^)]*\)", "", expr)
    words = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", bare)) - PROMQL_WORDS
    return words, labels


async def test_every_query_names_only_what_formsync_exports(tmp_path: Path) -> None:
    served, status = await exported(tmp_path)
    metrics: dict[str, set[str]] = {}
    for name, labels in SERIES.findall(served + status):
        metrics.setdefault(name, set()).update(re.findall(r"([a-z_][a-z0-9_]*)=", labels or ""))
    queries = expressions(grafana_dashboard())
    assert len(queries) >= 10
    for expr in queries:
        names, labels = names_in(expr)
        assert names and names <= metrics.keys(), (expr, names - metrics.keys())
        known = set().union(*(metrics[n] for n in names))
        assert labels <= known, (expr, labels - known)
    # The sync lag and the funnel are the series the decisions name, with their labels.
    assert any("time() - formsync_job_last_run_finished_timestamp_seconds" in q for q in queries)
    assert any("by (state) (formsync_outreach_rows)" in q for q in queries)


def test_a_name_formsync_does_not_export_is_caught() -> None:
    assert names_in('sum by (reason) (rate(formsync_receiver_rejected_total{channel="x"}[5m]))') == (
        {"formsync_receiver_rejected_total"}, {"reason", "channel"})
