"""The data contract (``connector.store._schema``): one table per form, from its field
list. The typed view and the Parquet export hold the same rows, columns and values on
SQLite, PostgreSQL and MariaDB; the CLI export, a scheduled export job and the frames give
the same columns, order and types; a Parquet dataset of exports made over time (a field
added between them) reads back as one table; and the site's data types page
(linked from docs/your-data.md) says what the mappers make."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import yaml
from sqlalchemy import text
from typer.testing import CliRunner

from connector.config.settings import Settings
from connector.store import Store
from formservice.domain import fieldtypes as ft
from pipelines.cli import app
from pipelines.export import frames
from pipelines.export.columns import type_table
from pipelines.export.write import export
from pipelines.operate.jobs import parse_params
from pipelines.operate.scheduler import JobRuntime
from tests.connector.conftest import db_url, migrated_db_url, mysql_database, pg_database  # noqa: F401  (fixtures)
from tests.pipelines.test_export import T0, sub_event

ROOT = Path(__file__).resolve().parents[2]
FORM = "form_every"


def everything() -> list[dict[str, Any]]:
    """The question blocks of the seeded form "Everything" (every field type)."""
    seed = yaml.safe_load((ROOT / "config" / "sandbox-seed.yaml").read_text())
    form = next(f for ws in seed["workspaces"] for f in ws["forms"] if f.get("name") == "Everything")
    return [b for b in form["blocks"] if ft.is_question(b)]


BLOCKS = everything()
DESCRIPTORS = [ft.descriptor(b) for b in BLOCKS]
ANSWERS: list[dict[str, Any]] = [
    {"full_name": "Ann", "email": "a@example.com", "quantity": 2, "unit_price": 2.5, "total": 5,
     "start_date": "2026-01-15", "start_time": "09:30", "satisfaction": 4, "likelihood": 9, "newsletter": True,
     "country": "de", "plan": "basic", "topics": ["billing", "sales"], "priorities": ["speed", "price", "quality"],
     "service_quality": {"speed": "ok", "friendliness": "great"}, "crm_id": "=crm-1",
     "attachment": [{"name": "f.pdf", "type": "application/pdf", "size": 10, "url": "http://files.test/f.pdf"}],
     "deposit": {"status": "paid", "amount": 40, "currency": "USD"},
     "line_items": [{"item": "desk", "amount": 1.5}, {"item": "lamp"}]},
    {"full_name": "Bo", "plan": "premium", "quantity": 2.5, "newsletter": False},
    {"full_name": "Cy", "plan": "basic", "service_quality": {"speed": "poor"}, "topics": []},
]


def display(answers: dict[str, Any]) -> dict[str, str]:
    by_key = {b["key"]: b for b in BLOCKS}
    return {k: ft.display(by_key[k], v) if k in by_key else str(v) for k, v in answers.items()}


def fill(store: Store, answers: list[dict[str, Any]], start: int = 0) -> None:
    store.store_events([sub_event(f"evt_{start + i}", f"sub_{start + i:03d}", FORM, T0 + (start + i) * 1000, a,
                                  display(a)) for i, a in enumerate(answers)])


@pytest.fixture
def store(migrated_db_url: str) -> Iterator[Store]:  # noqa: F811
    s = Store(migrated_db_url)
    s.record_fields(FORM, DESCRIPTORS)
    fill(s, ANSWERS)
    yield s
    s.close()


def _view_cell(kind: str, v: Any) -> Any:
    """A view cell as the export's Python value (each database's driver gives its own)."""
    if v is None:
        return None
    if kind == "timestamp":
        t = datetime.fromisoformat(v) if isinstance(v, str) else v
        return t.replace(tzinfo=None) if t.tzinfo is None else t.astimezone(tz=None).replace(tzinfo=None) - (
            t.astimezone().utcoffset() or timedelta())
    if kind == "boolean":
        return bool(v)
    if kind == "date":
        return date.fromisoformat(v) if isinstance(v, str) else v
    if kind == "time":
        if isinstance(v, timedelta):  # MySQL's TIME
            return (datetime.min + v).time()
        return time.fromisoformat(v) if isinstance(v, str) else v
    if kind in ("keys", "records", "json"):
        return json.loads(v) if isinstance(v, str | bytes) else v
    return v


def _export_cell(kind: str, members: tuple[Any, ...], v: Any) -> Any:
    if v is None:
        return None
    if kind == "timestamp":
        return v.astimezone(tz=None).replace(tzinfo=None) - (v.astimezone().utcoffset() or timedelta())
    if kind == "json":
        return json.loads(v)
    if kind == "records":  # the view keeps each object as stored: compare the members it has
        return [{k: x for k, x in r.items() if x is not None} for r in v]
    return v


def test_the_view_and_the_export_hold_the_same_table(store: Store, tmp_path: Path) -> None:
    table = store.schema(FORM)
    export(store, "parquet", tmp_path / "w.parquet", form_id=FORM)
    exported = pq.read_table(tmp_path / "w.parquet")
    assert exported.column_names == [c.name for c in table.columns]
    q = "`" if store.backend == "mysql" else '"'
    with store.database.engine.connect() as conn:
        result = conn.execute(text(f"SELECT * FROM {q}{table.name}{q} ORDER BY submitted_at"))
        view_names, view_rows = list(result.keys()), [tuple(r) for r in result]
    assert view_names == exported.column_names
    assert len(view_rows) == exported.num_rows == 3
    for row, got in zip(view_rows, exported.to_pylist(), strict=True):
        for c, v in zip(table.columns, row, strict=True):
            want = _export_cell(c.type, c.members, got[c.name])
            if c.type == "records" and v is not None:
                v = [{k: float(x) if isinstance(x, int) and k in ("size", "amount") else x for k, x in r.items()}
                     for r in _view_cell(c.type, v)]
                assert v == want, c.name
            else:
                assert _view_cell(c.type, v) == want, (c.name, v, got[c.name])
    first = exported.to_pylist()[0]
    assert (first["quantity"], first["start_date"], first["start_time"], first["topics_label"]) == (
        2.0, date(2026, 1, 15), time(9, 30), "Billing, Sales")
    assert first["service_quality_friendliness"] == "great" and first["country_label"] == "Germany"


def test_cli_export_a_scheduled_job_and_the_frames_give_one_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    s = Store(url)
    s.migrate()
    s.record_fields(FORM, DESCRIPTORS)
    fill(s, ANSWERS)
    cli_out, job_out = tmp_path / "cli.parquet", tmp_path / "job.parquet"
    result = CliRunner().invoke(app, ["export", "--format", "parquet", "--out", str(cli_out), "--form", FORM],
                                env={"FORMSYNC_STORE__URL": url})
    assert result.exit_code == 0, result.output
    settings = Settings.model_validate({"store": {"url": url}, "jobs": [
        {"id": "nightly", "kind": "export", "interval_seconds": 3600,
         "params": {"format": "parquet", "out": str(job_out), "form": FORM}}]})
    job = settings.jobs[0]
    asyncio.run(JobRuntime(settings, s, {job.id: parse_params(job)}).execute(job.id))
    assert s.runs.last("nightly").outcome == "ok"  # type: ignore[union-attr]
    cli, scheduled = pq.read_table(cli_out), pq.read_table(job_out)
    assert cli.schema == scheduled.schema and cli.equals(scheduled)
    frame = frames.wide(s, form=FORM)
    assert list(frame.columns) == cli.column_names
    want = {"double": "Float64", "int64": "Int64", "bool": "boolean", "string": "string",
            "timestamp[ms, tz=UTC]": "datetime64[ms, UTC]"}
    kinds = {c.name: c.type for c in s.schema(FORM).columns}
    for f in cli.schema:
        dtype = str(frame[f.name].dtype)
        expected = "object" if kinds[f.name] in ("json", "keys", "records", "date", "time") else want[str(f.type)]
        assert dtype == expected, (f.name, dtype)
    assert frame["topics"].iloc[0] == ["billing", "sales"] and frame["deposit"].iloc[0]["amount"] == 40
    s.close()


def test_a_dataset_of_exports_over_time_reads_back_as_one_table(tmp_path: Path) -> None:
    s = Store(f"sqlite:///{tmp_path / 's.db'}")
    s.migrate()
    s.record_fields(FORM, DESCRIPTORS)
    parts = tmp_path / "dataset"
    parts.mkdir()
    fill(s, ANSWERS[:1])
    export(s, "parquet", parts / "1.parquet", form_id=FORM)
    fill(s, ANSWERS[1:], start=1)  # different answers: a number with a fraction, fields left out
    export(s, "parquet", parts / "2.parquet", form_id=FORM)
    assert pq.read_schema(parts / "1.parquet") == pq.read_schema(parts / "2.parquet")
    # A field added to the form between the second export and the third: its column at its place.
    added = {"key": "referral", "type": "select", "title": "Referred by",
             "options": [{"key": "friend", "label": "A friend"}]}
    s.record_fields(FORM, [*DESCRIPTORS[:3], added, *DESCRIPTORS[3:]])
    fill(s, [{"full_name": "Di", "referral": "friend", "plan": "basic"}], start=3)
    export(s, "parquet", parts / "3.parquet", form_id=FORM)
    third = pq.read_schema(parts / "3.parquet")
    names = third.names
    assert names[names.index("email") + 1:names.index("email") + 3] == ["referral", "referral_label"]
    first = pq.read_schema(parts / "1.parquet")
    assert [n for n in names if n not in ("referral", "referral_label")] == first.names
    dataset = ds.dataset(parts, format="parquet", schema=third)
    table = dataset.to_table()
    assert table.num_rows == 1 + 3 + 4
    assert table.schema == third
    assert sorted(v for v in table.column("referral").to_pylist() if v) == ["friend"]
    assert table.column("quantity").type == pa.float64()
    s.close()


def test_the_docs_table_of_types_is_the_mappers() -> None:
    # The table is a generated page of the site (pipelines.cli.reference), linked from the guide.
    from pipelines.cli.reference import data_types_markdown

    doc = (ROOT / "docs" / "your-data.md").read_text()
    assert "(reference/data-types.md)" in doc
    page = data_types_markdown()
    for line in type_table()[2:]:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        for cell in cells[2:5] + cells[6:]:  # SQL per database, CSV, XLSX, pandas: as the mappers say
            for part in filter(None, cell.split("; ")):
                assert part in page, f"the data types page lacks {part!r} ({cells[0]})"
