"""Keeps each form's typed view (``views``) in step with the fields the store knows:
the field list (``formsync_form_fields``) is filled from ``fields.list`` and from the
answers of stored submissions, and a form's view is rebuilt when its list changes."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import and_, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from .schema import FormSchema, StoredField, fields_from_list, form_schema, shape_of, value_type
from .sqlite import READ_OPTION
from .tables import FORM_FIELDS, SUBMISSIONS
from .views import DIALECTS, select_sql

log = logging.getLogger("formsync.store")
_VIEW_LOCK = 7410118  # PostgreSQL advisory lock key serialising view rebuilds
_HOOK_LOCK_SECONDS = 2  # how long a write's hook waits to replace a view being read


class ViewKeeper:
    """The field lists and views of one store's database (thread-safe)."""

    def __init__(self, engine: Engine, clock: Any) -> None:
        self.engine = engine
        self.reads = engine.execution_options(**{READ_OPTION: True})  # no write lock on SQLite
        self.clock = clock
        self._known: dict[str, set[str]] = {}  # form id -> field keys in its list
        self._stale: set[str] = set()  # forms whose list changed since their view was built
        self._listed: set[str] = set()  # forms known to have a list from fields.list (for good)
        self._lock = threading.Lock()

    # -- learning fields ------------------------------------------------------------

    def learn(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """Add the fields answered in submission ``rows`` that the form's list lacks (a
        new form or field) and rebuild those forms' views. Returns the forms changed."""
        new: dict[str, dict[str, str]] = {}  # form id -> key -> value type, first seen first
        with self._lock:
            for r in rows:
                answers, form_id = r.get("answers"), r.get("form_id")
                if not isinstance(answers, dict) or not form_id:
                    continue
                known = self._known_keys(form_id)
                if answers.keys() <= known:  # the common case, checked in one set operation
                    continue
                for key, value in answers.items():
                    if key not in known and value is not None:
                        new.setdefault(form_id, {}).setdefault(key, value_type(value))
            for form_id, fields in new.items():
                self._add_learnt(form_id, fields)
            self._stale.update(new)
            for form_id in sorted(self._stale):  # a view not replaced last time is tried again
                self.rebuild(form_id, wait=False)
                self._stale.discard(form_id)
        return sorted(new)

    def _known_keys(self, form_id: str) -> set[str]:
        known = self._known.get(form_id)
        if known is None:
            with self.reads.connect() as conn:
                known = self._known[form_id] = set(conn.execute(
                    select(FORM_FIELDS.c.field_key).where(FORM_FIELDS.c.form_id == form_id)).scalars())
        return known

    def _add_learnt(self, form_id: str, fields: Mapping[str, str]) -> None:
        for attempt in range(2):  # another process may add the same field at once
            try:
                with self.engine.begin() as conn:
                    stored = self._stored(conn, form_id)
                    end = max((f["position"] for f in stored.values()), default=-1) + 1
                    rows = [{"form_id": form_id, "field_key": k, "position": end + i, "type": t, "title": None,
                             "options": None, "listed": False, "source": "answers", "updated_at": self.clock()}
                            for i, (k, t) in enumerate((k, t) for k, t in fields.items() if k not in stored)]
                    if rows:
                        conn.execute(insert(FORM_FIELDS), rows)
                break
            except IntegrityError:
                if attempt:
                    raise
        self._known.setdefault(form_id, set()).update(fields)

    @staticmethod
    def _stored(conn: Connection, form_id: str) -> dict[str, dict[str, Any]]:
        got = conn.execute(select(FORM_FIELDS).where(FORM_FIELDS.c.form_id == form_id)
                           .order_by(FORM_FIELDS.c.position, FORM_FIELDS.c.field_key)).mappings()
        return {r["field_key"]: dict(r) for r in got}

    def record_list(self, form_id: str, items: Sequence[Mapping[str, Any]]) -> FormSchema:
        """Store the form's ``fields.list`` items as its field list (their order first;
        fields no longer listed follow, marked unlisted; each field's shape in
        ``options``: see ``schema.shape_of``) and rebuild its view."""
        listed = fields_from_list(items)
        options = {str(i["key"]): shape_of(i) for i in items}
        now = self.clock()
        with self._lock:
            with self.engine.begin() as conn:
                stored = self._stored(conn, form_id)
                keys = {f.key for f in listed}
                rest = [k for k in stored if k not in keys]
                for pos, f in enumerate(listed):
                    values = {"position": pos, "type": f.type, "title": f.title, "options": options.get(f.key),
                              "listed": True, "source": "fields.list", "updated_at": now}
                    if f.key in stored:
                        conn.execute(update(FORM_FIELDS).where(and_(FORM_FIELDS.c.form_id == form_id,
                                                                    FORM_FIELDS.c.field_key == f.key)).values(values))
                    else:
                        conn.execute(insert(FORM_FIELDS).values(form_id=form_id, field_key=f.key, **values))
                for pos, k in enumerate(rest, start=len(listed)):
                    conn.execute(update(FORM_FIELDS).where(and_(FORM_FIELDS.c.form_id == form_id,
                                                                FORM_FIELDS.c.field_key == k))
                                 .values(position=pos, listed=False, updated_at=now))
            self._known.setdefault(form_id, set()).update(keys)
            return self.rebuild(form_id)

    def learn_stored(self, form_ids: Sequence[str] | None = None) -> list[str]:
        """Learn the fields of the stored submissions (of ``form_ids``, or every form),
        for forms whose service cannot be asked. Returns the forms changed."""
        stmt = select(SUBMISSIONS.c.form_id, SUBMISSIONS.c.answers).order_by(SUBMISSIONS.c.submitted_at)
        if form_ids is not None:
            stmt = stmt.where(SUBMISSIONS.c.form_id.in_(form_ids))
        seen: dict[str, dict[str, Any]] = {}  # form id -> key -> first non-null value
        with self.reads.connect() as conn:
            for part in conn.execution_options(yield_per=100).execute(stmt).partitions():
                for form_id, answers in part:
                    mine = seen.setdefault(form_id, {})
                    for k, v in (_doc(answers) or {}).items():
                        if v is not None:
                            mine.setdefault(k, v)
        return self.learn([{"form_id": f, "answers": a} for f, a in seen.items()])

    # -- the views --------------------------------------------------------------------

    def schema(self, form_id: str) -> FormSchema:
        """The table of ``form_id`` as its field list makes it now; a form with
        submissions but no field list (stored before lists were kept) is learnt first."""
        with self.reads.connect() as conn:
            known = conn.execute(select(FORM_FIELDS.c.form_id).where(FORM_FIELDS.c.form_id == form_id)
                                 .limit(1)).first() is not None
        if not known:
            self.learn_stored([form_id])
        with self.reads.connect() as conn:
            return self.view_of(conn, form_id)

    def answered_forms(self) -> list[str]:
        """The forms with at least one stored submission, by id."""
        with self.reads.connect() as conn:
            return list(conn.execute(select(SUBMISSIONS.c.form_id).distinct().order_by(SUBMISSIONS.c.form_id))
                        .scalars())

    def provisional(self, form_ids: Sequence[str] | None = None) -> list[str]:
        """The forms (among ``form_ids``, or every form with a field list) whose list
        holds no field from ``fields.list``: learnt from answers only, provisional."""
        wanted = None if form_ids is None else set(form_ids) - self._listed
        if wanted == set():
            return []
        f = FORM_FIELDS.c
        with self.reads.connect() as conn:
            listed = set(conn.execute(select(f.form_id).where(f.source == "fields.list").distinct()).scalars())
            if wanted is None:
                wanted = set(conn.execute(select(f.form_id).distinct()).scalars())
        self._listed |= listed
        return sorted(wanted - listed)

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
            if f["source"] == "fields.list" and not f["listed"] and not self._answered(conn, form_id, f["field_key"]):
                continue
            shape = _doc(f["options"]) if isinstance(f["options"], str | bytes) else f["options"]
            fields.append(StoredField(f["field_key"], f["type"], f["title"], tuple(shape or ()), bool(f["listed"])))
        return form_schema(form_id, fields)

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
        with self.engine.begin() as conn:
            view = self.view_of(conn, form_id)
            body = select_sql(conn.dialect.name, view)
            q = DIALECTS[conn.dialect.name].quote
            name = f"{q}{view.name}{q}"
            if conn.dialect.name == "mysql":
                if not wait:
                    conn.exec_driver_sql(f"SET SESSION lock_wait_timeout = {_HOOK_LOCK_SECONDS}")
                try:
                    conn.exec_driver_sql(f"CREATE OR REPLACE VIEW {name} AS {body}")
                finally:
                    if not wait:
                        conn.exec_driver_sql("SET SESSION lock_wait_timeout = DEFAULT")
            else:
                if conn.dialect.name == "postgresql":
                    if not wait:
                        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{_HOOK_LOCK_SECONDS}s'")
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_VIEW_LOCK})")
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {name}")
                conn.exec_driver_sql(f"CREATE VIEW {name} AS {body}")
        return view

    def views(self) -> list[FormSchema]:
        """The view of every form with a field list, as its list makes it now."""
        with self.reads.connect() as conn:
            return [self.view_of(conn, f) for f in self.forms()]


def _doc(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value
