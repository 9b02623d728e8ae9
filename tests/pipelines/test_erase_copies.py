"""No copy left: a load removes its dlt load packages (whatever the environment says),
``erase`` removes the person from every working file formsync keeps (dlt's packages not
yet loaded, the outreach reports, partial files of interrupted runs, the SQLite file's
freed pages), and a load failure's line starts with its real cause."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.store import Store
from connector.store._erasure import Person
from pipelines.export.load import (
    DEFAULT_DATASET,
    LoadFailed,
    cursor_name,
    destination_of,
    dlt_packages,
    dlt_settings,
    load,
    pipeline_name,
    warehouse_source,
    work_dir,
)
from pipelines.lifecycle.erase import WorkFolders, erase_person
from tests.items import list_item
from tests.stores import migrated_store

FORM = "form_copies"
FIELDS = [{"key": "note", "type": "text", "title": "Note"}, {"key": "email", "type": "email", "title": "Email"}]
ADA = "ada.lovelace@example.com"
ANSWER = b"zebra-ada-answer-31337"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)  # the DuckDB warehouse: formsync.duckdb here, beside the store's folder
    (tmp_path / "store").mkdir()
    yield tmp_path


@pytest.fixture
def store(here: Path) -> Iterator[Store]:
    s = migrated_store(f"sqlite:///{here / 'store' / 'formsync.db'}", key_file=here / "store" / "formsync.key")
    s.record_fields(FORM, FIELDS)
    yield s
    s.close()


def _submit(store: Store, sid: str, email: str, note: str) -> None:
    item = list_item(sid, {"note": note, "email": email})
    item["respondentEmail"] = email
    store.upsert_submissions([item], FORM, "Copies")


def _holding(folders: list[Path], *needles: bytes) -> list[str]:
    """Every file under ``folders`` whose bytes hold one of ``needles`` (any case)."""
    return sorted(str(p) for d in folders for p in d.rglob("*") if p.is_file()
                  and any(n.lower() in p.read_bytes().lower() for n in needles))


def _pending_package(store: Store) -> None:
    """A load that stopped after dlt normalised its rows: a package not yet loaded."""
    import dlt

    name = cursor_name("duckdb", DEFAULT_DATASET)
    with dlt_settings(work_dir(store)), store.exports.snapshot():
        pipeline = dlt.pipeline(pipeline_name=pipeline_name("duckdb", DEFAULT_DATASET),
                                pipelines_dir=str(work_dir(store) / "pipelines"), destination=destination_of(None),
                                dataset_name=DEFAULT_DATASET)
        pipeline.extract(warehouse_source(store, name).source, loader_file_format="parquet")
        pipeline.normalize()


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def test_a_load_keeps_no_package_even_when_the_environment_asks(store: Store, here: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOAD__DELETE_COMPLETED_JOBS", "false")
    for i in range(3):
        _submit(store, f"sub_{i}", f"p{i}@example.com", f"note {i}")
        assert load(store).rows["answers"] == 2
        assert dlt_packages(work_dir(store)) == [], "no package stays once the cursors moved"
    assert _holding([work_dir(store)], b"p0@example.com", b"note 1") == []
    import os

    assert os.environ["LOAD__DELETE_COMPLETED_JOBS"] == "false", "the user's setting is back after the load"


def test_after_erase_and_a_load_no_working_file_holds_the_person(store: Store, here: Path) -> None:
    _submit(store, "sub_ada", ADA, ANSWER.decode())
    _submit(store, "sub_bo", "bo@example.com", "bo's note")
    load(store)
    _submit(store, "sub_ada2", ADA.upper(), "a second answer of hers")
    _submit(store, "sub_bo2", "bo@example.com", "bo's second note")
    _pending_package(store)
    where = work_dir(store)
    assert any(p.parent.name == "normalized" for p in dlt_packages(where))
    assert _holding([where], ADA.encode()), "the package holds her rows in plain bytes"
    reports, exports = here / "reports", here / "exports"
    reports.mkdir(), exports.mkdir()
    (reports / "spring-report.csv").write_text(f"row,column,problem,accepted\n2,email,duplicate,{ADA}\n"
                                               "3,email,duplicate,bo@example.com\n")
    (reports / "spring-links.csv").write_text(f"externalId,email,url\n,{ADA},https://x/r/rq_1\n")
    (exports / f".answers.csv.{_dead_pid()}.partial").write_bytes(b"submission_id,value\nsub_ada," + ANSWER)
    live = exports / f".other.csv.{subprocess.os.getpid()}.partial"  # type: ignore[attr-defined]
    live.write_bytes(b"a run still writing")

    receipt = erase_person(store, Person(email=ADA), folders=WorkFolders(reports=reports, exports=exports))
    counts = {line.where: line.removed for line in receipt.lines}
    assert (counts["formsync_submissions"], counts["dlt load packages"], counts["partial files"],
            counts["report file lines"]) == (2, len(receipt.files) - 3, 1, 2)
    assert receipt.unreachable and "warehouse" in " ".join(receipt.unreachable)
    assert receipt.exports == [] and receipt.pending_requests == []
    assert live.exists(), "a partial file its writer still writes is left"
    assert dlt_packages(where) == []

    report = load(store)
    assert report.deleted.get("answers") == 2 and report.rows["answers"] == 2, "the pending rows came again, hers not"
    assert _holding([here / "store", reports, exports], ADA.encode(), ANSWER, b"a second answer of hers") == []
    assert "bo@example.com" in (reports / "spring-report.csv").read_text()


def _hold_duckdb(path: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(60)", str(path)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_load_failure_says_its_cause_first(store: Store, here: Path) -> None:
    _submit(store, "sub_1", "p1@example.com", "one")
    holder = _hold_duckdb(here / "formsync.duckdb")
    try:
        with pytest.raises(LoadFailed) as held:
            load(store)
    finally:
        holder.kill()
        holder.wait(10)
    line = str(held.value)
    assert line.startswith(f"another process (PID {holder.pid}) holds {here / 'formsync.duckdb'}:"), line
    assert "credentials" not in line and "internet" not in line and "\n" not in line

    (here / "formsync.duckdb").unlink()
    (here / "formsync.duckdb").write_bytes(b"not a database at all\n" * 100)
    started = time.monotonic()
    with pytest.raises(LoadFailed) as wrong:
        load(store)
    line = str(wrong.value)
    assert line.startswith(f"{here / 'formsync.duckdb'} is not a DuckDB database file:"), line
    assert "credentials" not in line.split("DESTINATION__")[0] and "\n" not in line
    assert time.monotonic() - started < 30
    (here / "formsync.duckdb").unlink()
    assert load(store).rows["answers"] == 2, "nothing moved: the next load sends the same rows"
