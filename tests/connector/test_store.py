"""The connector's SQL store: idempotent, out-of-order safe, atomic; every test runs on a
SQLite file and on PostgreSQL (the ``db_url`` fixture)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect, select, text
from sqlalchemy.exc import DBAPIError

from connector.models import Event
from connector.store import Store
from connector.store._facade import alembic_config
from connector.store._mapping import Incoming, SyncMark, answer_rows, answer_tuples, event_to_rows
from connector.store._mysql import compare_column_type
from connector.store._tables import (
    METADATA,
    VERSION_TABLE,
    RawEvent,
    RequestRow,
    SubmissionRow,
    SyncCursor,
    request_answers,
)

T0 = 1_780_000_000_000  # epoch ms, a fixed moment in 2026


class Clock:
    def __init__(self) -> None:
        self.now = T0 + 3_600_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(migrated_db_url: str, clock: Clock) -> Iterator[Store]:
    s = Store(migrated_db_url, clock=clock)
    try:
        yield s
    finally:
        s.close()


# -- builders ---------------------------------------------------------------------------


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def sql_ts(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def sub_event(eid: str, sid: str, *, type: str = "submission.completed", submitted: int = T0,
              updated: int | None = None, edits: int = 0, answers: dict[str, Any] | None = None,
              display: dict[str, Any] | None = None, created: int | None = None, request: dict | None = None,
              test: bool = False) -> dict[str, Any]:
    answers = {"name": "Ann"} if answers is None else answers
    data: dict[str, Any] = {
        "form": {"id": "form_contact", "name": "Contact", "snapshotId": "snap_1"},
        "submission": {"id": sid, "respondentEmail": "ann@example.com", "submittedAt": iso(submitted),
                       "updatedAt": iso(updated), "editCount": edits, "pdfUrl": None, "language": "en"},
        "answers": answers,
        "display": display if display is not None else {k: str(v) for k, v in answers.items()},
    }
    if request is not None:
        data["request"] = request
    return {"id": eid, "type": type, "createdAt": iso(created or updated or submitted), "apiVersion": "2026-09-24",
            "test": test, "data": data}


def req_block(rid: str, status: str, at: int, **extra: Any) -> dict[str, Any]:
    block = {"id": rid, "externalId": f"ext-{rid}", "status": status, "outcome": None, "language": "en",
             "recipient": {"email": "bo@example.com", "name": "Bo"}, "metadata": {"runId": "run-42"},
             "context": {"crm_id": "c-1"}, "createdAt": iso(T0 - 86_400_000)}
    block[{"completed": "completedAt", "expired": "expiredAt", "canceled": "canceledAt"}[status]] = iso(at)
    block.update(extra)
    return block


def req_completed(eid: str, rid: str, sid: str, at: int, **answers_kw: Any) -> dict[str, Any]:
    ev = sub_event(eid, sid, type="request.completed", submitted=at, answers=answers_kw or {"decision": "approve"},
                   request=req_block(rid, "completed", at, outcome="approve"))
    return ev


def req_terminal(eid: str, rid: str, status: str, at: int, **extra: Any) -> dict[str, Any]:
    return {"id": eid, "type": f"request.{status}", "createdAt": iso(at), "apiVersion": "2026-09-24", "test": False,
            "data": {"request": req_block(rid, status, at, **extra)}}


def poll_record(rid: str, status: str, updated: int, **extra: Any) -> dict[str, Any]:
    rec = {"id": rid, "workspaceId": "ws_pro", "formId": "form_approval", "formSnapshotId": "snap_1",
           "submissionId": None, "status": status, "outcome": None, "isTest": False,
           "recipient": {"email": "bo@example.com", "name": "Bo"}, "externalId": f"ext-{rid}",
           "metadata": {"runId": "run-42"}, "context": {"crm_id": "c-1"}, "delivery": "email",
           "deliveryStatus": "sent", "url": f"http://127.0.0.1/r/rq_{rid}", "createdAt": T0 - 86_400_000,
           "expiresAt": T0 + 29 * 86_400_000, "updatedAt": updated, "completedAt": None, "expiredAt": None,
           "canceledAt": None, "cancelReason": None}
    rec.update(extra)
    return rec


def item(sid: str, *, created: int = T0, submitted: int | None = T0, answers: dict[str, Any] | None = None,
         completed: bool = True, **extra: Any) -> dict[str, Any]:
    answers = {"name": "Ann"} if answers is None else answers
    it = {"id": sid, "submittedAt": sql_ts(submitted) if submitted else None, "isCompleted": completed,
          "createdAt": sql_ts(created), "answers": answers, "display": {k: str(v) for k, v in answers.items()}}
    it.update(extra)
    return it


def events(*dicts: dict[str, Any]) -> list[Event]:
    return [Event.model_validate(d) for d in dicts]


# -- reading back ---------------------------------------------------------------------------


def dump(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every store table, sorted: a snapshot to compare before and after."""
    out = {}
    with store.database.engine.connect() as conn:
        for t in METADATA.sorted_tables:
            out[t.name] = sorted(tuple(json.dumps(v, sort_keys=True, default=str) for v in r)
                                  for r in conn.execute(select(t)))
    return out


def get(store: Store, model: type, key: Any) -> Any:
    with store.database.reader() as s:
        row = s.get(model, key)
        assert row is not None, f"no {model.__name__} {key!r}"
        s.expunge(row)
        return row


def answers_of(store: Store, sid: str) -> dict[tuple[str, int, str, str], tuple[Any, str | None]]:
    """The long-form answers of a stored submission, as export derives them from its row."""
    sub = get(store, SubmissionRow, sid)
    return {(r[1], r[2], r[3], r[4]): (json.loads(r[5]), r[6]) for r in answer_tuples(sid, sub.answers, sub.display)}


def answer_count(store: Store) -> int:
    """How many long-form answer rows the stored submissions make."""
    with store.database.reader() as s:
        return sum(len(answer_tuples(r.id, r.answers, r.display)) for r in s.exec(select(SubmissionRow)).scalars())


def req_answers(store: Store, rid: str) -> tuple[Any, Any]:
    """A request's answers and display, as ``request_answers`` reads them."""
    with store.database.reader() as s:
        row = s.connection().execute(request_answers().where(RequestRow.__table__.c.id == rid)).one()
        return row.answers, row.display


def count(store: Store, model: type) -> int:
    with store.database.reader() as s:
        return len(s.exec(select(model)).scalars().all())


def add_refusal(store: Store, table: str, column: str, value: str) -> None:
    """A database trigger refusing rows of ``table`` whose ``column`` is ``value``: a
    constraint the store does not know of, failing inside its transaction."""
    with store.database.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.execute(text(f"CREATE TRIGGER refuse BEFORE INSERT ON {table} WHEN NEW.{column} = '{value}' "
                              f"BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END"))
        elif conn.dialect.name == "mysql":
            conn.execute(text(f"CREATE TRIGGER refuse BEFORE INSERT ON {table} FOR EACH ROW BEGIN "
                              f"IF NEW.{column} = '{value}' THEN "
                              f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by test trigger'; END IF; END"))
        else:
            conn.execute(text(f"CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN "
                              f"IF NEW.{column} = '{value}' THEN RAISE EXCEPTION 'refused by test trigger'; END IF; "
                              f"RETURN NEW; END $$ LANGUAGE plpgsql"))
            conn.execute(text(f"CREATE TRIGGER refuse BEFORE INSERT ON {table} "
                              f"FOR EACH ROW EXECUTE FUNCTION refuse()"))


def drop_refusal(store: Store, table: str) -> None:
    with store.database.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER refuse"))
        elif conn.dialect.name == "mysql":
            conn.execute(text("DROP TRIGGER refuse"))
        else:
            conn.execute(text(f"DROP TRIGGER refuse ON {table}"))
            conn.execute(text("DROP FUNCTION refuse()"))


# -- schema -------------------------------------------------------------------------------


def test_migrations_create_the_schema_and_compare_clean(store: Store) -> None:
    store.migrate()  # a second run is a no-op
    with store.database.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": compare_column_type, "version_table": VERSION_TABLE})
        assert compare_metadata(ctx, METADATA) == []
        head = ScriptDirectory.from_config(alembic_config(store.url)).get_current_head()
        assert conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one() == head
    # The comparison does see a drifted schema.
    with store.database.engine.begin() as conn:
        on = " ON formsync_requests" if conn.dialect.name == "mysql" else ""
        conn.execute(text(f"DROP INDEX ix_formsync_requests_external_id{on}"))
    with store.database.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": compare_column_type, "version_table": VERSION_TABLE})
        diff = compare_metadata(ctx, METADATA)
    assert [d[0] for d in diff] == ["add_index"] and diff[0][1].name == "ix_formsync_requests_external_id"


def test_migrations_downgrade_and_upgrade_again(store: Store) -> None:
    from alembic import command

    command.downgrade(alembic_config(store.url), "base")
    with store.database.engine.connect() as conn:
        assert [t for t in inspect(conn).get_table_names() if t != VERSION_TABLE] == []
    store.migrate()
    with store.database.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": compare_column_type, "version_table": VERSION_TABLE})
        assert compare_metadata(ctx, METADATA) == []


def test_sqlite_pragmas(tmp_path: Any) -> None:
    s = Store(tmp_path / "p.db")
    try:
        s.migrate()
        with s.database.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
    finally:
        s.close()


def test_postgresql_url_without_driver_uses_psycopg() -> None:
    assert Store("postgresql://postgres@127.0.0.1/x").database.engine.dialect.driver == "psycopg"


def test_mysql_url_without_driver_uses_pymysql() -> None:
    assert Store("mysql://root@127.0.0.1/x").database.engine.dialect.driver == "pymysql"
    assert Store("mariadb://root@127.0.0.1/x").database.engine.dialect.driver == "pymysql"


def test_unsupported_url_is_refused_without_its_password() -> None:
    with pytest.raises(ValueError, match="unsupported database URL 'oracle://scott:\\*\\*\\*@x/y'") as e:
        Store("oracle://scott:tiger@x/y")
    assert "tiger" not in str(e.value)


# -- events: idempotency --------------------------------------------------------------------


def test_same_event_twice_changes_nothing(store: Store, clock: Clock) -> None:
    sub = sub_event("evt_a", "sub_a", answers={"name": "Ann", "topics": ["billing", "sales"]})
    req = req_completed("evt_b", "req_b", "sub_b", T0 + 5000)
    body = json.dumps(sub)
    out = store.store_events([Incoming(Event.model_validate(sub), "webhook", body), *events(req)])
    assert [(o.event_id, o.status) for o in out] == [("evt_a", "stored"), ("evt_b", "stored")]
    before = dump(store)
    assert len(before["formsync_events"]) == 2 and len(before["formsync_submissions"]) == 2
    assert len(before["formsync_requests"]) == 1 and answer_count(store) == 3

    clock.now += 60_000
    # The same ids again, even with other content: nothing changes, not even stored_at.
    altered = sub_event("evt_a", "sub_a", answers={"name": "Mallory"}, updated=T0 + 90_000, edits=5)
    out = store.store_events([Incoming(Event.model_validate(altered), "callback"), *events(req)])
    assert [o.status for o in out] == ["duplicate", "duplicate"]
    assert dump(store) == before
    raw = get(store, RawEvent, "evt_a")
    assert raw.body == body and raw.payload == sub and raw.source == "webhook"


def test_duplicate_within_one_batch_is_stored_once(store: Store) -> None:
    ev = sub_event("evt_x", "sub_x")
    out = store.store_events(events(ev, ev))
    assert [o.status for o in out] == ["stored", "duplicate"]
    assert count(store, RawEvent) == 1 and count(store, SubmissionRow) == 1


# -- events: out of order ---------------------------------------------------------------------


def test_older_submission_update_after_newer_never_overwrites(store: Store) -> None:
    first = sub_event("evt_1", "sub_1", answers={"name": "v0"})
    newer = sub_event("evt_3", "sub_1", type="submission.updated", updated=T0 + 120_000, edits=2,
                      answers={"name": "v2", "city": "Oslo"})
    older = sub_event("evt_2", "sub_1", type="submission.updated", updated=T0 + 60_000, edits=1,
                      answers={"name": "v1"})
    store.store_events(events(first, newer))
    row = get(store, SubmissionRow, "sub_1")
    assert (row.edit_count, row.answers, row.last_event_id) == (2, {"name": "v2", "city": "Oslo"}, "evt_3")
    before = dump(store)

    out = store.store_events(events(older))  # delivered late
    assert out[0].status == "stored"  # the event itself is kept raw...
    after = dump(store)
    assert len(after["formsync_events"]) == 3
    # ...but the submission and its answers stay at the newest version.
    assert after["formsync_submissions"] == before["formsync_submissions"]
    assert answers_of(store, "sub_1") == {("name", -1, "", ""): ("v2", "v2"), ("city", -1, "", ""): ("Oslo", "Oslo")}
    assert row.submitted_at == T0 and row.updated_at == T0 + 120_000


def test_newer_versions_in_one_batch_apply_in_order(store: Store) -> None:
    v2 = sub_event("evt_v2", "sub_o", type="submission.updated", updated=T0 + 2000, edits=2, answers={"n": "2"})
    v1 = sub_event("evt_v1", "sub_o", type="submission.updated", updated=T0 + 1000, edits=1, answers={"n": "1"})
    v0 = sub_event("evt_v0", "sub_o", answers={"n": "0"})
    out = store.store_events(events(v2, v0, v1))
    assert [o.status for o in out] == ["stored"] * 3
    row = get(store, SubmissionRow, "sub_o")
    assert (row.edit_count, row.answers, row.last_event_id) == (2, {"n": "2"}, "evt_v2")
    assert answers_of(store, "sub_o") == {("n", -1, "", ""): ("2", "2")}


def test_request_completed_then_stale_pending_poll(store: Store) -> None:
    done = T0 + 10_000
    store.store_events(events(req_completed("evt_c", "req_1", "sub_r", done, decision="approve")))
    row = get(store, RequestRow, "req_1")
    assert (row.status, row.outcome, row.submission_id, row.answers) == ("completed", "approve", "sub_r", None)
    assert req_answers(store, "req_1")[0] == {"decision": "approve"}, "read from the linked submission"
    assert (row.completed_at, row.updated_at, row.url, row.form_id) == (done, done, None, "form_contact")
    sub = get(store, SubmissionRow, "sub_r")
    assert sub.request_id == "req_1" and answers_of(store, "sub_r")[("decision", -1, "", "")][0] == "approve"

    # A pending record read before the completion arrives late; another claims a newer
    # updatedAt (clock skew). Neither turns the request back to pending.
    written = store.upsert_requests([poll_record("req_1", "pending", T0 + 5000)])
    written += store.upsert_requests([poll_record("req_1", "pending", done + 60_000, deliveryStatus="bounced")])
    assert written == []
    row = get(store, RequestRow, "req_1")
    assert (row.status, row.outcome, req_answers(store, "req_1")[0], row.updated_at) == (
        "completed", "approve", {"decision": "approve"}, done)
    assert row.delivery_status == "sent", "a losing write only fills columns still unknown"
    assert (row.url, row.workspace_id, row.expires_at) == ("http://127.0.0.1/r/rq_req_1", "ws_pro",
                                                           T0 + 29 * 86_400_000)
    assert row.form_id == "form_contact", "a known value is never replaced by a losing write"

    # A newer completed record from requests.list (no answers there) wins, keeping the answers.
    later = done + 120_000
    assert store.upsert_requests([poll_record("req_1", "completed", later, completedAt=done, deliveryStatus="bounced",
                                              submissionId="sub_r", outcome="approve")]) == ["req_1"]
    row = get(store, RequestRow, "req_1")
    assert (row.delivery_status, row.updated_at, req_answers(store, "req_1")[0], row.source) == (
        "bounced", later, {"decision": "approve"}, "poll")
    assert row.last_event_id is None


def test_newer_pending_record_replaces_older_and_not_back(store: Store) -> None:
    assert store.upsert_requests([poll_record("req_p", "pending", T0 + 2000, deliveryStatus="sent")]) == ["req_p"]
    assert store.upsert_requests([poll_record("req_p", "pending", T0 + 1000, deliveryStatus="queued")]) == []
    assert get(store, RequestRow, "req_p").delivery_status == "sent"
    assert store.upsert_requests([poll_record("req_p", "pending", T0 + 3000, deliveryStatus="bounced")]) == ["req_p"]
    row = get(store, RequestRow, "req_p")
    assert (row.delivery_status, row.updated_at) == ("bounced", T0 + 3000)


def test_expired_and_canceled_events_set_status_only(store: Store) -> None:
    store.upsert_requests([poll_record("req_e", "pending", T0), poll_record("req_k", "pending", T0)])
    store.store_events(events(
        req_terminal("evt_e", "req_e", "expired", T0 + 50_000),
        req_terminal("evt_k", "req_k", "canceled", T0 + 60_000, cancelReason="Order withdrawn"),
        req_terminal("evt_n", "req_new", "canceled", T0 + 70_000, cancelReason=None),
    ))
    e = get(store, RequestRow, "req_e")
    assert (e.status, e.expired_at, e.updated_at, e.last_event_id) == ("expired", T0 + 50_000, T0 + 50_000, "evt_e")
    assert (e.url, e.form_id, e.delivery_status, e.answers) == ("http://127.0.0.1/r/rq_req_e", "form_approval",
                                                                "sent", None)
    k = get(store, RequestRow, "req_k")
    assert (k.status, k.canceled_at, k.cancel_reason) == ("canceled", T0 + 60_000, "Order withdrawn")
    n = get(store, RequestRow, "req_new")  # first seen through its cancel event
    assert (n.status, n.form_id, n.external_id, n.metadata_) == ("canceled", None, "ext-req_new", {"runId": "run-42"})
    assert count(store, SubmissionRow) == 0
    # A stale pending read never revives them.
    assert store.upsert_requests([poll_record("req_e", "pending", T0 + 99_000)]) == []
    assert get(store, RequestRow, "req_e").status == "expired"


# -- events: types -------------------------------------------------------------------------


def test_unknown_and_abandoned_events_are_stored_raw_only(store: Store) -> None:
    unknown = {"id": "evt_u", "type": "form.archived", "createdAt": iso(T0), "apiVersion": "2027-01-01",
               "test": False, "data": {"form": {"id": "form_1"}, "whatever": [1, 2]}, "extra": True}
    abandoned = sub_event("evt_ab", "sub_ab", type="submission.abandoned")
    body = json.dumps(unknown)
    out = store.store_events([Incoming(Event.model_validate_json(body), "webhook", body.encode()),
                              *events(abandoned)])
    assert [(o.type, o.status) for o in out] == [("form.archived", "stored"), ("submission.abandoned", "stored")]
    raw = get(store, RawEvent, "evt_u")
    assert (raw.type, raw.body, raw.payload, raw.api_version, raw.created_at) == (
        "form.archived", body, unknown, "2027-01-01", T0)
    assert count(store, SubmissionRow) == 0 and count(store, RequestRow) == 0 and answer_count(store) == 0


def test_test_events_keep_their_flag(store: Store) -> None:
    ev = req_completed("evt_t", "req_t", "sub_t", T0)
    ev["test"] = True
    store.store_events(events(ev), source="callback")
    assert get(store, RawEvent, "evt_t").test is True
    row = get(store, RequestRow, "req_t")
    assert row.is_test is True and row.source == "callback"


def test_group_commit_of_100_events(store: Store) -> None:
    batch = []
    for i in range(100):
        if i % 4 == 0:
            batch.append(req_completed(f"evt_{i}", f"req_{i}", f"sub_{i}", T0 + i))
        elif i % 4 == 1:
            batch.append(req_terminal(f"evt_{i}", f"req_{i}", "expired", T0 + i))
        else:
            batch.append(sub_event(f"evt_{i}", f"sub_{i}", submitted=T0 + i, answers={"n": i, "tags": ["a", "b"]}))
    out = store.store_events(events(*batch))
    assert len(out) == 100 and all(o.status == "stored" for o in out)
    assert count(store, RawEvent) == 100
    assert count(store, RequestRow) == 50
    assert count(store, SubmissionRow) == 75  # 25 request-born + 50 public-link
    assert answer_count(store) == 25 * 1 + 50 * 2


def test_group_commit_is_all_or_nothing(store: Store) -> None:
    add_refusal(store, "formsync_submissions", "id", "sub_bad")
    batch = [sub_event(f"evt_{i}", f"sub_{i}") for i in range(20)] + [sub_event("evt_bad", "sub_bad")]
    with pytest.raises(DBAPIError, match="refused by test trigger"):
        store.store_events(events(*batch))
    assert count(store, RawEvent) == 0 and count(store, SubmissionRow) == 0
    drop_refusal(store, "formsync_submissions")
    assert all(o.status == "stored" for o in store.store_events(events(*batch)))


def test_concurrent_writers_from_threads(store: Store) -> None:
    """Four threads store overlapping batches at once (as the receiver's worker threads
    do): each event id is stored exactly once and the newest version wins."""
    def version(k: int, sid: str) -> dict[str, Any]:
        return sub_event(f"evt_{sid}_{k}", sid, type="submission.updated", updated=T0 + k * 1000, edits=k,
                         answers={"k": k})

    outcomes: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(w: int) -> None:
        try:
            for k in range(1, 6):
                batch = events(*(version((k + w) % 5 + 1, f"sub_{j}") for j in range(10)))
                got = store.store_events(batch)
                with lock:
                    outcomes.extend(got)
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stored = [o.event_id for o in outcomes if o.status == "stored"]
    assert len(stored) == len(set(stored)) == 50 == count(store, RawEvent)
    for j in range(10):
        row = get(store, SubmissionRow, f"sub_{j}")
        assert (row.edit_count, row.answers) == (5, {"k": 5})
        assert answers_of(store, f"sub_{j}") == {("k", -1, "", ""): (5, "5")}


# -- one batch mixing new, late, repeated and refilled versions ---------------------------------


def test_one_batch_mixing_new_late_and_repeated_versions(store: Store) -> None:
    """What arrives together is merged as if each event came alone: a late version loses
    (and leaves the answers alone) while new rows are inserted, a newer version of a row
    first seen in the same batch wins, and a repeated event id is stored once."""
    store.store_events(events(
        sub_event("evt_m2", "sub_m", type="submission.updated", updated=T0 + 2000, edits=2, answers={"n": "m2"}),
        req_terminal("evt_q0", "req_q", "expired", T0 + 1000),
    ))
    # A submissions.list read of sub_l, newer than anything an event will bring, without
    # the respondent's email (the list leaves it out): a late event may fill it in.
    store.upsert_submissions([item("sub_l", created=T0, submitted=T0, updatedAt=sql_ts(T0 + 9000), editCount=3,
                                   answers={"n": "l3"})], "form_contact")
    before_m = get(store, SubmissionRow, "sub_m")

    late_m = sub_event("evt_m1", "sub_m", type="submission.updated", updated=T0 + 1000, edits=1, answers={"n": "m1"})
    n0 = sub_event("evt_n0", "sub_n", answers={"n": "n0", "x": "only in v0"})
    n1 = sub_event("evt_n1", "sub_n", type="submission.updated", updated=T0 + 5000, edits=1, answers={"n": "n1"})
    n0_again = sub_event("evt_n0", "sub_n", answers={"n": "not stored"})  # same event id, other content
    late_l = sub_event("evt_l0", "sub_l", answers={"n": "l0"})
    canceled_q = req_terminal("evt_q1", "req_q", "canceled", T0 + 3000, cancelReason="Withdrawn")
    out = store.store_events(events(n1, late_m, n0, n0_again, late_l, canceled_q))
    assert [(o.event_id, o.status) for o in out] == [
        ("evt_n1", "stored"), ("evt_m1", "stored"), ("evt_n0", "stored"), ("evt_n0", "duplicate"),
        ("evt_l0", "stored"), ("evt_q1", "stored")]
    assert count(store, RawEvent) == 7

    after_m = get(store, SubmissionRow, "sub_m")
    assert after_m == before_m, "a late version changes nothing"
    assert answers_of(store, "sub_m") == {("n", -1, "", ""): ("m2", "m2")}
    n = get(store, SubmissionRow, "sub_n")
    assert (n.edit_count, n.answers, n.last_event_id, n.submitted_at) == (1, {"n": "n1"}, "evt_n1", T0)
    assert answers_of(store, "sub_n") == {("n", -1, "", ""): ("n1", "n1")}, "only the newest version's answers"
    lrow = get(store, SubmissionRow, "sub_l")
    assert (lrow.edit_count, lrow.answers, lrow.source, lrow.last_event_id) == (3, {"n": "l3"}, "sync", None)
    assert lrow.respondent_email == "ann@example.com", "a losing write fills a column still unknown"
    assert answers_of(store, "sub_l") == {("n", -1, "", ""): ("l3", "l3")}
    q = get(store, RequestRow, "req_q")
    assert (q.status, q.canceled_at, q.cancel_reason, q.expired_at, q.last_event_id) == (
        "canceled", T0 + 3000, "Withdrawn", T0 + 1000, "evt_q1")


def test_values_that_look_like_sql_are_stored_verbatim(store: Store) -> None:
    tricky = "50% of ?s; %s %(x)s $1 'single' \"double\" \\ back\tslash\nnew line ✓ 😀 \u00e9"
    ev = req_completed("evt_s", "req_s", "sub_s", T0, q=tricky)
    ev["data"]["request"]["metadata"] = {"note": tricky}
    ev["data"]["display"] = {"q": tricky.upper()}
    body = json.dumps(ev, ensure_ascii=False)
    store.store_events([Incoming(Event.model_validate_json(body), "callback", body)])
    raw = get(store, RawEvent, "evt_s")
    assert raw.body == body and raw.payload == ev
    assert answers_of(store, "sub_s") == {("q", -1, "", ""): (tricky, tricky.upper())}
    assert get(store, SubmissionRow, "sub_s").answers == {"q": tricky}
    assert get(store, RequestRow, "req_s").metadata_ == {"note": tricky}


def test_missing_json_objects_are_sql_null(store: Store) -> None:
    store.store_events(events(req_terminal("evt_c", "req_c", "canceled", T0, context=None, metadata=None)))
    with store.database.engine.connect() as conn:
        nulls = conn.execute(text("SELECT context IS NULL, metadata IS NULL, answers IS NULL "
                                  "FROM formsync_requests WHERE id = 'req_c'")).one()
    assert tuple(bool(v) for v in nulls) == (True, True, True)


def test_a_body_that_is_not_json_is_kept_verbatim(store: Store) -> None:
    ev = sub_event("evt_j", "sub_j")
    store.store_events([Incoming(Event.model_validate(ev), "webhook", "not json at all")])
    raw = get(store, RawEvent, "evt_j")
    assert raw.body == "not json at all" and raw.payload is None
    assert get(store, SubmissionRow, "sub_j").answers == {"name": "Ann"}


def test_hundreds_of_answer_rows_in_one_batch(store: Store) -> None:
    """301 answer rows in one batch are all stored once, each with its own value."""
    answers = {f"q{i:03d}": f"answer {i}" for i in range(300)}
    store.store_events(events(sub_event("evt_big", "sub_big", answers=answers), sub_event("evt_one", "sub_one")))
    got = answers_of(store, "sub_big")
    assert got == {(k, -1, "", ""): (v, v) for k, v in answers.items()}
    assert answer_count(store) == 301


def test_many_rows_replaced_in_one_write(store: Store) -> None:
    """More ids than SQLite's bound-variable limit of older versions, in one write: the
    stored versions are read and replaced in one go."""
    ids = [f"req_{i:04d}" for i in range(1100)]
    assert store.upsert_requests([poll_record(r, "pending", T0) for r in ids]) == ids
    newer = [poll_record(r, "pending", T0 + 1000, deliveryStatus="bounced") for r in ids[::2]]
    older = [poll_record(r, "pending", T0 - 1000, deliveryStatus="queued") for r in ids[1::2]]
    assert store.upsert_requests(newer + older) == ids[::2]
    with store.database.engine.connect() as conn:
        got = dict(conn.execute(text("SELECT delivery_status, COUNT(*) FROM formsync_requests "
                                     "GROUP BY delivery_status")).all())
    assert got == {"bounced": 550, "sent": 550}


# -- long-form answers ----------------------------------------------------------------------

EVERY_SHAPE = {
    "answers": {
        "people": [{"name": "Ann", "role": "dev"}, {"name": "Bo", "role": "ops"}],
        "quality": {"food": "good", "service": "poor"},
        "topics": ["billing", "sales"],
        "attachment": [{"name": "a.pdf", "type": "application/pdf", "size": 10, "url": "https://x/a"},
                       {"name": "b.png", "type": "image/png", "size": 20, "url": "https://x/b"}],
        "deposit": {"status": "paid", "amount": 40.0, "currency": "USD"},
        "newsletter": True,
        "empty_group": [],
    },
    "display": {
        "people": "Ann / Developer, Bo / Operations",
        "quality": "Food: Good, Service: Poor",
        "topics": "Billing, Sales",
        "attachment": "a.pdf, b.png",
        "deposit": "$40.00 USD · Paid",
        "newsletter": "Yes",
        "empty_group": "",
    },
}
EVERY_SHAPE_ROWS = {
    ("people", 0, "", "name"): ("Ann", "Ann"),
    ("people", 0, "", "role"): ("dev", "Developer"),
    ("people", 1, "", "name"): ("Bo", "Bo"),
    ("people", 1, "", "role"): ("ops", "Operations"),
    ("quality", -1, "food", ""): ("good", "Food: Good"),
    ("quality", -1, "service", ""): ("poor", "Service: Poor"),
    ("topics", -1, "", ""): (["billing", "sales"], "Billing, Sales"),
    ("attachment", -1, "", ""): (EVERY_SHAPE["answers"]["attachment"], "a.pdf, b.png"),
    ("deposit", -1, "", ""): ({"status": "paid", "amount": 40.0, "currency": "USD"}, "$40.00 USD · Paid"),
    ("newsletter", -1, "", ""): (True, "Yes"),
    ("empty_group", -1, "", ""): ([], ""),
}


def test_answer_rows_long_form() -> None:
    rows = answer_rows("sub_1", EVERY_SHAPE["answers"], EVERY_SHAPE["display"])
    assert all(r["submission_id"] == "sub_1" for r in rows)
    got = {(r["field_key"], r["instance"], r["row_key"], r["member_key"]): (json.loads(r["value_json"]),
                                                                          r["display_text"]) for r in rows}
    assert got == EVERY_SHAPE_ROWS
    assert len(rows) == len(EVERY_SHAPE_ROWS)


def test_answer_rows_ambiguous_display_falls_back_to_raw_text() -> None:
    rows = answer_rows("s", {"g": [{"tags": ["a", "b"], "n": 3}, {"tags": ["c"], "n": 4}],
                             "m": {"r1": "c1", "r2": "c2"}, "one": {"r1": "c1"}},
                       {"g": "A, B / 3, C / 4", "m": "Row, one: Col, Row 2: Col", "one": "Row, one: Col"})
    got = {(r["field_key"], r["instance"], r["row_key"], r["member_key"]): r["display_text"] for r in rows}
    # A label holding the separator makes the joined text split into too many parts:
    # the raw values stand in. A single part is the whole text, whatever it holds.
    assert got == {("g", 0, "", "tags"): "a, b", ("g", 0, "", "n"): "3", ("g", 1, "", "tags"): "c",
                   ("g", 1, "", "n"): "4", ("m", -1, "r1", ""): "c1", ("m", -1, "r2", ""): "c2",
                   ("one", -1, "r1", ""): "Row, one: Col"}


def test_long_form_answers_stored_and_replaced_whole(store: Store) -> None:
    store.store_events(events(sub_event("evt_s1", "sub_s", answers=EVERY_SHAPE["answers"],
                                        display=EVERY_SHAPE["display"])))
    assert answers_of(store, "sub_s") == EVERY_SHAPE_ROWS
    # An edit drops an instance and a field: the rows are replaced, not merged.
    edited = {"people": [{"name": "Cy"}], "topics": ["sales"]}
    store.store_events(events(sub_event("evt_s2", "sub_s", type="submission.updated", updated=T0 + 5000, edits=1,
                                        answers=edited, display={"people": "Cy", "topics": "Sales"})))
    assert answers_of(store, "sub_s") == {("people", 0, "", "name"): ("Cy", "Cy"),
                                          ("topics", -1, "", ""): (["sales"], "Sales")}


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.-0123456789", min_size=1, max_size=6)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                     st.text(max_size=8))
_multi = st.lists(st.text(max_size=5), max_size=4)
_matrix = st.dictionaries(_keys, st.text(max_size=5), max_size=4)
_files = st.lists(st.fixed_dictionaries({"name": st.text(max_size=5), "type": st.just("image/png"),
                                         "size": st.integers(0, 10**6), "url": st.just("https://x/f")}), max_size=3)
_objects = st.fixed_dictionaries({"status": st.sampled_from(["paid", "confirmed"]), "amount": st.floats(0, 100)})
_group = st.lists(st.dictionaries(_keys, st.one_of(_scalars, _multi, _matrix), max_size=4), max_size=4)
_values = st.one_of(_scalars, _multi, _matrix, _files, _objects, _group)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers=st.dictionaries(_keys, _values, max_size=8), data=st.data())
def test_answer_rows_property(answers: dict[str, Any], data: st.DataObject) -> None:
    display = data.draw(st.dictionaries(st.sampled_from(sorted(answers)) if answers else st.nothing(),
                                        st.one_of(st.text(max_size=20), st.none()), max_size=len(answers)))
    rows = answer_rows("sub_p", answers, display)
    keys = [(r["field_key"], r["instance"], r["row_key"], r["member_key"]) for r in rows]
    assert len(keys) == len(set(keys)), "the long-form key is unique"
    assert {k[0] for k in keys} == set(answers), "every answer key appears"
    for r in rows:
        json.loads(r["value_json"])
        assert r["display_text"] is None or isinstance(r["display_text"], str)
        assert r["row_key"] is not None and r["member_key"] is not None and r["instance"] is not None
    for key, value in answers.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and any(
                "url" not in v for v in value):
            for i, inst in enumerate(value):
                for member in inst:
                    assert any(k[0] == key and k[1] == i and k[3] == member for k in keys), (key, i, member)


# -- pure mapping ----------------------------------------------------------------------------


def test_event_to_rows_request_completed() -> None:
    ev = Event.model_validate(req_completed("evt_m", "req_m", "sub_m", T0 + 1234, decision="approve"))
    rows = event_to_rows(Incoming(ev, "callback", received_at=T0 + 2000), now=T0 + 3000)
    assert rows.raw["id"] == "evt_m" and rows.raw["received_at"] == T0 + 2000 and rows.raw["source"] == "callback"
    assert rows.request == {
        "id": "req_m", "external_id": "ext-req_m", "status": "completed", "outcome": "approve", "language": "en",
        "recipient_email": "bo@example.com", "recipient_name": "Bo", "metadata": {"runId": "run-42"},
        "context": {"crm_id": "c-1"}, "created_at": T0 - 86_400_000, "completed_at": T0 + 1234, "is_test": False,
        "form_id": "form_contact", "submission_id": "sub_m", "updated_at": T0 + 1234, "source": "callback", "last_event_id": "evt_m",
        "stored_at": T0 + 3000,
    }
    assert rows.submission is not None
    assert (rows.submission["request_id"], rows.submission["submitted_at"], rows.submission["observed_at"]) == (
        "req_m", T0 + 1234, T0 + 1234)
    assert rows.answers == answer_rows("sub_m", {"decision": "approve"}, {"decision": "approve"})


# -- sync pages and cursors --------------------------------------------------------------------


def test_sync_page_writes_rows_and_cursor(store: Store) -> None:
    page = [item("sub_2", created=T0 + 2000), item("sub_1", created=T0 + 1000, completed=False, submitted=None)]
    mark = SyncMark(sql_ts(T0 + 2000), "sub_2")
    assert store.sync_page("form_c", page, mark, form_name="Contact") == ["sub_1", "sub_2"]
    assert store.get_cursor("form_c") == mark
    one = get(store, SubmissionRow, "sub_1")
    assert (one.is_completed, one.submitted_at, one.created_at, one.source, one.form_name) == (
        False, None, T0 + 1000 - (T0 + 1000) % 1000, "sync", "Contact")
    assert answers_of(store, "sub_2") == {("name", -1, "", ""): ("Ann", "Ann")}


def test_sync_page_is_atomic(store: Store, clock: Clock) -> None:
    store.sync_page("form_c", [item("sub_a", answers={"name": "A0"})], SyncMark(sql_ts(T0), "sub_a"))
    before = dump(store)
    # A constraint of the database refuses one submission row, after another new row
    # was already written in the same transaction.
    add_refusal(store, "formsync_submissions", "id", "sub_c")
    clock.now += 1000
    page = [item("sub_b", created=T0 + 5000, answers={"name": "B"}),
            item("sub_a", answers={"name": "A1"}, updatedAt=sql_ts(T0 + 4000), editCount=1),
            item("sub_c", created=T0 + 3000, answers={"boom": 1})]
    with pytest.raises(DBAPIError, match="refused by test trigger"):
        store.sync_page("form_c", page, SyncMark(sql_ts(T0 + 5000), "sub_b"))
    assert dump(store) == before
    assert store.get_cursor("form_c") == SyncMark(sql_ts(T0), "sub_a")

    drop_refusal(store, "formsync_submissions")
    # The cursor write, last in the transaction, is refused: the rows go too.
    add_refusal(store, "formsync_sync_cursors", "last_id", "sub_b")
    with pytest.raises(DBAPIError, match="refused by test trigger"):
        store.sync_page("form_c", page, SyncMark(sql_ts(T0 + 5000), "sub_b"))
    assert dump(store) == before

    drop_refusal(store, "formsync_sync_cursors")
    assert store.sync_page("form_c", page, SyncMark(sql_ts(T0 + 5000), "sub_b")) == ["sub_a", "sub_b", "sub_c"]
    assert store.get_cursor("form_c") == SyncMark(sql_ts(T0 + 5000), "sub_b")
    assert get(store, SubmissionRow, "sub_a").answers == {"name": "A1"}


def test_sync_page_refuses_a_malformed_item_and_changes_nothing(store: Store) -> None:
    store.sync_page("form_c", [item("sub_a")], SyncMark(sql_ts(T0), "sub_a"))
    before = dump(store)
    bad = item("sub_z")
    del bad["isCompleted"]
    with pytest.raises(ValueError, match=r"items\[1\]\.isCompleted: Field required .*nothing was stored"):
        store.sync_page("form_c", [item("sub_y"), bad], SyncMark(sql_ts(T0 + 9000), "sub_z"))
    with pytest.raises(ValueError, match=r"items\[0\]\.submittedAt: .*expected a time: epoch ms, 'YYYY-MM-DD HH:MM:SS' "
                                         r"\(UTC\) or ISO 8601 \(got 'yesterday'\); nothing was stored"):
        store.sync_page("form_c", [item("sub_w", submittedAt="yesterday")], None)
    with pytest.raises(ValueError, match=r"records\[0\]\.status: Field required"):
        store.upsert_requests([{"id": "req_q"}])
    assert dump(store) == before


def test_list_read_and_event_of_one_submission_merge(store: Store, clock: Clock) -> None:
    """An event (ms precision) and a later list read (seconds) of the same version: the
    later observation wins, submittedAt keeps its ms, the event-only columns stay."""
    at = T0 + 1_234
    store.store_events(events(sub_event("evt_e", "sub_e", submitted=at, answers={"pay": "paid"})))
    clock.now = at + 600_000
    assert store.upsert_submissions([item("sub_e", created=at, submitted=at, answers={"pay": "refunded"})],
                                    "form_contact", "Contact") == ["sub_e"]
    row = get(store, SubmissionRow, "sub_e")
    assert (row.answers, row.submitted_at, row.snapshot_id, row.language, row.source) == (
        {"pay": "refunded"}, at, "snap_1", "en", "sync")
    assert row.last_event_id is None
    # The event delivered again later under a new id (a replay) is older than that read.
    ev = sub_event("evt_e2", "sub_e", submitted=at, answers={"pay": "paid"})
    store.store_events(events(ev))
    assert get(store, SubmissionRow, "sub_e").answers == {"pay": "refunded"}
    # A draft listed before: a later completed version wins over it.
    store.upsert_submissions([item("sub_d", submitted=None, completed=False, answers={"n": "1"})], "form_contact")
    store.store_events(events(sub_event("evt_d", "sub_d", submitted=T0 + 900_000, answers={"n": "2"})))
    assert get(store, SubmissionRow, "sub_d").is_completed is True
    assert answers_of(store, "sub_d") == {("n", -1, "", ""): ("2", "2")}


def test_cursor_only_moves_forward(store: Store) -> None:
    assert store.get_cursor("form_c") is None
    store.set_cursor("form_c", SyncMark("2026-05-01 10:00:00", "sub_b"))
    store.set_cursor("form_c", SyncMark("2026-04-01 10:00:00", "sub_z"))
    assert store.get_cursor("form_c") == SyncMark("2026-05-01 10:00:00", "sub_b")
    store.set_cursor("form_c", SyncMark("2026-05-01 10:00:00", "sub_c"))
    assert store.get_cursor("form_c") == SyncMark("2026-05-01 10:00:00", "sub_c")
    assert store.get_cursor("form_c", "drafts") is None
    store.reset_cursor("form_c")
    assert store.get_cursor("form_c") is None
    assert count(store, SyncCursor) == 0
    with pytest.raises(ValueError, match="SyncMark.submission_id must be a non-empty string"):
        SyncMark("2026-05-01 10:00:00", "")


# -- against the sandbox's own wire shapes ---------------------------------------------------------


async def test_sandbox_sample_event_and_list_items_store(sandbox: Any, store: Store) -> None:
    """The sandbox's ``submissions.sample`` event and ``submissions.list`` items of the
    Everything form (every field type) store with one long-form row per group member and
    matrix row, display text split per part."""
    form_id = sandbox.pro.forms["Everything"]
    fields = (await sandbox.rpc("fields.list", {"formId": form_id})).data["items"]
    group = next(f for f in fields if f["type"] == "group")
    matrix = next(f for f in fields if f["type"] == "matrix")

    sample = (await sandbox.rpc("submissions.sample", {"formId": form_id})).data
    out = store.store_events([Incoming(Event.model_validate(sample), "webhook", json.dumps(sample))])
    assert out[0].status == "stored"
    rows = answers_of(store, "sub_example000000000000")
    assert {k[0] for k in rows} == set(sample["data"]["answers"])
    members = [m["key"] for m in group["members"]]
    assert {k[3] for k in rows if k[0] == group["key"]} == set(members)
    assert {k[2] for k in rows if k[0] == matrix["key"]} == {r["key"] for r in matrix["rows"]}
    assert all(v[1] for k, v in rows.items() if k[0] in (group["key"], matrix["key"]))

    answers = {"full_name": "Ann", "email": "ann@example.com", "plan": "premium", "topics": ["billing", "sales"],
               group["key"]: [{members[0]: "Desk", members[1]: 2}, {members[0]: "Lamp", members[1]: 1}],
               matrix["key"]: {r["key"]: matrix["columns"][0]["key"] for r in matrix["rows"]}}
    made = (await sandbox.helper("submissions.create", {"formId": form_id, "answers": answers})).data
    page = (await sandbox.rpc("submissions.list", {"formId": form_id, "limit": 100})).data
    newest = page["items"][0]
    written = store.sync_page(form_id, page["items"], SyncMark(newest["createdAt"], newest["id"]),
                              form_name=page["formName"])
    assert made["id"] in written
    row = get(store, SubmissionRow, made["id"])
    assert row.answers == newest["answers"] and row.form_name == "Everything"
    rows = answers_of(store, made["id"])
    assert rows[(group["key"], 1, "", members[0])] == ("Lamp", "Lamp")
    assert rows[("plan", -1, "", "")] == ("premium", newest["display"]["plan"])
    assert rows[("topics", -1, "", "")][0] == ["billing", "sales"]
    assert store.get_cursor(form_id) == SyncMark(newest["createdAt"], newest["id"])


async def test_sandbox_request_lifecycle_events_and_reads_store(sandbox: Any, store: Store) -> None:
    """Real ``request.completed`` / ``request.canceled`` events from the sandbox's outbox and
    real ``requests.get`` / ``requests.list`` records: a stale pending read never undoes
    the completion, and a list record (no answers) keeps the answers."""
    form_id = sandbox.pro.forms["Approval"]
    made = (await sandbox.rpc("requests.create", {
        "formId": form_id, "recipient": {"email": "bo@example.com", "name": "Bo"}, "externalId": "case-7",
        "metadata": {"runId": "run-1"}, "context": {"case_id": "C-7"}})).data
    pending = (await sandbox.rpc("requests.get", {"requestId": made["id"]})).data
    assert store.upsert_requests([pending]) == [made["id"]]
    assert get(store, RequestRow, made["id"]).status == "pending"

    r = await sandbox.helper("requests.complete", {"requestId": made["id"],
                                                   "answers": {"reviewer": "Bo", "decision": "approve"}})
    assert r.ok, r.body
    evs = (await sandbox.helper("events.list", {"requestId": made["id"], "type": "request.completed"})).data["items"]
    assert len(evs) == 1
    payload = evs[0]["payload"]
    out = store.store_events([Incoming(Event.model_validate(payload), "callback", json.dumps(payload))])
    assert out[0].status == "stored"
    row = get(store, RequestRow, made["id"])
    done = (await sandbox.rpc("requests.get", {"requestId": made["id"]})).data
    assert (row.status, row.outcome, row.external_id, row.metadata_) == ("completed", "approve", "case-7",
                                                                         {"runId": "run-1"})
    assert (*req_answers(store, made["id"]), row.submission_id) == (done["answers"], done["display"],
                                                                   done["submissionId"])
    assert (row.completed_at, row.url, row.form_id) == (done["completedAt"], made["url"], form_id)
    sub = get(store, SubmissionRow, done["submissionId"])
    assert sub.request_id == made["id"] and sub.answers == done["answers"]

    assert store.upsert_requests([pending]) == []  # the stale pending read, again
    listed = (await sandbox.rpc("requests.list", {"formId": form_id})).data["items"]
    record = next(r for r in listed if r["id"] == made["id"])
    assert "answers" not in record  # list records carry no answers (notes section 2)
    store.upsert_requests([record])
    row = get(store, RequestRow, made["id"])
    assert (row.status, req_answers(store, made["id"])[0]) == ("completed", done["answers"])

    other = (await sandbox.rpc("requests.create", {"formId": form_id, "externalId": "case-8"})).data
    r = await sandbox.rpc("requests.cancel", {"requestId": other["id"], "reason": "Order withdrawn"})
    assert r.ok, r.body
    evs = (await sandbox.helper("events.list", {"requestId": other["id"], "type": "request.canceled"})).data["items"]
    store.store_events(events(evs[0]["payload"]))
    row = get(store, RequestRow, other["id"])
    assert (row.status, row.cancel_reason, row.external_id, row.answers) == ("canceled", "Order withdrawn", "case-8",
                                                                             None)


def test_read_integers_past_32_bits_are_stored_and_past_64_bits_named(store: Store) -> None:
    """``editCount`` from a ``submissions.list`` read: 64-bit on every database; beyond,
    a ``ValueError`` naming the item and field, and nothing stored."""
    assert store.upsert_submissions([item("sub_big", editCount=2**40)], "form_i") == ["sub_big"]
    assert get(store, SubmissionRow, "sub_big").edit_count == 2**40
    with pytest.raises(ValueError, match=r"items\[1\] \(sub_huge\)\.edit_count is 9223372036854775808"):
        store.upsert_submissions([item("sub_ok"), item("sub_huge", editCount=2**63)], "form_i")
    assert count(store, SubmissionRow) == 1
    with pytest.raises(ValueError, match=r"records\[0\]\.updatedAt: .*a time out of range.*9223372036854775808.*"
                                         r"nothing was stored"):
        store.upsert_requests([poll_record("req_huge", "pending", 2**63)])
    assert count(store, RequestRow) == 0


def test_requests_are_counted_by_form_and_status_one_form_at_a_time(store: Store) -> None:
    store.upsert_requests([poll_record("req_a1", "pending", T0, formId="form_a"),
                           poll_record("req_a2", "pending", T0, formId="form_a"),
                           poll_record("req_b1", "pending", T0, formId="form_b")])
    store.store_events(events(req_terminal("evt_a", "req_a1", "expired", T0 + 1),
                              req_terminal("evt_n", "req_new", "canceled", T0 + 2)))  # no form known: "?"
    got = store.requests.each_form_status(("pending", "expired", "completed"))
    assert sorted(got) == [("?", {"pending": 0, "expired": 0, "completed": 0}),
                           ("form_a", {"pending": 1, "expired": 1, "completed": 0}),
                           ("form_b", {"pending": 1, "expired": 0, "completed": 0})]
    assert store.requests.status_by_form() == {"?": {"canceled": 1}, "form_a": {"pending": 1, "expired": 1},
                                               "form_b": {"pending": 1}}


def test_a_form_is_known_once_anything_of_it_is_stored(store: Store) -> None:
    assert not store.knows_form("form_contact")
    store.upsert_submissions([item("sub_k", answers={"n": "k"})], "form_contact")
    store.set_cursor("form_synced", SyncMark(sql_ts(T0), "sub_0"))
    store.record_fields("form_listed", [{"key": "n", "type": "short_text", "title": "N"}])
    assert [store.knows_form(f) for f in ("form_contact", "form_synced", "form_listed", "form_other")] == [
        True, True, True, False]
