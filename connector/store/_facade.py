"""The ``Store``: the connector's database as its callers see it. It picks the writer of
the database the URL names, runs every write in one transaction (run again on a
transient conflict where the database has them), and applies the schema's migrations."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import delete, literal, select, table, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, OperationalError

from ..config.keyfile import bound_key, library_key_path, new_key
from ..models import Event
from ._archive import ArchiveStore
from ._campaign import CampaignReads
from ._cursors import ExportCursors
from ._database import Database
from ._deadletters import DeadLetterReads
from ._deletions import DeletionLog
from ._erasure import (
    Found,
    Person,
    any_erased,
    barred,
    erasure_keys,
    find,
    find_submissions,
    forget_erasures,
    marks_of,
    remove,
    remove_rows,
)
from ._events import EventReads
from ._exports import ExportReads
from ._grants import GrantRows, forget_grants, holds_any_grant
from ._jobstore import ScheduledJobs
from ._keeper import ViewKeeper
from ._leader import LOCK_NAME, LeaderLock
from ._lease import leader_lock, run_lock
from ._ledger import OutreachLedger
from ._mapping import (
    SOURCES,
    EventRows,
    Incoming,
    Source,
    StoreOutcome,
    SyncMark,
    Unstorable,
    event_to_rows,
    now_ms,
    request_rows,
    submission_rows,
)
from ._merge import REQUEST_MERGE, merge, write_submissions
from ._mysql import MySQLWriter
from ._postgresql import PostgreSQLWriter
from ._progress import OutreachProgressReads
from ._reconcile import reconcile
from ._requests import RequestReads
from ._responses import completions, replace_provisional
from ._runs import JobRuns
from ._schema import FormSchema
from ._sqlite import SQLiteWriter, sqlite_file
from ._submissions import SubmissionReads
from ._tables import (
    CURSORS,
    DEAD_LETTERS,
    ERASURES,
    EVENTS,
    FORM_FIELDS,
    REQUESTS,
    SUBMISSIONS,
    VERSION_TABLE,
    ArrivalCounter,
    SyncCursor,
)
from ._writer import Writer

log = logging.getLogger("formsync.store")

T = TypeVar("T")
_RETRIES = 5  # a transient conflict (see Writer.retryable): the whole transaction is run again

# The writer of each database, by SQLAlchemy backend name: a new database is a module
# with its writer, and one line here.
WRITERS: dict[str, type[Writer]] = {"sqlite": SQLiteWriter, "postgresql": PostgreSQLWriter, "mysql": MySQLWriter}


def url_problem(url: str) -> str | None:
    """Why the database ``url`` names cannot be opened, when its writer can tell without
    connecting (a SQLite file in a missing directory); None otherwise, or for a URL no
    writer takes (``Store`` says that one)."""
    try:
        writer = WRITERS.get(make_url(url).get_backend_name())
    except ArgumentError:
        return None
    return writer.open_problem(url) if writer is not None else None


def _normalise_url(url: str | Path) -> str:
    if isinstance(url, Path):
        return f"sqlite:///{url}"
    for bare in ("postgresql://", "postgres://"):
        if url.startswith(bare):  # psycopg 3 is the driver this distribution installs
            return "postgresql+psycopg://" + url[len(bare):]
    for bare in ("mysql://", "mariadb://", "mariadb+pymysql://"):
        if url.startswith(bare):  # PyMySQL is the driver this distribution installs
            return "mysql+pymysql://" + url[len(bare):]
    return url


class Store:
    """The connector's database. ``url`` is a SQLAlchemy URL: ``sqlite:///path.db`` (the
    default kind; WAL journal, ``synchronous=FULL``, a busy timeout, and every write
    transaction taking the write lock at its start) or ``postgresql+psycopg://…``.
    ``clock`` returns the current time in epoch ms (injectable for tests).
    ``pre_ping`` false spares a server database the check of a pooled connection
    before each use (a round trip): the first use of a connection the server has
    dropped then fails instead (and the pool is renewed), for callers that retry
    anyway. ``key_file`` is the store's key (see ``connector.config.keyfile``); unset, it
    is where a command finds it (``library_key_path``: beside a SQLite database, else as
    the settings file ``config`` or ``FORMSYNC_CONFIG`` says). Call ``migrate()`` once before use.

    Conventions of every write: idempotent and out-of-order safe. An event id is stored
    once. A submission or request row is only replaced by a newer version of it ("newest
    wins", see ``submission_rank`` and ``request_rank``); a write that loses changes
    nothing, except that it may fill in a column still unknown (NULL) whose value never
    changes. A write only sets the columns its source carries: a ``requests.list`` record
    has no answers, so it never erases the answers a completion event stored. Every
    public method runs in its own transaction on its own connection, so the store may be
    shared by threads (the async receiver calls it from a worker thread)."""

    def __init__(self, url: str | Path = "sqlite:///formsync.db", *, clock: Callable[[], int] = now_ms,
                 echo: bool = False, pre_ping: bool = True, key_file: Path | None = None,
                 config: Path | None = None) -> None:
        self.url = _normalise_url(url)
        self.clock = clock
        # The store's key (``[store] key_file``): read only once a tombstone or a sign-in is kept.
        self.key_file = key_file or library_key_path(self.url, config)
        self._key: bytes | None = None
        writer = WRITERS.get(make_url(self.url).get_backend_name())
        if writer is None:
            shown = make_url(self.url).render_as_string(hide_password=True)
            raise ValueError(f"unsupported database URL {shown!r}: use sqlite:///path.db, "
                             f"postgresql+psycopg://user@host/db or mysql+pymysql://user@host/db")
        self._writer: type[Writer] = writer
        file = sqlite_file(self.url) if writer is SQLiteWriter else None
        self._file = None if file is None else file.resolve()  # read by every run's lock: found once
        self._db = Database(writer.create_engine(self.url, echo=echo, pre_ping=pre_ping), writer)
        self.runs = JobRuns(self._db)
        self.requests = RequestReads(self._db)
        self.events = EventReads(self._db)
        self.submissions = SubmissionReads(self._db)
        self.outreach_progress = OutreachProgressReads(self._db)
        self.scheduled_jobs = ScheduledJobs(self._db)
        self.exports = ExportReads(self._db)
        self.export_cursors = ExportCursors(self._db)  # where each incremental export under a name stopped
        self.dead_letters = DeadLetterReads(self._db)  # the events set aside (see set_aside)
        self.archive = ArchiveStore(self._db, clock)  # the file answers' bytes archived by `formsync files`
        self.campaign = CampaignReads(self._db, clock, self.key)  # each job's rows with their requests; suppression
        self.ledger = OutreachLedger(self._db, clock)  # outreach jobs and the state of each sheet row
        self._views = ViewKeeper(self._db.engine, clock, writer)  # each form's field list and typed view
        self.grants = GrantRows(self._db, clock)  # formsync login's sign-in; static tokens' first use
        self.deletions = DeletionLog(self._db)  # what erase, purge and reconcile removed, for loads

    @property
    def file(self) -> Path | None:
        """The store's SQLite file, resolved when the store was made; None for a server
        database or an in-memory SQLite."""
        return self._file

    @property
    def backend(self) -> str:
        """The database's kind, as SQLAlchemy names it: ``sqlite``, ``postgresql`` or ``mysql``."""
        return self._db.engine.dialect.name

    def exists(self) -> bool:
        """False while the database is a SQLite file not created yet (reading nothing
        then creates nothing)."""
        return not self._writer.missing(self.url)

    def table_names(self) -> set[str]:
        """The tables the database holds now (none before the first migration)."""
        return self._db.table_names()

    def holds_rows(self) -> bool:
        """Whether any of the store's tables holds a row (the rows the migrations make aside:
        their record, the arrival counter): False for a store new or emptied, True once
        anything was stored (a sign-in too)."""
        names = sorted(self.table_names() - {VERSION_TABLE, ArrivalCounter.__tablename__})
        with self._db.reader() as s:
            return any(s.execute(select(literal(1)).select_from(table(name)).limit(1)).first() is not None
                       for name in names)

    def leader_lock(self, name: str = LOCK_NAME, *, ttl_seconds: float = 30.0,
                    holder: str | None = None) -> LeaderLock:
        """The scheduler's leader lock on this database (see ``connector.store._lease``):
        a session lock where the database has one, else a lease of ``ttl_seconds``."""
        return leader_lock(self._db, name, ttl_seconds=ttl_seconds, holder=holder)

    def run_lock(self, name: str, *, ttl_seconds: float = 30.0) -> LeaderLock:
        """The lock of one short run under ``name`` (``connector.store._lease.run_lock``):
        a session lock where the database has one, a file lock beside a SQLite file
        (``<file>-locks/``), else a lease of ``ttl_seconds``."""
        return run_lock(self._db, self.file, name, ttl_seconds=ttl_seconds)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every pooled connection (``with Store(url) as store:`` does on exit)."""
        self._db.engine.dispose()

    def ping(self) -> None:
        """Reach the database once (a health check); raises when it is unavailable. A
        read: on SQLite it never waits for the write lock."""
        with self._db.reader() as s:
            s.execute(text("SELECT 1"))

    def write_problem(self) -> str | None:
        """Why no write can succeed now though the database answers, in a few words
        (SQLite: ``not writable (disk full: 0 KiB free)``, ``not writable (read-only file
        system)``, ``locked by another process``); None when writes may go ahead."""
        return self._writer.write_problem(self.url)

    # -- schema ---------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the schema to the newest migration (Alembic, configured in code: no
        ``alembic.ini`` needed). Safe to run from several processes at once."""
        from alembic import command

        cfg = alembic_config(self.url)
        with self._db.engine.begin() as conn:
            self._writer.lock_migrations(conn)
            try:
                cfg.attributes["connection"] = conn
                cfg.attributes["key_file"] = self.key_file  # a migration stamping the tombstones reads the key
                command.upgrade(cfg, "head")
            finally:
                self._writer.unlock_migrations(conn)

    @property
    def database(self) -> Database:
        """The database below the repositories (its engine and sessions), for tests and
        tools that check what is stored; applications use the methods and repositories."""
        return self._db

    def _write_tx(self, work: Callable[[Writer], T]) -> T:
        """``_write`` with the transaction's writer."""
        def run(conn: Connection) -> T:
            w = self._writer(conn)  # type: ignore[call-arg]
            try:
                return work(w)
            finally:
                w.close()

        return self._write(run)

    def _write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one transaction; on a transient conflict (a PostgreSQL
        deadlock or serialization failure) the whole transaction is run again."""
        driver_error = self._db.engine.dialect.loaded_dbapi.Error
        for attempt in range(_RETRIES):
            try:
                try:
                    with self._db.engine.begin() as conn:
                        return work(conn)
                except driver_error as e:
                    # Raised by the driver-level writes: as SQLAlchemy's own class
                    # (IntegrityError, OperationalError, ...), as its execute would raise.
                    if self._writer.refused(e):  # a constraint the driver files elsewhere
                        raise IntegrityError(None, None, e) from e
                    raise DBAPIError.instance(None, None, e, driver_error, dialect=self._db.engine.dialect) from e
            except (OperationalError, IntegrityError) as e:
                if not self._writer.retryable(e) or attempt == _RETRIES - 1:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    # -- events ---------------------------------------------------------------------

    def store_events(self, events: Sequence[Event | Incoming], *, source: Source = "webhook",
                     settles: Sequence[str] = ()) -> list[StoreOutcome]:
        """Store many events in ONE transaction (group commit). Returns one outcome per
        event, in order: ``stored`` the first time an event id is seen, ``duplicate``
        afterwards (also for a repeat within the batch); a duplicate changes nothing.
        Plain ``Event`` items are taken as coming from ``source``. See ``event_to_rows``
        for what each type writes. The dead letters whose ids are in ``settles`` are
        removed in the same transaction (a replay). All or nothing: on an error nothing
        is stored."""
        if source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
        now = self.clock()
        items = [e if isinstance(e, Incoming) else Incoming(e, source) for e in events]
        for i, inc in enumerate(items):
            if inc.source not in SOURCES:
                raise ValueError(f"events[{i}].source must be one of {', '.join(SOURCES)}, got {inc.source!r}")
        mapped = [event_to_rows(inc, now=now) for inc in items]
        firsts: dict[str, EventRows] = {}
        for m in mapped:
            firsts.setdefault(m.raw["id"], m)

        def work(w: Writer) -> set[str]:
            kept = self._unbarred(w.conn, list(firsts.values()), lambda m: [
                *marks_of(m.raw, "event"), *(marks_of(m.submission, "submission") if m.submission else []),
                *(marks_of(m.request, "request") if m.request else [])])
            new = w.insert_new(EVENTS.name, [m.raw for m in kept])
            fresh = [m for m in firsts.values() if m.raw["id"] in new]
            requests = [m.request for m in fresh if m.request]
            merge(w, REQUEST_MERGE, requests)
            subs = [m.submission for m in fresh if m.submission]
            write_submissions(w, subs)
            replace_provisional(w, subs)
            if settles:
                w.conn.execute(delete(DEAD_LETTERS).where(DEAD_LETTERS.c.id.in_(list(settles))))
            _arrived(w, [s["id"] for s in subs], [r["id"] for r in requests])
            return new

        new = self._write_tx(work) if firsts else set()
        self._note_fields([m.submission for m in firsts.values() if m.submission and m.raw["id"] in new])
        outcomes = []
        for m in mapped:
            eid = m.raw["id"]
            first = eid in new and firsts.get(eid) is m
            outcomes.append(StoreOutcome(eid, m.raw["type"], "stored" if first else "duplicate"))
        return outcomes

    def set_aside(self, items: Sequence[Unstorable]) -> list[StoreOutcome]:
        """Keep correctly signed events that cannot be stored as events in the dead
        letters (``formsync_dead_letters``), in one transaction; one ``set_aside`` outcome
        per item, in order. A body set aside already is kept once (a sender's retry)."""
        now = self.clock()
        rows = {r["id"]: r for r in (item.row(now) for item in items)}

        def work(conn: Connection) -> None:
            kept = set(conn.execute(select(DEAD_LETTERS.c.id).where(DEAD_LETTERS.c.id.in_(list(rows)))).scalars())
            new = [r for key, r in rows.items() if key not in kept]
            if new:
                conn.execute(DEAD_LETTERS.insert(), new)

        if rows:
            try:
                self._write(work)
            except IntegrityError:  # another process set the same body aside meanwhile
                self._write(work)
        return [StoreOutcome(item.event_id, item.type, "set_aside", item.reason) for item in items]

    # -- erasure ------------------------------------------------------------------------

    def key(self, *, create: bool = False) -> bytes:
        """The store's key (``key_file``), read once: a ``KeyFileError`` when it is
        missing, cannot be used, or is not the key the tombstones were made with. Made
        when missing and ``create`` is true, unless tombstones or a sign-in are kept
        (only ``reset_key`` makes a key then)."""
        if self._key is None:
            with self._db.reader() as s:
                conn = s.connection()
                bound = erasure_keys(conn) if conn.dialect.has_table(conn, ERASURES.name) else set()
                granted = create and holds_any_grant(conn)
            self._key = bound_key(self.key_file, bound, create=create, granted=granted)
        return self._key

    def check_key(self) -> None:
        """Refuse (``KeyFileError``, naming the key file) when tombstones are kept and the
        key is missing, unusable, or not the one they were made with: what every ingest
        path, ``erase`` and every send call before their first write. Nothing to check
        while no tombstone is kept."""
        with self._db.reader() as s:
            conn = s.connection()
            kept = conn.dialect.has_table(conn, ERASURES.name) and any_erased(conn)
        if kept:
            self.key()

    def reset_key(self) -> tuple[int, int]:
        """A new key in ``key_file`` (``formsync key reset --forget-erasures``): every
        tombstone and every sign-in sealed with the old key is forgotten first, in one
        transaction, so an erased person can come back with the next full sync. Returns
        the tombstones and sign-ins forgotten."""
        counts = self._write(lambda conn: (forget_erasures(conn), forget_grants(conn)))
        self._key = new_key(self.key_file)
        return counts

    def _unbarred(self, conn: Connection, items: Sequence[T], marks: Callable[[T], list[tuple[str, str]]]) -> list[T]:
        """``items`` without those an erasure's tombstone names (see ``erasure.barred``)."""
        if not items or not any_erased(conn):
            return list(items)
        gone = barred(conn, self.key, [marks(i) for i in items])
        return [i for n, i in enumerate(items) if n not in gone]

    def erase(self, person: Person, *, dry_run: bool = False) -> Found:
        """Remove every row that holds ``person`` in one transaction, log each removal and
        keep the tombstones that bar them from coming back (see ``connector.store._erasure``);
        with ``dry_run``, only find them. Returns what was (or would be) removed; the
        archived files' bytes at ``Found.locations`` are the caller's to remove."""
        key = self.key(create=True) if not dry_run else b""  # first: a refused key writes nothing
        now = self.clock()

        zero = self.backend == "sqlite" and not dry_run

        def work(w: Writer) -> Found:
            found = find(w.conn, person)
            if not dry_run:
                if zero:  # the cells and pages the removals free are zeroed: no copy stays in the file
                    w.conn.exec_driver_sql("PRAGMA secure_delete=ON")
                try:
                    remove(w.conn, found, person, key, now, w.take_place)
                finally:
                    if zero:
                        w.conn.exec_driver_sql("PRAGMA secure_delete=OFF")
            return found

        found = self._write_tx(work)
        if zero:
            self._truncate_log()
        return found

    def _truncate_log(self) -> None:
        """SQLite's write-ahead log written into the file and emptied (best effort: a reader
        holding it leaves it for the next checkpoint): its older frames held the rows removed."""
        raw = self._db.engine.raw_connection()  # outside a transaction: a checkpoint cannot run in one
        try:
            cursor = raw.cursor()
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.fetchall()
            cursor.close()
        finally:
            raw.close()

    def remove_submissions(self, submissions: Mapping[str, str], *, reason: str, dry_run: bool = False,
                           cleared: Sequence[str] = ()) -> Found:
        """Remove stored submissions (id -> form id) with their events and archived-file
        rows, and clear their requests' answers (and those of the requests ``cleared``),
        logging each removal with ``reason`` (``purge``), in one transaction; with
        ``dry_run``, only find them. The archived files' bytes at ``Found.locations`` (used
        by no other answer) are the caller's."""
        now = self.clock()

        def work(w: Writer) -> Found:
            found = find_submissions(w.conn, submissions)
            found.cleared = sorted(set(found.cleared) | set(cleared))
            if not dry_run:
                remove_rows(w.conn, found, reason, now, w.take_place)
            return found

        return self._write_tx(work)

    def reconcile(self, form_id: str, listed: AbstractSet[str]) -> tuple[list[str], list[str]]:
        """Mark the form's stored completed submissions that the service no longer lists
        (``listed``: every id of its ``submissions.list``) gone, logged as deletions, and
        un-mark those listed again, in one transaction (see ``connector.store._reconcile``).
        An un-marked submission takes a new place in the arrival order, so the next
        incremental export and load send it again (a load had deleted it). Returns the ids
        marked and the ids un-marked."""
        now = self.clock()

        def work(w: Writer) -> tuple[list[str], list[str]]:
            gone, back = reconcile(w.conn, form_id, listed, now, w.take_place)
            w.stamp_arrival({SUBMISSIONS.name: back})  # the transaction's last write
            return gone, back

        return self._write_tx(work)

    # -- reads from the service ---------------------------------------------------------

    def upsert_requests(self, records: Sequence[Mapping[str, Any] | BaseModel], *,
                        source: Source = "poll") -> list[str]:
        """Store request records read from the service (``requests.get``, ``requests.list``
        or ``requests.create`` shapes, epoch ms), newest wins: a terminal status is never
        replaced by ``pending``, and otherwise the newer ``updatedAt`` is kept. Only the
        keys a record carries are written. A completed record's answers are stored as
        its submission's row, once, whichever route brings that submission (see
        ``connector.store._responses``). Returns the ids whose request row was inserted
        or replaced. A malformed record is a ``ValueError`` and nothing is stored."""
        rows = request_rows(records, source, self.clock())

        def work(w: Writer) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            kept = self._unbarred(w.conn, rows, lambda r: marks_of(r, "request"))
            subs = completions(w, kept)
            written = merge(w, REQUEST_MERGE, kept)
            write_submissions(w, subs)
            replace_provisional(w, subs)
            _arrived(w, [s["id"] for s in subs], [r["id"] for r in kept])
            return written, subs

        written, subs = self._write_tx(work)
        self._note_fields(subs)
        return sorted({r["id"] for r in written})

    def upsert_submissions(self, items: Sequence[Mapping[str, Any] | BaseModel], form_id: str,
                           form_name: str | None = None, *, source: Source = "sync") -> list[str]:
        """Store ``submissions.list`` items of one form, newest wins (see
        ``submission_rank``), with their answers. Returns the ids whose row was
        inserted or replaced. A malformed item is a ``ValueError`` and nothing is stored."""
        return self.sync_page(form_id, items, None, form_name=form_name, source=source)

    def sync_page(self, form_id: str, items: Sequence[Mapping[str, Any] | BaseModel], cursor: SyncMark | None, *,
                  form_name: str | None = None, stream: str = "submissions", source: Source = "sync") -> list[str]:
        """Store one ``submissions.list`` page and, when ``cursor`` is given, move the
        form's sync cursor to it: both in the same transaction, so a failure leaves
        neither. The cursor only moves forward (see ``set_cursor``). Returns the ids whose
        row was inserted or replaced."""
        now = self.clock()
        rows = submission_rows(items, form_id, form_name, source, now)

        def work(w: Writer) -> list[str]:
            kept = self._unbarred(w.conn, rows, lambda r: marks_of(r, "submission"))
            written = write_submissions(w, kept)
            replace_provisional(w, kept)
            if cursor is not None:
                w.set_cursor(form_id, cursor, stream, now)
            _arrived(w, [r["id"] for r in kept], [])
            return written

        written = self._write_tx(work)
        self._note_fields(rows)
        return written

    # -- the typed views of the forms ------------------------------------------------------

    def _note_fields(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """After a write: answered keys the form's field list lacks are held back until
        ``fields.list`` names them (``held_back_fields``). The rows are stored already,
        so a failure here is logged, never raised."""
        try:
            self._views.note(rows)
        except Exception as e:  # noted again at the next write of the form or `formsync views`
            log.warning("could not note the new fields of a form: %s", e)

    def record_fields(self, form_id: str, items: Sequence[Mapping[str, Any] | BaseModel]) -> FormSchema:
        """Store a form's ``fields.list`` items as its field list (their order, types,
        titles and choices) and rebuild its view (``schema.view_name``). A field no
        longer listed keeps its column while stored submissions answer it."""
        plain = [i.model_dump(exclude_none=True) if isinstance(i, BaseModel) else dict(i) for i in items]
        return self._views.record_list(form_id, plain)

    def refresh_views(self, form_ids: Sequence[str] | None = None) -> list[FormSchema]:
        """Hold back the answered keys of the stored submissions (of ``form_ids``, or of
        every form) that no field list holds yet, and (re)build the views of those
        forms. Returns their views."""
        self._views.note_stored(form_ids)
        known = set(self._views.forms())
        forms = sorted(known) if form_ids is None else [f for f in form_ids if f in known]
        return self._views.rebuild_many(forms)

    def held_back_fields(self, form_ids: Sequence[str] | None = None, *,
                         since: int | None = None) -> dict[str, list[str]]:
        """The answered field keys kept out of every typed output (views, exports,
        frames, loads) because no ``fields.list`` read named them yet, by form (among
        ``form_ids``, or every form). The long answers table carries them. With
        ``since`` (epoch ms, the store's ``clock``), only the keys held (or to be asked
        again under a new form snapshot) since then."""
        return self._views.held_back(form_ids, since)

    def claim_field_list_reads(self, form_ids: Sequence[str] | None = None, *,
                               every_ms: int = 60_000) -> list[str]:
        """The forms (among ``form_ids``, or every form) holding back keys that no
        ``fields.list`` read asked about yet, or whose ``fields.list`` no process read or
        tried in the last ``every_ms``; each is stamped as read now. A new key is asked
        about at once; the same held keys once a minute at most."""
        return self._views.claim_reads(form_ids, every_ms)

    def schema_changed_at(self, form_id: str) -> int | None:
        """When a held-back column last appeared in the form's table (epoch ms, store
        clock), or None. The rows answering it took a new place in the arrival order
        then, so incremental exports and loads sent them again with its values."""
        return self._views.changed_at(form_id)

    def full_syncs(self, form_ids: Sequence[str]) -> dict[str, int | None]:
        """When a sync last read each of ``form_ids``' whole ``submissions.list`` (the
        service's clock, epoch ms; None: never, or before the store kept it)."""
        return self._views.full_syncs(form_ids)

    def record_full_sync(self, form_id: str, at: int) -> None:
        """Keep that a sync read the form's whole ``submissions.list``, as of ``at`` (the
        service's clock, epoch ms)."""
        self._views.record_full_sync(form_id, at)

    def schema(self, form_id: str) -> FormSchema:
        """The table of ``form_id`` (``schema.form_schema`` over its stored field list):
        what its view, its wide export and its frames hold, column by column."""
        return self._views.schema(form_id)

    def answered_forms(self) -> list[str]:
        """The forms with at least one stored submission, by id."""
        return self._views.answered_forms()

    def knows_form(self, form_id: str) -> bool:
        """Whether anything of ``form_id`` was ever stored: a submission, a request, a
        field list or a sync cursor (a form synced with no submission yet is known)."""
        tables = (SUBMISSIONS, REQUESTS, FORM_FIELDS, CURSORS)
        with self._db.reader() as s:
            return any(s.execute(select(t.c.form_id).where(t.c.form_id == form_id).limit(1)).first() is not None
                       for t in tables)

    def views(self) -> list[FormSchema]:
        """The typed view of every form the store knows (name, form, columns), by form id."""
        return self._views.views()

    def parsed_views(self) -> int | None:
        """On a SQLite store, how many views its schema holds (each form's, its alias and
        any of the user's): every connection to the file keeps each one parsed. None on a
        server database, which keeps its views itself."""
        if self.backend != "sqlite":
            return None
        with self._db.reader() as s:
            return int(s.execute(text("SELECT count(*) FROM sqlite_master WHERE type = 'view'")).scalar_one())

    # -- sync cursors ---------------------------------------------------------------

    def set_cursor(self, form_id: str, mark: SyncMark, stream: str = "submissions") -> None:
        """Move a form's sync cursor forward to ``mark``. A mark older than the stored one
        (compared as ``(created_at, submission_id)``) changes nothing; use
        ``reset_cursor`` to start over."""
        now = self.clock()
        self._write_tx(lambda w: w.set_cursor(form_id, mark, stream, now))

    def get_cursor(self, form_id: str, stream: str = "submissions") -> SyncMark | None:
        """The stored high-water mark of a form's sync, or None before the first."""
        with self._db.reader() as s:
            c = s.get(SyncCursor, (form_id, stream))
            return SyncMark(c.last_created_at, c.last_id) if c else None

    def reset_cursor(self, form_id: str, stream: str = "submissions") -> None:
        """Forget a form's sync cursor: the next sync reads the whole list again."""
        self._write(lambda conn: conn.execute(
            delete(CURSORS).where(CURSORS.c.form_id == form_id, CURSORS.c.stream == stream)))


def _arrived(w: Writer, submissions: Sequence[str], requests: Sequence[str]) -> None:
    """The rows a write touched whose content changed take a new place in the arrival
    order (``Writer.stamp_changed``): the transaction's last step. A row read again as
    it was keeps its place, so incremental exports and loads do not send it again."""
    w.stamp_changed({SUBMISSIONS.name: submissions, REQUESTS.name: requests})


def alembic_config(url: str) -> Any:
    """An Alembic ``Config`` for the store's migrations (``connector/migrations``), built in code."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent.parent / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg
