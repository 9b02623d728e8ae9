"""Benchmark of the sandbox's snapshots: restoring a workspace with N submissions against
restarting the sandbox, both measured in one run, interleaved.

Run: ``.venv/bin/python bench/sandbox.py [--submissions 1000] [--rounds 5]``

A fresh ``formsync sandbox`` process; N submissions to the Pro workspace's Contact form
made in bulk (through the service's own ``submissions.create`` helper code, in this
process, on the stopped sandbox's data directory), then ``snapshot.save``. Each round
then times, as a client sees them:

* restore: one ``snapshot.restore`` call over HTTP, until its answer;
* restart: stopping the process (SIGTERM) and starting it again on its data directory,
  until a ``clock.get`` helper call answers.

The medians are printed side by side with their ratio, and ``uptime``'s load at the start
and the end (a busy machine slows both sides alike). The last line is ``restore <ms>``.
Exits 1 when the median restore is over the goal (100 ms) or a restore did not bring the
N submissions back.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

import aiohttp
from sandbox_process import SandboxProcess

GOAL_MS = 100.0


def machine_load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


async def _restore_ms(sb: SandboxProcess) -> float:
    async with aiohttp.ClientSession() as http:
        helpers = sb.helpers(http)
        start = time.perf_counter()
        await helpers.snapshot_restore("bench")
        return (time.perf_counter() - start) * 1000


async def _restart_ms(sb: SandboxProcess) -> float:
    start = time.perf_counter()
    sb.stop()
    sb.start()
    async with aiohttp.ClientSession() as http:
        await sb.helpers(http).clock_get()
    return (time.perf_counter() - start) * 1000


async def _events(sb: SandboxProcess) -> int:
    async with aiohttp.ClientSession() as http:
        return len((await sb.helpers(http).events_list(type="submission.completed")).items)


async def main(n: int, rounds: int) -> int:
    print(f"load average (1, 5, 15 min) at the start: {machine_load()}", flush=True)
    with SandboxProcess() as sb:
        form = sb.form("Contact")
        sb.stop()
        sb.invoke_many("submissions.create", [
            {"formId": form, "answers": {"name": f"P{i}", "email": f"p{i}@example.test"}} for i in range(n)],
            helper=True)
        sb.start()
        async with aiohttp.ClientSession() as http:
            saved = await sb.helpers(http).snapshot_save("bench")
            await sb.helpers(http).submissions_create(form, {"name": "Later", "email": "later@example.test"})
        restores: list[float] = []
        restarts: list[float] = []
        for _ in range(rounds):  # interleaved: a burst of load on the shared machine hits both sides
            restores.append(await _restore_ms(sb))
            restarts.append(await _restart_ms(sb))
        kept = await _events(sb)
    restore, restart = statistics.median(restores), statistics.median(restarts)
    print(f"snapshot of {n} submissions: {saved.size_bytes / 1e6:.1f} MB", flush=True)
    print(f"restore (snapshot.restore over HTTP): median {restore:.1f} ms "
          f"(all: {', '.join(f'{x:.0f}' for x in restores)})")
    print(f"restart (stop, start, first helper answer): median {restart:.0f} ms "
          f"(all: {', '.join(f'{x:.0f}' for x in restarts)})")
    print(f"restart / restore: {restart / restore:.1f}x; goal restore <= {GOAL_MS:.0f} ms; "
          f"submissions back after the restores: {kept} of {n}")
    print(f"load average (1, 5, 15 min) at the end: {machine_load()}")
    print(f"restore {restore:.1f}")
    return 0 if restore <= GOAL_MS and kept == n else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.submissions, args.rounds)))
