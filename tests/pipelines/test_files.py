"""``formsync files``: the bytes of the stored file and signature answers archived into a
folder or an fsspec URL, named by their sha256, over real HTTP from the sandbox's storage;
what cannot be fetched is a report row, fetched again by the next run."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import fsspec
from typer.testing import CliRunner

from connector.client.rpc import FormClient
from connector.store import Store
from connector.store._archive import FileFields
from pipelines.cli import app
from pipelines.lifecycle.archive import archive_files, file_refs
from pipelines.lifecycle.archive.download import PARTIAL
from pipelines.lifecycle.archive.refs import refusal, same_origin
from pipelines.sync.submissions import sync_form
from tests.conftest import Sandbox
from tests.connector.conftest import db_url, migrated_db_url, mysql_database, pg_database  # noqa: F401  (fixtures)

# -- which files an answer names (pure) ---------------------------------------------------------


def _file(name: str, url: str | None = "http://svc/api/storage/x", size: int | None = 3) -> dict[str, Any]:
    return {"name": name, "type": "application/pdf", "size": size, "url": url}


def test_file_refs_finds_top_level_files_and_files_inside_group_instances():
    fields = FileFields(top=("cv", "sig"), groups={"docs": ("scan",)})
    answers = {"cv": [_file("a.pdf"), _file("b.pdf")], "sig": [], "other": [_file("x")],
               "docs": [{"scan": [_file("s1")]}, {"scan": None}, "junk", {"scan": [_file("s3", size=None)]}]}
    refs = file_refs("sub_1", "form_1", answers, fields)
    assert [(r.path, r.name, r.size) for r in refs] == [
        ("cv[0]", "a.pdf", 3), ("cv[1]", "b.pdf", 3), ("docs[0].scan[0]", "s1", 3), ("docs[3].scan[0]", "s3", None)]
    assert refs[2].place == ("sub_1", "docs", 0, "scan", 0)
    assert file_refs("sub_1", "form_1", {"cv": "not a list"}, fields) == []


def test_only_the_services_own_host_is_fetched():
    assert same_origin("http://127.0.0.1:8787/api/storage/1", "http://127.0.0.1:8787")
    assert same_origin("https://api.formstep.io/api/storage/1", "https://api.formstep.io:443")
    assert not same_origin("http://127.0.0.1:9999/api/storage/1", "http://127.0.0.1:8787")
    assert not same_origin("https://evil.example/x", "https://api.formstep.io")
    ref = file_refs("s", "f", {"cv": [_file("a", url=None)]}, FileFields(("cv",), {}))[0]
    assert refusal(ref, "http://svc") == "the answer has no url"
    ref = file_refs("s", "f", {"cv": [_file("a", url="https://evil.example/x")]}, FileFields(("cv",), {}))[0]
    assert "not on the service's host (svc)" in (refusal(ref, "http://svc") or "")


def test_the_archived_locations_follow_the_answers_files_item_for_item():
    from pipelines.lifecycle.archive.columns import locations

    located = {("s", "cv", -1, "", 0): ("http://svc/1", "file:///a/1"),
               ("s", "cv", -1, "", 1): ("http://svc/old", "file:///a/9"),
               ("s", "cv", -1, "", 2): ("http://svc/3", "s3://b/3"),
               ("s", "docs", 1, "scan", 0): ("http://svc/1", "file:///a/g")}
    files: list[dict[str, object]] = [{"url": "http://svc/1"}, {"url": "http://svc/2"}, {"url": "http://svc/3"}]
    assert locations(("s", "cv", -1, ""), files, located) == ["file:///a/1", None, "s3://b/3"]
    assert locations(("s", "cv", -1, ""), None, located) is None
    assert locations(("t", "cv", -1, ""), files[:1], located) == [None]
    assert locations(("s", "docs", 1, "scan"), files[:1], located) == ["file:///a/g"], "a group member's, by instance"
    assert locations(("s", "docs", 0, "scan"), files[:1], located) == [None]


def test_the_long_tables_archived_column_is_set_on_file_list_rows_only():
    import pyarrow as pa

    from pipelines.export.long_json import ROWS_SCHEMA
    from pipelines.lifecycle.archive.columns import long_archived

    files = '[{"name": "a", "url": "http://svc/1"}, {"name": "b", "url": "http://svc/2"}]'
    rows = [("s", "f1", "cv", None, None, None, files, "a, b"),             # a top-level file field
            ("s", "f1", "docs", 0, None, "scan", files, "a, b"),            # a group's file member
            ("s", "f1", "docs", 0, None, "note", files, "x"),               # a group's text member
            ("s", "f1", "cv", 1, None, "scan", files, "x"),                 # not a group of that form
            ("t", "f2", "cv", None, None, None, "not json", "x"),           # out of shape: no list
            ("t", "f2", "other", None, None, None, files, "x"),             # not a file field
            ("u", "f3", "cv", None, None, None, files, "x")]                # a form without file fields
    batch = pa.RecordBatch.from_pylist([dict(zip(ROWS_SCHEMA.names, r, strict=True)) for r in rows],
                                       schema=ROWS_SCHEMA)
    fields = {"f1": FileFields(("cv",), {"docs": ("scan",)}), "f2": FileFields(("cv",), {})}
    assert long_archived(batch, fields, {}).to_pylist() == [[None, None], [None, None], None, None, None, None,
                                                            None]
    located = {("s", "docs", 0, "scan", 1): ("http://svc/2", "file:///k/2"),
               ("s", "cv", -1, "", 0): ("http://svc/old", "file:///k/9")}
    assert long_archived(batch, fields, located).to_pylist()[:2] == [[None, None], [None, "file:///k/2"]]
    assert long_archived(batch, {}, located).null_count == len(rows)


# -- archiving from the sandbox ---------------------------------------------------------------


async def _stored(sandbox: Sandbox, store: Store, answers: list[dict[str, Any]]) -> str:
    """Submit ``answers`` to the Everything form and sync them into ``store``."""
    form = sandbox.pro.forms["Everything"]
    for a in answers:
        await sandbox.helpers.submissions_create(form, a, completed=False)
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await sync_form(fc, store, form, full=True, include_drafts=True)
    return form


async def test_files_are_archived_by_content_once_and_a_second_run_fetches_nothing(sandbox: Sandbox, store: Store,
                                                                                  tmp_path: Path):
    h = sandbox.helpers
    pdf = await h.files_create("cv.pdf", b"%PDF-1.4 cv" * 1000, "application/pdf")
    png = await h.files_create("sig.png", b"\x89PNG sig" * 500, "image/png")
    again = await h.files_create("copy.pdf", b"%PDF-1.4 cv" * 1000, "application/pdf")  # the same bytes
    await _stored(sandbox, store, [{"attachment": [pdf.model_dump(), again.model_dump()],
                                    "signature": [png.model_dump()]}, {"attachment": [pdf.model_dump()]}])
    out = tmp_path / "archive"
    seen: list[tuple[int, int]] = []
    report = await archive_files(store, sandbox.base_url, str(out), concurrency=2,
                                 on_file=lambda total, done: seen.append((total, done)))
    assert (report.files, report.archived, report.already, report.failed) == (4, 4, 0, 0)
    assert seen[0] == (4, 0) and seen[-1] == (4, 4)
    names = sorted(p.name for p in out.iterdir() if p.name != PARTIAL)
    sha_pdf = hashlib.sha256(b"%PDF-1.4 cv" * 1000).hexdigest()
    sha_png = hashlib.sha256(b"\x89PNG sig" * 500).hexdigest()
    assert names == sorted([sha_pdf, sha_png]), "kept by content: three answers, two files"
    assert (out / sha_pdf).read_bytes() == b"%PDF-1.4 cv" * 1000
    assert report.bytes == 3 * 11000 + 8 * 500
    rows = store.archive.archived()
    assert len(rows) == 4 and {r.location for r in rows.values()} == {
        f"file://{out}/{sha_pdf}", f"file://{out}/{sha_png}"}

    second = await archive_files(store, sandbox.base_url, str(out))
    assert (second.files, second.archived, second.already, second.bytes) == (4, 0, 4, 0)


async def test_what_cannot_be_fetched_is_a_report_row_and_is_fetched_again_next_time(sandbox: Sandbox, store: Store,
                                                                                    tmp_path: Path):
    good = await sandbox.helpers.files_create("ok.pdf", b"%PDF ok", "application/pdf")
    gone = {**good.model_dump(), "url": sandbox.base_url + "/api/storage/0000-missing", "name": "gone.pdf"}
    lying = {**good.model_dump(), "size": 99, "name": "wrong-size.pdf"}
    foreign = {**good.model_dump(), "url": "https://elsewhere.example/f.pdf", "name": "foreign.pdf"}
    await _stored(sandbox, store, [{"attachment": [good.model_dump(), gone, lying, foreign]}])
    out = tmp_path / "archive"
    (out / PARTIAL).mkdir(parents=True)
    (out / PARTIAL / "left-by-a-killed-run").write_bytes(b"half")
    report = await archive_files(store, sandbox.base_url, str(out))
    assert (report.files, report.archived, report.failed) == (4, 1, 3)
    problems = {p.path: p.problem for p in report.problems}
    assert problems["attachment[1]"] == "HTTP 404 (gone or expired)"
    assert problems["attachment[2]"] == "7 bytes downloaded, the answer says 99"
    assert "not on the service's host" in problems["attachment[3]"]
    assert not (out / PARTIAL).exists() or not any((out / PARTIAL).iterdir()), "no half file is left"
    assert sorted(p.name for p in out.iterdir() if p.name != PARTIAL) == [hashlib.sha256(b"%PDF ok").hexdigest()]
    again = await archive_files(store, sandbox.base_url, str(out))
    assert (again.already, again.archived, again.failed) == (1, 0, 3), "the failed ones are tried again"


async def test_an_fsspec_url_is_a_location_too(sandbox: Sandbox, store: Store):
    made = await sandbox.helpers.files_create("m.pdf", b"%PDF in memory", "application/pdf")
    await _stored(sandbox, store, [{"signature": [made.model_dump()]}])
    report = await archive_files(store, sandbox.base_url, "memory://formsync-test/archive")
    sha = hashlib.sha256(b"%PDF in memory").hexdigest()
    assert report.archived == 1 and report.location == "memory:///formsync-test/archive"
    assert fsspec.filesystem("memory").cat(f"/formsync-test/archive/{sha}") == b"%PDF in memory"
    assert next(iter(store.archive.archived().values())).location == f"{report.location}/{sha}"


async def _cli(*args: str) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "400"})


async def test_the_command_says_what_it_did_and_exits_3_when_files_are_in_its_report(sandbox: Sandbox,
                                                                                    tmp_path: Path):
    db = f"sqlite:///{tmp_path}/cli.db"
    store = Store(db)
    store.migrate()
    good = await sandbox.helpers.files_create("ok.pdf", b"%PDF ok", "application/pdf")
    gone = {**good.model_dump(), "url": sandbox.base_url + "/api/storage/0000-missing"}
    await _stored(sandbox, store, [{"attachment": [good.model_dump(), gone]}])
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\n[store]\nurl = "{db}"\n')  # no token needed
    res = await _cli("files", "--config", str(cfg), "--to", str(tmp_path / "out"), "--quiet")
    assert res.exit_code == 3, res.output
    assert "done: 1 files archived (7 bytes), 0 already; 1 could not be fetched" in res.output
    assert "attachment[1]: HTTP 404" in res.output
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert (report["archived"], report["failed"]) == (1, 1)

    res = await _cli("files", "--config", str(cfg), "--to", str(tmp_path / "out"), "--concurrency", "0")
    assert res.exit_code == 2 and "--concurrency" in res.output
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    res = await _cli("files", "--config", str(cfg), "--to", str(blocker / "sub"), "--quiet")
    assert res.exit_code == 1 and f"cannot write to {blocker / 'sub'}" in res.output
    assert res.output.count("\n") <= 3, "one line, no traceback"


async def test_the_archived_locations_are_beside_the_urls_in_views_exports_frames_and_loads(
        sandbox: Sandbox, store: Store, tmp_path: Path, monkeypatch: Any):
    import duckdb
    import openpyxl
    import pandas as pd
    import pyarrow.parquet as pq
    from sqlalchemy import text

    from pipelines import frames
    from pipelines.export import export
    from pipelines.export.load import load

    h = sandbox.helpers
    a = await h.files_create("a.pdf", b"%PDF a", "application/pdf")
    b = await h.files_create("b.pdf", b"%PDF b", "application/pdf")
    gone = {**a.model_dump(), "url": sandbox.base_url + "/api/storage/0000-missing", "name": "gone.pdf"}
    form = await _stored(sandbox, store, [{"attachment": [a.model_dump(), gone, b.model_dump()]}])
    schema = store.schema(form)
    assert [c.name for c in schema.columns if c.field_key == "attachment"] == ["attachment", "attachment__archived"]
    frame = frames.wide(store, form=form)
    assert frame["attachment__archived"].tolist() == [[None, None, None]], "nothing archived yet"

    out = tmp_path / "archive"
    report = await archive_files(store, sandbox.base_url, str(out))
    assert (report.archived, report.failed) == (2, 1)
    where = [f"file://{out}/{hashlib.sha256(x).hexdigest()}" for x in (b"%PDF a", b"%PDF b")]
    expected = [where[0], None, where[1]]  # item for item beside the answer's files

    with store.database.engine.connect() as conn:
        cell = conn.execute(text(f'SELECT attachment__archived FROM "{schema.name}"')).scalar_one()
    assert json.loads(cell) == expected
    assert frames.wide(store, form=form)["attachment__archived"].tolist() == [expected]
    export(store, "parquet", tmp_path / "w.parquet", form_id=form)
    assert pq.read_table(tmp_path / "w.parquet").column("attachment__archived").to_pylist() == [expected]
    export(store, "csv", tmp_path / "w.csv", form_id=form)
    assert json.loads(pd.read_csv(tmp_path / "w.csv")["attachment__archived"][0]) == expected
    export(store, "xlsx", tmp_path / "w.xlsx", form_id=form)
    sheet = openpyxl.load_workbook(tmp_path / "w.xlsx").active
    header = [c.value for c in sheet[1]]
    assert json.loads(sheet.cell(2, header.index("attachment__archived") + 1).value) == expected

    monkeypatch.chdir(tmp_path)
    assert load(store).rows[schema.name] == 1
    with duckdb.connect(str(tmp_path / "formsync.duckdb"), read_only=True) as con:
        loaded = con.sql(f"SELECT attachment__archived FROM formsync_data.{schema.name}").fetchone()
    assert loaded is not None and json.loads(loaded[0]) == expected


def test_an_incremental_export_reads_the_archived_locations_on_every_database(db_url: str,  # noqa: F811
                                                                              tmp_path: Path, monkeypatch: Any):
    """The locations are read while the snapshot's streamed read is open (on MySQL its
    connection can run nothing else): every batch gets them, none is cut short."""
    import pyarrow.parquet as pq

    from connector.store._tables import ArchivedFile
    from pipelines.export import write as pe
    from tests.connector.test_store import events, sub_event

    store = Store(db_url)
    store.migrate()

    def f(n: int) -> dict[str, Any]:
        return {"name": "x", "type": "application/pdf", "size": 3, "url": f"http://svc/api/storage/{n}"}

    store.store_events(events(*[sub_event(f"evt_{i}", f"sub_{i:02}", answers={"cv": [f(i), f(i + 100)]})
                                for i in range(30)]))
    store.record_fields("form_contact", [{"key": "cv", "type": "file"}])
    store.archive.record([ArchivedFile(submission_id=f"sub_{i:02}", field_key="cv", instance=-1, member="", idx=0,
                                       form_id="form_contact", name="x", url=f"http://svc/api/storage/{i}", size=3,
                                       sha256="ab" * 32, location=f"file:///kept/{i}", archived_at=1)
                          for i in range(30)])
    monkeypatch.setattr(pe, "CHUNK_ROWS", 25)  # several batches while the stream is open
    out = tmp_path / "w.parquet"
    report = pe.export(store, "parquet", out, form_id="form_contact", since_last="nightly")
    assert report.rows == {"wide": 30}
    got = dict(zip(*[pq.read_table(out).column(c).to_pylist() for c in ("submission_id", "cv__archived")],
                   strict=True))
    assert got == {f"sub_{i:02}": [f"file:///kept/{i}", None] for i in range(30)}
    store.close()


# -- files inside a repeating group ---------------------------------------------------------------

CLAIMS_SEED = """
workspaces:
  - name: Pro Workspace
    plan: pro
    monthlyAllowance: 1000
    owner: {email: owner@pro.example.test, name: Pat Pro}
    forms:
      - name: Claims
        published: true
        blocks:
          - {type: text, key: claimant, title: Claimant}
          - {type: file, key: receipt, title: Receipt}
          - type: group
            key: items
            title: Items
            repeating: true
            members:
              - {type: text, key: item, title: Item}
              - {type: file, key: scan, title: Scan}
              - {type: signature, key: sig, title: Signature}
"""


async def test_files_inside_a_repeating_group_reach_every_output_by_instance_and_member(tmp_path: Path,
                                                                                        monkeypatch: Any):
    """A real archive run on a sandbox seeded with a form whose repeating group has file
    and signature members: the long table's ``archived`` beside each file list, a group
    member's by its instance, and the form's ``<group>__archived``, in the view, the
    Parquet, CSV and XLSX exports, the frames and the load."""
    import duckdb
    import openpyxl
    import pandas as pd
    import pyarrow.parquet as pq
    from sqlalchemy import text

    from pipelines import frames
    from pipelines.export import export
    from pipelines.export.load import load
    from tests.conftest import start_sandbox

    seed = tmp_path / "seed.yaml"
    seed.write_text(CLAIMS_SEED)
    server, sandbox = await start_sandbox(tmp_path / "sandbox", seed)
    try:
        store = Store(f"sqlite:///{tmp_path}/claims.db")
        store.migrate()
        h = sandbox.helpers
        a, b, c = [await h.files_create(f"{n}.pdf", f"%PDF {n}".encode(), "application/pdf") for n in "abc"]
        gone = {**b.model_dump(), "url": sandbox.base_url + "/api/storage/0000-missing", "name": "gone.pdf"}
        form = sandbox.pro.forms["Claims"]
        await h.submissions_create(form, {"claimant": "Ann", "receipt": [a.model_dump()], "items": [
            {"item": "desk", "scan": [b.model_dump(), gone]}, {"item": "chair", "sig": [c.model_dump()]}]})
        async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
            await sync_form(fc, store, form, full=True)
        report = await archive_files(store, sandbox.base_url, str(tmp_path / "archive"))
    finally:
        await sandbox.http.close()
        await server.stop()
    assert (report.files, report.archived, report.failed) == (4, 3, 1)
    assert [p.path for p in report.problems] == ["items[0].scan[1]"]
    at = {x: f"file://{tmp_path / 'archive'}/{hashlib.sha256(f'%PDF {x}'.encode()).hexdigest()}" for x in "abc"}
    want = {("receipt", None, None): [at["a"]], ("items", 0, "scan"): [at["b"], None],
            ("items", 1, "sig"): [at["c"]], ("items", 0, "item"): None, ("items", 1, "item"): None,
            ("claimant", None, None): None}

    def placed(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], Any]:
        return {(r["field_key"], None if pd.isna(r["instance"]) else int(r["instance"]), r["member_key"] or None):
                r["archived"] for r in rows}

    export(store, "parquet", tmp_path / "l.parquet", table="long")
    assert placed(pq.read_table(tmp_path / "l.parquet").to_pylist()) == want
    long = frames.long(store)
    assert placed(long.astype(object).where(long.notna(), None).to_dict("records")) == want
    export(store, "csv", tmp_path / "l.csv", table="long")
    cells = pd.read_csv(tmp_path / "l.csv", dtype=str, keep_default_na=False).to_dict("records")
    assert placed([{**r, "member_key": r["member_key"] or None, "instance": r["instance"] or None,
                    "archived": json.loads(r["archived"]) if r["archived"] else None} for r in cells]) == want
    export(store, "xlsx", tmp_path / "l.xlsx", table="long")
    sheet = list(openpyxl.load_workbook(tmp_path / "l.xlsx").active.values)
    rows = [dict(zip(sheet[0], r, strict=True)) for r in sheet[1:]]
    assert placed([{**r, "archived": json.loads(r["archived"]) if r["archived"] else None} for r in rows]) == want

    # the form's table: <group>__archived, per instance an object of its file members' locations
    grouped = [{"scan": [at["b"], None], "sig": None}, {"scan": None, "sig": [at["c"]]}]
    schema = store.schema(form)
    assert [c.name for c in schema.columns if c.field_key == "items"] == ["items", "items__archived"]
    assert frames.wide(store, form=form)["items__archived"].tolist() == [grouped]
    export(store, "parquet", tmp_path / "w.parquet", form_id=form)
    assert pq.read_table(tmp_path / "w.parquet").column("items__archived").to_pylist() == [grouped]
    export(store, "csv", tmp_path / "w.csv", form_id=form)
    assert json.loads(pd.read_csv(tmp_path / "w.csv")["items__archived"][0]) == [{"scan": [at["b"], None]},
                                                                                {"sig": [at["c"]]}]
    with store.database.engine.connect() as conn:
        cell = conn.execute(text(f'SELECT items__archived FROM "{schema.name}"')).scalar_one()
    assert json.loads(cell) == grouped

    monkeypatch.chdir(tmp_path)
    load(store)
    with duckdb.connect(str(tmp_path / "formsync.duckdb"), read_only=True) as con:
        loaded = con.sql("SELECT field_key, instance, member_key, archived FROM formsync_data.answers").fetchall()
        wide = con.sql(f"SELECT items__archived FROM formsync_data.{schema.name}").fetchone()
    assert {(k, i, m): None if v is None else json.loads(v) for k, i, m, v in loaded} == want
    assert wide is not None and json.loads(wide[0]) == [{"scan": [at["b"], None]}, {"sig": [at["c"]]}]
    store.close()


async def test_a_killed_run_records_what_it_archived_and_the_next_fetches_only_the_rest(sandbox: Sandbox,
                                                                                      tmp_path: Path):
    """A real ``formsync files`` process killed (SIGKILL) once it has archived a few files:
    each file was recorded as it completed, so the next run fetches only the others."""
    import os
    import signal
    import sys

    db = f"sqlite:///{tmp_path}/killed.db"
    store = Store(db)
    store.migrate()
    made = [await sandbox.helpers.files_create(f"f{i}.pdf", b"%%PDF-1.4 %d " % i * 10_000, "application/pdf")
            for i in range(40)]
    await _stored(sandbox, store, [{"attachment": [m.model_dump() for m in made[i:i + 10]]} for i in range(0, 40, 10)])
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\n[store]\nurl = "{db}"\n')
    out = tmp_path / "archive"
    run = await asyncio.create_subprocess_exec(sys.executable, "-m", "pipelines.cli", "files", "--config", str(cfg),
                                               "--to", str(out), "--concurrency", "1", "--quiet",
                                               stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                                               env={**os.environ, "COLUMNS": "200"})
    deadline = asyncio.get_running_loop().time() + 60
    for _ in iter(lambda: store.archive.count() >= 3 or run.returncode is not None
                  or asyncio.get_running_loop().time() > deadline, True):
        await asyncio.sleep(0.005)  # the sandbox serves the run from this loop meanwhile
    assert run.returncode is None, "the run was still archiving when it was killed"
    run.send_signal(signal.SIGKILL)
    assert await asyncio.wait_for(run.wait(), 10) == -signal.SIGKILL
    recorded = store.archive.count()
    assert 3 <= recorded < 40
    kept = {p.name for p in out.iterdir() if p.name != PARTIAL}
    assert len(kept) - recorded <= 1, "at most the file of the interrupted commit is unrecorded"

    again = await archive_files(store, sandbox.base_url, str(out))
    assert (again.files, again.already, again.archived, again.failed) == (40, recorded, 40 - recorded, 0)
    store.close()
