"""Crash recovery of outreach: the job is killed with SIGKILL at random points over a
500-row sheet and resumed each time, against ``formsync sandbox`` running as its own
process. Afterwards: one request per row on the service (counted there, by externalId),
every row recorded as sent with that request, and each request carrying its row's
values.

To afford hundreds of kills, everything is imported once and each run is a forked child
(no new interpreter per kill). The kill delays adapt so the kills spread over the whole
sheet rather than bunching at its start or end."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlmodel import select

from connector.client.rpc import FormClient
from connector.store import Store
from connector.store._tables import OutreachRow
from pipelines.outreach import run_outreach
from tests.pipelines.test_outreach import sheet_rows, write_csv

from .support import SandboxProcess, memory_dir, report_figures, sandbox_process

FAST = {"callsPerMinute": 1_000_000, "createsPerMinute": 1_000_000}
JOB = "crash-test"


@dataclass
class Target:
    sandbox: SandboxProcess
    form: str
    token: str


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with memory_dir(tmp_path_factory.mktemp("crash-sandbox")) as where, sandbox_process(where) as sb:
        sb.helper("limits.set", FAST)
        pro = sb.workspace("pro")
        yield Target(sb, pro["forms"]["Contact"], pro["token"])


def _child(t: Target, db_url: str, sheet: Path, report: Path) -> None:
    """The body of a forked child: one outreach run, then exit without any cleanup."""
    code = 0
    try:
        async def main() -> None:
            store = Store(db_url)
            async with FormClient(t.sandbox.base_url, t.token, calls_per_minute=1_000_000,
                                  creates_per_minute=1_000_000) as fc:
                await run_outreach(fc, store, sheet, t.form, job=JOB, report_path=report)

        asyncio.run(main())
    except BaseException:  # noqa: BLE001 - whatever happens, the child must not return into pytest
        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def _sent(store: Store) -> tuple[int, int]:
    """Rows recorded with a request, and rows recorded but still without one."""
    with store.database.reader() as s:
        rows = s.exec(select(OutreachRow).where(OutreachRow.job_name == JOB)).all()
    return sum(r.request_id is not None for r in rows), sum(r.request_id is None for r in rows)


def crash_and_resume(t: Target, db_url: str, sheet: Path, report: Path, *, rows: int, kills: int,
                     seed: int) -> dict[str, int]:
    """Run outreach in forked children, SIGKILL each after a random delay, ``kills``
    times, then once to completion. Returns the figures of the run."""
    rng = random.Random(seed)
    store = Store(db_url)
    store.migrate()
    figures: Counter[str] = Counter()
    limit = 0.3  # the longest delay before a kill, in seconds; adapted as the rows go out
    deadline = time.monotonic() + 400
    try:
        while figures["kills"] < kills:
            assert time.monotonic() < deadline, f"crash loop too slow: {dict(figures)}"
            store.close()  # no pooled connection crosses the fork
            pid = os.fork()
            if pid == 0:
                _child(t, db_url, sheet, report)
            time.sleep(rng.uniform(0, limit))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                figures["kills"] += 1
            else:
                assert os.WEXITSTATUS(status) == 0, "an outreach run failed (see its traceback above)"
                figures["finished_before_kill"] += 1
            sent, in_flight = _sent(store)
            figures["kills_with_a_row_recorded_not_sent"] += in_flight > 0
            if sent >= rows:
                figures["kills_after_all_sent"] += 1
            # Aim at rows * k / kills rows sent after the k-th kill: more time when behind, less when ahead.
            limit = limit * 1.15 if sent < rows * figures["kills"] / kills else max(limit / 1.5, 0.02)
        store.close()
        pid = os.fork()
        if pid == 0:
            _child(t, db_url, sheet, report)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "the final run failed"
        return dict(figures)
    finally:
        store.close()


async def check_final_state(t: Target, store: Store, sheet_data: list[dict[str, str]]) -> dict[str, int]:
    """One request per row on the service, every row sent with that request, each request
    carrying its row's values. Returns counts for the figures."""
    async with FormClient(t.sandbox.base_url, t.token, calls_per_minute=1_000_000,
                          creates_per_minute=1_000_000) as fc:
        mine = {r["externalId"] for r in sheet_data}
        on_service = [r async for r in fc.iter_requests(form_id=t.form) if r.externalId in mine]
        per_row = Counter(r.externalId for r in on_service)
        duplicates = sum(n - 1 for n in per_row.values())
        assert duplicates == 0, f"duplicate requests: {[k for k, n in per_row.items() if n > 1][:10]}"
        assert set(per_row) == mine, f"rows lost: {sorted(mine - set(per_row))[:10]}"
        with store.database.reader() as s:
            recorded = {r.row_key: r for r in s.exec(select(OutreachRow).where(OutreachRow.job_name == JOB))}
        by_ext = {r.externalId: r for r in on_service}
        assert len(recorded) == len(sheet_data)
        for row in sheet_data:
            rec = recorded[f"ext:{row['externalId']}"]
            assert rec.state == "sent" and rec.request_id == by_ext[row["externalId"]].id, rec
        # The values on the service are those of the sheet (a sample of every 7th row, plus the last).
        for row in sheet_data[::7] + sheet_data[-1:]:
            full = await fc.get_request(by_ext[row["externalId"]].id)
            assert full.recipient is not None and full.recipient.email == row["email"]
            assert full.prefill is not None and full.prefill.get("name") == row["name"]
            assert full.context == {"source": row["source"]}
            assert (full.prefill.get("message") or "") == row["message"]
        attempts = sum(r.attempts for r in recorded.values())
    return {"requests_on_service": len(on_service), "duplicates": duplicates,
            "rows_lost": len(mine - set(per_row)), "create_attempts": attempts}


def run_suite(t: Target, db_url: str, tmp_path: Path, *, rows: int, kills: int, seed: int, backend: str) -> None:
    prefix = f"{backend}-{seed}-"
    data = sheet_rows(rows, bad=False)
    for r in data:
        r["externalId"] = prefix + r["externalId"]
    sheet = write_csv(tmp_path / "sheet.csv", data)
    started = time.monotonic()
    figures = crash_and_resume(t, db_url, sheet, tmp_path / "report.csv", rows=rows, kills=kills, seed=seed)
    store = Store(db_url)
    try:
        final = asyncio.run(check_final_state(t, store, data))
    finally:
        store.close()
    report_figures("outreach crash recovery", backend=backend, rows=rows, seed=seed,
                   seconds=round(time.monotonic() - started, 1), **figures, **final)
    assert figures["kills"] == kills
    # The kills fell while rows were going out, not only before or after.
    assert figures["kills_with_a_row_recorded_not_sent"] >= 1
    assert figures.get("kills_after_all_sent", 0) < kills // 2


@pytest.mark.slow
def test_sigkill_at_200_points_over_500_rows_sqlite(target: Target, tmp_path: Path) -> None:
    with memory_dir(tmp_path) as where:
        run_suite(target, f"sqlite:///{where / 'outreach.db'}", where, rows=500, kills=200, seed=1, backend="sqlite")


@pytest.mark.slow
def test_sigkill_at_40_points_over_100_rows_postgresql(target: Target, pg_database: str, tmp_path: Path) -> None:
    run_suite(target, pg_database, tmp_path, rows=100, kills=40, seed=2, backend="postgresql")
