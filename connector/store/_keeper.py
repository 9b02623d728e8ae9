"""Keeps each form's typed view (``views``) in step with its field list
(``formsync_form_fields``), which only ``fields.list`` fills: an answered key the list
lacks is held back (kept, untyped, out of every typed output) until a read of
``fields.list`` names it; nothing is ever typed from values. A form's view is rebuilt
when its list changes."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, and_, func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from ._schema import (
    FormSchema,
    StoredField,
    fields_from_list,
    form_schema,
    legacy_view_name,
    same_columns,
    shape_of,
    variant_key,
    view_name,
)
from ._sqlite import READ_OPTION
from ._tables import FORM_FIELDS, FORM_SCHEMAS, SUBMISSIONS
from ._views import DIALECTS, select_sql
from ._writer import Writer

log = logging.getLogger("formsync.store")
_VIEW_LOCK = 7410118  # PostgreSQL advisory lock key serialising view rebuilds
_HOOK_LOCK_SECONDS = 2  # how long a write's hook waits to replace a view being read
BATCH_SECONDS = 0.5  # views replaced in one transaction: at most this long holding the write lock
RECENT_FORMS = 1024  # the forms whose known keys and snapshot a keeper holds (the rest are read again)
V = TypeVar("V")
HELD_BACK = "answers"  # the ``source`` of a key answered before fields.list named it
PENDING, UNLISTED = "pending", "unlisted"  # a held-back key: to be asked; not listed by the last read


def merge_field_list(stored: Mapping[str, Mapping[str, Any]], listed: Sequence[StoredField],
                     options: Mapping[str, Any], now: int) -> tuple[list[dict[str, Any]], bool]:
    """The form's field rows after a ``fields.list`` read (``listed``, each field's shape
    in ``options``) over its ``stored`` rows (by key, in position order): the listed
    fields in their order; a field whose type changed keeps its row and type, and the
    new type follows as ``variant_key`` (reading the same answer); then the stored rows
    no longer listed, marked so (a held-back key the list lacks: ``UNLISTED``). Returns
    the rows (every column but ``form_id``) and whether a held-back key got its column."""
    out: list[dict[str, Any]] = []
    taken: set[str] = set()
    appeared = False

    def put(key: str, row: Mapping[str, Any]) -> None:
        out.append({**row, "field_key": key, "position": len(out), "updated_at": now})
        taken.add(key)

    for f in listed:
        new = {"type": f.type, "title": f.title, "options": options.get(f.key), "listed": True,
               "source": "fields.list", "answer_key": None}
        old = stored.get(f.key)
        if old is None or old["source"] == HELD_BACK or same_columns(old["type"], f.type):
            appeared |= old is not None and old["source"] == HELD_BACK
            put(f.key, new)
        else:  # a column's type never changes: the old one stays, the new type is a new column
            put(f.key, {**new, "type": old["type"], "options": old["options"]})
            put(variant_key(f.key, f.type), {**new, "answer_key": f.key})
    for key, old in stored.items():
        if key not in taken:
            put(key, {**old, "listed": False, **({"type": UNLISTED} if old["source"] == HELD_BACK else {})})
    return out, appeared


class ViewKeeper:
    """The field lists and views of one store's database (thread-safe)."""

    def __init__(self, engine: Engine, clock: Any, writer: type[Writer], *, recent: int = RECENT_FORMS) -> None:
        self.engine = engine
        self._writer = writer  # the database's writer: places rows in the arrival order
        self.reads = engine.execution_options(**{READ_OPTION: True})  # no write lock on SQLite
        self.clock = clock
        # Both read again from the store when missing: the most recently used forms only, so
        # a process's memory does not grow with the number of forms it has seen.
        self._known: _Recent[set[str]] = _Recent(recent)  # form id -> keys with a row (listed or held back)
        self._snapshots: _Recent[str | None] = _Recent(recent)  # form id -> snapshot its keys were asked under
        self._lock = threading.Lock()

    # -- answered keys the field list lacks ----------------------------------------------

    def note(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """Hold back the keys answered in submission ``rows`` that their form's field list
        lacks (kept as ``PENDING``: the next ``fields.list`` read types or drops them), and
        ask again the keys a read did not list when a row names a new form snapshot. A
        form seen for the first time gets its view. Returns the forms with keys to ask."""
        new: dict[str, list[str]] = {}
        snapshots: dict[str, str] = {}
        with self._lock:
            for r in rows:
                answers, form_id = r.get("answers"), r.get("form_id")
                if not isinstance(answers, dict) or not form_id:
                    continue
                if r.get("snapshot_id"):
                    snapshots[form_id] = r["snapshot_id"]
                known = self._known_keys(form_id)
                if answers.keys() <= known:  # the common case, checked in one set operation
                    continue
                mine = new.setdefault(form_id, [])
                mine += [k for k, v in answers.items() if k not in known and v is not None and k not in mine]
            first = [f for f, keys in new.items() if keys and not self._known_keys(f)]
            for form_id, keys in new.items():
                if keys:
                    self._hold(form_id, keys)
            asked = [f for f, snap in snapshots.items() if self._new_snapshot(f, snap)]
            if first:
                self.rebuild_many(first, wait=False)
        return sorted({f for f, keys in new.items() if keys} | set(asked))

    def _known_keys(self, form_id: str) -> set[str]:
        known = self._known.get(form_id)
        if known is None:
            with self.reads.connect() as conn:
                known = set(conn.execute(
                    select(FORM_FIELDS.c.field_key).where(FORM_FIELDS.c.form_id == form_id)).scalars())
            self._known.put(form_id, known)
        return known

    def _hold(self, form_id: str, keys: Sequence[str]) -> None:
        for attempt in range(2):  # another process may add the same key at once
            try:
                with self.engine.begin() as conn:
                    stored = self._stored(conn, form_id)
                    end = max((f["position"] for f in stored.values()), default=-1) + 1
                    rows = [{"form_id": form_id, "field_key": k, "position": end + i, "type": PENDING, "title": None,
                             "options": None, "listed": False, "source": HELD_BACK, "updated_at": self.clock()}
                            for i, k in enumerate(k for k in keys if k not in stored)]
                    if rows:
                        conn.execute(insert(FORM_FIELDS), rows)
                break
            except IntegrityError:
                if attempt:
                    raise
        known = self._known.get(form_id)
        if known is not None:  # a form not held is read whole from the store when next asked
            known.update(keys)

    def _new_snapshot(self, form_id: str, snapshot: str) -> bool:
        """Record ``snapshot`` as the form's newest; when it differs from the one its
        unlisted keys were asked under, make them ``PENDING`` again (True)."""
        if form_id in self._snapshots:
            asked = self._snapshots.get(form_id)
        else:
            with self.reads.connect() as conn:
                asked = conn.execute(select(FORM_SCHEMAS.c.snapshot_id).where(
                    FORM_SCHEMAS.c.form_id == form_id)).scalar()
            self._snapshots.put(form_id, asked)
        if asked == snapshot:
            return False
        with self.engine.begin() as conn:
            set_state(conn, form_id, snapshot_id=snapshot)
            f = FORM_FIELDS.c
            again = conn.execute(update(FORM_FIELDS).where(and_(f.form_id == form_id, f.source == HELD_BACK,
                                                                f.type == UNLISTED))
                                 .values(type=PENDING, updated_at=self.clock())).rowcount  # not asked under it yet
        self._snapshots.put(form_id, snapshot)
        return bool(again)

    @staticmethod
    def _stored(conn: Connection, form_id: str) -> dict[str, dict[str, Any]]:
        got = conn.execute(select(FORM_FIELDS).where(FORM_FIELDS.c.form_id == form_id)
                           .order_by(FORM_FIELDS.c.position, FORM_FIELDS.c.field_key)).mappings()
        return {r["field_key"]: dict(r) for r in got}

    def record_list(self, form_id: str, items: Sequence[Mapping[str, Any]]) -> FormSchema:
        """Store the form's ``fields.list`` items as its field list (``merge_field_list``;
        each field's shape in ``options``: see ``schema.shape_of``) and rebuild its view.
        When a held-back key gets its column, the form's ``changed_at`` is set and the
        stored submissions answering it take a new place in the arrival order, in the
        same transaction: the next incremental export and load, under every name, send
        those rows again with the new column's values (and no other row)."""
        options = {str(i["key"]): shape_of(i) for i in items}
        now = self.clock()
        with self._lock:
            with self.engine.begin() as conn:
                stored = self._stored(conn, form_id)
                rows, appeared = merge_field_list(stored, fields_from_list(items), options, now)
                for row in rows:
                    key = row.pop("field_key")
                    row.pop("form_id", None)
                    if key in stored:
                        conn.execute(update(FORM_FIELDS).where(and_(FORM_FIELDS.c.form_id == form_id,
                                                                    FORM_FIELDS.c.field_key == key)).values(row))
                    else:
                        conn.execute(insert(FORM_FIELDS).values(form_id=form_id, field_key=key, **row))
                set_state(conn, form_id, read_at=now, **({"changed_at": now} if appeared else {}))
                if appeared:
                    got = [k for k in options if stored.get(k, {}).get("source") == HELD_BACK]
                    self._place_answering(conn, form_id, got)
                self._known.put(form_id, set(stored) | {str(i["key"]) for i in items})
            return self.rebuild(form_id)

    def _place_answering(self, conn: Connection, form_id: str, keys: Sequence[str]) -> None:
        """Give the form's stored submissions that answer one of ``keys`` (a non-null
        value) a new place in the arrival order: the transaction's last write."""
        if not keys:
            return
        view = form_schema(form_id, [StoredField(k, "json") for k in keys])
        q = DIALECTS[conn.dialect.name].quote
        answered = " OR ".join(f"v.{q}{c.name}{q} IS NOT NULL" for c in view.fields())
        sql = f"SELECT v.{q}submission_id{q} FROM ({select_sql(conn.dialect.name, view)}) v WHERE {answered}"
        ids = [str(i) for i in conn.exec_driver_sql(sql).scalars()]
        w = self._writer(conn)  # type: ignore[call-arg]
        try:
            w.stamp_arrival({SUBMISSIONS.name: ids})
        finally:
            w.close()

    def note_stored(self, form_ids: Sequence[str] | None = None) -> list[str]:
        """Hold back the answered keys of the stored submissions (of ``form_ids``, or of
        every form) that no field list holds yet (``note``). Returns those forms."""
        stmt = select(SUBMISSIONS.c.form_id, SUBMISSIONS.c.answers)
        if form_ids is not None:
            stmt = stmt.where(SUBMISSIONS.c.form_id.in_(form_ids))
        seen: dict[str, dict[str, Any]] = {}  # form id -> key -> a non-null value
        with self.reads.connect() as conn:
            for part in conn.execution_options(yield_per=100).execute(stmt).partitions():
                for form_id, answers in part:
                    mine = seen.setdefault(form_id, {})
                    mine.update((k, v) for k, v in (_doc(answers) or {}).items() if v is not None)
        return self.note([{"form_id": f, "answers": a} for f, a in seen.items()])

    def held_back(self, form_ids: Sequence[str] | None = None, since: int | None = None) -> dict[str, list[str]]:
        """The answered keys waiting for a ``fields.list`` read to name them (``PENDING``),
        by form (among ``form_ids``, or every form), in the order they were first seen;
        with ``since`` (epoch ms, this store's clock), only those held (or made
        ``PENDING`` again) since."""
        f = FORM_FIELDS.c
        stmt = (select(f.form_id, f.field_key).where(and_(f.source == HELD_BACK, f.type == PENDING))
                .order_by(f.form_id, f.position))
        if form_ids is not None:
            stmt = stmt.where(f.form_id.in_(form_ids))
        if since is not None:
            stmt = stmt.where(f.updated_at >= since)
        out: dict[str, list[str]] = {}
        with self.reads.connect() as conn:
            for form_id, key in conn.execute(stmt):
                out.setdefault(form_id, []).append(key)
        return out

    def claim_reads(self, form_ids: Sequence[str] | None, every_ms: int) -> list[str]:
        """The forms (among ``form_ids``, or every form) holding back keys that no read
        of their field list asked about yet, or whose field list was not read (nor
        tried) in the last ``every_ms``; each is stamped as read now. So a new key is
        asked about at once, and the same held keys once per ``every_ms`` at most,
        whichever process asks."""
        now = self.clock()
        wanted = sorted(self.held_back(form_ids))
        if not wanted:
            return []
        s, f = FORM_SCHEMAS.c, FORM_FIELDS.c
        # A key held after the form's last read (or try) was never asked about: its form is due at once.
        unasked = select(f.form_id).where(and_(f.form_id == s.form_id, f.source == HELD_BACK, f.type == PENDING,
                                               f.updated_at > s.read_at)).exists()
        with self.engine.begin() as conn:
            recent = set(conn.execute(select(s.form_id).where(and_(s.form_id.in_(wanted), s.read_at > now - every_ms,
                                                                   ~unasked))).scalars())
            due = [f for f in wanted if f not in recent]
            for form_id in due:
                set_state(conn, form_id, read_at=now)
        return due

    def full_syncs(self, form_ids: Sequence[str]) -> dict[str, int | None]:
        """When a sync last read each form's whole submissions list (service clock, epoch
        ms; None: never)."""
        s = FORM_SCHEMAS.c
        with self.reads.connect() as conn:
            got = dict(conn.execute(select(s.form_id, s.full_sync_at).where(s.form_id.in_(list(form_ids)))).all())
        return {f: got.get(f) for f in form_ids}

    def record_full_sync(self, form_id: str, at: int) -> None:
        """A sync read the form's whole submissions list, as of ``at`` (service clock)."""
        with self.engine.begin() as conn:
            set_state(conn, form_id, full_sync_at=at)

    def changed_at(self, form_id: str) -> int | None:
        """When a held-back column last appeared in the form's table (epoch ms), or None."""
        with self.reads.connect() as conn:
            return conn.execute(select(FORM_SCHEMAS.c.changed_at).where(FORM_SCHEMAS.c.form_id == form_id)).scalar()

    # -- the views --------------------------------------------------------------------

    def schema(self, form_id: str) -> FormSchema:
        """The table of ``form_id`` as its field list makes it now; the answered keys of a
        form with submissions but no field list (stored before lists were kept) are held
        back first (``note_stored``), so status names them."""
        with self.reads.connect() as conn:
            known = conn.execute(select(FORM_FIELDS.c.form_id).where(FORM_FIELDS.c.form_id == form_id)
                                 .limit(1)).first() is not None
        if not known:
            self.note_stored([form_id])
        with self.reads.connect() as conn:
            return self.view_of(conn, form_id)

    def answered_forms(self) -> list[str]:
        """The forms with at least one stored submission, by id (``answered_forms_query``)."""
        with self.reads.connect() as conn:
            return list(conn.execute(answered_forms_query()).scalars())

    def forms(self) -> list[str]:
        """The forms with a field list, by id."""
        with self.reads.connect() as conn:
            return list(conn.execute(select(FORM_FIELDS.c.form_id).distinct().order_by(FORM_FIELDS.c.form_id))
                        .scalars())

    def view_of(self, conn: Connection, form_id: str) -> FormSchema:
        """The form's table as its field list makes it; a field no longer listed keeps
        its column while a stored submission answers it."""
        fields = []
        for f in self._stored(conn, form_id).values():
            answer = f["answer_key"] or f["field_key"]
            if f["source"] == HELD_BACK or (not f["listed"] and not self._answered(conn, form_id, answer)):
                continue  # held back: no type until fields.list names it
            shape = _doc(f["options"]) if isinstance(f["options"], str | bytes) else f["options"]
            fields.append(StoredField(answer, f["type"], f["title"], tuple(shape or ()), bool(f["listed"]),
                                      f["field_key"] if f["answer_key"] else None))
        name = conn.execute(select(FORM_SCHEMAS.c.view_name).where(FORM_SCHEMAS.c.form_id == form_id)).scalar()
        return form_schema(form_id, fields, name)

    @staticmethod
    def _name(conn: Connection, form_id: str) -> None:
        """Give the form's view its name from the form's name (``schema.view_name``) the
        first time a stored submission names the form; the name is kept afterwards."""
        s, sub = FORM_SCHEMAS.c, SUBMISSIONS.c
        if conn.execute(select(s.view_name).where(s.form_id == form_id)).scalar():
            return
        form_name = conn.execute(select(sub.form_name).where(and_(sub.form_id == form_id, sub.form_name.is_not(None)))
                                 .limit(1)).scalar()
        if form_name:
            set_state(conn, form_id, view_name=view_name(form_id, form_name))

    @staticmethod
    def _answered(conn: Connection, form_id: str, key: str) -> bool:
        view = form_schema(form_id, [StoredField(key, "json")])
        q = DIALECTS[conn.dialect.name].quote
        sql = f"SELECT 1 FROM ({select_sql(conn.dialect.name, view)}) v WHERE v.{q}{view.columns[-1].name}{q} IS NOT NULL"
        # Driver-level: the statement is SQL text with no parameters (no bind or % parsing).
        return conn.exec_driver_sql(sql + " LIMIT 1").first() is not None

    def rebuild(self, form_id: str, *, wait: bool = True) -> FormSchema:
        """(Re)create the form's view from its field list. Replacing a view waits for the
        queries reading it; without ``wait`` (a write's hook, which must not hold up the
        receiver behind a long query) it gives up after ``_HOOK_LOCK_SECONDS``."""
        return self.rebuild_many([form_id], wait=wait)[0]

    def rebuild_many(self, form_ids: Sequence[str], *, wait: bool = True) -> list[FormSchema]:
        """``rebuild`` each of ``form_ids``, several in one transaction: every other
        connection to a SQLite file parses its whole schema again after each transaction
        that changes it, so views made one transaction each would cost time quadratic in
        the forms. A transaction stops taking forms after ``BATCH_SECONDS`` (the write
        lock it holds keeps the receiver's commits waiting)."""
        out: list[FormSchema] = []
        while len(out) < len(form_ids):
            with self.engine.begin() as conn:
                self._bound_wait(conn, wait)
                try:
                    ends = time.monotonic() + BATCH_SECONDS
                    out.append(self._replace(conn, form_ids[len(out)]))  # one at least
                    while len(out) < len(form_ids) and time.monotonic() < ends:
                        out.append(self._replace(conn, form_ids[len(out)]))
                finally:
                    if conn.dialect.name == "mysql" and not wait:
                        conn.exec_driver_sql("SET SESSION lock_wait_timeout = DEFAULT")
        return out

    @staticmethod
    def _bound_wait(conn: Connection, wait: bool) -> None:
        """Serialise view changes on PostgreSQL; without ``wait``, give up waiting for a
        view being read after ``_HOOK_LOCK_SECONDS`` (PostgreSQL, MySQL)."""
        if conn.dialect.name == "postgresql":
            if not wait:
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{_HOOK_LOCK_SECONDS}s'")
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_VIEW_LOCK})")
        elif conn.dialect.name == "mysql" and not wait:
            conn.exec_driver_sql(f"SET SESSION lock_wait_timeout = {_HOOK_LOCK_SECONDS}")

    def _replace(self, conn: Connection, form_id: str) -> FormSchema:
        """Name the form's view (``_name``) and replace it, with its legacy-name alias."""
        self._name(conn, form_id)
        view = self.view_of(conn, form_id)
        body = select_sql(conn.dialect.name, view)
        q = DIALECTS[conn.dialect.name].quote
        name, old = f"{q}{view.name}{q}", legacy_view_name(form_id)
        # The name views had before: an alias for one release (none when it is the name).
        alias = [f"{q}{old}{q}"] if old != view.name else []
        if conn.dialect.name == "mysql":
            conn.exec_driver_sql(f"CREATE OR REPLACE VIEW {name} AS {body}")
            for a in alias:
                conn.exec_driver_sql(f"CREATE OR REPLACE VIEW {a} AS SELECT * FROM {name}")
            return view
        for v in [*alias, name]:  # the alias depends on the view: dropped first
            conn.exec_driver_sql(f"DROP VIEW IF EXISTS {v}")
        conn.exec_driver_sql(f"CREATE VIEW {name} AS {body}")
        for a in alias:
            conn.exec_driver_sql(f"CREATE VIEW {a} AS SELECT * FROM {name}")
        return view

    def views(self) -> list[FormSchema]:
        """The view of every form with a field list, as its list makes it now."""
        forms = self.forms()  # before: one connection at a time (each SQLite one holds the schema)
        with self.reads.connect() as conn:
            return [self.view_of(conn, f) for f in forms]


class _Recent(Generic[V]):
    """A map of the ``size`` form ids used last (least recently used dropped first); the
    caller holds the keeper's lock."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, V] = OrderedDict()

    def __contains__(self, form_id: str) -> bool:
        return form_id in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, form_id: str) -> V | None:
        if form_id not in self._items:
            return None
        self._items.move_to_end(form_id)
        return self._items[form_id]

    def put(self, form_id: str, value: V) -> None:
        self._items[form_id] = value
        self._items.move_to_end(form_id)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


def _doc(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def set_state(conn: Connection, form_id: str, **values: Any) -> None:
    """Set columns of the form's ``formsync_form_schemas`` row, made when missing."""
    where = FORM_SCHEMAS.c.form_id == form_id
    if conn.execute(update(FORM_SCHEMAS).where(where).values(values)).rowcount == 0:
        try:
            with conn.begin_nested():  # another process may make the row at once
                conn.execute(insert(FORM_SCHEMAS).values(form_id=form_id, **values))
        except IntegrityError:
            conn.execute(update(FORM_SCHEMAS).where(where).values(values))


def answered_forms_query() -> Select[Any]:
    """The distinct form ids of the stored submissions, ascending, read as a skip over the
    index on ``(form_id, arrival)``: each step seeks the next form id, so the read costs
    one lookup per form, not one per row (``SELECT DISTINCT`` reads the whole index)."""
    t = SUBMISSIONS
    forms = select(func.min(t.c.form_id).label("form_id")).cte("answered", recursive=True)
    later = t.alias("later")
    step = (select(select(func.min(later.c.form_id)).where(later.c.form_id > forms.c.form_id).scalar_subquery())
            .where(forms.c.form_id.is_not(None)))
    forms = forms.union_all(step)
    return select(forms.c.form_id).where(forms.c.form_id.is_not(None))
