"""Benchmark of ``formsync files`` against a bare aiohttp downloader, and its peak memory.

Run: ``.venv/bin/python bench/files.py [--files 1000] [--kib 512] [--concurrency 8]``

A sandbox in its own process holds ``--files`` files of ``--kib`` KiB of random bytes
(made with the ``files.create`` helper), answered 20 to a submission in the Everything
form's file field; a SQLite store in a temporary directory gets them by a full sync.
Then, each in a fresh process, alternately, ``--repeat`` times:

* ours: ``pipelines.lifecycle.archive.archive_files`` into an empty folder (the store read, each
  file streamed to a temporary name with its sha256, its size checked, ``os.replace``d
  to its sha256 name, the files recorded in the store a batch at a time);
* bare: the same URLs (read from the same store beforehand, not charged) fetched by an
  aiohttp session with the same concurrency, each streamed to a temporary file with its
  sha256 and renamed to it, nothing recorded.

Each side's figure is its best wall time; the throughput ratio is bare / ours (goal at
least 0.8). Peak memory (RSS high-water of the fresh process) is measured for ours with
all files and with a quarter of them: bounded by the concurrency, it must not follow the
count. The machine's load average is printed with the figures. The last line is
``ratio <x>``: the throughput ratio divided by its goal (at or over 1: the goal is met).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sandbox_process import SandboxProcess  # noqa: E402

GOAL = 0.8
PER_SUBMISSION = 20
CHUNK = 256 * 1024


def _prepare(sb: SandboxProcess, files: int, kib: int, work: Path) -> str:
    """Files in the sandbox, answers naming them, synced into a store; the store's URL.
    Made over HTTP while it runs: a file's URL names the address it was made at."""
    from connector.client.rpc import FormClient
    from connector.store import Store
    from pipelines.sync.submissions import sync_form

    form = sb.form("Everything")
    url = f"sqlite:///{work / 'store.db'}"
    store = Store(url)
    store.migrate()

    async def fill() -> None:
        async with aiohttp.ClientSession() as http:
            h = sb.helpers(http)
            gate = asyncio.Semaphore(4)

            async def one(i: int) -> dict[str, Any]:
                async with gate:
                    return (await h.files_create(f"f{i}.bin", os.urandom(kib * 1024))).model_dump()

            made = await asyncio.gather(*(one(i) for i in range(files)))
            for i in range(0, files, PER_SUBMISSION):
                await h.submissions_create(form, {"attachment": made[i:i + PER_SUBMISSION]}, completed=False)
        async with FormClient(sb.base_url, sb.token()) as fc:
            await sync_form(fc, store, form, full=True, include_drafts=True)

    asyncio.run(fill())
    store.close()
    return url


def _urls(store_url: str) -> list[str]:
    from connector.store import Store
    from pipelines.lifecycle.archive import file_refs

    store = Store(store_url)
    fields = store.archive.file_fields()
    urls = [r.url for sub, form, answers in store.archive.answers(list(fields))
            for r in file_refs(sub, form, answers, fields[form]) if r.url]
    store.close()
    return urls


async def _bare(urls: list[str], out: Path, concurrency: int) -> int:
    gate = asyncio.Semaphore(concurrency)
    (out / "tmp").mkdir(parents=True)
    total = 0

    async def one(http: aiohttp.ClientSession, url: str) -> None:
        nonlocal total
        async with gate, http.get(url) as resp:
            tmp = out / "tmp" / uuid.uuid4().hex
            h = hashlib.sha256()
            with open(tmp, "wb") as f:
                async for chunk in resp.content.iter_chunked(CHUNK):
                    h.update(chunk)
                    f.write(chunk)
                    total += len(chunk)
            tmp.rename(out / h.hexdigest())

    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(one(http, u) for u in urls))
    return total


def side(args: argparse.Namespace) -> None:
    """One measured run in this fresh process: JSON {seconds, bytes, rss_mib} on stdout."""
    out = Path(args.to)
    if args.side == "bare":
        urls = json.loads(Path(args.urls).read_text())
        start = time.perf_counter()
        done = asyncio.run(_bare(urls, out, args.concurrency))
    else:
        from connector.store import Store
        from pipelines.lifecycle.archive import archive_files

        store = Store(args.store)
        forms = json.loads(args.forms) if args.forms else None
        start = time.perf_counter()
        report = asyncio.run(archive_files(store, args.base, str(out), form_ids=forms,
                                           concurrency=args.concurrency))
        done = report.bytes
        assert report.failed == 0, report.problems[:3]
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "bytes": done, "rss_mib": rss}))


def _run(extra: list[str]) -> dict[str, Any]:
    res = subprocess.run([sys.executable, __file__, *extra], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(extra[:2])} failed: {res.stderr[-3000:]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def _fresh_store(src: str, work: Path, name: str) -> str:
    """A copy of the synced store with nothing archived, so each run starts the same."""
    path = work / f"{name}.db"
    shutil.copy(src.removeprefix("sqlite:///"), path)
    return f"sqlite:///{path}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=1000)
    p.add_argument("--kib", type=int, default=512)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--side")
    p.add_argument("--to")
    p.add_argument("--urls")
    p.add_argument("--store")
    p.add_argument("--base")
    p.add_argument("--forms")
    args = p.parse_args()
    if args.side:
        side(args)
        return
    work = Path(tempfile.mkdtemp(prefix="formsync-bench-files-"))
    try:
        with SandboxProcess() as sb:
            print(f"load before: {os.getloadavg()[0]:.2f}; {args.files} files of {args.kib} KiB, "
                  f"concurrency {args.concurrency}", flush=True)
            store_url = _prepare(sb, args.files, args.kib, work)
            urls = _urls(store_url)
            assert len(urls) == args.files, len(urls)
            (work / "urls.json").write_text(json.dumps(urls))
            ours, bare = [], []
            for i in range(args.repeat):
                common = ["--concurrency", str(args.concurrency), "--base", sb.base_url]
                ours.append(_run(["--side", "ours", "--to", str(work / f"ours{i}"),
                                  "--store", _fresh_store(store_url, work, f"s{i}"), *common]))
                bare.append(_run(["--side", "bare", "--to", str(work / f"bare{i}"), "--urls",
                                  str(work / "urls.json"), *common]))
                shutil.rmtree(work / f"ours{i}")
                shutil.rmtree(work / f"bare{i}")
            best_ours = min(r["seconds"] for r in ours)
            best_bare = min(r["seconds"] for r in bare)
            mib = args.files * args.kib / 1024
            print(f"ours: {best_ours:.2f} s ({mib / best_ours:.0f} MiB/s), bare: {best_bare:.2f} s "
                  f"({mib / best_bare:.0f} MiB/s); throughput ratio {best_bare / best_ours:.2f} (goal {GOAL})")
            quarter = _run(["--side", "ours", "--to", str(work / "quarter"), "--store",
                            _quarter_store(store_url, work), "--base", sb.base_url,
                            "--concurrency", str(args.concurrency)])
            print(f"peak memory, ours: {max(r['rss_mib'] for r in ours):.0f} MiB with {args.files} files, "
                  f"{quarter['rss_mib']:.0f} MiB with a quarter of them; bare: "
                  f"{max(r['rss_mib'] for r in bare):.0f} MiB")
            print(f"load after: {os.getloadavg()[0]:.2f}")
            print(f"ratio {best_bare / best_ours / GOAL:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _quarter_store(src: str, work: Path) -> str:
    """A copy of the store holding a quarter of the submissions (so a quarter of the files)."""
    import sqlite3

    url = _fresh_store(src, work, "quarter")
    con = sqlite3.connect(url.removeprefix("sqlite:///"))
    ids = [r[0] for r in con.execute("SELECT id FROM formsync_submissions ORDER BY id")]
    con.executemany("DELETE FROM formsync_submissions WHERE id = ?", [(i,) for i in ids[len(ids) // 4:]])
    con.commit()
    con.close()
    return url


if __name__ == "__main__":
    main()
