"""The shipped Prometheus alert rules: valid, unit-tested with ``promtool test rules``
(Debian's prometheus package, installed by scripts/test), and written against metric names
formsync really serves: a real receiver's ``/metrics`` over HTTP and ``formsync status
--format prometheus``."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry, generate_latest
from typer.testing import CliRunner

from bench.forms_memory import event
from connector.client._pacing import token_key
from connector.config.settings import ReceiverSettings, load_settings
from connector.receiver.app import create_receiver_app
from connector.signing import sign_formstep
from connector.store import Store
from connector.store._ledger import PendingRow
from pipelines.cli import app
from pipelines.operate.metrics import StoreCollector

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "config" / "alerts" / "formsync-rules.yml"
RULE_TESTS = Path(__file__).with_name("formsync-rules.test.yml")


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI") or os.environ.get("FORMSYNC_CI"):
            pytest.fail("promtool is required in CI (Debian's prometheus package; scripts/test installs it)")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return path


def test_the_rules_are_valid_and_their_unit_tests_pass() -> None:
    tool = promtool()
    check = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 10 rules found" in check.stdout
    run = subprocess.run([tool, "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_alert_has_a_unit_test() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = {t["alertname"] for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for t in case["alert_rule_test"] if t.get("exp_alerts")}
    assert alerts == tested


def metric_names_in_rules() -> set[str]:
    names: set[str] = set()
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            expr = re.sub(r"\{[^}]*\}", "", rule["expr"])  # label matchers
            names |= set(re.findall(r"\bformsync_[a-z0-9_]+", expr))
    return names


async def exported(tmp_path: Path) -> tuple[str, str]:
    """What formsync exports with some traffic: a real receiver's ``/metrics`` over HTTP
    (one event stored, one refused) and ``formsync status --format prometheus``."""
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    store.migrate()
    cfg = tmp_path / "formsync.toml"
    token = "fb_" + "A" * 32
    cfg.write_text(f'[service]\ntoken = "{token}"\n'
                   f'[store]\nurl = "sqlite:///{tmp_path / "s.db"}"\n[receiver]\ncallback_secrets = ["whsec_x"]\n'
                   '[[jobs]]\nid = "nightly"\nkind = "export"\ncron = "0 2 * * *"\n'
                   'params = { format = "csv", out = "a.csv" }\n')
    settings = load_settings(cfg)
    store.grants.note_token_use(token_key(token), "api")  # the token's expiry series: formsync used it
    # What the job and outreach series need to exist: a run, a beat, an outreach row.
    run = store.runs.start("nightly", "export", scheduled_at=None, pid=1, host="h")
    store.runs.finish(run, "error", error="ValueError: x")
    store.runs.beat("h:1", stale_after_ms=1)
    store.ledger.open_job("spring", "form_1", "contacts.csv", {})
    store.ledger.record_pending("spring", [PendingRow("r1", 2, "h", "k1")])
    rx = create_receiver_app(store, ReceiverSettings(callback_secrets=["whsec_x"]), store_process=False,
                             collectors=[StoreCollector(settings, store)])
    body = event(1)
    async with TestServer(rx, host="127.0.0.1") as server, aiohttp.ClientSession() as http:
        # One delivery refused for its signature, so the labelled refusal series exists.
        async with http.post(server.make_url("/formsync/events"), data=b"{}") as resp:
            assert resp.status == 401
        async with http.post(server.make_url("/formsync/events"), data=body, headers={
                "Content-Type": "application/json",
                "X-Formstep-Signature": sign_formstep("whsec_x", body, int(time.time()))}) as resp:
            assert resp.status == 200, await resp.text()
        async with http.get(server.make_url("/metrics")) as resp:
            served = await resp.text()
    # In a thread: the command runs an event loop of its own.
    cli = await asyncio.to_thread(CliRunner().invoke, app, ["status", "--config", str(cfg), "--format", "prometheus"])
    store.close()
    assert cli.exit_code == 0, cli.output  # written; the failed run is in formsync_problems
    return served, cli.stdout


async def test_the_rules_name_only_metrics_formsync_serves(tmp_path: Path) -> None:
    served, status = await exported(tmp_path)
    served_names = set(re.findall(r"^([a-z_:][a-z0-9_:]*)[{ ]", served + status, re.M))
    wanted = metric_names_in_rules()
    assert wanted and wanted <= served_names, wanted - served_names
    assert 'formsync_job_last_run_failed{job_id="nightly",kind="export"} 1.0' in served
    assert 'formsync_job_last_run_failed{job_id="nightly",kind="export"} 1.0' in status
    assert 'formsync_problems{kind="job_failed"} 1.0' in status
    assert 'formsync_outreach_rows{job_id="spring",state="pending"} 1.0' in status


def test_a_database_that_does_not_answer_never_holds_or_fails_a_scrape(tmp_path: Path) -> None:
    # A PostgreSQL address that takes connections and never answers: a read hangs there.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        cfg = tmp_path / "formsync.toml"
        cfg.write_text(f'[store]\nurl = "postgresql+psycopg://u@127.0.0.1:{silent.getsockname()[1]}/db"\n')
        settings = load_settings(cfg)
        collector = StoreCollector(settings, Store(settings.store.url), wait_seconds=0.5)
        registry = CollectorRegistry()
        registry.register(collector)
        for _ in range(2):  # the second scrape waits on the same read: no pile of hung threads
            started = time.monotonic()
            text = generate_latest(registry).decode()
            assert time.monotonic() - started < 2.0
            assert "formsync_store_read_ok 0.0" in text and "formsync_job_runs" not in text
        assert sum(t.name == "formsync-metrics-read" for t in threading.enumerate()) == 1
    finally:
        silent.close()
