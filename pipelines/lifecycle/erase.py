"""``formsync erase``: one person's data removed from the store, the archived files only
they used, and the lines of the report files formsync wrote that name them, with a
receipt of what was removed where (see ``connector.store.erasure`` for the tables)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from connector.store import Store
from connector.store.erasure import Person

from ..outreach.report import links_path


class ReceiptLine(BaseModel):
    """What an erase removed (or would remove) in one table or location."""

    where: str
    removed: int


class EraseReceipt(BaseModel):
    """What ``formsync erase`` removed, where; ``matched`` false when nobody was found."""

    dry_run: bool
    matched: bool
    lines: list[ReceiptLine]

    def text(self) -> list[str]:
        """The receipt as lines for a terminal."""
        if not self.matched:
            return ["nobody matched: nothing was removed" + ("" if self.dry_run else
                    " (kept as a keyed hash all the same: no later sync, callback or campaign brings them in)")]
        verb = "would remove" if self.dry_run else "removed"
        out = [f"{verb} {line.removed:>6}  {line.where}" for line in self.lines if line.removed]
        if not self.dry_run:
            out.append("the address and ids are kept as keyed hashes only: no sync, poll, callback or campaign "
                       "brings them back")
        return out


def erase_person(store: Store, person: Person, *, dry_run: bool = False) -> EraseReceipt:
    """Erase ``person`` (see ``Store.erase``), then remove the archived files no other
    answer uses and the report files' lines naming them; with ``dry_run``, only count."""
    found = store.erase(person, dry_run=dry_run)
    counts = found.counts()
    reports = report_files(store)
    if not dry_run:
        remove_files(found.locations)
    counts["report file lines"] = sum(_scrub_report(path, person, dry_run=dry_run) for path in reports)
    lines = [ReceiptLine(where=where, removed=n) for where, n in counts.items()]
    return EraseReceipt(dry_run=dry_run, matched=any(n for n in counts.values()), lines=lines)


def remove_files(locations: Iterable[str]) -> None:
    """Remove archived files (fsspec URLs); one already gone is fine."""
    import fsspec

    for loc in locations:
        fs, path = fsspec.core.url_to_fs(loc)
        if fs.exists(path):
            fs.rm(path)


def report_files(store: Store) -> list[Path]:
    """The report and links files the outreach jobs' last runs wrote, where they still exist."""
    out: list[Path] = []
    for name in store.campaign.jobs():
        job = store.campaign.job(name)
        report = ((job.settings if job else None) or {}).get("outcome", {}).get("report")
        if report:
            out += [p for p in (Path(report), links_path(Path(report), name)) if p.is_file()]
    return out


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
