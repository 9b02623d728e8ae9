"""Migration 0003 (each event stored once) on a store filled by the previous schema,
on SQLite and PostgreSQL: nothing is lost (bodies, answers, a request's own answers),
what is now derived reads back the same, and a downgrade restores the old layout. And
migration 0019: the deletion log's places, the loads' cursors of it kept; and migration 0020:
the rows' content hash and the forms' last full read; migration 0021: the tombstones
stamped with their key's id, refused without the key; migration 0022: a cursor's format."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from connector.config.keyfile import KeyFileError, create_key, key_id
from connector.store import Store
from connector.store._facade import alembic_config
from connector.store._mapping import answer_rows
from connector.store._tables import RawEvent, RequestRow, SubmissionRow, request_answers
from pipelines.export.load import DELETIONS, read_deletions
from tests.items import list_item

T0 = 1_780_000_000_000
JSON = sa.JSON(none_as_null=True)
EVENTS = sa.table("formsync_events", *[sa.column(c) for c in ("id", "type", "source", "created_at", "api_version",
                                                               "test", "received_at", "body")],
                  sa.column("payload", JSON))
SUBMISSIONS = sa.table("formsync_submissions", *[sa.column(c) for c in (
    "id", "form_id", "request_id", "submitted_at", "edit_count", "is_completed", "source", "observed_at",
    "stored_at")], sa.column("answers", JSON), sa.column("display", JSON))
REQUESTS = sa.table("formsync_requests", *[sa.column(c) for c in ("id", "status", "submission_id", "updated_at",
                                                                 "is_test", "source", "stored_at")],
                    sa.column("answers", JSON), sa.column("display", JSON))
ANSWERS = sa.table("formsync_answers", *[sa.column(c) for c in ("submission_id", "field_key", "instance", "row_key",
                                                                "member_key", "value_json", "display_text")])
GROUP = {"people": [{"first": "Ann", "last": "Lee"}, {"first": "Bo", "last": "Ng"}], "grid": {"a": "x", "b": "y"},
         "name": "Ann ✓ 😀"}
GROUP_SHOWN = {"people": "Ann / Lee, Bo / Ng", "grid": "A: X, B: Y", "name": "Ann ✓ 😀"}


def _to(store: Store, revision: str, down: bool = False) -> None:
    cfg = alembic_config(store.url)
    with store.database.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)


def _body(eid: str, answers: dict[str, Any]) -> str:
    return json.dumps({"id": eid, "type": "request.completed", "createdAt": "2026-05-01T10:00:00.000Z",
                       "data": {"answers": answers}}, ensure_ascii=False)


def _fill_previous(store: Store) -> dict[str, str]:
    """Rows as the previous version wrote them (body and its parsed payload, answers on
    the request and the submission, long-form rows). Returns the bodies by event id."""
    bodies = {f"evt_{i}": _body(f"evt_{i}", {"name": f"Person {i}"}) for i in range(3)}
    bodies["evt_g"] = _body("evt_g", GROUP)
    bodies["evt_raw"] = "not json ✓"
    with store.database.engine.begin() as conn:
        conn.execute(sa.insert(EVENTS), [
            {"id": eid, "type": "request.completed", "source": "callback", "created_at": T0, "api_version": None,
             "test": False, "received_at": T0, "body": body,
             "payload": None if eid == "evt_raw" else json.loads(body)} for eid, body in bodies.items()])
        subs = [(f"sub_{i}", f"req_{i}", {"name": f"Person {i}"}, {"name": f"Person {i}"}) for i in range(3)]
        subs.append(("sub_g", "req_g", GROUP, GROUP_SHOWN))
        conn.execute(sa.insert(SUBMISSIONS), [
            {"id": sid, "form_id": "form_1", "request_id": rid, "submitted_at": T0, "edit_count": 0,
             "is_completed": True, "source": "callback", "observed_at": T0, "stored_at": T0, "answers": a,
             "display": d} for sid, rid, a, d in subs])
        conn.execute(sa.insert(ANSWERS), [r for sid, _, a, d in subs for r in answer_rows(sid, a, d)])
        requests = [{"id": rid, "status": "completed", "submission_id": sid, "updated_at": T0, "is_test": False,
                     "source": "callback", "stored_at": T0, "answers": a, "display": d} for sid, rid, a, d in subs]
        # Read from the service before a later edit of the submission: its own answers differ.
        requests[1]["answers"] = requests[1]["display"] = {"name": "Person 1, before the edit"}
        # Read by the poller, no submission stored: the request holds the only copy.
        requests.append({"id": "req_p", "status": "completed", "submission_id": "sub_unknown", "updated_at": T0,
                         "is_test": False, "source": "poll", "stored_at": T0, "answers": {"name": "Polled"},
                         "display": {"name": "POLLED"}})
        conn.execute(sa.insert(REQUESTS), requests)
    return bodies


def _request_answers(store: Store) -> dict[str, tuple[Any, Any]]:
    with store.database.reader() as s:
        return {r.id: (r.answers, r.display) for r in s.connection().execute(request_answers())}


def test_migration_keeps_everything_and_downgrades(db_url: str) -> None:
    store = Store(db_url)
    try:
        _to(store, "0002")
        bodies = _fill_previous(store)
        before_answers = _request_answers_old(store)
        with store.database.engine.connect() as conn:
            long_before = sorted(conn.execute(sa.select(ANSWERS)).all())

        store.migrate()
        with store.database.reader() as s:
            raws = {r.id: r for r in s.exec(sa.select(RawEvent)).scalars()}  # type: ignore[call-overload]
            assert {eid: r.body for eid, r in raws.items()} == bodies
            assert raws["evt_g"].payload == json.loads(bodies["evt_g"]) and raws["evt_raw"].payload is None
            assert all(len(r.body_zlib) < len(r.body.encode()) + 16 for r in raws.values())
            subs = {r.id: r for r in s.exec(sa.select(SubmissionRow)).scalars()}  # type: ignore[call-overload]
            own = {r.id: r.answers for r in s.exec(sa.select(RequestRow)).scalars()}  # type: ignore[call-overload]
        assert "formsync_answers" not in sa.inspect(store.database.engine).get_table_names()
        long_after = sorted(tuple(r.values()) for sid, sub in subs.items()
                            for r in answer_rows(sid, sub.answers, sub.display))
        assert long_after == [tuple(r) for r in long_before], "the long form derives to the rows it replaced"
        # Answers the linked submission holds are kept there only; a request's own differing
        # copy and the poller's only copy stay.
        assert own == {"req_0": None, "req_1": {"name": "Person 1, before the edit"}, "req_2": None,
                       "req_g": None, "req_p": {"name": "Polled"}}
        after = _request_answers(store)
        assert after["req_p"] == before_answers["req_p"] and after["req_g"] == (GROUP, GROUP_SHOWN)
        assert after["req_1"] == ({"name": "Person 1"}, {"name": "Person 1"}), "the submission's newest version"

        with store.database.engine.begin() as conn:  # edit_count is 64-bit now
            conn.execute(sa.update(SUBMISSIONS).where(SUBMISSIONS.c.id == "sub_0").values(edit_count=2**40))
            assert conn.execute(sa.select(SUBMISSIONS.c.edit_count).where(SUBMISSIONS.c.id == "sub_0")).scalar() \
                == 2**40
            conn.execute(sa.update(SUBMISSIONS).where(SUBMISSIONS.c.id == "sub_0").values(edit_count=0))

        _to(store, "0002", down=True)
        with store.database.engine.begin() as conn:
            restored = {r.id: (r.body, r.payload) for r in conn.execute(sa.select(EVENTS))}
            assert sorted(conn.execute(sa.select(ANSWERS)).all()) == long_before
        assert {eid: b for eid, (b, _) in restored.items()} == bodies
        assert restored["evt_1"][1] == json.loads(bodies["evt_1"]) and restored["evt_raw"][1] is None
        assert _request_answers_old(store) == before_answers
        store.migrate()  # and up again
        assert _request_answers(store) == after
    finally:
        store.close()


def _request_answers_old(store: Store) -> dict[str, tuple[Any, Any]]:
    with store.database.engine.connect() as conn:
        return {r.id: (r.answers, r.display) for r in conn.execute(sa.select(REQUESTS))}


def test_the_suppressed_state_comes_and_goes_with_its_migration(db_url: str) -> None:
    store = Store(db_url)
    rows = sa.table("formsync_outreach_rows", *[sa.column(c) for c in (
        "job_name", "row_key", "row_number", "content_hash", "idempotency_key", "state", "error", "attempts",
        "updated_at")])
    try:
        store.migrate()
        store.ledger.open_job("job", "form_1", "sheet.csv", {})
        row = {"job_name": "job", "row_number": 2, "content_hash": "h", "attempts": 0, "updated_at": T0}
        with store.database.engine.begin() as conn:
            conn.execute(sa.insert(rows), [{**row, "row_key": "ext:a", "idempotency_key": "k-a", "state": "suppressed",
                                            "error": "suppressed (bounced)"}])
        _to(store, "0006", down=True)
        with store.database.engine.begin() as conn:
            assert conn.execute(sa.select(rows.c.state, rows.c.error)).all() == [("failed", "suppressed")]
        with pytest.raises(sa.exc.DBAPIError), store.database.engine.begin() as conn:  # MariaDB: OperationalError
            conn.execute(sa.insert(rows), [{**row, "row_key": "ext:b", "idempotency_key": "k-b",
                                            "state": "suppressed"}])
        store.migrate()
        assert store.ledger.claims("job", {"ext:a": "h"}) == {"ext:a": "send"}
    finally:
        store.close()


def test_the_deletion_log_takes_places_and_the_loads_cursors_keep_their_meaning(db_url: str) -> None:
    """Migration 0019: the rows logged before take their id as their place, the counter
    moves past them, so a load's cursor of the log (an id until then) sends exactly the
    removals it had not sent; a downgrade gives the cursor its id back."""
    store = Store(db_url)
    try:
        _to(store, "0018")
        with store.database.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO formsync_deletions (kind, item_id, form_id, reason, deleted_at) "
                                 "VALUES ('submission', :i, 'form_1', 'purge', 1)"), [{"i": f"sub_{n}"} for n in range(3)])
            ids = [r[0] for r in conn.execute(sa.text("SELECT id FROM formsync_deletions ORDER BY id"))]
            conn.execute(sa.text("INSERT INTO formsync_export_cursors (name, table_name, form_id, arrival, row_count, "
                                 "run, updated_at) VALUES ('load:duckdb/d', :t, '', :at, 2, 1, 1)"),
                         {"t": DELETIONS, "at": ids[1]})
        store.migrate()
        with store.database.engine.connect() as conn:
            assert [tuple(r) for r in conn.execute(sa.text("SELECT id, arrival FROM formsync_deletions ORDER BY id"))] \
                == [(i, i) for i in ids]
            assert conn.execute(sa.text("SELECT last_place FROM formsync_arrival")).scalar_one() >= ids[-1]
        found = read_deletions(store, "load:duckdb/d")
        assert found.submissions == {"form_1": ["sub_2"]} and found.mark is not None
        store.export_cursors.advance([found.mark])

        store.upsert_submissions([list_item("sub_9", {"q": 1})], "form_1")
        store.remove_submissions({"sub_9": "form_1"}, reason="purge")
        found = read_deletions(store, "load:duckdb/d")
        assert found.submissions == {"form_1": ["sub_9"]} and found.mark is not None
        store.export_cursors.advance([found.mark])

        _to(store, "0018", down=True)
        with store.database.engine.connect() as conn:
            last = conn.execute(sa.text("SELECT max(id) FROM formsync_deletions")).scalar_one()
            assert conn.execute(sa.text("SELECT arrival FROM formsync_export_cursors WHERE table_name = :t"),
                                {"t": DELETIONS}).scalar_one() == last
    finally:
        store.close()


def test_the_content_hash_comes_and_goes_with_its_migration(db_url: str) -> None:
    """Migration 0020: a row stored before has no hash, so its next write places it once;
    an unchanged write after that moves nothing; the full-read time is kept per form; a
    downgrade drops both columns and leaves the form's view working."""
    store = Store(db_url)
    try:
        _to(store, "0019")
        with store.database.engine.begin() as conn:
            conn.execute(SUBMISSIONS.insert(), [{"id": "sub_1", "form_id": "form_1", "answers": {"q": 1},
                                                 "display": {}, "edit_count": 0, "is_completed": True,
                                                 "source": "sync", "observed_at": 1, "stored_at": 1}])
        store.migrate()
        store.refresh_views(["form_1"])

        def place() -> int:
            with store.database.engine.connect() as conn:
                return int(conn.execute(sa.text("SELECT arrival FROM formsync_submissions")).scalar_one())

        assert place() == 0
        store.upsert_submissions([list_item("sub_1", {"q": 1})], "form_1")
        placed = place()
        assert placed > 0, "no hash yet: placed once"
        store.upsert_submissions([list_item("sub_1", {"q": 1}, edits=1)], "form_1")
        assert place() == placed
        store.record_full_sync("form_1", 123)
        assert store.full_syncs(["form_1", "form_2"]) == {"form_1": 123, "form_2": None}

        _to(store, "0019", down=True)
        with store.database.engine.connect() as conn:
            for table in ("formsync_submissions", "formsync_requests", "formsync_form_schemas"):
                names = {c["name"] for c in sa.inspect(conn).get_columns(table)}
                assert not names & {"content_hash", "full_sync_at"}, table
            view = store.schema("form_1").name
            assert conn.execute(sa.text(f'SELECT COUNT(*) FROM "{view}"' if store.backend != "mysql"
                                        else f"SELECT COUNT(*) FROM `{view}`")).scalar_one() == 1
    finally:
        store.close()


def test_the_tombstones_kept_are_stamped_with_the_key_present_and_refused_without_it(db_url: str,
                                                                                      tmp_path: Path) -> None:
    """Migration 0021: a store holding tombstones and no key file is refused in one line
    naming the file, and stays at 0020; with the key, each tombstone gets its id."""
    key_file = tmp_path / "formsync.key"
    store = Store(db_url, key_file=key_file)
    try:
        _to(store, "0020")
        with store.database.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO formsync_erasures (hash, kind, erased_at) VALUES (:h, 'email', 1)"),
                         [{"h": "a" * 64}, {"h": "b" * 64}])
        with pytest.raises(KeyFileError) as caught:
            store.migrate()
        assert str(key_file) in str(caught.value) and "\n" not in str(caught.value)
        assert "formsync login" not in str(caught.value) and "restore" in str(caught.value)
        with store.database.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT version_num FROM formsync_alembic_version")).scalar_one() == "0020"
        key = create_key(key_file)
        store.migrate()
        with store.database.engine.connect() as conn:
            assert set(conn.execute(sa.text("SELECT key_id FROM formsync_erasures")).scalars()) == {key_id(key)}
        _to(store, "0020", down=True)
        with store.database.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM formsync_erasures")).scalar_one() == 2
    finally:
        store.close()


def test_the_export_cursors_keep_their_format(db_url: str) -> None:
    """Migration 0022: a cursor stored before has no format (its name keeps working and
    takes the format of its next run); one stored after keeps its own; a downgrade drops
    the column and keeps the cursors."""
    store = Store(db_url)
    try:
        _to(store, "0021")
        with store.database.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO formsync_export_cursors (name, table_name, form_id, arrival, row_count, "
                                 "run, updated_at) VALUES ('nightly', 'wide', 'form_1', 7, 2, 3, 1)"))
        store.migrate()
        (before,) = store.export_cursors.list("nightly")
        assert (before.arrival, before.run, before.format) == (7, 3, None)
        store.export_cursors.advance([dataclasses.replace(before, arrival=9, run=4, format="parquet")])
        assert [(m.arrival, m.format) for m in store.export_cursors.list("nightly")] == [(9, "parquet")]
        _to(store, "0021", down=True)
        with store.database.engine.connect() as conn:
            assert [tuple(r) for r in conn.execute(sa.text(
                "SELECT name, arrival, run FROM formsync_export_cursors"))] == [("nightly", 9, 4)]
    finally:
        store.close()
