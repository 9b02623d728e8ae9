"""The typed view of each form (``formsync_form_<slug>``) on SQLite, PostgreSQL and
MariaDB: built when a form first appears, its columns typed and placed by fields.list
only (an answered key no list names is held back, never typed from values; a type change
adds a variant column), and plain SQL (a GROUP BY, a date range) works on it in each
database."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest
from sqlalchemy import event, inspect, text

from connector.store import Store
from connector.store._keeper import ViewKeeper
from connector.store._schema import view_name
from tests.connector.test_store import T0, events, req_completed, sub_event

DAY = 86_400_000
FIELDS = [
    {"key": "name", "type": "text", "title": "Your name"},
    {"key": "topic", "type": "select", "title": "Topic",
     "options": [{"key": "sales", "label": "Sales"}, {"key": "support", "label": "Support"}]},
    {"key": "rating", "type": "rating", "title": "Rate us", "maxStars": 5},
    {"key": "visit", "type": "date", "title": "Visit day"},
    {"key": "agree", "type": "switch", "title": "Agree"},
    {"key": "colors", "type": "checkbox", "title": "Colors",
     "options": [{"key": "red", "label": "Red"}, {"key": "blue", "label": "Blue"}]},
    {"key": "intro", "type": "documents", "title": "Read this"},
]


@pytest.fixture
def store(migrated_db_url: str) -> Iterator[Store]:
    s = Store(migrated_db_url)
    yield s
    s.close()


def answers(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    topic = ["sales", "support"][i % 2]
    a = {"name": f"P{i}", "topic": topic, "rating": 1 + i % 5, "visit": f"2026-05-0{1 + i % 3}",
         "agree": i % 2 == 0, "colors": ["red", "blue"][: 1 + i % 2]}
    d = {**{k: str(v) for k, v in a.items()}, "topic": topic.title()}
    return a, d


def fill(store: Store, n: int = 6) -> None:
    evs = []
    for i in range(n):
        a, d = answers(i)
        evs.append(sub_event(f"evt_{i}", f"sub_{i}", submitted=T0 + i * DAY, answers=a, display=d))
    store.store_events(events(*evs))


def rows(store: Store, sql: str) -> list[tuple[Any, ...]]:
    with store.database.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql))]


def test_a_received_event_creates_the_forms_view_and_fields_list_types_it(store: Store) -> None:
    fill(store)
    name = view_name("form_contact", "Contact")
    assert name == "formsync_contact_" + hashlib.sha1(b"form_contact").hexdigest()[:6]
    with store.database.engine.connect() as conn:  # the name of before, an alias for one release
        assert {name, "formsync_form_form_contact"} <= set(inspect(conn).get_view_names())
    # No field list yet: the answered keys are held back, no column is typed from values.
    (bare,) = store.views()
    assert bare.fields() == ()
    assert store.held_back_fields() == {"form_contact": ["name", "topic", "rating", "visit", "agree", "colors"]}
    assert store.schema_changed_at("form_contact") is None
    view = store.record_fields("form_contact", FIELDS)
    assert store.held_back_fields() == {} and store.schema_changed_at("form_contact") is not None
    assert [(c.name, c.type, c.source) for c in view.columns][11:] == [
        ("name", "text", "answer"), ("topic", "text", "answer"), ("topic_label", "text", "label"),
        ("rating", "integer", "answer"), ("visit", "date", "answer"), ("agree", "boolean", "answer"),
        ("colors", "keys", "answer"), ("colors_label", "text", "label")]
    got = rows(store, f"SELECT submission_id, topic, topic_label, rating, visit, agree, colors, completed "
                      f"FROM {name} WHERE submission_id = 'sub_1'")
    (sid, topic, label, rating, visit, agree, colors, completed) = got[0]
    assert (sid, topic, label, rating) == ("sub_1", "support", "Support", 2)
    assert visit in (date(2026, 5, 2), "2026-05-02")  # SQLite has no date type: ISO text
    assert bool(agree) is False and bool(completed) is True
    assert (colors if isinstance(colors, list) else json.loads(colors)) == ["red", "blue"]


def test_group_by_and_date_range_in_plain_sql(store: Store) -> None:
    fill(store)
    store.record_fields("form_contact", FIELDS)
    name = view_name("form_contact")
    got = rows(store, f"SELECT topic, avg(rating), count(*) FROM {name} GROUP BY topic ORDER BY topic")
    assert [(t, round(float(a), 3), n) for t, a, n in got] == [("sales", 3.0, 3), ("support", 2.333, 3)]
    # T0 is 2026-05-28 20:26:40 UTC; one submission a day from there.
    got = rows(store, f"SELECT submission_id FROM {name} WHERE submitted_at >= '2026-05-29' "
                      f"AND submitted_at < '2026-05-31' ORDER BY submitted_at")
    assert [r[0] for r in got] == ["sub_1", "sub_2"]
    got = rows(store, f"SELECT count(*) FROM {name} WHERE visit >= '2026-05-02' AND agree")
    assert got == [(2,)]  # sub_2 (05-03) and sub_4 (05-02) agree; sub_1 and sub_5 do not


def test_group_by_a_list_column(store: Store) -> None:
    fill(store)
    store.record_fields("form_contact", FIELDS)
    name = view_name("form_contact")
    # PostgreSQL: a jsonb column (json has no equality operator, so GROUP BY would fail).
    got = rows(store, f"SELECT colors, count(*) FROM {name} GROUP BY colors")
    assert sorted((json.dumps(c if isinstance(c, list) else json.loads(c)), n) for c, n in got) == [
        ('["red", "blue"]', 3), ('["red"]', 3)]
    if store.backend == "postgresql":
        assert rows(store, f"SELECT pg_typeof(colors)::text FROM {name} LIMIT 1") == [("jsonb",)]


def test_a_new_field_in_an_event_is_held_back_until_its_field_list_places_and_types_it(store: Store) -> None:
    fill(store, 2)
    store.record_fields("form_contact", FIELDS)
    before = store.schema("form_contact")
    store.store_events(events(sub_event("evt_new", "sub_new", answers={"name": "Z", "extra": 4})))
    assert store.schema("form_contact") == before  # no column from a value
    assert store.held_back_fields(["form_contact"]) == {"form_contact": ["extra"]}
    changed = store.schema_changed_at("form_contact")
    view = store.record_fields("form_contact", [FIELDS[0], {"key": "extra", "type": "rating"}, *FIELDS[1:]])
    assert [(c.name, c.type) for c in view.fields()][:2] == [("name", "text"), ("extra", "integer")]  # its place
    assert rows(store, f"SELECT extra FROM {view.name} WHERE submission_id = 'sub_new'") == [(4,)]
    assert store.held_back_fields() == {}
    assert (store.schema_changed_at("form_contact") or 0) >= (changed or 0) > 0


def test_the_keeper_holds_the_keys_and_snapshots_of_the_forms_used_last_only(store: Store) -> None:
    keeper = ViewKeeper(store.database.engine, store.clock, store.database.writer, recent=4)
    assert keeper.note([{"form_id": "form_0", "answers": {"a": 1}, "snapshot_id": "snap_1"}]) == ["form_0"]
    seen = [{"form_id": f"form_{i}", "answers": {}, "snapshot_id": "snap_1"} for i in range(1, 10)]
    keeper.note(seen)
    assert len(keeper._known) == len(keeper._snapshots) == 4  # 10 forms seen: the 4 used last
    assert "form_0" not in keeper._known and "form_9" in keeper._known
    # A form no longer held is read again from the store: its key and snapshot are still known.
    assert keeper.note([{"form_id": "form_0", "answers": {"a": 2}, "snapshot_id": "snap_1"}]) == []
    assert keeper.note([{"form_id": "form_0", "answers": {"a": 2, "b": 3}}]) == ["form_0"]
    assert store.held_back_fields(["form_0"]) == {"form_0": ["a", "b"]}


def test_a_key_the_list_never_names_is_asked_again_only_under_a_new_snapshot(store: Store) -> None:
    store.store_events(events(sub_event("evt_a", "sub_a", answers={"name": "A", "stray": 1})))
    assert store.claim_field_list_reads() == ["form_contact"]
    assert store.claim_field_list_reads() == []  # once a minute at most, whoever asks
    store.record_fields("form_contact", FIELDS)  # the read does not list it
    assert store.claim_field_list_reads(every_ms=0) == []
    assert store.held_back_fields() == {} and "stray" not in [c.name for c in store.schema("form_contact").columns]
    assert store.schema_changed_at("form_contact") is not None  # "name" got its column
    store.store_events(events(sub_event("evt_b", "sub_b", answers={"name": "B", "stray": 2})))
    assert store.held_back_fields() == {}  # same snapshot: not asked again
    ev = sub_event("evt_c", "sub_c", answers={"name": "C", "stray": 3})
    ev["data"]["form"]["snapshotId"] = "snap_next"
    store.store_events(events(ev))
    assert store.held_back_fields() == {"form_contact": ["stray"]}


def test_a_field_whose_type_changes_keeps_its_column_and_gets_a_variant(store: Store) -> None:
    store.record_fields("form_contact", FIELDS)
    store.store_events(events(sub_event("evt_a", "sub_a", answers={"name": "Ann", "rating": 4})))
    view = store.record_fields("form_contact", [{"key": "name", "type": "email"},  # same columns: no variant
                                                {"key": "rating", "type": "text"}, FIELDS[1], *FIELDS[3:]])
    got = [(c.name, c.type, c.field_key) for c in view.fields()][:3]
    assert got == [("name", "text", "name"), ("rating", "integer", "rating"), ("rating__text", "text", "rating")]
    store.store_events(events(sub_event("evt_b", "sub_b", answers={"name": "Bo", "rating": "four"})))
    assert rows(store, f"SELECT submission_id, rating, rating__text FROM {view.name} ORDER BY submission_id") == [
        ("sub_a", 4, None), ("sub_b", None, "four")]


def test_a_removed_field_keeps_its_column_while_answered(store: Store) -> None:
    fill(store, 2)
    store.record_fields("form_contact", FIELDS + [{"key": "unused", "type": "text"}])
    view = store.record_fields("form_contact", [f for f in FIELDS if f["key"] not in ("rating", "unused")])
    names = [c.name for c in view.columns]
    assert "rating" in names and "unused" not in names  # rating is answered, unused never was
    assert names.index("rating") > names.index("colors")  # unlisted fields follow the listed ones


def test_request_external_id_and_refresh_views(store: Store) -> None:
    store.store_events(events(req_completed("evt_r", "req_1", "sub_r", T0, decision="approve")))
    store.record_fields("form_contact", [{"key": "decision", "type": "text"}])
    assert rows(store, f"SELECT external_id, decision FROM {view_name('form_contact')}") == [("ext-req_1", "approve")]
    assert [v.form_id for v in store.refresh_views()] == ["form_contact"]


def _view_transactions(store: Store) -> list[int]:
    """A list the store's engine fills, from now on, with the number of the transaction
    (counted from 1) in which each ``CREATE VIEW`` runs."""
    got: list[int] = []
    began = [0]
    engine = store.database.engine
    event.listen(engine, "begin", lambda conn: began.__setitem__(0, began[0] + 1))
    event.listen(engine, "before_cursor_execute",
                 lambda conn, cur, sql, *a: got.append(began[0]) if sql.lstrip().upper().startswith(
                     ("CREATE VIEW", "CREATE OR REPLACE VIEW")) else None)
    return got


@pytest.mark.parametrize("batch_seconds, transactions", [(60.0, 1), (0.0, 12)])
def test_the_views_of_many_forms_are_replaced_together_for_a_bounded_time(
        store: Store, monkeypatch: pytest.MonkeyPatch, batch_seconds: float, transactions: int) -> None:
    """Each transaction changing a SQLite file's schema makes every other connection parse
    the whole schema again: many forms' views are replaced in one transaction, which stops
    taking forms after ``BATCH_SECONDS`` (it holds the write lock meanwhile)."""
    forms = [f"form_many{i:02d}" for i in range(12)]
    for f in forms:
        store.record_fields(f, FIELDS[:2])
    monkeypatch.setattr("connector.store._keeper.BATCH_SECONDS", batch_seconds)
    made = _view_transactions(store)
    assert [v.form_id for v in store.refresh_views()] == forms
    assert len(made) == len(forms)  # no alias: no submission named the forms
    assert len(set(made)) == transactions
    with store.database.engine.connect() as conn:
        assert {view_name(f) for f in forms} <= set(inspect(conn).get_view_names())


def test_the_forms_first_seen_in_one_write_get_their_views_in_one_transaction(store: Store) -> None:
    made = _view_transactions(store)
    evs = [sub_event(f"evt_{i}", f"sub_{i}", answers={"name": "Ann"}) for i in range(5)]
    for i, e in enumerate(evs):
        e["data"]["form"] = {"id": f"form_new{i}", "name": f"New {i}", "snapshotId": "snap_1"}
    store.store_events(events(*evs))
    assert len(made) == 2 * len(evs) and len(set(made)) == 1
    assert sorted(store.held_back_fields()) == [f"form_new{i}" for i in range(5)]


def test_threads_taking_turns_on_a_sqlite_store_reuse_its_last_connection(sqlite_store: Store) -> None:
    """A pooled SQLite connection parses the whole schema again when first used after
    another changed it: connections used in turn are taken newest first, so one parses
    (not every pooled one in turn)."""
    engine = sqlite_store.database.engine
    held = [engine.connect() for _ in range(3)]  # a moment of concurrency leaves 3 pooled connections
    for c in held:
        c.close()
    used: list[int] = []
    event.listen(engine, "checkout", lambda dbapi, record, proxy: used.append(id(dbapi)))

    def turn(i: int) -> None:
        sqlite_store.store_events(events(sub_event(f"evt_t{i}", f"sub_t{i}")))
        sqlite_store.views()

    for i in range(6):
        t = threading.Thread(target=turn, args=(i,))
        t.start()
        t.join()
    assert len(used) >= 12 and len(set(used)) == 1


def test_view_names_are_stable_and_collision_safe() -> None:
    assert view_name("frm_AbC") != view_name("frm_abc")
    assert view_name("frm_AbC") == view_name("frm_AbC")
    assert view_name("frm_abc") == "formsync_form_frm_abc"  # no form name known: named from the id
    long = view_name("x" * 100)
    assert len(long) <= 63 and long.startswith("formsync_form_x")
    named = view_name("form_1", "Customer Feedback (2026) – Q3")
    assert named.startswith("formsync_customer_feedback_2026_q3_") and len(named) == 35 + 6
    assert view_name("form_2", "Customer Feedback (2026) – Q3") != named
    assert len(view_name("form_1", "A very long form name " * 9)) == 63 and view_name("f", "!!!").startswith(
        "formsync_form_")


def test_a_view_keeps_its_name_when_the_form_is_renamed(store: Store) -> None:
    fill(store, 1)
    name = store.record_fields("form_contact", FIELDS).name
    renamed = sub_event("evt_r", "sub_r", answers={"name": "R"})
    renamed["data"]["form"]["name"] = "Contact us (new)"
    store.store_events(events(renamed))
    assert store.record_fields("form_contact", FIELDS).name == name == view_name("form_contact", "Contact")
    assert rows(store, f"SELECT count(*) FROM {name}") == [(2,)]


@pytest.mark.parametrize("db_url", ["postgresql", "mysql"], indirect=True)
def test_a_long_read_of_a_view_never_holds_up_storing_events(store: Store) -> None:
    fill(store, 2)
    name = view_name("form_contact")
    reader = store.database.engine.connect()
    try:
        reader.begin()
        reader.execute(text(f"SELECT count(*) FROM {name}")).all()  # holds the view until its transaction ends
        started = time.monotonic()
        got = store.store_events(events(sub_event("evt_new", "sub_new", answers={"name": "Z", "extra": 1})))
        assert got[0].status == "stored" and time.monotonic() - started < 20
        assert "extra" not in [c["name"] for c in inspect(store.database.engine).get_columns(name)]
    finally:
        reader.rollback()
        reader.close()
    store.record_fields("form_contact", [*FIELDS, {"key": "extra", "type": "number"}])
    assert rows(store, f"SELECT extra FROM {name} WHERE submission_id = 'sub_new'") == [(1.0,)]


def test_merge_field_list_keeps_types_places_listed_fields_and_marks_the_rest() -> None:
    from connector.store._keeper import merge_field_list
    from connector.store._schema import fields_from_list

    def row(key: str, type_: str, source: str = "fields.list") -> dict[str, Any]:
        return {"form_id": "f", "field_key": key, "type": type_, "title": None, "options": None, "listed": True,
                "source": source, "answer_key": None, "position": 0, "updated_at": 0}

    stored = {"a": row("a", "number"), "gone": row("gone", "text"), "new": row("new", "pending", "answers"),
              "stray": row("stray", "pending", "answers")}
    listed = fields_from_list([{"key": "new", "type": "date"}, {"key": "a", "type": "text"}])
    rows_, appeared = merge_field_list(stored, listed, {}, 5)
    got = [(r["field_key"], r["type"], r["listed"], r["answer_key"], r["position"]) for r in rows_]
    assert got == [("new", "date", True, None, 0), ("a", "number", True, None, 1), ("a__text", "text", True, "a", 2),
                   ("gone", "text", False, None, 3), ("stray", "unlisted", False, None, 4)]
    assert appeared and all(r["updated_at"] == 5 for r in rows_)
    assert merge_field_list({"a": row("a", "number")}, fields_from_list([{"key": "a", "type": "calculated"}]), {},
                            5)[0][0]["type"] == "calculated"  # same columns: no variant


def test_a_file_fields_archived_locations_are_beside_its_urls_item_for_item(store: Store) -> None:
    from connector.store._tables import ArchivedFile

    def file(n: int) -> dict[str, Any]:
        return {"name": f"f{n}.pdf", "type": "application/pdf", "size": 3, "url": f"http://svc/api/storage/{n}"}

    fields = [{"key": "name", "type": "text"}, {"key": "cv", "type": "file", "title": "Your CV"}]
    store.store_events(events(sub_event("evt_a", "sub_a", answers={"name": "A", "cv": [file(1), file(2), file(3)]}),
                              sub_event("evt_b", "sub_b", answers={"name": "B", "cv": []}),
                              sub_event("evt_c", "sub_c", answers={"name": "C"})))
    name = store.record_fields("form_contact", fields).name

    def archived(url_of: int, idx: int, where: str) -> ArchivedFile:
        return ArchivedFile(submission_id="sub_a", field_key="cv", instance=-1, member="", idx=idx, form_id="form_contact",
                            name="x", url=f"http://svc/api/storage/{url_of}", size=3, sha256="ab" * 32,
                            location=where, archived_at=1)

    def located() -> dict[str, Any]:
        got = rows(store, f"SELECT submission_id, cv__archived FROM {name} ORDER BY submission_id")
        return {sid: None if v is None else json.loads(v) if isinstance(v, str) else v for sid, v in got}

    assert located() == {"sub_a": [None, None, None], "sub_b": [], "sub_c": None}
    # the first and third archived; the second's row is of an older answer's URL: not this file
    store.archive.record([archived(1, 0, "file:///a/1"), archived(9, 1, "file:///a/9"), archived(3, 2, "s3://b/3")])
    assert located()["sub_a"] == ["file:///a/1", None, "s3://b/3"]


def test_a_groups_file_members_archived_locations_are_per_instance_and_member(store: Store) -> None:
    """``<group>__archived``: per instance, an object of the file members' locations item
    for item, keyed as the archive table keys them (instance, member, index)."""
    from connector.store._tables import ArchivedFile

    def file(n: int) -> dict[str, Any]:
        return {"name": f"f{n}.pdf", "type": "application/pdf", "size": 3, "url": f"http://svc/api/storage/{n}"}

    members = [{"key": "item", "type": "text"}, {"key": "scan", "type": "file"}, {"key": "sig", "type": "signature"}]
    fields = [{"key": "items", "type": "group", "members": members}]
    store.store_events(events(
        sub_event("evt_a", "sub_a", answers={"items": [{"item": "desk", "scan": [file(1), file(2)]},
                                                       {"item": "chair", "sig": [file(3)]}]}),
        sub_event("evt_b", "sub_b", answers={"items": []}), sub_event("evt_c", "sub_c", answers={"x": 1})))
    schema = store.record_fields("form_contact", fields)
    assert [c.name for c in schema.columns if c.field_key == "items"] == ["items", "items__archived"]

    def located() -> dict[str, Any]:
        got = rows(store, f"SELECT submission_id, items__archived FROM {schema.name} ORDER BY submission_id")
        return {sid: None if v is None else json.loads(v) if isinstance(v, str) else v for sid, v in got}

    def nulls_left_out(v: Any) -> Any:  # a JSON null member and an absent one read alike
        return [None if i is None else {k: x for k, x in i.items() if x is not None} for i in v] if v else v

    assert {k: nulls_left_out(v) for k, v in located().items()} == {
        "sub_a": [{"scan": [None, None]}, {"sig": [None]}], "sub_b": [], "sub_c": None}
    store.archive.record([ArchivedFile(submission_id="sub_a", field_key="items", instance=inst, member=m, idx=i,
                                       form_id="form_contact", name="x", url=f"http://svc/api/storage/{n}", size=3,
                                       sha256="ab" * 32, location=f"file:///a/{n}", archived_at=1)
                          for inst, m, i, n in ((0, "scan", 1, 2), (1, "sig", 0, 3), (1, "scan", 0, 1))])
    assert nulls_left_out(located()["sub_a"]) == [{"scan": [None, "file:///a/2"]}, {"sig": ["file:///a/3"]}]
