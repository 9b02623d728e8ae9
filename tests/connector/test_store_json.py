"""The JSON text the store writes: orjson's where it means the same as ``json.dumps``,
``json.dumps``'s own text where orjson would write something else or refuse."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from connector.store import Store
from connector.store._writer import json_text

FALLBACKS: list[Any] = [
    float("nan"), float("inf"), -math.inf, {"a": [1, {"b": float("nan")}]},
    2**64, -(2**63) - 1, {"big": [2**70]},
    {1: "x"}, {"grid": {True: "x", 2: "y"}},
    "lone \ud800 surrogate", {"k": ["\udfff"]},
]


@pytest.mark.parametrize("value", FALLBACKS, ids=repr)
def test_values_orjson_would_change_get_json_dumps_text(value: Any) -> None:
    assert json_text(value) == json.dumps(value)


@pytest.mark.parametrize("value", [
    {"name": "Zoë", "n": 3, "f": 2.5, "none": None, "list": [True, False, "null"], "emoji": "\U0001f600"},
    [2**63 - 1, -(2**63), 2**64 - 1, 1e300, -0.0, 0.1],
    "text with \"quotes\" and \\ and \n", {"nested": {"deep": [[[{}]]]}},
], ids=repr)
def test_other_values_parse_back_to_themselves(value: Any) -> None:
    out = json_text(value)
    assert json.loads(out) == value
    assert ", " not in out.replace('", "', "")  # compact: orjson wrote it


def test_what_json_dumps_refuses_is_still_refused() -> None:
    with pytest.raises(TypeError):
        json_text({"at": datetime(2026, 1, 1, tzinfo=UTC)})


def test_the_store_writes_json_dumps_text_for_those_values(tmp_path: Path) -> None:
    answers = {"ratio": float("nan"), "big": 2**70, "grid": {1: "x"}, "name": "Ann"}
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate()
    try:
        store.upsert_submissions([{"id": "s1", "isCompleted": True, "createdAt": "2026-01-01 00:00:00",
                                   "submittedAt": "2026-01-01 00:00:00", "answers": answers,
                                   "display": {"name": "Ann"}}], "f1")
        with store.database.engine.connect() as conn:
            stored, shown = conn.execute(text("SELECT answers, display FROM formsync_submissions")).one()
    finally:
        store.close()
    assert stored == json.dumps(answers)
    assert json.loads(shown) == {"name": "Ann"}
