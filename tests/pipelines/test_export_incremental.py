"""Incremental exports (``--since-last NAME``) on a SQLite store: each run writes exactly the
rows stored since the last one under its name (an edit comes again), per table and form;
the cursor moves only once the files are complete; ``--cursors`` lists them, ``--reset``
rewinds one; ``--out`` takes ``{date}``, ``{time}``, ``{form}`` and ``{run}``; the export
job takes the same params."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from connector.config.settings import JobSettings
from connector.store import Store
from pipelines.cli import app
from pipelines.export.write import export, export_files, out_path, slug
from pipelines.operate.jobs import ConfigError, parse_params
from tests.items import list_item

FORM_A, FORM_B = "form_a", "form_b"
AT = datetime(2026, 5, 1, 22, 30, 5, tzinfo=UTC)


def ids(path: Path) -> list[str]:
    table = pq.read_table(path) if path.suffix == ".parquet" else pacsv.read_csv(path)
    return sorted(table.column("submission_id").to_pylist())


def test_out_path_fills_its_placeholders() -> None:
    assert out_path("x/{form}-{date}T{time}-{run}.csv", at=AT, form="survey", run=3) == \
        Path("x/survey-2026-05-01T223005-3.csv")
    assert out_path("plain.csv", at=AT) == Path("plain.csv")
    assert slug("Customer Survey: 2026 (EU)") == "customer-survey-2026-eu" and slug("??") == "form"
    for bad, message in (("{when}.csv", "unknown placeholder {when}"), ("{run}.csv", "use it with since_last"),
                         ("{date}/x.csv", "not in its directory"), ("x{.csv", "the placeholders are")):
        with pytest.raises(ValueError, match=message):
            out_path(bad, at=AT)


def test_each_run_writes_the_rows_stored_since_the_last(store: Store, tmp_path: Path) -> None:
    store.record_fields(FORM_A, [{"key": "q", "type": "text", "title": "Q"}])  # a column's type: the field list's
    store.upsert_submissions([list_item("sub_1", {"q": "a"}), list_item("sub_2", {"q": "b"})], FORM_A, "Spring Survey")
    out = tmp_path / "{form}-{run}.parquet"

    first = export(store, "parquet", out, since_last="nightly")
    assert first.rows == {"wide": 2} and ids(tmp_path / "spring-survey-1.parquet") == ["sub_1", "sub_2"]

    store.upsert_submissions([list_item("sub_3", {"q": "c"}), list_item("sub_1", {"q": "A"}, edits=1)], FORM_A)
    second = export(store, "parquet", out, since_last="nightly")
    written = tmp_path / "spring-survey-2.parquet"
    assert ids(written) == ["sub_1", "sub_3"], "the new row and the edited one, nothing else"
    assert pq.read_table(written).column("q").to_pylist() == ["A", "c"]
    assert second.cursors[0].rows == 2 and second.cursors[0].run == 2

    third = export(store, "parquet", out, since_last="nightly")
    assert third.rows == {"wide": 0}
    assert export(store, "parquet", tmp_path / "other.parquet", since_last="weekly").rows == {"wide": 3}, \
        "each name has its own cursor"

    assert store.export_cursors.reset("nightly") == 1
    with pytest.raises(ValueError, match=r"spring-survey-1.parquet exists .* move it away"):
        export(store, "parquet", out, since_last="nightly")  # {run} restarts after a reset: never replaced
    assert store.export_cursors.list("nightly") == [] and ids(tmp_path / "spring-survey-1.parquet") == ["sub_1", "sub_2"]
    (tmp_path / "spring-survey-1.parquet").rename(tmp_path / "before-the-reset.parquet")
    assert export(store, "parquet", out, since_last="nightly").rows == {"wide": 3}


def test_the_cursor_moves_only_when_every_file_is_complete(store: Store, tmp_path: Path) -> None:
    store.upsert_submissions([list_item("sub_1", {"q": "a"})], FORM_A)
    with pytest.raises(ValueError, match="does not exist"):
        export_files(store, [("parquet", tmp_path / "gone" / "x.parquet")], since_last="nightly")  # type: ignore[list-item]
    assert store.export_cursors.list() == []
    with pytest.raises(ValueError, match="'nightly' writes one format, got csv, parquet"):
        export_files(store, [("csv", tmp_path / "a.csv"), ("parquet", tmp_path / "a.parquet")],  # type: ignore[list-item]
                     since_last="nightly")
    assert store.export_cursors.list() == [] and list(tmp_path.glob("a.*")) == []
    reports = export_files(store, [("parquet", tmp_path / "a.parquet")], since_last="nightly")  # type: ignore[list-item]
    assert [r.rows for r in reports] == [{"wide": 1}]
    assert [(m.table, m.form_id, m.rows, m.run, m.format) for m in store.export_cursors.list()] == \
        [("wide", FORM_A, 1, 1, "parquet")]


def test_the_file_is_on_disk_before_the_cursor_moves(store: Store, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The file's bytes and its name are synced before the cursor commits: after a power cut
    the cursor never points past rows no file holds. A whole export (no cursor) skips the
    syncs. ``os.fsync`` is wrapped (it still runs) to see what is synced and when."""
    import os

    store.upsert_submissions([list_item("sub_1", {"q": "a"})], FORM_A)
    seen: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    real_advance = store.export_cursors.advance
    monkeypatch.setattr(store.export_cursors, "advance", lambda marks: (seen.append("cursor"), real_advance(marks)))
    export(store, "parquet", tmp_path / "whole.parquet")
    assert seen == [], "a whole export moves no cursor and pays for no sync"
    export(store, "parquet", tmp_path / "night.parquet", since_last="nightly")
    assert seen[-1] == "cursor" and seen[-2] == str(tmp_path), seen
    assert seen[-3].startswith(str(tmp_path / ".night.parquet.")), "the file's bytes, before its rename"


def test_cursors_per_table_and_form_and_a_form_rewound(store: Store, tmp_path: Path) -> None:
    store.upsert_submissions([list_item("sub_a", {"q": "a"})], FORM_A)
    store.upsert_submissions([list_item("sub_b", {"q": "b"})], FORM_B)
    wide = export(store, "csv", tmp_path / "w-{form}.csv", since_last="n")
    assert wide.rows == {FORM_A: 1, FORM_B: 1} and ids(tmp_path / "w-form-b.csv") == ["sub_b"]
    assert export(store, "csv", tmp_path / "long.csv", table="long", since_last="n").rows == {"long": 2}
    assert [(m.table, m.form_id) for m in store.export_cursors.list("n")] == \
        [("long", ""), ("wide", FORM_A), ("wide", FORM_B)]

    assert store.export_cursors.rewind_form(FORM_B) == 1  # its table changed: its rows go again
    again = export(store, "csv", tmp_path / "w2-{form}.csv", since_last="n")
    assert again.rows == {FORM_A: 0, FORM_B: 1}
    with pytest.raises(ValueError, match="exclude each other"):
        export(store, "csv", tmp_path / "x.csv", since_last="n", since=AT)


def test_a_held_back_column_that_appears_sends_its_forms_rows_again(store: Store, tmp_path: Path) -> None:
    store.upsert_submissions([list_item("sub_a", {"q": "a"})], FORM_A)
    store.upsert_submissions([list_item("sub_b", {"q": "b"})], FORM_B)
    first = export(store, "csv", tmp_path / "n1-{form}.csv", since_last="n")
    assert first.rows == {FORM_A: 1, FORM_B: 1}
    assert '"q"' not in (tmp_path / "n1-form-b.csv").read_text().splitlines()[0].split(","), "held back"
    store.record_fields(FORM_B, [{"key": "q", "type": "text", "title": "Q"}])  # the column appears
    assert store.schema_changed_at(FORM_B) is not None
    again = export(store, "csv", tmp_path / "n2-{form}.csv", since_last="n")
    assert again.rows == {FORM_A: 0, FORM_B: 1}, "the changed form's rows are sent again, the other's are not"
    assert ids(tmp_path / "n2-form-b.csv") == ["sub_b"]
    assert '"q"' in (tmp_path / "n2-form-b.csv").read_text().splitlines()[0].split(",")


def test_cli_since_last_cursors_and_reset(store: Store, tmp_path: Path) -> None:
    env = {"FORMSYNC_STORE__URL": store.url}
    store.upsert_submissions([list_item("sub_1", {"q": "a"})], FORM_A, "Spring Survey")
    out = str(tmp_path / "{form}-{date}-{run}.csv")
    run = CliRunner().invoke(app, ["export", "--since-last", "nightly", "--out", out], env=env)
    assert run.exit_code == 0, run.output
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert ids(tmp_path / f"spring-survey-{today}-1.csv") == ["sub_1"]
    again = CliRunner().invoke(app, ["export", "--since-last", "nightly", "--out", out], env=env)
    assert again.exit_code == 0 and "nothing new since the last export under 'nightly'" in again.stderr
    assert json.loads(again.stdout)["rows"] == {"wide": 0}

    listed = CliRunner().invoke(app, ["export", "--cursors"], env=env)
    assert [json.loads(line)["name"] for line in listed.stdout.splitlines()] == ["nightly"]
    reset = CliRunner().invoke(app, ["export", "--reset", "nightly"], env=env)
    assert reset.exit_code == 0 and "reset nightly" in reset.stdout
    assert CliRunner().invoke(app, ["export", "--cursors"], env=env).stdout == ""

    for args, where in ((["--reset", "weekly"], "--reset"), (["--since-last", "n", "--since", "2026-01-01"], "--since"),
                        (["--out", str(tmp_path / "{run}.csv")], "--out")):
        bad = CliRunner().invoke(app, ["export", *args], env=env)
        assert bad.exit_code == 2 and where in bad.output and "Traceback" not in bad.output, bad.output


def test_export_job_params() -> None:
    def job(**params: Any) -> JobSettings:
        return JobSettings(id="nightly", kind="export", cron="0 2 * * *",
                           params={"format": "parquet", "out": "exports/{form}-{date}.parquet", **params})

    assert parse_params(job(since_last="nightly")).since_last == "nightly"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="'since' and 'since_last' exclude each other"):
        parse_params(job(since_last="nightly", since="2026-01-01"))
    with pytest.raises(ConfigError, match=r"param 'out': .*\{run\} numbers the runs"):
        parse_params(job(out="exports/{run}.csv"))
