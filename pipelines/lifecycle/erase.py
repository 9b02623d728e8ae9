"""``formsync erase``: one person's data removed from the store, the archived files only
they used, the lines of the report files formsync wrote that name them, dlt's load
packages not yet loaded and the partial files interrupted runs left, with a receipt of
what was removed where and what is out of reach (see ``connector.store._erasure`` for the
tables)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from connector import errors
from connector.client.rpc import FormClient
from connector.config.settings import Settings
from connector.store import Store
from connector.store._erasure import Person

from ..export.load import dlt_packages, remove_packages, store_folder, work_dir
from ..outreach.report import links_path

PARTIAL_IDLE = 60.0  # seconds unchanged after which a partial file without its writer's id is a leftover


class ReceiptLine(BaseModel):
    """What an erase removed (or would remove) in one table or location."""

    where: str
    removed: int


class EraseReceipt(BaseModel):
    """What ``formsync erase`` removed and what it cannot reach: ``lines`` the rows per
    table and the files per kind, ``files`` each working file removed or rewritten without
    the person, ``exports`` the export files already written with the person, ``pending_requests``
    their requests left pending at the service, ``unreachable`` the copies out of its reach
    (said in words); ``matched`` false when nobody was found."""

    dry_run: bool
    matched: bool
    lines: list[ReceiptLine]
    files: list[str] = []
    exports: list[str] = []
    pending_requests: list[str] = []
    unreachable: list[str] = []

    def text(self) -> list[str]:
        """The receipt as lines for a terminal."""
        if not self.matched:
            return ["nobody matched: nothing was removed" + ("" if self.dry_run else
                    " (kept as a keyed hash all the same: no later sync, callback or campaign brings them in)")]
        verb = "would remove" if self.dry_run else "removed"
        out = [f"{verb} {line.removed:>6}  {line.where}" for line in self.lines if line.removed]
        out += [f"  {path}" for path in self.files]
        if not self.dry_run:
            out.append("the address and ids are kept as keyed hashes only: no sync, poll, callback or campaign "
                       "brings them back")
        out += [f"export file written with them earlier: {name}" for name in self.exports]
        out += [f"request left pending at the service: {rid}" for rid in self.pending_requests]
        return out + [f"not reached: {what}" for what in self.unreachable]


# What an erase cannot reach, whatever it found (the exports and pending requests are named apart).
UNREACHABLE = ("files exported earlier (formsync export, the Python API): remove them or export again",
               "the warehouse: the next formsync load deletes their rows there")


CANCEL_REASON = "erased on request"


async def erase_everywhere(store: Store, person: Person, client: FormClient | None, *, dry_run: bool = False,
                           folders: WorkFolders | None = None) -> EraseReceipt:
    """``erase_person``, with what only the service can do first: each of the person's
    pending requests is canceled there (``client``; none without a token or sign-in) so no
    reminder reaches them, and the receipt names the requests left pending (no client, a
    cancel refused) and the ``--since-last`` export names that had already written them."""
    found = store.erase(person, dry_run=True)
    pending = {r.id for r in store.requests.pending()} & set(found.requests)
    exports = store.exports.names_past(list(found.submissions))
    left = sorted(pending)
    if client is not None and not dry_run:
        left = [rid for rid in left if not await _canceled(client, rid)]
    receipt = erase_person(store, person, dry_run=dry_run, folders=folders)
    receipt.exports, receipt.pending_requests = exports, left
    return receipt


async def _canceled(client: FormClient, request_id: str) -> bool:
    """Whether the request is no longer pending at the service once asked to cancel it."""
    try:
        await client.cancel_request(request_id, reason=CANCEL_REASON)
    except errors.Conflict as e:
        return e.reason == "REQUEST_NOT_PENDING"
    except (errors.FormsyncError, OSError, TimeoutError):  # the erasure goes on; the receipt names it
        return False
    return True


def erase_person(store: Store, person: Person, *, dry_run: bool = False,
                 folders: WorkFolders | None = None) -> EraseReceipt:
    """Erase ``person`` (see ``Store.erase``), then remove the archived files no other
    answer uses, the report files' lines naming them, every dlt load package not yet
    loaded (its rows are read again by the next load, whose cursors did not move) and the
    partial files of interrupted runs, in the store's folders and ``folders``; with
    ``dry_run``, only count."""
    found = store.erase(person, dry_run=dry_run)
    counts = found.counts()
    folders = folders or WorkFolders()
    scrubbed = {path: _scrub_report(path, person, dry_run=dry_run) for path in report_files(store, folders.reports)}
    counts["report file lines"] = sum(scrubbed.values())
    matched = any(n for n in counts.values())
    # Whoever they hold: a package's rows come again with the next load, a partial file is a leftover.
    packages = dlt_packages(work_dir(store)) if matched else []
    partials = partial_files(folders.partial_dirs(store)) if matched else []
    if not dry_run:
        remove_files(found.locations)
        remove_packages(packages)
        for path in partials:
            path.unlink(missing_ok=True)
    counts["dlt load packages"] = len(packages)
    counts["partial files"] = len(partials)
    files = sorted([*(p for p, n in scrubbed.items() if n), *packages, *partials])
    return EraseReceipt(dry_run=dry_run, matched=matched, lines=[ReceiptLine(where=w, removed=n) for w, n in
                                                                  counts.items()],
                        files=[str(p) for p in files], unreachable=list(UNREACHABLE) if matched else [])


@dataclass(frozen=True)
class WorkFolders:
    """The folders formsync writes working files to besides the store's: the outreach
    reports (``outreach.report_dir``) and the exports (``export.out_dir``), where partial
    files of interrupted runs may stay."""

    reports: Path | None = None
    exports: Path | None = None

    @classmethod
    def of(cls, settings: Settings) -> WorkFolders:
        """The folders ``settings`` name."""
        return cls(reports=settings.outreach.report_dir, exports=settings.export.out_dir)

    def partial_dirs(self, store: Store) -> list[Path]:
        """Where partial files are looked for: these folders and the store's."""
        return [d for d in (store_folder(store), self.reports, self.exports) if d is not None]


def partial_files(folders: Iterable[Path], *, idle: float = PARTIAL_IDLE) -> list[Path]:
    """The partial files (``*.partial``) under ``folders`` that no running process writes:
    the leftovers of interrupted runs. One named with its writer's process id is left
    while that process runs; one without, while it changed within ``idle`` seconds."""
    now, out = time.time(), set()
    for folder in folders:
        for path in folder.rglob("*.partial") if folder.is_dir() else ():
            pid = _writer(path.name)
            alive = _running(pid) if pid is not None else now - path.stat().st_mtime < idle
            if path.is_file() and not alive:
                out.add(path)
    return sorted(out)


def _writer(name: str) -> int | None:
    """The process id a partial file's name carries (``.NAME.PID.partial``), if any."""
    parts = name.split(".")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: running
        return True
    return True


def remove_files(locations: Iterable[str]) -> None:
    """Remove archived files (fsspec URLs); one already gone is fine."""
    import fsspec

    for loc in locations:
        fs, path = fsspec.core.url_to_fs(loc)
        if fs.exists(path):
            fs.rm(path)


def report_files(store: Store, report_dir: Path | None = None) -> list[Path]:
    """The report and links files the outreach jobs' last runs wrote, where they still
    exist, and every CSV file under ``report_dir`` (earlier runs' and other jobs')."""
    out: list[Path] = []
    for name in store.campaign.jobs():
        job = store.campaign.job(name)
        report = ((job.settings if job else None) or {}).get("outcome", {}).get("report")
        if report:
            out += [p for p in (Path(report), links_path(Path(report), name)) if p.is_file()]
    if report_dir is not None and report_dir.is_dir():
        out += [p for p in report_dir.rglob("*.csv") if p.is_file()]
    return sorted({p.resolve() for p in out})


def _scrub_report(path: Path, person: Person, *, dry_run: bool) -> int:
    """Remove (or count) the lines of ``path`` that name the person."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = [line for line in lines if not person.named_in(line) and not _cell(line, person.external_id)]
    if not dry_run and len(keep) < len(lines):
        tmp = path.with_name(path.name + ".erasing")
        tmp.write_text("".join(keep), encoding="utf-8")
        tmp.replace(path)
    return len(lines) - len(keep)


def _cell(line: str, value: str | None) -> bool:
    """Whether a CSV line holds ``value`` as a whole cell."""
    return value is not None and value in (c.strip().strip('"') for c in line.rstrip("\r\n").split(","))
