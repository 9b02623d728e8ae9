"""``formsync deploy grafana``: one Grafana dashboard of what formsync exports (the receiver's
``/metrics`` and the status metrics, ``pipelines.operate.metrics``): deliveries, refusals,
dead letters, commit latency, jobs, sync lag, token expiry and the campaign funnel. Pure:
the same JSON for every installation (Prometheus is picked as a data source variable), also
committed as ``deploy/grafana/formsync.json``."""

from __future__ import annotations

import json
from typing import Any

DASHBOARD = "formsync.json"
UID = "formsync"
_DS = {"type": "prometheus", "uid": "${datasource}"}
_W, _H = 12, 8  # two panels a row


def _panel(n: int, title: str, description: str, targets: list[tuple[str, str]], *, unit: str = "short",
           kind: str = "timeseries") -> dict[str, Any]:
    """Panel ``n`` (its place: two a row) plotting each (PromQL, legend) of ``targets``."""
    return {"id": n + 1, "type": kind, "title": title, "description": description, "datasource": _DS,
            "gridPos": {"h": _H, "w": _W, "x": (n % 2) * _W, "y": (n // 2) * _H},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if kind == "timeseries" else {},
            "targets": [{"refId": chr(ord("A") + i), "datasource": _DS, "expr": expr, "legendFormat": legend}
                        for i, (expr, legend) in enumerate(targets)]}


PANELS: list[tuple[str, str, list[tuple[str, str]], str, str]] = [
    ("Deliveries", "Deliveries reaching an event path, and events stored for the first time, per second.",
     [("sum by (channel) (rate(formsync_receiver_received_total[5m]))", "received {{channel}}"),
      ("sum by (source) (rate(formsync_receiver_stored_total[5m]))", "stored {{source}}"),
      ("sum(rate(formsync_receiver_duplicates_total[5m]))", "duplicates")], "reqps", "timeseries"),
    ("Refusals", "Deliveries refused, by reason, and answers by HTTP status, per second.",
     [("sum by (reason) (rate(formsync_receiver_rejected_total[5m]))", "refused {{reason}}"),
      ("sum by (status) (rate(formsync_receiver_responses_total[5m]))", "HTTP {{status}}")], "reqps", "timeseries"),
    ("Dead letters", "Correctly signed events set aside (formsync dead-letters list), and how fast they come.",
     [("formsync_dead_letters", "held"),
      ("sum(increase(formsync_receiver_set_aside_total[1h]))", "set aside in the last hour")], "short", "timeseries"),
    ("Commit latency", "Time of one group commit (store_events call).",
     [("histogram_quantile(0.5, sum by (le) (rate(formsync_receiver_commit_seconds_bucket[5m])))", "p50"),
      ("histogram_quantile(0.99, sum by (le) (rate(formsync_receiver_commit_seconds_bucket[5m])))", "p99"),
      ("formsync_receiver_queued", "queued deliveries")], "s", "timeseries"),
    ("Jobs", "1 when a job's last run failed; whether a scheduler beats; the problems formsync status reports.",
     [("formsync_job_last_run_failed", "failed {{job_id}} ({{kind}})"),
      ("formsync_scheduler_alive", "scheduler alive"),
      ("sum by (kind) (formsync_problems)", "problem {{kind}}")], "short", "timeseries"),
    ("Sync lag", "Time since the last run of each sync and poll job ended.",
     [('time() - formsync_job_last_run_finished_timestamp_seconds{kind=~"sync|poll"}', "{{job_id}} ({{kind}})")],
     "s", "timeseries"),
    ("Token expiry", "Seconds until the API token (service.token) expires at the latest.",
     [("formsync_api_token_expiry_seconds", "token")], "s", "stat"),
    ("Campaign funnel", "Rows of each outreach job by state.",
     [("sum by (state) (formsync_outreach_rows)", "{{state}}")], "short", "bargauge"),
    ("Requests by form", "Stored requests by form and status (the top forms; the rest as form=\"other\").",
     [("sum by (form, status) (formsync_requests)", "{{form}} {{status}}")], "short", "timeseries"),
]


def grafana_dashboard() -> str:
    """The dashboard's JSON (Grafana's import format), ending with a newline."""
    panels = [_panel(n, title, text, targets, unit=unit, kind=kind)
              for n, (title, text, targets, unit, kind) in enumerate(PANELS)]
    board = {
        "uid": UID, "title": "formsync", "tags": ["formsync"], "timezone": "browser", "schemaVersion": 39,
        "version": 1, "editable": True, "refresh": "1m", "time": {"from": "now-24h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "label": "Prometheus", "type": "datasource",
                                 "query": "prometheus", "current": {}, "hide": 0}]},
        "annotations": {"list": []}, "panels": panels,
    }
    return json.dumps(board, indent=2) + "\n"


def expressions(dashboard: str) -> list[str]:
    """The PromQL of every target of ``dashboard`` (its JSON)."""
    return [t["expr"] for p in json.loads(dashboard)["panels"] for t in p["targets"]]
