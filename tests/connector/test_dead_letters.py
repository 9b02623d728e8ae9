"""The dead letters: a correctly signed event that no database can store as an event
(U+0000, a lone surrogate, a number out of range, nesting too deep, an integer beyond 64
bits) is set aside over real HTTP on SQLite, PostgreSQL and MariaDB (kept once, body and
reason, acknowledged 200), counted, listed, exported and replayed by ``formsync
dead-letters`` and ``formsync status``, and stored by a replay once a release can store
it, leaving the dead letters in the same transaction."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.receiver._delivery import parse_event
from connector.receiver._replay import replay_dead_letters
from connector.store import Store
from connector.store._mapping import Incoming, Unstorable
from tests.forkserver import ForkServer, formsync_forks

from .test_receiver import (
    FORMSYNC,
    NOTHING,
    UNSTORABLE,
    counts,
    encode,
    envelope,
    events_in,
    metric,
    running,
    signed,
)

BEYOND_64_BITS = encode(envelope("evt_big")).replace(b'"editCount":0', b'"editCount":18446744073709551616')


async def set_aside_over_http(store: Store) -> dict[bytes, dict[str, object]]:
    """Each unstorable body delivered (and one of them delivered again) to a receiver on
    ``store``: their answers, by body."""
    answers: dict[bytes, dict[str, object]] = {}
    async with running(store) as rx:
        for _, body, _ in UNSTORABLE:
            status, answers[body], _ = await rx.post(body, signed(body), "callbacks")
            assert status == 200, answers[body]
        status, again, _ = await rx.post(UNSTORABLE[0][1], signed(UNSTORABLE[0][1]), "any")
        assert status == 200 and again["status"] == "set_aside", again
        status, answers[BEYOND_64_BITS], _ = await rx.post(BEYOND_64_BITS, signed(BEYOND_64_BITS), "callbacks")
        assert status == 200, answers[BEYOND_64_BITS]
        assert metric(await rx.metrics(), "formsync_receiver_set_aside_total") == len(UNSTORABLE) + 2
        status, health = await rx.get("/healthz")
        assert status == 200, health
    return answers


async def test_an_unstorable_event_is_set_aside_once_acknowledged_and_replayable(store: Store) -> None:
    answers = await set_aside_over_http(store)
    for answer in answers.values():
        assert answer["ok"] is True and answer["status"] == "set_aside", answer
        assert answer["eventId"] and "cannot be stored" in str(answer["reason"])
    assert counts(store) == NOTHING  # nothing stored as an event
    letters = {letter.body: letter for letter in store.dead_letters}
    assert set(letters) == set(answers)  # every body kept, the one delivered twice kept once
    assert store.dead_letters.count() == len(UNSTORABLE) + 1
    for case, body, field in UNSTORABLE:
        letter = letters[body]
        assert (letter.code, letter.source) == ("UNSTORABLE_EVENT", "callback"), case
        assert letter.field is not None and letter.field.startswith(field), (case, letter.field)
        assert letter.reason == answers[body]["reason"]
    assert letters[BEYOND_64_BITS].field == "data.submission.editCount"

    # This release still cannot store them: a replay keeps every one, with its reason.
    assert replay_dead_letters(store).model_dump() == {"stored": 0, "duplicate": 0, "remaining": len(letters)}
    assert store.dead_letters.count() == len(letters) and counts(store) == NOTHING

    # Set aside by an earlier release that could not store them, storable now: one new
    # event, and one stored meanwhile (a duplicate); both leave the dead letters.
    fresh, stored = encode(envelope("evt_fresh")), encode(envelope("evt_known"))
    store.store_events([Incoming(parse_event(stored), "callback", stored, 1)])
    store.set_aside([Unstorable("evt_fresh", "request.completed", "webhook", fresh, 1, "UNSTORABLE_EVENT", "older"),
                     Unstorable("evt_known", "request.completed", "callback", stored, 2, "UNSTORABLE_EVENT", "older")])
    assert replay_dead_letters(store).model_dump() == {"stored": 1, "duplicate": 1, "remaining": len(letters)}
    assert {letter.event_id for letter in store.dead_letters} == {letter.event_id for letter in letters.values()}
    assert counts(store)["events"] == 2 and store.events.count_stored(["evt_fresh", "evt_known"]) == 2


@pytest.fixture
def forked(tmp_path: Path) -> Iterator[ForkServer | None]:
    """Where the commands run: each a process of its own, forked from one holding formsync
    imported (None with ``FORMSYNC_TESTS_SUBPROCESS=1``: each a ``formsync`` process)."""
    with formsync_forks(dict(os.environ), tmp_path) as server:
        yield server


def test_the_dead_letters_command_lists_exports_replays_and_status_counts(tmp_path: Path,
                                                                          forked: ForkServer | None) -> None:
    db = tmp_path / "dl.db"
    store = Store(f"sqlite:///{db}")
    store.migrate()
    not_utf8_body = b'{"id":"evt_raw","type":"x","note":"\xff"}'
    store.set_aside([Unstorable("evt_nul", "request.completed", "callback", UNSTORABLE[0][1], 5, "UNSTORABLE_EVENT",
                                "the event cannot be stored: $.data.answers.name contains U+0000", "data.answers.name"),
                     Unstorable("evt_raw", "x", "webhook", not_utf8_body, 6, "UNSTORABLE_EVENT", "older"),
                     Unstorable("evt_ok", "request.completed", "webhook", encode(envelope("evt_ok")), 7,
                                "UNSTORABLE_EVENT", "older")])
    store.close()
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{db}"\n')

    def formsync(*args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        argv = [str(FORMSYNC), *args, "--config", str(cfg)]
        done = forked.run(argv, cwd=Path.cwd(), env=dict(os.environ), timeout=60) if forked else \
            subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == code, done.stderr
        return done

    listed = [json.loads(line) for line in formsync("dead-letters", "list").stdout.splitlines()]
    assert [(d["eventId"], d["field"]) for d in listed] == [("evt_nul", "data.answers.name"), ("evt_raw", None),
                                                            ("evt_ok", None)]
    assert "body" not in listed[0] and "U+0000" in listed[0]["reason"]
    shown = formsync("status", code=4)  # events set aside need attention, as the alert says
    assert "Events set aside: 3 (see formsync dead-letters list)" in shown.stdout
    assert "attention: 3 signed event(s) set aside" in shown.stderr

    out = tmp_path / "dead.jsonl"
    formsync("dead-letters", "export", "--out", str(out))
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert exported[0]["body"].encode() == UNSTORABLE[0][1]  # the raw body, byte for byte
    assert base64.b64decode(exported[1]["bodyBase64"]) == not_utf8_body and "body" not in exported[1]
    assert [json.loads(line)["id"] for line in formsync("dead-letters", "export").stdout.splitlines()] == [
        d["id"] for d in exported]

    assert json.loads(formsync("dead-letters", "replay").stdout) == {"stored": 1, "duplicate": 0, "remaining": 2}
    assert events_in(db) == 1
    assert "Events set aside: 2 " in formsync("status", code=4).stdout


def test_a_replay_stores_an_event_and_removes_its_dead_letter_in_one_transaction(sqlite_store: Store) -> None:
    """When removing the dead letter fails (a trigger refuses it here: a stand-in for any
    failure inside the transaction), the event is not stored either: it stays set aside,
    and the replay goes on with the others."""
    bodies = {eid: encode(envelope(eid)) for eid in ("evt_a", "evt_stuck", "evt_b")}
    sqlite_store.set_aside([Unstorable(eid, "request.completed", "callback", body, n, "UNSTORABLE_EVENT", "older")
                            for n, (eid, body) in enumerate(bodies.items())])
    with sqlite_store.database.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TRIGGER stuck BEFORE DELETE ON formsync_dead_letters "
                             "WHEN old.event_id = 'evt_stuck' BEGIN SELECT RAISE(ABORT, 'kept'); END")
    assert replay_dead_letters(sqlite_store).model_dump() == {"stored": 2, "duplicate": 0, "remaining": 1}
    assert [letter.event_id for letter in sqlite_store.dead_letters] == ["evt_stuck"]
    assert sqlite_store.events.count_stored(bodies) == 2  # evt_a and evt_b; evt_stuck was rolled back
