"""``formsync files``: download the bytes of every stored file and signature answer into a
folder or any fsspec URL, each kept once under the sha256 of its bytes.

A file is written under a temporary name and moved to its final name only once its
bytes are whole and their size matches the answer, so a killed run leaves no half file
(the next run clears the temporary folder and fetches what is not recorded). A local
folder (or ``file://``) is written with plain file calls and ``os.replace`` (no fsync: a
killed process loses nothing the rename has not made whole); any other URL through fsspec. Downloads
are not API calls: they spend no call budget, run at most ``concurrency`` at once, and
back off on 429 and 5xx. A file that cannot be fetched is a row of the report, fetched
again by the next run, never a stop."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import uuid
from collections.abc import Callable
from typing import Any

import aiohttp
from pydantic import BaseModel

from connector.store import Store

from .refs import FileRef, file_refs, location, refusal

CHUNK = 256 * 1024  # bytes read and written at a time: memory is bounded by concurrency x CHUNK
PARTIAL = ".formsync-partial"  # the temporary folder under the location
ATTEMPTS = 5
RECORD_EVERY = 500  # files recorded in the store per transaction, at most


class ArchiveProblem(BaseModel):
    submission_id: str
    form_id: str
    path: str  # field[index], or group[instance].member[index]
    url: str | None
    problem: str


class ArchiveReport(BaseModel):
    """What a run did; ``files`` = ``archived`` + ``already`` + ``failed``."""

    location: str
    files: int = 0  # file answers found in the store
    archived: int = 0  # fetched by this run
    already: int = 0  # archived by an earlier run
    failed: int = 0  # in ``problems``, fetched again next time
    bytes: int = 0  # fetched by this run
    problems: list[ArchiveProblem] = []

    def outcome(self) -> str:
        """The run in one line, as the command's last line and a scheduled run's summary say it."""
        said = f"done: {self.archived} files archived ({self.bytes:,} bytes), {self.already} already"
        return said + (f"; {self.failed} could not be fetched" if self.failed else "")


class LocationError(Exception):
    """The location cannot be written: its URL, and what to check."""


class _Failed(Exception):
    """A file not fetched, with the reason its report row gives."""


def open_location(to: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec file system and root path of ``to`` (a folder or a URL), made if missing."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(to, **(storage_options or {}))
        fs.makedirs(root, exist_ok=True)
        if fs.exists(f"{root}/{PARTIAL}"):  # what a killed run left half written
            fs.rm(f"{root}/{PARTIAL}", recursive=True)
        fs.makedirs(f"{root}/{PARTIAL}", exist_ok=True)
    except ImportError as e:
        raise LocationError(f"{to}: {e.msg}; install the fsspec package for that URL (s3fs for s3://, gcsfs "
                            "for gs://)") from None
    except Exception as e:  # each file system fails in its own way (OSError, botocore, ...)
        raise LocationError(f"cannot write to {to}: {str(e).splitlines()[0] if str(e) else type(e).__name__}; "
                            "check the path and its credentials (files.storage_options, or the file system's "
                            "own environment variables)") from None
    return fs, root


class _Target:
    """Where files are written: a local folder is written with plain file calls (a
    temporary name in the location's partial folder, then ``os.replace``, atomic on one
    file system: a file is complete or absent); any other fsspec URL through fsspec."""

    def __init__(self, fs: Any, root: str) -> None:
        self.fs, self.root = fs, root
        self.local = "file" in _protocols(fs)
        self.prefix = fs.unstrip_protocol(root).rstrip("/")

    def location(self, digest: str) -> str:
        """The URL a file's bytes are kept at, as the archived-files table records it."""
        return f"{self.prefix}/{digest}"

    def open_partial(self) -> tuple[str, Any]:
        tmp = f"{self.root}/{PARTIAL}/{uuid.uuid4().hex}"
        return tmp, open(tmp, "wb") if self.local else self.fs.open(tmp, "wb")  # noqa: SIM115

    def discard(self, tmp: str) -> None:
        if self.local:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        elif self.fs.exists(tmp):
            self.fs.rm(tmp)

    def keep(self, tmp: str, digest: str) -> None:
        """Move a whole file to its sha256 name (an equal file there already is the same bytes)."""
        final = location(self.root, digest)
        if self.local:
            os.replace(tmp, final)
        elif self.fs.exists(final):
            self.fs.rm(tmp)
        else:
            self.fs.mv(tmp, final)


def _protocols(fs: Any) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


async def _download(http: aiohttp.ClientSession, target: _Target, ref: FileRef) -> tuple[str, int]:
    """Fetch ``ref`` into the location; the sha256 and size of its bytes."""
    assert ref.url is not None
    for attempt in range(ATTEMPTS):
        try:
            async with http.get(ref.url) as resp:
                if resp.status == 429 or resp.status >= 500:
                    if attempt == ATTEMPTS - 1:
                        raise _Failed(f"HTTP {resp.status} after {ATTEMPTS} attempts")
                    await asyncio.sleep(_retry_after(resp.headers.get("Retry-After"), attempt))
                    continue
                if resp.status != 200:
                    raise _Failed(f"HTTP {resp.status}" + (" (gone or expired)" if resp.status in (403, 404, 410)
                                                           else ""))
                tmp, digest, size = await _write(resp, target)
                break
        except (TimeoutError, aiohttp.ClientError) as e:
            if attempt == ATTEMPTS - 1:
                raise _Failed(f"cannot download: {type(e).__name__} {e}".rstrip()) from None
            await asyncio.sleep(_retry_after(None, attempt))
    if ref.size is not None and size != ref.size:
        target.discard(tmp)
        raise _Failed(f"{size} bytes downloaded, the answer says {ref.size}")
    target.keep(tmp, digest)
    return digest, size


async def _write(resp: aiohttp.ClientResponse, target: _Target) -> tuple[str, str, int]:
    """Stream the body to a temporary name, hashing it on the way: that name, the sha256, the size."""
    h = hashlib.sha256()
    size = 0
    tmp, out = target.open_partial()
    try:
        with out:
            async for chunk in resp.content.iter_chunked(CHUNK):
                h.update(chunk)
                out.write(chunk)
                size += len(chunk)
    except BaseException:
        target.discard(tmp)
        raise
    return tmp, h.hexdigest(), size


def _retry_after(header: str | None, attempt: int) -> float:
    try:
        return min(float(header), 60.0) if header is not None else min(0.25 * 2**attempt, 8.0)
    except ValueError:
        return min(0.25 * 2**attempt, 8.0)


def _todo(store: Store, base_url: str, form_ids: list[str] | None, report: ArchiveReport) -> list[FileRef]:
    """The files to fetch; counts the ones archived already and the ones refused."""
    fields = store.archive.file_fields(form_ids)
    done = store.archive.archived(list(fields))
    todo = []
    for sub, form, answers in store.archive.answers(list(fields)):
        for ref in file_refs(sub, form, answers, fields[form]):
            report.files += 1
            kept = done.get(ref.place)
            if kept is not None and kept.url == ref.url:
                report.already += 1
            elif (why := refusal(ref, base_url)) is not None:
                _problem(report, ref, why)
            else:
                todo.append(ref)
    return todo


def _problem(report: ArchiveReport, ref: FileRef, why: str) -> None:
    report.failed += 1
    report.problems.append(ArchiveProblem(submission_id=ref.submission_id, form_id=ref.form_id, path=ref.path,
                                          url=ref.url, problem=why))


async def archive_files(store: Store, base_url: str, to: str, *, form_ids: list[str] | None = None,
                        concurrency: int = 8, storage_options: dict[str, Any] | None = None,
                        on_file: Callable[[int, int], None] | None = None) -> ArchiveReport:
    """Fetch every stored file answer (of ``form_ids``) not archived yet into ``to``, and
    record each. ``on_file(total, done)`` is called once before the first download (``done``
    0) and after each one. Raises ``LocationError`` when ``to`` cannot be written."""
    target = _Target(*open_location(to, storage_options))
    report = ArchiveReport(location=target.prefix)
    todo = _todo(store, base_url, form_ids, report)
    finished = 0
    if on_file is not None:
        on_file(len(todo), finished)
    gate = asyncio.Semaphore(concurrency)
    recorder = _Recorder(store)

    async def one(http: aiohttp.ClientSession, ref: FileRef) -> None:
        nonlocal finished
        async with gate:
            try:
                digest, size = await _download(http, target, ref)
            except _Failed as e:
                _problem(report, ref, str(e))
                digest, size = "", 0
        finished += 1
        if on_file is not None:
            on_file(len(todo), finished)
        if not digest:
            return
        report.archived += 1
        report.bytes += size
        recorder.add({"submission_id": ref.submission_id, "field_key": ref.field, "instance": ref.instance,
                      "member": ref.member, "idx": ref.index, "form_id": ref.form_id, "name": ref.name,
                      "url": ref.url or "", "size": size, "sha256": digest, "location": target.location(digest),
                      "archived_at": store.clock()})

    timeout = aiohttp.ClientTimeout(total=None, sock_connect=15, sock_read=60)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        try:
            await asyncio.gather(*(one(http, ref) for ref in todo))
        finally:
            await recorder.close()
    return report


class _Recorder:
    """Records each archived file as it completes: a commit starts as soon as a file is
    kept, and the files kept while it runs go in the next one (at most ``RECORD_EVERY``
    each), so a killed run fetches again only the files of the commit it interrupted."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._waiting: list[dict[str, Any]] = []  # rows of the archived-files table, as plain values
        self._running: asyncio.Task[None] | None = None

    def add(self, row: dict[str, Any]) -> None:
        self._waiting.append(row)
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._commit())

    async def _commit(self) -> None:
        while self._waiting:
            rows, self._waiting = self._waiting[:RECORD_EVERY], self._waiting[RECORD_EVERY:]
            await asyncio.to_thread(self._store.archive.record, rows)

    async def close(self) -> None:
        """Wait until every file kept is recorded (a failed commit raises here)."""
        if self._running is not None:
            await self._running
        await self._commit()
