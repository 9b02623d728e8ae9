"""Benchmark of outreach pacing: how close the creates run to the service's limit.

Run: ``.venv/bin/python bench/outreach.py [--limit 60] [--window-ms 20000] [--windows 2]``

Starts ``formsync sandbox`` in its own process, sets its create limit to ``--limit`` per
``--window-ms`` (``limits.set``: a scaled window, so several full windows pass in under
a minute), gives the client the same pacing, and runs ``run_outreach`` on a sheet of
``limit * (windows + 1)`` valid rows. The create times are then read from the server
(``calls.list``). The figure:

    achieved rate = (creates - limit) / (time of the last create - time of the limit-th)
    ratio = achieved rate / (limit / window)

(the first ``limit`` creates may go at once, as a sliding window allows; each later one
has to wait for the one ``limit`` creates before it to leave the window, so with an
ideal pacer create ``k + limit`` comes exactly one window after create ``k``, and the
ratio is 1.0). Also
printed: the fullest window on the server (must not exceed the limit), the mean fill of
all windows of the run, and the RATE_LIMITED answers the client got (must be 0). Exits 1
when a window was over the limit, a create was refused, or a row was not sent.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from sandbox_process import SandboxProcess, most_in_window

from connector.client.rpc import FormClient
from connector.store import Store
from pipelines.outreach import run_outreach


def mean_fill(times_ms: list[int], window_ms: int, limit: int) -> float:
    """The mean of count(window) / limit over every window [s, s + window) that starts at
    a whole ms between the first create and the last create minus a window."""
    first, end = times_ms[0], times_ms[-1] - window_ms
    if end <= first:
        return float("nan")
    total, lo, hi = 0, 0, 0
    for s in range(first, end + 1):
        while lo < len(times_ms) and times_ms[lo] < s:
            lo += 1
        while hi < len(times_ms) and times_ms[hi] < s + window_ms:
            hi += 1
        total += hi - lo
    return total / (end - first + 1) / limit


class RoundTrips(logging.Handler):
    """Collects the client's own timing of each requests.create (its debug log line)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seconds: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if (record.msg == "%s -> HTTP %d in %.3f s" and isinstance(args, tuple) and args[:1] == ("requests.create",)
                and isinstance(args[2], float)):
            self.seconds.append(args[2])


def write_sheet(path: Path, rows: int) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["externalId", "name", "email", "topic", "message"])
        for i in range(rows):
            w.writerow([f"bench-{i}", f"Person {i}", f"p{i}@example.test", ["Sales", "Support", "Other"][i % 3],
                        f"row {i}"])


async def run(limit: int, window_ms: int, windows: int) -> int:
    rows = limit * (windows + 1)
    with SandboxProcess() as sb, tempfile.TemporaryDirectory(prefix="formsync-outreach-bench-") as tmp:
        async with aiohttp.ClientSession() as http:
            # Plain calls are not what is measured: give them ample room.
            helpers = sb.helpers(http)
            await helpers.limits_set(creates_per_minute=limit, calls_per_minute=100 * limit, window_ms=window_ms)
            sheet = Path(tmp) / "sheet.csv"
            write_sheet(sheet, rows)
            store = Store(f"sqlite:///{tmp}/store.db")
            store.migrate()
            trips = RoundTrips()
            client_log = logging.getLogger("formsync.client")
            client_log.setLevel(logging.DEBUG)
            client_log.addHandler(trips)
            async with FormClient(sb.base_url, sb.token(), creates_per_minute=limit, calls_per_minute=100 * limit,
                                  rate_window=window_ms / 1000) as fc:
                started = time.monotonic()
                report = await run_outreach(fc, store, sheet, sb.form("Contact"), job="bench",
                                            report_path=Path(tmp) / "report.csv")
                took = time.monotonic() - started
                refused = fc.stats["rate_limited"]
            store.close()
            calls = await helpers.calls_list(method="requests.create")
    times = sorted(c.at_ms for c in calls.items)
    rate = (len(times) - limit) / ((times[-1] - times[limit - 1]) / 1000)
    ideal = limit / (window_ms / 1000)
    fullest = most_in_window(times, window_ms)
    print(f"rows {rows}, sent {report.sent}, creates counted on the server {len(times)}, run {took:.1f} s")
    print(f"limit {limit} creates per {window_ms} ms window ({ideal:.2f}/s); achieved {rate:.2f}/s")
    print(f"create round trip seen by the client: median {statistics.median(trips.seconds) * 1000:.0f} ms, "
          f"mean {statistics.fmean(trips.seconds) * 1000:.0f} ms; the pacer's ideal with it: "
          f"{window_ms / (window_ms + statistics.fmean(trips.seconds) * 1000):.4f}")
    print(f"fullest window on the server {fullest} (limit {limit}); mean window fill "
          f"{mean_fill(times, window_ms, limit):.4f}; RATE_LIMITED answers {refused}")
    bad = fullest > limit or refused or report.sent != rows or len(times) != rows
    print(f"ratio {rate / ideal:.4f}")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=60, help="creates per window (default 60)")
    parser.add_argument("--window-ms", type=int, default=20000, help="the window (default 20000 ms)")
    parser.add_argument("--windows", type=int, default=2, help="full windows to run after the first (default 2)")
    args = parser.parse_args()
    return asyncio.run(run(args.limit, args.window_ms, args.windows))


if __name__ == "__main__":
    sys.exit(main())
