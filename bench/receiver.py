"""Benchmark of the receiver: what persisting costs against a handler that does not persist.

Run: ``.venv/bin/python bench/receiver.py [--duration 10] [--concurrency 64] [--no-postgres]
[--with-nostore] [--with-thread]``

Three servers, each its own process, each driven by the same load generator (an aiohttp
client in another process, so it never shares a server's event loop):

* ``bare``: an aiohttp handler doing the receiver's own read, signature check and JSON
  parse (``connector.signing.verify`` and ``connector.receiver.parse_event``), answering
  200 without storing;
* ``sqlite``: ``formsync receive`` on a SQLite file (WAL, ``synchronous=FULL``; a 2xx
  only after the commit), with its store process (``receiver.store_process``);
* ``postgresql``: ``formsync receive`` on a fresh database at 127.0.0.1:5432;
* with ``--with-nostore``, also ``no store``: the receiver with a store that writes
  nothing, which shows what the receiver costs apart from its database;
* with ``--with-thread``, also ``sqlite/thread`` and ``postgresql/thread``: the receiver
  committing in a worker thread of its own process (``store_process = false``), side by
  side with the store process.

Load: ``--concurrency`` connections (64) posting signed ``request.completed`` events of
about 7 KB with 20 answers, each with a fresh id, for ``--duration`` seconds (after a
1 s warm-up that is stored but not measured). For each server it prints events/s and
the p50/p99 latency, and checks that every answer was 2xx. Right after the load each
receiver is killed with SIGKILL; the database is reopened and every acknowledged event
id must be in it.

The last line is ``ratio <x>``: the LOWER of the two receiver/bare rate ratios (SQLite
and PostgreSQL), so the figure never flatters; both are printed on the lines above.
The exit status is 1 when any answer was not 2xx or an acknowledged event is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SECRET = "whsec_" + "be" * 32
EVENT_ID = "__EVENT_ID__"
ANSWERS = 20
WARMUP_S = 1.0
PG = "postgresql+psycopg://postgres@127.0.0.1:5432"


# ======================================================================================
# The event
# ======================================================================================


def event_template() -> bytes:
    """A request.completed envelope of about 7 KB with 20 answers; ``EVENT_ID`` marks the
    places that make each event (and its request and submission) distinct."""
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut " \
             "labore et dolore magna aliqua. Ut enim ad minim veniam, quis"
    answers = {f"q{i:02d}": f"{filler} #{i}" for i in range(ANSWERS)}
    envelope = {
        "id": f"evt_{EVENT_ID}", "type": "request.completed", "createdAt": "2026-05-01T10:00:00.000Z",
        "apiVersion": "2026-09-24", "test": False,
        "data": {
            "request": {"id": f"req_{EVENT_ID}", "externalId": f"ext-{EVENT_ID}", "status": "completed",
                        "outcome": None, "language": "en", "recipient": {"email": "ada@example.test", "name": "Ada"},
                        "metadata": {"runId": "bench"}, "context": None, "createdAt": "2026-05-01T09:00:00.000Z",
                        "completedAt": "2026-05-01T10:00:00.000Z"},
            "form": {"id": "form_bench0000000000000000", "name": "Bench", "snapshotId": "snap_bench000000000000000"},
            "submission": {"id": f"sub_{EVENT_ID}", "respondentEmail": "ada@example.test",
                           "submittedAt": "2026-05-01T10:00:00.000Z", "updatedAt": None, "editCount": 0,
                           "pdfUrl": None, "language": "en"},
            "answers": answers,
            "display": {k: v.upper() for k, v in answers.items()},
        },
    }
    return json.dumps(envelope, separators=(",", ":")).encode()


# ======================================================================================
# Load generator (its own process)
# ======================================================================================


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def load(url: str, duration: float, concurrency: int, ids_out: Path, run: str) -> dict[str, Any]:
    import aiohttp

    from connector.signing import sign_formstep

    template = event_template()
    latencies: list[float] = []
    completed: list[float] = []
    statuses: dict[int, int] = {}
    errors: list[str] = []
    acked: list[str] = []
    counter = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    measure_from = start + WARMUP_S
    stop_at = measure_from + duration

    async def worker(http: aiohttp.ClientSession) -> None:
        nonlocal counter
        while loop.time() < stop_at:
            counter += 1
            eid = f"{run}{counter:09d}"
            body = template.replace(EVENT_ID.encode(), eid.encode())
            headers = {"Content-Type": "application/json", "X-Formstep-Event-Id": f"evt_{eid}",
                       "X-Formstep-Event-Type": "request.completed",
                       "X-Formstep-Signature": sign_formstep(SECRET, body, int(time.time()))}
            sent = loop.time()
            try:
                async with http.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    status = resp.status
            except (aiohttp.ClientError, OSError) as e:
                errors.append(f"{type(e).__name__}: {e}")
                continue
            done = loop.time()
            if 200 <= status < 300:
                acked.append(f"evt_{eid}")
            statuses[status] = statuses.get(status, 0) + 1
            if measure_from <= done <= stop_at:
                completed.append(done)
                if sent >= measure_from:
                    latencies.append(done - sent)

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:
        await asyncio.gather(*(worker(http) for _ in range(concurrency)))
    ids_out.write_text("\n".join(acked))
    return {
        "events": len(completed), "seconds": duration, "rate": len(completed) / duration,
        "p50_ms": percentile(latencies, 0.50) * 1000, "p99_ms": percentile(latencies, 0.99) * 1000,
        "statuses": statuses, "errors": errors[:5], "error_count": len(errors), "acked": len(acked),
    }


def run_load(url: str, duration: float, concurrency: int, ids_out: Path) -> dict[str, Any]:
    """The load generator in a separate process; its result."""
    cmd = [sys.executable, __file__, "--load", url, "--duration", str(duration), "--concurrency", str(concurrency),
           "--ids-out", str(ids_out), "--run", secrets.token_hex(4)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ======================================================================================
# The bare handler (its own process)
# ======================================================================================


async def serve_bare(max_body: int) -> None:
    from aiohttp import web

    from connector.receiver.app import parse_event
    from connector.signing import verify

    async def handle(request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > max_body:
            return web.json_response({"ok": False}, status=413)
        body = bytearray()
        async for chunk in request.content.iter_any():
            body += chunk
            if len(body) > max_body:
                return web.json_response({"ok": False}, status=413)
        if not verify(request.headers, bytes(body), [SECRET], "formstep", tolerance=300):
            return web.json_response({"ok": False}, status=401)
        try:
            event = parse_event(bytes(body))
        except ValueError:
            return web.json_response({"ok": False}, status=400)
        return web.Response(text=json.dumps({"ok": True, "status": "stored", "eventId": event.id, "type": event.type}),
                            content_type="application/json")

    app = web.Application()
    app.router.add_post("/formsync/events", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"bare listening on http://127.0.0.1:{runner.addresses[0][1]}/formsync/events", flush=True)
    await asyncio.Event().wait()


async def serve_nostore() -> None:
    """The real receiver application with a store that writes nothing: what the
    receiver costs without its database (a diagnostic, ``--with-nostore``)."""
    from connector.config.settings import ReceiverSettings
    from connector.receiver.app import run_receiver
    from connector.store import Store
    from connector.store._mapping import StoreOutcome

    class NoStore(Store):
        def store_events(self, events: Any, *, source: Any = "webhook") -> list[StoreOutcome]:
            return [StoreOutcome(e.event.id, e.event.type, "stored") for e in events]

    with tempfile.TemporaryDirectory() as tmp:
        store = NoStore(f"sqlite:///{tmp}/unused.db")
        settings = ReceiverSettings(callback_secrets=[SECRET], store_process=False)  # NoStore lives here
        await run_receiver(store, settings, host="127.0.0.1", port=0,
                           on_ready=lambda url: print(f"nostore listening on {url}/formsync/events", flush=True))


# ======================================================================================
# Orchestration
# ======================================================================================


def start(cmd: list[str]) -> tuple[subprocess.Popen[str], str]:
    """Start a server process and wait for its "listening on <url>" line."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read() if proc.stderr else ""
            raise SystemExit(f"server exited before listening: {' '.join(cmd)}\n{err}")
        if "listening on " in line:
            return proc, line.split("listening on ", 1)[1].split()[0]
    proc.kill()
    raise SystemExit(f"server did not start: {' '.join(cmd)}")


def receiver_cmd(config: Path, db_url: str) -> list[str]:
    return [sys.executable, "-m", "pipelines.cli", "receive", "--config", str(config), "--port", "0", "--db", db_url]


def missing_after_kill(db_url: str, ids_file: Path) -> tuple[int, int]:
    """(acknowledged, missing) event ids, read back from the reopened database."""
    from sqlalchemy import select

    from connector.store import Store
    from connector.store._tables import RawEvent

    acked = {line for line in ids_file.read_text().splitlines() if line}
    store = Store(db_url)
    try:
        with store.database.reader() as s:
            present = set(s.exec(select(RawEvent.__table__.c.id)).scalars())
    finally:
        store.close()
    return len(acked), len(acked - present)


def sqlite_settings(db_url: str) -> str:
    from sqlalchemy import text

    from connector.store import Store

    store = Store(db_url)
    try:
        with store.database.engine.connect() as conn:
            mode = conn.execute(text("PRAGMA journal_mode")).scalar()
            sync = conn.execute(text("PRAGMA synchronous")).scalar()
    finally:
        store.close()
    return f"journal_mode={mode} synchronous={ {0: 'OFF', 1: 'NORMAL', 2: 'FULL', 3: 'EXTRA'}.get(sync, sync)}"


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        for task in Path(f"/proc/{p}/task").iterdir():
            todo += [int(c) for c in (task / "children").read_text().split()]
    return found


def _stat_seconds(stat: str) -> float:
    """User + system CPU seconds from the text of a /proc/<pid>/stat file."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float] | None:
    """CPU time (user + system, all threads) used so far by process ``pid`` and by its
    children together (the receiver's store process); None where /proc is not available."""
    try:
        times = [_stat_seconds(Path(f"/proc/{p}/stat").read_text()) for p in _descendants(pid)]
    except OSError:
        return None
    return times[0], sum(times[1:])


def postgres_cpu_seconds() -> float:
    """CPU time used so far by the machine's PostgreSQL server processes (0 where none
    can be read)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if text.split("(", 1)[1].split(")", 1)[0] == "postgres":
            total += _stat_seconds(text)
    return total


def loaded(proc: subprocess.Popen[str], url: str, args: argparse.Namespace, ids: Path) -> dict[str, Any]:
    """The load run against a started server, with the CPU time per answered event of
    the server (all its processes), of its children alone, of the PostgreSQL server and
    of the load generator (a diagnostic: it depends less on what else the machine runs
    than the rates do)."""
    before, db_before = cpu_seconds(proc.pid), postgres_cpu_seconds()
    generator = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run_load(url, args.duration, args.concurrency, ids)
    generated = resource.getrusage(resource.RUSAGE_CHILDREN)
    after, db_after = cpu_seconds(proc.pid), postgres_cpu_seconds()
    n = result["acked"]
    if n and db_after - db_before > 0.05:
        result["db_cpu_ms"] = (db_after - db_before) / n * 1000
    if before is not None and after is not None and n:
        result["cpu_ms"] = (sum(after) - sum(before)) / n * 1000
        result["child_cpu_ms"] = (after[1] - before[1]) / n * 1000
    if n:
        spent = (generated.ru_utime + generated.ru_stime) - (generator.ru_utime + generator.ru_stime)
        result["load_cpu_ms"] = spent / n * 1000
    return result


def report(name: str, r: dict[str, Any]) -> bool:
    non2xx = sum(n for s, n in r["statuses"].items() if not 200 <= int(s) < 300) + r["error_count"]
    cpu = f", server CPU {r['cpu_ms']:.2f} ms/event" if "cpu_ms" in r else ""
    if r.get("child_cpu_ms"):
        cpu += f" (store process {r['child_cpu_ms']:.2f})"
    if "db_cpu_ms" in r:
        cpu += f", PostgreSQL server {r['db_cpu_ms']:.2f}"
    if "load_cpu_ms" in r:
        cpu += f", load generator {r['load_cpu_ms']:.2f}"
    print(f"{name:<11} {r['rate']:8.0f} events/s  p50 {r['p50_ms']:7.1f} ms  p99 {r['p99_ms']:7.1f} ms  "
          f"({r['events']} events in {r['seconds']:.0f} s, non-2xx {non2xx}{cpu})", flush=True)
    if r["errors"]:
        print(f"            errors: {r['errors']}")
    return non2xx == 0


def storage_bytes(db_url: str) -> int:
    """The bytes the store's tables take: SQLite, the pages in use after a WAL checkpoint
    (free pages excluded); PostgreSQL, ``pg_total_relation_size`` of every formsync table
    (heap, TOAST and indexes)."""
    import sqlite3

    from sqlalchemy import text

    from connector.store import Store

    if db_url.startswith("sqlite:///"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages, free, size = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                                 for p in ("page_count", "freelist_count", "page_size"))
            return int((pages - free) * size)
        finally:
            conn.close()
    store = Store(db_url)
    try:
        with store.database.engine.connect() as pg:
            return int(pg.execute(text(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND n.nspname = 'public' AND c.relname LIKE 'formsync%'")).scalar_one())
    finally:
        store.close()


def stored_events(db_url: str) -> int:
    from sqlalchemy import func, select

    from connector.store import Store
    from connector.store._tables import RawEvent

    store = Store(db_url)
    try:
        with store.database.reader() as s:
            return int(s.connection().execute(select(func.count()).select_from(RawEvent.__table__)).scalar_one())
    finally:
        store.close()


def empty_store(db_url: str) -> int:
    """Migrate a fresh database; the bytes its empty tables take."""
    from connector.store import Store

    store = Store(db_url)
    try:
        store.migrate()
    finally:
        store.close()
    return storage_bytes(db_url)


def bench_receiver(name: str, db_url: str, config: Path, work: Path, args: argparse.Namespace
                   ) -> tuple[dict[str, Any], bool]:
    empty = empty_store(db_url)
    proc, url = start(receiver_cmd(config, db_url))
    ids = work / f"{name.replace('/', '-')}.ids"
    try:
        result = loaded(proc, url, args, ids)
    finally:
        proc.kill()  # SIGKILL, right after the load: no graceful shutdown
        proc.wait()
    ok = report(name, result)
    acked, missing = missing_after_kill(db_url, ids)
    print(f"{'':<11} kill -9 check: {acked} acknowledged, {acked - missing} present after reopening, "
          f"{missing} missing", flush=True)
    n = stored_events(db_url)
    grown = storage_bytes(db_url) - empty
    result["storage"] = grown / (n * len(event_template())) if n else float("nan")
    print(f"{'':<11} {n} events stored, database grew {grown / 1e6:.1f} MB: {grown / max(n, 1):.0f} bytes per "
          f"event of {len(event_template())} body bytes, storage {result['storage']:.2f}", flush=True)
    return result, ok and missing == 0


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_gunicorn(config: Path, db_url: str, workers: int) -> tuple[subprocess.Popen[str], str]:
    """The receiver under gunicorn's aiohttp worker (the documented command); waits until
    every worker has booted and the health check answers."""
    import urllib.request

    port = free_port()
    gunicorn = Path(sys.executable).parent / "gunicorn"
    proc = subprocess.Popen([str(gunicorn), "connector.serving:receiver_app", "--worker-class",
                             "aiohttp.GunicornWebWorker", "--workers", str(workers), "--bind", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "FORMSYNC_CONFIG": str(config), "FORMSYNC_STORE__URL": db_url})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                if resp.status == 200:
                    time.sleep(1.0)  # the other workers finish booting
                    return proc, f"http://127.0.0.1:{port}/formsync/events"
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("gunicorn did not start")


def bench_workers(db_url: str, config: Path, work: Path, args: argparse.Namespace, workers: int) -> dict[str, Any]:
    """The receiver under gunicorn with ``workers`` processes, on ``db_url``."""
    proc, url = start_gunicorn(config, db_url, workers)
    try:
        result = run_load(url, args.duration, args.concurrency, work / f"gunicorn{workers}.ids")
    finally:
        proc.terminate()
        proc.wait()
    report(f"{workers} workers", result)
    return result


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min) {five:.2f} (5 min)"


def pg_database() -> tuple[str, Any]:
    """A fresh PostgreSQL database's URL and a function dropping it."""
    import psycopg

    name = f"formsync_bench_{secrets.token_hex(4)}"

    def admin(sql: str) -> None:
        with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(sql)

    admin(f'CREATE DATABASE "{name}"')
    return f"{PG}/{name}", lambda: admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def one_round(k: int, work: Path, config: Path, args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], bool]:
    """Bare, SQLite and PostgreSQL, one after the other; each receiver on a fresh database."""
    print(f"-- round {k + 1} of {args.rounds}, {load_average()}", flush=True)
    out: dict[str, dict[str, Any]] = {}
    proc, url = start([sys.executable, __file__, "--bare"])
    try:
        out["bare"] = loaded(proc, url, args, work / "bare.ids")
    finally:
        proc.kill()
        proc.wait()
    ok = report("bare", out["bare"])
    sqlite_url = f"sqlite:///{work / f'bench{k}.db'}"
    out["sqlite"], good = bench_receiver("sqlite", sqlite_url, config, work, args)
    ok &= good
    if k == 0:
        print(f"{'':<11} sqlite {sqlite_settings(sqlite_url)}")
    if args.with_thread:
        thread_url = f"sqlite:///{work / f'thread{k}.db'}"
        out["sqlite/thread"], good = bench_receiver("sqlite/thread", thread_url, thread_config(config), work, args)
        ok &= good
    if not args.no_postgres:
        for name, cfg in [("postgresql", config)] + [("postgresql/thread", thread_config(config))] * args.with_thread:
            url, drop = pg_database()
            try:
                out[name], good = bench_receiver(name, url, cfg, work, args)
                ok &= good
            finally:
                drop()
    return out, ok


def thread_config(config: Path) -> Path:
    """``config`` with the group commits in a thread of the receiver (``store_process = false``)."""
    thread = config.with_name("thread.toml")
    thread.write_text(config.read_text() + "store_process = false\n")
    return thread


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per server (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds; the ratios are their medians")
    parser.add_argument("--concurrency", type=int, default=64, help="concurrent connections (default 64)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL runs")
    parser.add_argument("--no-workers", action="store_true", help="skip the gunicorn one- and two-worker runs")
    parser.add_argument("--with-nostore", action="store_true",
                        help="also run the receiver with a store that writes nothing (what storing costs)")
    parser.add_argument("--with-thread", action="store_true",
                        help="also run each receiver with its commits in a thread (receiver.store_process = false)")
    parser.add_argument("--load", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--ids-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--run", default="r", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--nostore", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.load:
        print(json.dumps(asyncio.run(load(args.load, args.duration, args.concurrency, args.ids_out, args.run))))
        return 0
    if args.bare:
        asyncio.run(serve_bare(1024 * 1024))
        return 0
    if args.nostore:
        asyncio.run(serve_nostore())
        return 0

    print(f"event body {len(event_template())} bytes, {ANSWERS} answers; {args.concurrency} connections; "
          f"{args.duration:.0f} s per server after {WARMUP_S:.0f} s warm-up; {args.rounds} rounds; "
          f"{os.cpu_count()} CPUs; {load_average()}", flush=True)
    if os.getloadavg()[0] > 1.0:
        print(f"WARNING: the machine is busy ({load_average()}): rates and ratios are lower and noisier than on a "
              f"quiet machine; the CPU per event is the steadier figure", flush=True)
    all_ok = True
    with tempfile.TemporaryDirectory(prefix="formsync-bench-") as tmp:
        work = Path(tmp)
        config = work / "formsync.toml"
        config.write_text(f'[receiver]\ncallback_secrets = ["{SECRET}"]\n')

        rounds = []
        for k in range(max(1, args.rounds)):
            got, ok = one_round(k, work, config, args)
            rounds.append(got)
            all_ok &= ok

        if args.with_nostore:
            proc, url = start([sys.executable, __file__, "--nostore"])
            try:
                nostore = loaded(proc, url, args, work / "nostore.ids")
            finally:
                proc.terminate()
                proc.wait()
            all_ok &= report("no store", nostore)
            print(f"{'':<11} receiver without storing keeps {nostore['rate'] / rounds[-1]['bare']['rate']:.2f} "
                  f"of bare")

        if not args.no_workers:
            print(f"-- gunicorn, one then two workers ({load_average()}); on 2 CPUs the load generator takes "
                  f"a core of its own", flush=True)
            if args.no_postgres:
                url, drop = f"sqlite:///{work / 'workers.db'}", (lambda: None)
            else:
                url, drop = pg_database()
            try:
                one = bench_workers(url, config, work, args, 1)
                two = bench_workers(url, config, work, args, 2)
                print(f"{'':<11} two workers: {two['rate'] / one['rate']:.2f} x one worker's rate")
            finally:
                drop()

    dbs = [d for d in ("sqlite", "postgresql") if d in rounds[0]]
    ratios = {d: statistics.median(r[d]["rate"] / r["bare"]["rate"] for r in rounds) for d in dbs}
    for d in (f"{d}/thread" for d in dbs if f"{d}/thread" in rounds[0]):
        print(f"{d} ratio {statistics.median(r[d]['rate'] / r['bare']['rate'] for r in rounds):.2f} (not in the "
              "last line)")
    cpu = {d: statistics.median(r[d].get("cpu_ms", float("nan")) for r in rounds) for d in ("bare", *dbs)}
    print("median CPU per event: " + ", ".join(f"{d} {v:.2f} ms" for d, v in cpu.items()))
    for d in dbs:
        print(f"{d} storage {statistics.median(r[d]['storage'] for r in rounds):.2f}")
    for d in dbs:
        print(f"{d} ratio {ratios[d]:.2f} (median of {len(rounds)}: "
              + ", ".join(f"{r[d]['rate'] / r['bare']['rate']:.2f}" for r in rounds) + ")")
    print(f"finished at {load_average()}")
    print("all answers 2xx and every acknowledged event present" if all_ok else "CHECK FAILED")
    print(f"ratio {min(ratios.values()):.2f}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
