"""One count of a job's sheet rows, said the same way everywhere: after a row is edited
and outreach is run again, outreach's last line, ``formsync status``, ``campaign funnel``
(JSON and table), the page and the campaign export agree on sent, changed, rejected and
suppressed, each from ``job_counts``. On a real sandbox over loopback, through the
commands, with a SQLite store."""

from __future__ import annotations

import asyncio
import csv
import json
import re
from collections import Counter
from html import escape
from pathlib import Path

from click.testing import Result
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from connector.store import Store
from pipelines.campaign import read_campaign
from pipelines.cli import app
from pipelines.outreach.counts import RunCounts, job_counts, row_state, row_states
from tests.conftest import Sandbox

# Rows 2-4 are sent; row 5 has row 2's address (suppressed); row 6 has no valid address.
ROWS = [("a", "ann@x.test"), ("b", "bob@x.test"), ("c", "cy@x.test"), ("d", "ANN@x.test"), ("e", "not-an-address")]


def _sheet(path: Path, rows: list[tuple[str, str]], *, names: dict[str, str] | None = None) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["externalId", "name", "email"])
        w.writerows([ext, (names or {}).get(ext, f"Person {ext}"), email] for ext, email in rows)
    return path


async def _run(args: list[str], config: Path, token: str) -> Result:
    # In a thread: the command runs its own event loop.
    result = await asyncio.to_thread(CliRunner().invoke, app, [*args, "--config", str(config)],
                                     env={"FORMSYNC_SERVICE__TOKEN": token, "COLUMNS": "200"})
    assert token not in result.output
    return result


def _words(text: str) -> str:
    return " ".join(text.replace("│", " ").replace("┃", " ").split())


async def test_an_edited_row_is_counted_changed_in_every_output(sandbox: Sandbox, tmp_path: Path) -> None:
    await sandbox.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
    db = f"sqlite:///{tmp_path}/s.db"
    config = tmp_path / "formsync.toml"
    config.write_text(f'[store]\nurl = "{db}"\n[service]\nbase_url = "{sandbox.base_url}"\n')
    sheet, report = tmp_path / "contacts.csv", tmp_path / "spring-report.csv"
    send = ["outreach", str(sheet), "--form", sandbox.pro.forms["Contact"], "--job", "spring", "--report", str(report)]

    _sheet(sheet, ROWS)
    first = await _run(send, config, sandbox.pro.token)
    assert "sent 3 of 5 rows; 1 rejected, 1 suppressed" in _words(first.stderr), first.output
    _sheet(sheet, ROWS, names={"b": "Robert B."})  # row 3 edited after it was sent
    again = await _run(send, config, sandbox.pro.token)
    line = "sent 2 of 5 rows (0 now, 2 before); 1 rejected, 1 changed since sent, not sent again, 1 suppressed"
    assert line in _words(again.stderr), again.output

    store = Store(db)
    try:
        c = read_campaign(store, "spring")
        record = store.campaign.job("spring")
        assert record is not None
        # the one count: the run's record, and the ledger's rows, say the same
        assert c.counts == job_counts(Counter(r.state for r in c.rows), (record.settings or {}).get("outcome"))
    finally:
        store.close()
    want = (5, 2, 1, 2, 1)  # rows, sent, changed, rejected (invalid + changed), suppressed
    counts: RunCounts = c.counts
    assert (counts.rows, counts.sent_total, counts.changed, counts.rejected, counts.suppressed) == want

    status = await _run(["status"], config, sandbox.pro.token)
    assert f"{line} (see {report}), done " in _words(status.stdout), status.output

    f = json.loads((await _run(["campaign", "funnel", "spring", "--json"], config, sandbox.pro.token)).stdout)
    assert (f["rows"], f["sent"], f["changed"], f["rejected"], f["suppressed"], f["not_sent"]) == (*want, 0)
    assert f["requests"] == 3, "the changed row keeps the request it was sent"
    table = _words((await _run(["campaign", "funnel", "spring"], config, sandbox.pro.token)).stdout)
    for step, n in (("rows", 5), ("sent", 2), ("rejected", 2), ("changed since sent", 1), ("suppressed", 1),
                    ("requests", 3)):
        assert re.search(rf"(^| ){re.escape(step)} {n}( |$)", table), (step, n, table)
    assert "5 rows: 2 sent, 2 rejected (1 changed since sent), 1 suppressed" in table

    page = tmp_path / "spring.html"
    assert (await _run(["campaign", "page", "spring", "--out", str(page)], config, sandbox.pro.token)).exit_code == 0
    html = page.read_text(encoding="utf-8")
    for words, n in row_states(counts):
        assert f"<tr><td>{escape(words)}</td><td class=n>{n:,}</td></tr>" in html, (words, n)
    assert "<tr><td>sheet rows sent</td><td class=n>2</td></tr>" in html
    assert "<tr><td>changed since sent</td><td class=n>1</td></tr>" in html

    out = tmp_path / "spring.csv"
    done = await _run(["campaign", "export", "spring", "--out", str(out)], config, sandbox.pro.token)
    assert done.exit_code == 0, done.output
    with out.open(newline="", encoding="utf-8") as fh:
        states = Counter(r["row_state"] for r in csv.DictReader(fh))
    assert states == {"sent": 2, "changed": 1, "rejected": 1, "suppressed": 1}
    assert (sum(states.values()), states["sent"], states["changed"], states["changed"] + states["rejected"],
            states["suppressed"]) == want

    # A run killed while sending row 4 (its request not confirmed): every output counts it left, from the ledger.
    engine = create_engine(db)
    with engine.begin() as conn:
        conn.execute(text("UPDATE formsync_outreach_rows SET state = 'sending', request_id = NULL "
                          "WHERE job_name = 'spring' AND row_number = 4"))
    engine.dispose()
    status = await _run(["status"], config, sandbox.pro.token)
    assert ("sent 1 of 5 rows, 1 left; 1 rejected, 1 changed since sent, not sent again, 1 suppressed, "
            "interrupted ") in _words(status.stdout), status.output
    f = json.loads((await _run(["campaign", "funnel", "spring", "--json"], config, sandbox.pro.token)).stdout)
    assert (f["rows"], f["sent"], f["changed"], f["rejected"], f["suppressed"], f["not_sent"]) == (5, 1, 1, 2, 1, 1)
    assert (await _run(["campaign", "export", "spring", "--out", str(out)], config, sandbox.pro.token)).exit_code == 0
    with out.open(newline="", encoding="utf-8") as fh:
        assert Counter(r["row_state"] for r in csv.DictReader(fh))["not sent"] == 1


def test_the_counts_are_the_runs_while_the_ledger_holds_them_else_the_ledgers() -> None:
    done = RunCounts(rows=6, invalid=1, suppressed=1, skipped_existing=2, changed=1, sent=1)
    outcome = {**done.model_dump(), "at": 1}
    ledger = {"sent": 3, "changed": 1, "suppressed": 1}
    assert job_counts(ledger, outcome) == done, "the run's own counts, with the rows sent before it"
    # A later run killed while sending: two new rows recorded, one sent, one not confirmed.
    killed = job_counts({**ledger, "sent": 4, "sending": 1}, outcome)
    assert killed == RunCounts(rows=8, invalid=1, suppressed=1, changed=1, sent=4, left=1)
    assert killed.rows == killed.sent_total + killed.rejected + killed.suppressed + killed.left
    assert killed.outcome() == "sent 4 of 8 rows, 1 left; 1 rejected, 1 changed since sent, not sent again, " \
                               "1 suppressed"
    # A first run killed before it recorded anything: the ledger alone.
    assert job_counts({"pending": 2, "sent": 1}, None) == RunCounts(rows=3, sent=1, left=2)
    assert [row_state(s) for s in ("sent", "changed", "failed", "suppressed", "pending", None)] == [
        "sent", "changed", "rejected", "suppressed", "not sent", "rejected"]
