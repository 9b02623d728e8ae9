"""pandas frames of the store (``pipelines.export.frames``): typed from the form's field list,
the same rows, columns and types as the file export, and frames per batch."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from connector.store import Store
from pipelines.export import frames
from pipelines.export import write as export_mod
from pipelines.export.write import export
from tests.connector.conftest import db_url, migrated_db_url, mysql_database, pg_database  # noqa: F401  (fixtures)
from tests.connector.test_store import T0, events, req_completed, sub_event

ANSWERS = {"name": "Ann", "topic": "sales", "rating": 4, "score": 2.5, "agree": True,
           "colors": ["red", "blue"], "grid": {"speed": "good"}, "cv": [{"name": "cv.pdf", "size": 10}],
           "day": "2026-01-15", "at": "09:30", "pay": {"status": "paid", "amount": 40}}
FIELDS = [{"key": "name", "type": "text"}, {"key": "topic", "type": "select"}, {"key": "rating", "type": "rating"},
          {"key": "score", "type": "number"}, {"key": "agree", "type": "switch"}, {"key": "colors", "type": "checkbox"},
          {"key": "grid", "type": "matrix", "rows": [{"key": "speed", "label": "Speed"}]},
          {"key": "cv", "type": "file"}, {"key": "day", "type": "date"}, {"key": "at", "type": "time"},
          {"key": "pay", "type": "payment"}, {"key": "decision", "type": "decision"}]


@pytest.fixture
def store(migrated_db_url: str) -> Iterator[Store]:  # noqa: F811
    s = Store(migrated_db_url)
    s.record_fields("form_contact", FIELDS)
    evs = [sub_event(f"evt_{i}", f"sub_{i}", submitted=T0 + i * 1000,
                     answers={**ANSWERS, "rating": 4 + i, "agree": i == 0},
                     display={**{k: str(v) for k, v in ANSWERS.items()}, "topic": "Sales", "grid": "Speed: Good"})
           for i in range(3)]
    evs.append(req_completed("evt_r", "req_1", "sub_r", T0 + 5000, name="Bo", rating=1))
    s.store_events(events(*evs))
    yield s
    s.close()


def test_wide_frame_is_typed(store: Store) -> None:
    df = frames.wide(store, form="form_contact")
    assert len(df) == 4
    assert str(df["submitted_at"].dtype) == "datetime64[ns, UTC]" or str(df["submitted_at"].dtype).endswith(", UTC]")
    assert df["submitted_at"].iloc[0] == pd.Timestamp(T0, unit="ms", tz="UTC")
    assert str(df["rating"].dtype) == "Int64" and df["rating"].tolist()[:3] == [4, 5, 6]
    assert str(df["score"].dtype) == "Float64" and pd.isna(df["score"].iloc[3])
    assert str(df["agree"].dtype) == "boolean" and df["agree"].tolist()[:3] == [True, False, False]
    assert df["topic"].iloc[0] == "sales" and df["topic_label"].iloc[0] == "Sales"
    assert df["grid_speed"].iloc[0] == "good"
    assert df["colors"].iloc[0] == ["red", "blue"]
    assert df["cv"].iloc[0] == [{"name": "cv.pdf", "type": None, "size": 10.0, "url": None}]
    assert df["colors"].iloc[3] is None
    assert df["day"].iloc[0] == date(2026, 1, 15) and df["at"].iloc[0] == time(9, 30)
    assert df["pay"].iloc[0] == {"status": "paid", "amount": 40}
    assert df["name"].tolist()[3] == "Bo" and df["external_id"].tolist()[3] == "ext-req_1"
    assert df["decision"].isna().all()  # a field no submission answered: a column all the same
    # T0 is 2026-05-28 20:26:40 UTC, one submission a second
    assert frames.wide(store, form="form_contact", since="2026-05-28T20:26:41")["submission_id"].tolist()[:2] == \
        ["sub_1", "sub_2"]
    shown = frames.wide(store, form="form_contact", display=True)
    assert shown["topic"].iloc[0] == "Sales" and shown["rating"].iloc[0] == 4  # the label; a number stays one


def test_frames_hold_what_the_file_export_writes(store: Store, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for table, make in (("wide", frames.wide), ("long", frames.long), ("requests", frames.requests)):
        export(store, "parquet", tmp_path / f"{table}.parquet", table=table)  # type: ignore[arg-type]
        written = pq.read_table(tmp_path / f"{table}.parquet").to_pandas()
        df = make(store)
        assert list(df.columns) == list(written.columns) and len(df) == len(written)
        assert df["form_id"].tolist() == written["form_id"].tolist()
        if table == "wide":  # the frame's dtypes are the Arrow types' (pipelines.export.columns.PANDAS_TYPES)
            want = {"double": "Float64", "int64": "Int64", "bool": "boolean", "string": "string"}
            types = {f.name: str(f.type) for f in pq.read_schema(tmp_path / "wide.parquet")}
            types["pay"] = "json"  # JSON text in Parquet, its parsed value in the frame
            for name, dtype in df.dtypes.items():
                assert str(dtype) == want.get(types[name], str(dtype) if str(dtype) == "object" or "UTC" in str(dtype)
                                              else "?"), name
    monkeypatch.setattr(export_mod, "CHUNK_ROWS", 3)
    parts = list(frames.iter_wide(store))
    assert [len(p) for p in parts] == [3, 1] and all(list(p.columns) == list(parts[0].columns) for p in parts)
    assert [str(t) for t in parts[0].dtypes] == [str(t) for t in parts[1].dtypes]


def test_requests_frame_and_an_empty_frame(store: Store) -> None:
    df = frames.requests(store)
    assert df["request_id"].tolist() == ["req_1"] and df["external_id"].tolist() == ["ext-req_1"]
    assert str(df["completed_at"].dtype).endswith(", UTC]")
    empty = frames.wide(store, form="form_none")
    assert len(empty) == 0 and "submitted_at" in empty.columns
