"""Benchmark of the poll pipeline's cost: API calls per cycle for N pending requests.

Run: ``.venv/bin/python bench/poll.py [--sizes 1000 5000]``

For each N: a fresh ``formsync sandbox`` process; N pending requests of one form made in
bulk (through the service's own ``requests.create`` code, in this process, on the
stopped sandbox's data directory: thousands of HTTP creates would take minutes) and stored
in a SQLite store as outreach stores its create results; then, with the sandbox running
again, two ``poll_once`` cycles counted on the server (``calls.list``):

* cycle 1: nothing changed since the requests were made;
* cycle 2: after 10 of them were canceled (resolved by one ``status=canceled`` listing).

Each is printed beside the budget ``ceil(N/100) + 1``, with the ``requests.get`` calls
(0 when the listings can resolve everything, as here). The last line is ``calls <n>``,
the dearest cycle of the largest N. Exits 1 when a cycle is over budget, made a
``requests.get``, or left the store wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
from collections import Counter

import aiohttp
from sandbox_process import SandboxProcess

from connector.client.rpc import FormClient
from connector.store import Store
from formservice.sandbox.client import SandboxHelpers
from pipelines.sync.poll import poll_once, stored_pending

CANCELED = 10


async def server_calls(helpers: SandboxHelpers, since: int) -> Counter[str]:
    return Counter(i.method for i in (await helpers.calls_list(since=since)).items)


async def measure(n: int, tmp: str) -> tuple[list[int], bool]:
    """The server-counted calls of the two cycles for ``n`` pending requests, and whether all was well."""
    ok = True
    with SandboxProcess() as sb:
        form = sb.form("Contact")
        sb.stop()
        sb.invoke_many("workspace.update", [{"monthlyAllowance": n + 1000}], helper=True)  # Pro allows 1000
        created = sb.invoke_many("requests.create", [
            {"formId": form, "recipient": {"email": f"p{i}@example.test"}, "externalId": f"poll-{i}",
             "delivery": "none"} for i in range(n)])
        sb.start()
        store = Store(f"sqlite:///{tmp}/poll-{n}.db")
        store.migrate()
        store.upsert_requests([{**c, "formId": form} for c in created], source="poll")
        assert len(stored_pending(store)) == n
        cycles: list[int] = []
        async with aiohttp.ClientSession() as http, FormClient(
                sb.base_url, sb.token(), calls_per_minute=100_000, creates_per_minute=100_000) as fc:
            helpers = sb.helpers(http)
            await helpers.limits_set(calls_per_minute=100_000, creates_per_minute=100_000)
            for cycle in (1, 2):
                if cycle == 2:
                    for c in created[:: n // CANCELED][:CANCELED]:
                        await fc.cancel_request(c["id"], reason="bench")
                since = (await helpers.clock_get()).now_ms
                report = await poll_once(fc, store)
                counted = await server_calls(helpers, since)
                total = sum(counted.values())
                budget = math.ceil(n / 100) + 1
                gets = counted.get("requests.get", 0)
                want_canceled = 0 if cycle == 1 else CANCELED
                good = (total <= budget and gets == 0 and report.canceled == want_canceled
                        and report.still_pending == n - want_canceled and total == report.calls)
                ok &= good
                print(f"N={n:>5} cycle {cycle} ({'unchanged' if cycle == 1 else f'{CANCELED} canceled'}): "
                      f"{total} calls (budget ceil(N/100)+1 = {budget}), requests.get {gets}, "
                      f"{dict(counted)}{'' if good else '  FAILED'}")
                cycles.append(total)
        store.close()
    return cycles, ok


async def run(sizes: list[int]) -> int:
    worst, ok = 0, True
    with tempfile.TemporaryDirectory(prefix="formsync-poll-bench-") as tmp:
        for n in sizes:
            cycles, good = await measure(n, tmp)
            ok &= good
            worst = max(worst, *cycles)
    print(f"calls {worst}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000])
    return asyncio.run(run(parser.parse_args().sizes))


if __name__ == "__main__":
    sys.exit(main())
