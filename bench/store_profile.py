"""Profile of ``Store.store_events`` alone: the receiver benchmark's events, in batches
of 64, on SQLite (WAL, ``synchronous=FULL``) and PostgreSQL, without HTTP.

Run: ``.venv/bin/python bench/store_profile.py [--batches 20] [--batch 64] [--no-postgres]
[--no-pre-ping] [--profile]``

Prints the wall and CPU time per event of each database; with ``--profile`` also the
top functions under cProfile (cumulative time).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import secrets
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from receiver import EVENT_ID, PG, event_template  # noqa: E402


def batches(n: int, size: int, run: str) -> list[list[object]]:
    from connector.receiver.app import parse_event
    from connector.store._mapping import Incoming

    template = event_template()
    out = []
    for b in range(n):
        batch = []
        for i in range(size):
            body = template.replace(EVENT_ID.encode(), f"{run}{b:04d}{i:04d}".encode())
            batch.append(Incoming(parse_event(body), "callback", body))
        out.append(batch)
    return out


def measure(name: str, url: str, args: argparse.Namespace) -> None:
    from connector.store import Store

    store = Store(url, pre_ping=not args.no_pre_ping)
    store.migrate()
    try:
        work = batches(args.batches + 1, args.batch, secrets.token_hex(3))
        store.store_events(work[0])  # warm-up: connections, statement caches
        prof = cProfile.Profile() if args.profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        for batch in work[1:]:
            store.store_events(batch)
        if prof:
            prof.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        n = args.batches * args.batch
        print(f"{name:<11} {n} events: wall {wall / n * 1000:.3f} ms/event, cpu {cpu / n * 1000:.3f} ms/event")
        if prof:
            pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-pre-ping", action="store_true",
                        help="no check of a pooled connection before each transaction (as the store process)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", default="cumulative", help="cProfile sort key (cumulative, tottime)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="formsync-prof-") as tmp:
        measure("sqlite", f"sqlite:///{tmp}/p.db", args)
    if not args.no_postgres:
        import psycopg

        name = f"formsync_prof_{secrets.token_hex(4)}"
        with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", autocommit=True) as a:
            a.execute(f'CREATE DATABASE "{name}"')
        try:
            measure("postgresql", f"{PG}/{name}", args)
        finally:
            with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres",
                                 autocommit=True) as a:
                a.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
