"""Benchmark of the receiver's memory against the number of forms it has seen.

Run: ``.venv/bin/python bench/forms_memory.py [--forms 1000 10000] [--answers] [--db URL] [--soak FORMS]``

``formsync receive`` on a SQLite file with its commits in a thread of its own process
(``receiver.store_process = false``: one process holds everything a worker holds) takes
one signed ``request.completed`` event on each of ``--forms`` form ids in turn (each on a
form not seen before, each with one request, so each form gets its ``formsync_requests``
series); after each step ``/metrics`` is scraped and its lines counted, and the receiver's
anonymous memory (``RssAnon`` of ``/proc/<pid>/status``) is read once it has been idle
for 1.5 s (no route runs a collection from outside; what the receiver keeps per form is
acyclic, freed without one). The last line is
``growth <MiB>``: RssAnon after the last step minus after the first.

With ``--answers`` each event also answers three fields, so each form gets its typed view
(and its field list's held-back keys); ``--db`` takes another store than the SQLite file
(a PostgreSQL URL: every form's view then lives in the server, not in the receiver).
With ``--soak 20`` the readings are after as many events on 20 forms in turn: memory
flat in the events (``--forms 5000 15000 45000 --soak 20``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SECRET = "whsec_" + "be" * 32


ANSWERS = {"name": "Ada", "rating": 4, "agree": True}


def event(n: int, answers: bool = False, form_n: int | None = None) -> bytes:
    """A small ``request.completed`` envelope ``n`` (its own request and submission) on
    form ``form_n`` (default ``n``), answering three fields with ``answers``."""
    form = f"form_mem{n if form_n is None else form_n:019d}"
    envelope = {
        "id": f"evt_mem{n:012d}", "type": "request.completed", "createdAt": "2026-05-01T10:00:00.000Z",
        "apiVersion": "2026-09-24", "test": False,
        "data": {
            "request": {"id": f"req_mem{n:012d}", "externalId": None, "status": "completed", "outcome": None,
                        "language": "en", "recipient": {"email": "ada@example.test", "name": "Ada"},
                        "metadata": {}, "context": None, "createdAt": "2026-05-01T09:00:00.000Z",
                        "completedAt": "2026-05-01T10:00:00.000Z"},
            "form": {"id": form, "name": f"Form {n}", "snapshotId": f"snap_mem{n:016d}"},
            "submission": {"id": f"sub_mem{n:012d}", "respondentEmail": "ada@example.test",
                           "submittedAt": "2026-05-01T10:00:00.000Z", "updatedAt": None, "editCount": 0,
                           "pdfUrl": None, "language": "en"},
            "answers": dict(ANSWERS) if answers else {}, "display": {},
        },
    }
    return json.dumps(envelope, separators=(",", ":")).encode()


async def deliver(url: str, first: int, last: int, answers: bool, forms: int | None = None,
                  concurrency: int = 8) -> None:
    """Post events ``first`` to ``last - 1`` (each on a form of its own, or on ``forms``
    forms in turn); every answer must be 2xx."""
    import aiohttp

    from connector.signing import sign_formstep

    todo = iter(range(first, last))

    async def worker(http: aiohttp.ClientSession) -> None:
        for n in todo:
            body = event(n, answers, None if forms is None else n % forms)
            headers = {"Content-Type": "application/json",
                       "X-Formstep-Signature": sign_formstep(SECRET, body, int(time.time()))}
            for _ in range(20):  # a 503 (a slow commit on a busy machine) is retried, as a sender does
                async with http.post(url, data=body, headers=headers) as r:
                    if r.status == 200:
                        break
                    if r.status != 503:
                        raise SystemExit(f"form {n}: HTTP {r.status} {await r.text()}")
                await asyncio.sleep(0.5)
            else:
                raise SystemExit(f"form {n}: still 503 after 20 tries")

    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))


def rss_anon_kib(pid: int) -> int:
    """The process's anonymous resident memory (``RssAnon``), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise SystemExit(f"no RssAnon in /proc/{pid}/status")


def metrics_lines(base: str) -> tuple[int, int]:
    """The number of lines ``/metrics`` answers, and of those the ``formsync_requests`` series."""
    import urllib.request

    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as r:
        lines = r.read().decode().splitlines()
    return len(lines), sum(line.startswith("formsync_requests{") for line in lines)


def start_receiver(work: Path, db: str | None = None, extra: str = "") -> tuple[subprocess.Popen[str], str]:
    """``formsync receive`` on ``db`` (default: a SQLite file of ``work``), commits in a
    thread, with ``extra`` lines of its ``[receiver]`` settings; its base URL."""
    config = work / "formsync.toml"
    config.write_text(f'[receiver]\ncallback_secrets = ["{SECRET}"]\nstore_process = false\n{extra}')
    db = db or f"sqlite:///{work / 'store.db'}"
    cmd = [sys.executable, "-m", "pipelines.cli", "receive", "--config", str(config), "--port", "0", "--db", db]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the receiver exited before listening")
        if "listening on " in line:
            url = line.split("listening on ", 1)[1].split()[0]
            return proc, url.split("/formsync", 1)[0]
    proc.kill()
    raise SystemExit("the receiver did not start")


def settle(pid: int, seconds: float = 1.5) -> int:
    """RssAnon once the receiver has been idle ``seconds`` (its lowest reading)."""
    time.sleep(seconds)
    return rss_anon_kib(pid)


def measure(steps: list[int], work: Path, *, answers: bool = False, db: str | None = None,
            forms: int | None = None, extra: str = "") -> list[dict[str, Any]]:
    """Deliver up to each of ``steps`` events in turn (each on a new form, or on ``forms``
    forms); RssAnon and /metrics lines after each."""
    proc, base = start_receiver(work, db, extra)
    out = []
    try:
        done = 0
        for step in steps:
            started = time.perf_counter()
            asyncio.run(deliver(f"{base}/formsync/events", done, step, answers, forms))
            took = time.perf_counter() - started
            done = step
            lines, requests = metrics_lines(base)
            out.append({"events": step, "rss_anon_kib": settle(proc.pid), "metrics_lines": lines,
                        "requests_lines": requests, "seconds": took})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--forms", type=int, nargs="+", default=[1000, 10000],
                        help="events at each reading, each on a new form")
    parser.add_argument("--soak", type=int, metavar="FORMS",
                        help="the events on this many forms in turn instead (memory flat in the events)")
    parser.add_argument("--answers", action="store_true", help="each event answers three fields (typed views)")
    parser.add_argument("--db", help="a PostgreSQL store's URL (default: a SQLite file); its database is made afresh")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="formsync-bench-") as tmp:
        if args.db:
            _fresh(args.db)
        got = measure(sorted(args.forms), Path(tmp), answers=args.answers, db=args.db, forms=args.soak)
    seen = "events" if args.soak else "forms"
    for g in got:
        print(f"{g['events']:>7} {seen}: RssAnon {g['rss_anon_kib'] / 1024:7.1f} MiB, /metrics {g['metrics_lines']} lines, "
              f"{g['seconds']:.1f} s to deliver")
    growth = (got[-1]["rss_anon_kib"] - got[0]["rss_anon_kib"]) / 1024
    print(f"growth {growth:.1f}")
    return 0


def _fresh(url: str) -> None:
    """Drop the PostgreSQL database of ``url`` and make it again (a bench database only)."""
    import sqlalchemy as sa

    u = sa.make_url(url)
    if u.get_backend_name() != "postgresql":
        raise SystemExit("--db: a PostgreSQL URL, whose database the bench drops and makes again")
    admin = sa.create_engine(u.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{u.database}" WITH (FORCE)')
        conn.exec_driver_sql(f'CREATE DATABASE "{u.database}"')
    admin.dispose()


if __name__ == "__main__":
    sys.exit(main())
