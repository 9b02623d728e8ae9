"""Named snapshots of a running sandbox: its store copied with SQLite's backup API, with
what the service holds in memory (clock offset, limits, rate windows, call log) in the
copy's meta table, and the credentials it handed out beside it (the store keeps only
token hashes). In a folder (``NAME.db`` and ``NAME.credentials.json``, so they outlive a
restart) or, for a sandbox without a data dir, in memory."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ApiError
from ..service import Service
from .seed import CREDENTIALS

SUFFIX = ".db"
CREDS_SUFFIX = ".credentials.json"  # beside the copy: the store itself keeps only hashes
_STATE = "snapshot_state"  # the meta keys of a snapshot copy
_VERSION = "snapshot_schema"
_SAVED_AT = "snapshot_saved_at"


@dataclass(frozen=True)
class SnapshotInfo:
    name: str
    saved_at: int
    size_bytes: int


def schema_version(conn: sqlite3.Connection) -> str:
    """A digest of the tables, columns and indexes of the database ``conn`` holds: two
    stores of one schema version have the same."""
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                        "AND name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


@dataclass
class SnapshotStore:
    """Where a sandbox keeps its snapshots (``folder`` None: in memory), and the
    credentials it handed out (``credentials``, changed in place by a restore) with the
    files that hold them (rewritten by a restore)."""

    folder: Path | None
    credentials: dict[str, Any] = field(default_factory=dict)
    credential_files: list[Path] = field(default_factory=list)
    _memory: dict[str, sqlite3.Connection] = field(default_factory=dict, repr=False)
    _memory_creds: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def save(self, service: Service, name: str) -> SnapshotInfo:
        """Copy the store as it is now under ``name`` (replacing one of that name), with
        the service's in-memory state in the copy's meta table and the credentials beside it."""
        saved_at = service.now()
        creds = {k: v for k, v in self.credentials.items() if k != "baseUrl"}
        if self.folder is None:
            target = sqlite3.connect(":memory:", check_same_thread=False)
            self._fill(service, target, saved_at)
            self._memory[name], self._memory_creds[name] = target, creds
            return SnapshotInfo(name, saved_at, _size(target))
        self.folder.mkdir(parents=True, exist_ok=True)
        path, tmp = self.folder / f"{name}{SUFFIX}", self.folder / f".{name}{SUFFIX}.tmp"
        tmp.unlink(missing_ok=True)
        with contextlib.closing(sqlite3.connect(tmp)) as target:
            self._fill(service, target, saved_at)
        (self.folder / f"{name}{CREDS_SUFFIX}").write_text(json.dumps(creds, indent=2))
        os.replace(tmp, path)  # a reader never sees half a snapshot
        return SnapshotInfo(name, saved_at, path.stat().st_size)

    def _fill(self, service: Service, target: sqlite3.Connection, saved_at: int) -> None:
        service.copy_store(into=target)
        facts = {_STATE: json.dumps(service.runtime_state()), _VERSION: schema_version(target),
                 _SAVED_AT: str(saved_at)}
        target.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", facts.items())
        target.commit()

    def restore(self, service: Service, name: str) -> SnapshotInfo:
        """Put the store, the service's in-memory state and the credentials back as
        ``name`` kept them. NOT_FOUND for an unknown name; CONFLICT (``SNAPSHOT_VERSION``)
        for a snapshot of another schema version, changing nothing."""
        with self._open(name) as source:
            facts = _facts(source)
            ours = service_schema(service)
            if facts.get(_VERSION) != ours or schema_version(source) != ours:
                raise ApiError("CONFLICT", f"Snapshot {name!r} was saved by another version of the sandbox (its "
                               "tables differ from this one's); save it again with this version.",
                               reason="SNAPSHOT_VERSION", field="name")
            service.load_store(source)
            size = _size(source)
        service.load_runtime_state(json.loads(facts[_STATE]))
        self.put_credentials(self._credentials_of(name))
        return SnapshotInfo(name, int(facts[_SAVED_AT]), size)

    @contextlib.contextmanager
    def _open(self, name: str) -> Iterator[sqlite3.Connection]:
        if name in self._memory:
            yield self._memory[name]
            return
        path = self.folder / f"{name}{SUFFIX}" if self.folder is not None else None
        if path is None or not path.is_file():
            known = ", ".join(self.names()) or "none yet"
            raise ApiError("NOT_FOUND", f"No snapshot named {name!r} (saved: {known}); save one with "
                           "snapshot.save first, or list them with snapshot.list.", field="name",
                           reason="SNAPSHOT_NOT_FOUND")
        with contextlib.closing(sqlite3.connect(path)) as conn:
            yield conn

    def _credentials_of(self, name: str) -> dict[str, Any]:
        if name in self._memory_creds:
            return self._memory_creds[name]
        kept = self.folder / f"{name}{CREDS_SUFFIX}" if self.folder is not None else None
        return json.loads(kept.read_text()) if kept is not None and kept.is_file() else {}

    def put_credentials(self, creds: dict[str, Any]) -> None:
        """Make ``creds`` (without ``baseUrl``) the credentials handed out, and rewrite the
        files that hold them; nothing when empty."""
        if not creds:
            return
        base_url = self.credentials.get("baseUrl")
        self.credentials.clear()
        self.credentials.update({"baseUrl": base_url, **creds} if base_url else creds)
        for path in self.credential_files:
            shown = creds if path.name == CREDENTIALS else self.credentials
            path.write_text(json.dumps(shown, indent=2))

    def names(self) -> list[str]:
        return [i.name for i in self.kept()]

    def kept(self) -> list[SnapshotInfo]:
        """The snapshots kept, by name."""
        out = [SnapshotInfo(n, _saved_at(c), _size(c)) for n, c in self._memory.items()]
        if self.folder is not None and self.folder.is_dir():
            for path in self.folder.glob(f"*{SUFFIX}"):
                with contextlib.closing(sqlite3.connect(path)) as conn:
                    out.append(SnapshotInfo(path.stem, _saved_at(conn), path.stat().st_size))
        return sorted(out, key=lambda i: i.name)


def service_schema(service: Service) -> str:
    """The schema version of the running service's store."""
    raw = service.engine.raw_connection()
    try:
        return schema_version(raw.driver_connection)  # type: ignore[arg-type]
    finally:
        raw.close()


def _facts(conn: sqlite3.Connection) -> dict[str, str]:
    """The snapshot's meta facts; none for a file that is not a sandbox's database (its
    restore is then refused as of another version)."""
    try:
        return dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'snapshot_%'").fetchall())
    except sqlite3.DatabaseError:
        return {}


def _saved_at(conn: sqlite3.Connection) -> int:
    return int(_facts(conn).get(_SAVED_AT) or 0)


def _size(conn: sqlite3.Connection) -> int:
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    return int(pages) * int(conn.execute("PRAGMA page_size").fetchone()[0])


def store_of(service: Service) -> SnapshotStore:
    """The service's snapshot store (made on first use: ``snapshots`` in its data dir, or
    in memory)."""
    if service.snapshots is None:
        service.snapshots = SnapshotStore(service.data_dir / "snapshots" if service.data_dir else None)
    store: SnapshotStore = service.snapshots
    return store
