"""Benchmark of reminding and closing a campaign: how close the calls run to the
service's call limit, and how few there are.

Run: ``.venv/bin/python bench/campaign.py [--requests 180] [--suppressed 20] [--limit 60] [--window-ms 20000]``

Starts ``formsync sandbox`` in its own process and sends ``--requests`` requests with
``run_outreach`` under generous limits, then puts ``--suppressed`` of their addresses on the
store's suppression list and polls, which cancels their pending requests as ``campaign
suppress`` does (so the service sends them none of its own reminders either): remind and
close then act on the others, and the suppressed rows must cost them no call. Then it sets the call limit to ``--limit`` per
``--window-ms`` (``limits.set``: a scaled window), gives the client the same pacing, and
runs ``formsync campaign remind`` and, one window later, ``close`` on the job (each first
polls the job's form, then one call per pending request). For each, from the server's
own call log (``calls.list``):

    calls, against the budget N + ceil(N / 100) + 1 (N: the requests acted on; remind's leaves
    out the suppressed ones)
    achieved rate = limit / mean(time of call k - time of call k - limit, for every k > limit)
    ratio = achieved rate / (limit / window)      (the sliding window's ideal is 1.0)

(with an ideal pacer, call k + limit goes exactly one window after call k, whatever the
number of calls; a call logged when its answer comes back costs a round trip per window).

and the fullest window (must not exceed the limit) and the RATE_LIMITED answers the
client got (must be 0). ``uptime``'s load is printed beside them. Exits 1 when a budget,
the limit or a request was missed.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import logging
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from sandbox_process import SandboxProcess, most_in_window

from connector.client.rpc import FormClient
from connector.store import Store
from formservice.sandbox.client import SandboxHelpers
from pipelines.campaign import ActionReport, act
from pipelines.outreach import run_outreach
from pipelines.sync.poll import poll_once

ROOMY = 100_000


class RoundTrips(logging.Handler):
    """The client's own timing of each call of one method (its debug log line)."""

    def __init__(self, method: str) -> None:
        super().__init__(logging.DEBUG)
        self.method, self.seconds = method, []  # type: list[float]

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if (record.msg == "%s -> HTTP %d in %.3f s" and isinstance(args, tuple) and args[:1] == (self.method,)
                and isinstance(args[2], float)):
            self.seconds.append(args[2])


def write_sheet(path: Path, rows: int) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["externalId", "name", "email", "topic"])
        for i in range(rows):
            w.writerow([f"bench-{i}", f"Person {i}", f"p{i}@example.test", "Sales"])


async def phase(sb: SandboxProcess, helpers: SandboxHelpers, store: Store, action: str, n: int, limit: int,
                window_ms: int) -> tuple[bool, list[str]]:
    """Run one action paced at the limit; its figures, and whether it kept every promise."""
    since = (await helpers.clock_get()).now_ms
    trips = RoundTrips("requests.remind" if action == "remind" else "requests.cancel")
    client_log = logging.getLogger("formsync.client")
    client_log.setLevel(logging.DEBUG)
    client_log.addHandler(trips)
    async with FormClient(sb.base_url, sb.token(), calls_per_minute=limit, creates_per_minute=limit,
                          rate_window=window_ms / 1000) as fc:
        started = time.monotonic()
        report: ActionReport = await act(fc, store, "bench", action, reason="bench")  # type: ignore[arg-type]
        took = time.monotonic() - started
        refused = fc.stats["rate_limited"]
    client_log.removeHandler(trips)
    mean_trip = statistics.fmean(trips.seconds) if trips.seconds else 0.0
    times = sorted(c.at_ms for c in (await helpers.calls_list(since=since)).items)
    budget = n + math.ceil(n / 100) + 1
    gaps = [times[k] - times[k - limit] for k in range(limit, len(times))]
    rate = limit / (statistics.fmean(gaps) / 1000) if gaps else float("nan")
    ideal = limit / (window_ms / 1000)
    fullest = most_in_window(times, window_ms)
    ok = len(times) <= budget and fullest <= limit and not refused and report.done == n and rate / ideal >= 0.98
    return ok, [f"{action}: {report.done} of {n} done in {took:.1f} s; calls {len(times)} (budget {budget})",
                f"  limit {limit} calls per {window_ms} ms ({ideal:.2f}/s); achieved {rate:.2f}/s; "
                f"ratio {rate / ideal:.4f}",
                f"  round trip seen by the client: median {statistics.median(trips.seconds or [0]) * 1000:.0f} ms, "
                f"mean {mean_trip * 1000:.0f} ms; the sliding window's ideal with it: "
                f"{window_ms / (window_ms + mean_trip * 1000):.4f}",
                f"  fullest window on the server {fullest} (limit {limit}); RATE_LIMITED answers {refused}"]


async def run(n: int, limit: int, window_ms: int, suppressed: int) -> int:
    with SandboxProcess() as sb, tempfile.TemporaryDirectory(prefix="formsync-campaign-bench-") as tmp:
        async with aiohttp.ClientSession() as http:
            helpers = sb.helpers(http)
            await helpers.limits_set(creates_per_minute=ROOMY, calls_per_minute=ROOMY)
            sheet = Path(tmp) / "sheet.csv"
            write_sheet(sheet, n)
            store = Store(f"sqlite:///{tmp}/store.db")
            store.migrate()
            async with FormClient(sb.base_url, sb.token(), calls_per_minute=ROOMY, creates_per_minute=ROOMY) as fc:
                sent = await run_outreach(fc, store, sheet, sb.form("Contact"), job="bench",
                                          report_path=Path(tmp) / "report.csv")
                store.campaign.suppress([f"p{i}@example.test" for i in range(n - suppressed, n)], "bench")
                polled = await poll_once(fc, store)  # cancels the suppressed addresses' pending requests
            await helpers.limits_set(creates_per_minute=limit, calls_per_minute=limit, window_ms=window_ms)
            await asyncio.sleep(window_ms / 1000)
            acted = n - suppressed
            ok_remind, remind = await phase(sb, helpers, store, "remind", acted, limit, window_ms)
            await asyncio.sleep(window_ms / 1000)  # an empty window before the next phase
            ok_close, close = await phase(sb, helpers, store, "close", acted, limit, window_ms)
            store.close()
    print(f"requests {n} (sent {sent.sent}; {len(polled.suppressed)} of them then suppressed, their requests "
          f"canceled before the phases); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores")
    print("\n".join(remind + close))
    return 0 if ok_remind and ok_close and sent.sent == n and len(polled.suppressed) == suppressed else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=180, help="pending requests to remind and close (180)")
    parser.add_argument("--suppressed", type=int, default=20, help="of them, addresses suppressed (20)")
    parser.add_argument("--limit", type=int, default=60, help="calls per window (default 60)")
    parser.add_argument("--window-ms", type=int, default=20000, help="the window (default 20000 ms)")
    args = parser.parse_args()
    return asyncio.run(run(args.requests, args.limit, args.window_ms, args.suppressed))


if __name__ == "__main__":
    sys.exit(main())
