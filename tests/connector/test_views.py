"""The typed view of each form (``formsync_form_<slug>``) on SQLite, PostgreSQL and
MariaDB: built when a form or field first appears, typed from fields.list, and plain SQL
(a GROUP BY, a date range) works on it in each database."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest
from sqlalchemy import inspect, text

from connector.store import Store, view_name
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
def store(db_url: str) -> Iterator[Store]:
    s = Store(db_url)
    s.migrate()
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
    name = view_name("form_contact")
    assert name == "formsync_form_form_contact"
    with store.database.engine.connect() as conn:
        assert name in inspect(conn).get_view_names()
    # Learnt from answers: the columns exist, typed from the values.
    (learnt,) = store.views()
    assert [c.name for c in learnt.columns][11:] == ["name", "topic", "rating", "visit", "agree", "colors"]
    view = store.record_fields("form_contact", FIELDS)
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


def test_a_new_field_in_an_event_adds_its_column(store: Store) -> None:
    fill(store, 2)
    store.record_fields("form_contact", FIELDS)
    store.store_events(events(sub_event("evt_new", "sub_new", answers={"name": "Z", "extra": 4.5})))
    (view,) = store.views()
    assert view.columns[-1].name == "extra" and view.columns[-1].type == "number"
    assert rows(store, f"SELECT extra FROM {view.name} WHERE submission_id = 'sub_new'") == [(4.5,)]


def test_a_removed_field_keeps_its_column_while_answered(store: Store) -> None:
    fill(store, 2)
    store.record_fields("form_contact", FIELDS + [{"key": "unused", "type": "text"}])
    view = store.record_fields("form_contact", [f for f in FIELDS if f["key"] not in ("rating", "unused")])
    names = [c.name for c in view.columns]
    assert "rating" in names and "unused" not in names  # rating is answered, unused never was
    assert names.index("rating") > names.index("colors")  # unlisted fields follow the listed ones


def test_request_external_id_and_refresh_views(store: Store) -> None:
    store.store_events(events(req_completed("evt_r", "req_1", "sub_r", T0, decision="approve")))
    assert rows(store, f"SELECT external_id, decision FROM {view_name('form_contact')}") == [("ext-req_1", "approve")]
    assert [v.form_id for v in store.refresh_views()] == ["form_contact"]


def test_view_names_are_stable_and_collision_safe() -> None:
    assert view_name("frm_AbC") != view_name("frm_abc")
    assert view_name("frm_AbC") == view_name("frm_AbC")
    assert view_name("frm_abc") == "formsync_form_frm_abc"
    long = view_name("x" * 100)
    assert len(long) <= 63 and long.startswith("formsync_form_x")


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
    # The next event tries the view again.
    store.store_events(events(sub_event("evt_more", "sub_more", answers={"name": "Y"})))
    assert rows(store, f"SELECT extra FROM {name} WHERE submission_id = 'sub_new'") == [(1.0,)]
