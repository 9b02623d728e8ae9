"""Benchmark of the sync pipeline's cost: API calls to bring in k new submissions, with
more arriving while it pages.

Run: ``.venv/bin/python bench/sync.py [--sizes 50 500 2000]``

For each k: a fresh ``formsync sandbox`` process; a first ``sync_form`` of the Contact
form sets the high-water mark; k new submissions are made in bulk (the ``submissions.create``
helper's own code, in this process, on the stopped sandbox's data directory), and the
sandbox runs again. Then ``sync_form`` runs while a task submits more
(``submissions.create`` over HTTP, one every few milliseconds until the walk ends), and
its calls, counted on the server (``calls.list``), are printed beside ``ceil(k/100) + 1``.
A second sync picks up what arrived during the first (one call when fewer than 100).
Finally every submission id the server lists must be in the store exactly once, and
the store must hold nothing else: no gap, no duplicate.

The last line is ``calls <n>``, the first walk's calls for the largest k. Exits 1 when a
walk is over budget or the store does not match the server.
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
from sqlmodel import select

from connector.client.rpc import FormClient
from connector.store import Store
from connector.store._tables import SubmissionRow
from pipelines.sync.submissions import sync_form

ARRIVALS = 30


def answers(i: int) -> dict[str, str]:
    return {"name": f"Person {i}", "email": f"p{i}@example.test", "topic": "sales"}


async def measure(k: int, tmp: str) -> tuple[int, bool]:
    with SandboxProcess() as sb:
        form = sb.form("Contact")
        store = Store(f"sqlite:///{tmp}/sync-{k}.db")
        store.migrate()
        async with FormClient(sb.base_url, sb.token(), calls_per_minute=100_000, creates_per_minute=100_000) as fc:
            await sync_form(fc, store, form)  # the mark: the seeded submissions
        sb.stop()
        sb.invoke_many("submissions.create", [{"formId": form, "answers": answers(i)} for i in range(k)],
                       helper=True)
        sb.start()
        async with aiohttp.ClientSession() as http, FormClient(
                sb.base_url, sb.token(), calls_per_minute=100_000, creates_per_minute=100_000) as fc:
            helpers = sb.helpers(http)
            await helpers.limits_set(calls_per_minute=100_000, creates_per_minute=100_000)
            since = (await helpers.clock_get()).now_ms
            walk = asyncio.create_task(sync_form(fc, store, form))
            arrived = 0
            while not walk.done() and arrived < ARRIVALS:
                await helpers.submissions_create(form, answers(k + arrived))
                arrived += 1
                await asyncio.sleep(0.005)
            first = await walk
            counted = Counter(i.method for i in (await helpers.calls_list(since=since)).items)
            calls = sum(counted.values())
            second = await sync_form(fc, store, form)
            on_server = [s.id async for s in fc.iter_submissions(form, include_drafts=False)]
        with store.database.reader() as s:
            stored = list(s.exec(select(SubmissionRow.id).where(SubmissionRow.form_id == form)))
        store.close()
    budget = math.ceil(k / 100) + 1
    dup = [i for i, n in Counter(on_server).items() if n > 1]
    missing = set(on_server) - set(stored)
    extra = set(stored) - set(on_server)
    ok = calls <= budget and calls == first.calls and not dup and not missing and not extra \
        and len(stored) == len(set(stored)) and second.calls <= 1 + arrived // 100
    print(f"k={k:>5}: first walk {calls} calls (budget ceil(k/100)+1 = {budget}), fetched {first.fetched}; "
          f"{arrived} arrived while it paged, second walk {second.calls} call(s), fetched {second.fetched}; "
          f"server {len(on_server)} submissions, store {len(stored)}, missing {len(missing)}, "
          f"extra {len(extra)}, duplicate {len(dup)}{'' if ok else '  FAILED'}")
    return calls, ok


async def run(sizes: list[int]) -> int:
    last, ok = 0, True
    with tempfile.TemporaryDirectory(prefix="formsync-sync-bench-") as tmp:
        for k in sizes:
            calls, good = await measure(k, tmp)
            ok &= good
            last = calls
    print(f"calls {last}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 2000])
    return asyncio.run(run(parser.parse_args().sizes))


if __name__ == "__main__":
    sys.exit(main())
