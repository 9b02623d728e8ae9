"""Retention and deletions mirrored, on the sandbox: ``formsync purge`` applies each form's
retention read from the service on the service's clock; ``formsync sync --reconcile``
marks what the service no longer has (a trashed form) and un-marks it when restored; views
and exports leave marked rows out; every removal is in the deletion log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text
from typer.testing import CliRunner

from connector.client.rpc import FormClient
from connector.store import ExportFilter, Store
from connector.store._submissions import SubmissionTimes
from connector.store._tables import SubmissionRow
from pipelines.cli import app
from pipelines.lifecycle.purge import DAY_MS, Retention, past_retention
from pipelines.sync.reconcile import reconcile
from pipelines.sync.submissions import sync_form
from tests.conftest import Sandbox


async def _cli(*args: str) -> Any:
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "400"})


def _ids(store: Store) -> set[str]:
    with store.database.engine.connect() as conn:
        return set(conn.execute(select(SubmissionRow.id)).scalars())


def test_past_retention_mirrors_the_services_rule():
    now = 100 * DAY_MS
    rows = [SubmissionTimes("draft_old", False, None, now - 31 * DAY_MS, None),
            SubmissionTimes("draft_new", False, None, now - 29 * DAY_MS, None),
            SubmissionTimes("sub_old", True, now - 8 * DAY_MS, None, None),
            SubmissionTimes("sub_new", True, now - 6 * DAY_MS, None, None),
            SubmissionTimes("sub_unknown", True, None, None, None)]
    assert past_retention(Retention(30, 7), now, rows) == ["draft_old", "sub_old"]
    assert past_retention(Retention(30, None), now, rows) == ["draft_old"]
    assert past_retention(Retention(None, None, fixed_deletion_at=now), now, rows) == [
        "sub_new", "sub_old", "sub_unknown"]
    assert past_retention(Retention(None, 7, fixed_deletion_at=now), now, rows) == ["sub_old"]


def _purge_setup(sandbox: Sandbox, tmp_path: Path) -> tuple[Any, str, Path, Store]:
    """The business workspace, its Contact form, a config naming them and a migrated store."""
    db = f"sqlite:///{tmp_path}/purge.db"
    ws = sandbox.business
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{ws.token}"\n[store]\nurl = "{db}"\n')
    store = Store(db)
    store.migrate()
    return ws, ws.forms["Contact"], cfg, store


async def test_purge_applies_the_forms_retention_on_the_services_clock(sandbox: Sandbox, tmp_path: Path):
    ws, form, cfg, store = _purge_setup(sandbox, tmp_path)
    async with FormClient(sandbox.base_url, ws.token) as fc:
        await fc.update_form_settings(form, submissionRetentionDays=1, draftRetentionDays=1)
        await sync_form(fc, store, form, full=True, include_drafts=True)
        seeded = _ids(store)
        assert len(seeded) == 4  # three completed, one draft
        await sandbox.helpers_for("business").clock_advance(2 * DAY_MS)  # the service purges them
        fresh = await sandbox.helpers_for("business").submissions_create(
            form, {"name": "Kept", "email": "kept@example.test", "topic": "sales"})
        await sync_form(fc, store, form, include_drafts=True)
    assert _ids(store) == seeded | {fresh.id}, "the store still holds what the service purged"

    res = await _cli("purge", "--config", str(cfg), "--dry-run")
    assert res.exit_code == 0, res.output
    assert "would remove 4 submissions past their retention (1 forms read, 1 calls)" in res.output
    assert len(_ids(store)) == 5
    res = await _cli("purge", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["forms"][0]["submission_days"] == 1 and report["forms"][0]["submissions"] == 4
    assert _ids(store) == {fresh.id}
    assert {(d.item_id, d.reason) for d in store.deletions.since(0)} == {(s, "purge") for s in seeded}

    # Never without the retention read in the same run: a form the service refuses stops it.
    res = await _cli("purge", "--config", str(cfg), "--form", "form_doesnotexist000000000")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert _ids(store) == {fresh.id}
    store.close()


async def test_purge_removes_the_request_answers_the_service_purged_on_its_clock(sandbox: Sandbox, tmp_path: Path):
    ws, form, cfg, store = _purge_setup(sandbox, tmp_path)
    helpers = sandbox.helpers_for("business")
    answers = {"name": "Old", "email": "old@example.test", "topic": "sales"}
    async with FormClient(sandbox.base_url, ws.token) as fc:
        await fc.update_form_settings(form, submissionRetentionDays=1)
        old = await fc.create_request(form, recipient={"email": "old@example.test"})
        await helpers.requests_complete(old.id, answers)
        store.upsert_requests([await fc.get_request(old.id)])  # its answers, as requests.get reads them
        assert store.requests.answers([old.id])[old.id][0] == answers
        await helpers.clock_advance(2 * DAY_MS)  # the service purges the answers, and says when
        young = await fc.create_request(form, recipient={"email": "young@example.test"})
        await helpers.requests_complete(young.id, {**answers, "name": "Young"})
        # The retention is lifted afterwards: only dataPurgedAt says what the service purged.
        await fc.update_form_settings(form, submissionRetentionDays=None)
        store.upsert_requests([await fc.get_request(young.id)])

    def purged_at() -> Any:
        with store.database.engine.connect() as conn:
            return conn.execute(text("SELECT data_purged_at FROM formsync_requests WHERE id = :i"),
                                {"i": old.id}).scalar_one()

    assert purged_at() is None and store.requests.answers([old.id])[old.id][0] == answers, "not purged here yet"
    res = await _cli("purge", "--config", str(cfg), "--dry-run")
    assert res.exit_code == 0, res.output
    assert "would remove 1 submissions past their retention (1 forms read, 2 calls)" in res.output
    assert store.requests.answers([old.id])[old.id][0] == answers and purged_at() is None, "a dry run changes nothing"
    res = await _cli("purge", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert [(f["submissions"], f["request_answers"]) for f in report["forms"]] == [(1, 1)]
    assert isinstance(purged_at(), int), "the service's dataPurgedAt is kept"
    kept = store.requests.answers([old.id, young.id])
    assert kept[old.id] == (None, None) and kept[young.id][0]["name"] == "Young"
    assert [(d.kind, d.reason) for d in store.deletions.since(0)] == [("submission", "purge")]
    res = await _cli("purge", "--config", str(cfg))  # nothing left to purge
    assert json.loads(res.stdout.strip().splitlines()[-1])["forms"][0]["submissions"] == 0
    store.close()


async def test_reconcile_marks_a_trashed_forms_submissions_and_unmarks_them_when_restored(sandbox: Sandbox,
                                                                                           store: Store,
                                                                                           tmp_path: Path):
    form = sandbox.pro.forms["Contact"]
    async with FormClient(sandbox.base_url, sandbox.pro.token) as fc:
        await sync_form(fc, store, form, full=True, include_drafts=True)
        test_req = await fc.create_request(form, recipient={"email": "t@example.test"}, test=True)
        done = await sandbox.helpers.requests_complete(test_req.id, {"name": "Test", "email": "t@example.test",
                                                                     "topic": "sales"})
        store.upsert_requests([done])  # the completed record, as requests.get reads it
        stored = _ids(store)
        assert len(stored) == 5  # three completed, a draft, the test request's submission

        first = await reconcile(fc, store)
        assert [(f.gone, f.back) for f in first.forms] == [(0, 0)], "drafts and test submissions are no deletions"
        assert first.calls == 1 and "1 calls" in first.outcome()

        assert (await sandbox.rpc("forms.delete", {"formId": form})).status == 200
        trashed = await reconcile(fc, store)
        assert [(f.gone, f.form_missing) for f in trashed.forms] == [(3, True)]
        assert store.exports.count_submissions(ExportFilter(form_id=form)) == 2
        assert store.exports.count_submissions(ExportFilter(form_id=form, include_gone=True)) == 5
        assert {d.reason for d in store.deletions.since(0)} == {"reconciled"} and len(store.deletions.since(0)) == 3
        view = store.schema(form).name
        with store.database.engine.connect() as conn:
            assert conn.execute(text(f'SELECT COUNT(*) FROM "{view}"')).scalar_one() == 2
        await _gone_ones_only_when_asked(sandbox, store, form, tmp_path)

        assert (await sandbox.rpc("forms.restore", {"formId": form})).status == 200
        back = await reconcile(fc, store)
        assert [(f.gone, f.back) for f in back.forms] == [(0, 3)]
        assert store.exports.count_submissions(ExportFilter(form_id=form)) == 5
        assert _ids(store) == stored, "reconcile marks, never removes"


async def _gone_ones_only_when_asked(sandbox: Sandbox, store: Store, form: str, tmp_path: Path) -> None:
    """``formsync export --include-gone`` and the frames' ``include_gone`` read the marked rows too."""
    import pandas as pd

    from pipelines import frames

    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[service]\nbase_url = "{sandbox.base_url}"\ntoken = "{sandbox.pro.token}"\n'
                   f'[store]\nurl = "{store.url}"\n')
    for flags, rows in (([], 2), (["--include-gone"], 5)):
        out = tmp_path / f"wide{len(flags)}.csv"
        res = await _cli("export", "--config", str(cfg), "--form", form, "--out", str(out), *flags)
        assert res.exit_code == 0, res.output
        assert len(pd.read_csv(out)) == rows
        res = await _cli("export", "--config", str(cfg), "--form", form, "--table", "long", "--out",
                         str(tmp_path / "long.csv"), *flags)
        assert json.loads(res.stdout.strip().splitlines()[-1])["rows"]["long"] > 0
    assert len(frames.wide(store, form=form)) == 2
    assert len(frames.wide(store, form=form, include_gone=True)) == 5
    gone = set(frames.long(store, form=form, include_gone=True).submission_id) - set(
        frames.long(store, form=form).submission_id)
    assert len(gone) == 3
    await _each_row_says_whether_it_is_gone(store, form, gone, tmp_path)


async def _each_row_says_whether_it_is_gone(store: Store, form: str, gone: set[str], tmp_path: Path) -> None:
    """With gone rows asked for, the wide and long tables end with ``gone_at`` (aware UTC,
    when reconcile marked the row; null for the others); without, no such column."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines import frames
    from pipelines.export import export

    with store.database.engine.connect() as conn:
        marked = dict(conn.execute(select(SubmissionRow.id, SubmissionRow.gone_at)
                                   .where(SubmissionRow.gone_at.is_not(None))).all())  # type: ignore[union-attr]
    assert set(marked) == gone
    when = {sid: pd.Timestamp(ms, unit="ms", tz="UTC") for sid, ms in marked.items()}
    assert "gone_at" not in frames.wide(store, form=form) and "gone_at" not in frames.long(store, form=form)
    wide = frames.wide(store, form=form, include_gone=True)
    assert list(wide.columns)[-1] == "gone_at" and str(wide["gone_at"].dtype) == "datetime64[ms, UTC]"
    assert {r.submission_id: r.gone_at for r in wide.itertuples() if pd.notna(r.gone_at)} == when
    assert wide["gone_at"].isna().sum() == 2
    long = frames.long(store, form=form, include_gone=True)
    assert list(long.columns)[-2:] == ["archived", "gone_at"]
    assert all((r.gone_at == when[r.submission_id]) if r.submission_id in gone else pd.isna(r.gone_at)
               for r in long.itertuples())
    for table in ("wide", "long"):
        plain = export(store, "parquet", tmp_path / f"{table}-plain.parquet", table=table, form_id=form)
        report = export(store, "parquet", tmp_path / f"{table}.parquet", table=table, form_id=form, include_gone=True)
        assert report.columns[table] == [*plain.columns[table], "gone_at"]
        read = pq.read_table(tmp_path / f"{table}.parquet")
        assert read.schema.field("gone_at").type == pa.timestamp("ms", tz="UTC")
        export(store, "csv", tmp_path / f"{table}.csv", table=table, form_id=form, include_gone=True)
        cells = pd.read_csv(tmp_path / f"{table}.csv", dtype=str)
        times = {t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z" for t in when.values()}  # as every CSV time is
        assert set(cells["gone_at"].dropna()) == times
        assert set(cells.loc[cells["gone_at"].notna(), "submission_id"]) == gone


def test_the_purge_job_takes_forms_and_says_what_it_did():
    from pydantic import ValidationError

    from pipelines.jobs import PARAMS
    from pipelines.lifecycle.purge import FormPurge, PurgeReport
    from pipelines.operate.jobs import summarise

    assert PARAMS["purge"].model_validate({"form": ["form_1"]}).model_dump() == {"form": ["form_1"], "dry_run": False}
    with pytest.raises(ValidationError):  # an unknown key is refused
        PARAMS["purge"].model_validate({"days": 3})
    report = PurgeReport(dry_run=False, service_now=0, calls=2,
                         forms=[FormPurge(form_id="form_1", draft_days=30, submission_days=7, submissions=3)])
    assert summarise("purge", report) == "removed 3 submissions past their retention (1 forms read, 2 calls)"
