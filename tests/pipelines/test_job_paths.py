"""One path per job: every job kind run once by its ``formsync`` command and once as a
scheduled job (the scheduler's own run path, ``JobRuntime.execute``) on the same settings,
against two sandboxes seeded alike, step by step through a campaign's life. After each
step the two reports agree field by field, and at the end the two stores hold the same
rows; ids, times, durations and the two sides' folders are the only differences allowed."""

from __future__ import annotations

import asyncio
import csv
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from connector.config.settings import load_settings
from connector.store import Store
from pipelines.cli import app
from pipelines.operate.jobs import check_jobs
from pipelines.operate.scheduler import JobRuntime
from tests.conftest import Sandbox, start_sandbox

pytestmark = pytest.mark.slow

_ID = re.compile(r"\b[a-z]{2,5}_[A-Za-z0-9]{16,}\b")
_ISO = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
_VIEW = re.compile(r"^formsync_\w+_[0-9a-f]{6,8}$")  # a view's name ends in a hash of its form id
_TIME_KEY = re.compile(r"(^|_)(at|now|ms|seconds|duration)$")


def _same(value: Any, side: Path) -> Any:
    """``value`` with what may differ between the sides made equal: ids, times, folders."""
    if isinstance(value, dict):
        return {_same(k, side): "<time>" if _TIME_KEY.search(k) and v is not None else _same(v, side)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_same(v, side) for v in value]
    if isinstance(value, str) and _VIEW.match(value):
        return "<view>"
    if isinstance(value, str):
        return _ISO.sub("<time>", _ID.sub("<id>", value.replace(str(side), "<dir>")))
    return value


def _sheet(path: Path) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["externalId", "name", "email"])
        w.writerows([["a", "Ann", "ann@x.test"], ["b", "Bo", "bo@bounce.test"], ["c", "Cy", "cy@x.test"]])
    return path


def _config(side: Path, sandbox: Sandbox, steps: list[tuple[str, str, dict[str, Any], list[str]]]) -> Path:
    lines = [f'[store]\nurl = "sqlite:///{side}/store.db"\n[service]\nbase_url = "{sandbox.base_url}"\n'
             f'token = "{sandbox.pro.token}"\n[outreach]\nreport_dir = "{side}/reports"\n']
    for job_id, kind, params, _ in steps:
        shown = ", ".join(f"{k} = {json.dumps(v)}" for k, v in params.items())
        lines.append(f'[[jobs]]\nid = "{job_id}"\nkind = "{kind}"\ninterval_seconds = 86400\n'
                     f'params = {{ {shown} }}\n')
    path = side / "formsync.toml"
    path.write_text("\n".join(lines))
    return path


def _steps(side: Path, form: str) -> list[tuple[str, str, dict[str, Any], list[str]]]:
    """(job id, kind, [[jobs]] params, the command's arguments) of each step, on one side."""
    sheet = str(_sheet(side / "contacts.csv"))
    out, files = str(side / "wide.csv"), str(side / "files")
    return [
        ("spring", "outreach", {"sheet": sheet, "form": form}, ["outreach", sheet, "--form", form, "--job", "spring"]),
        ("poll", "poll", {"form": form}, ["poll", "--form", form]),
        ("sync", "sync", {"form": form}, ["sync", "--form", form]),
        ("views", "views", {}, ["views"]),
        ("export", "export", {"format": "csv", "out": out, "form": form},
         ["export", "--format", "csv", "--out", out, "--form", form]),
        ("load", "load", {"dataset": "forms"}, ["load", "--dataset", "forms"]),
        ("files", "files", {"to": files}, ["files", "--to", files]),
        ("remind", "remind", {"job": "spring"}, ["campaign", "remind", "spring", "--json"]),
        ("close", "close", {"job": "spring", "at": "2020-01-01T00:00:00Z"}, ["campaign", "close", "spring", "--json"]),
        ("purge", "purge", {"form": [form]}, ["purge", "--form", form]),
    ]


def _cli_reports(args: list[str], config: Path) -> list[Any]:
    result = CliRunner().invoke(app, [*args, "--config", str(config)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, (args, result.output)
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


async def _complete_first(sandbox: Sandbox, store: Store) -> None:
    """The first row's recipient answers, on this side's sandbox."""
    row = min(store.campaign.rows("spring"), key=lambda r: r.row_number)
    await sandbox.helpers.requests_complete(row.request_id or "")


def _rows(store: Store, path: Path) -> dict[str, Any]:
    """What the store holds: rows per table (the scheduler's own bookkeeping aside) and the
    campaign's funnel."""
    from pipelines.campaign import read_campaign

    with sqlite3.connect(path) as db:
        counts = {t: db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in sorted(store.table_names())
                  if t.startswith("formsync_") and t not in ("formsync_job_runs", "formsync_scheduler_beats")}
    return {"tables": counts, "funnel": _same(read_campaign(store, "spring").funnel.model_dump(mode="json"), path)}


async def test_each_kind_by_its_command_and_scheduled_gives_the_same_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sides = [tmp_path / "command", tmp_path / "scheduled"]
    started = [await start_sandbox(side / "sandbox") for side in sides]
    try:
        for _, sb in started:
            await sb.helpers.limits_set(calls_per_minute=10000, creates_per_minute=10000)
        form = {side: sb.pro.forms["Contact"] for side, (_, sb) in zip(sides, started, strict=True)}
        steps = {side: _steps(side, form[side]) for side in sides}
        configs = {side: _config(side, sb, steps[side]) for side, (_, sb) in zip(sides, started, strict=True)}
        settings = load_settings(configs[sides[1]])
        store = Store(settings.store.url)
        store.migrate()
        runtime = JobRuntime(settings, store, check_jobs(settings))
        command_store = Store(load_settings(configs[sides[0]]).store.url)
        for i, (job_id, kind, _, _) in enumerate(steps[sides[1]]):
            monkeypatch.chdir(sides[0])  # the load's DuckDB file is made in the working directory
            said = await asyncio.to_thread(_cli_reports, steps[sides[0]][i][3], configs[sides[0]])
            monkeypatch.chdir(sides[1])
            await runtime.execute(job_id)
            assert job_id in runtime.reports, f"the scheduled {kind} run failed: see the log above"
            scheduled = runtime.reports[job_id].model_dump(mode="json")
            scheduled_list = scheduled["files"] if kind == "export" else [scheduled]
            assert [_same(r, sides[0]) for r in said] == [_same(r, sides[1]) for r in scheduled_list], kind
            if kind == "outreach":
                for side, (_, sb) in zip(sides, started, strict=True):
                    await _complete_first(sb, command_store if side == sides[0] else store)
        assert _same(_rows(command_store, sides[0] / "store.db"), sides[0]) == _same(
            _rows(store, sides[1] / "store.db"), sides[1])
        command_store.close()
        store.close()
    finally:
        for server, sb in started:
            await sb.http.close()
            await server.stop()



@pytest.mark.parametrize(("kind", "params"), [
    ("poll", 'form = "form_nope"'), ("views", 'form = "form_nope"'),
    ("export", 'form = "form_nope", format = "csv", out = "{out}/w.csv"'),
    ("files", 'form = ["form_nope"], to = "{out}/files"'),
])
async def test_a_form_the_store_never_saw_is_refused_by_the_job_whoever_runs_it(
        tmp_path: Path, kind: str, params: str) -> None:
    """The command's ``--form`` line and the scheduled run's error are the job layer's one
    check, said before any service call or file."""
    from pipelines.jobs import PARAMS, JobEnv, TargetError, run_job
    from tests.pipelines.test_scheduler import runs

    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/store.db"\n[service]\ntoken = "fb_x"\n'
                   f'base_url = "http://127.0.0.1:9"\n[[jobs]]\nid = "j"\nkind = "{kind}"\ninterval_seconds = 60\n'
                   f'params = {{ {params.format(out=tmp_path)} }}\n')
    settings = load_settings(cfg)
    store = Store(settings.store.url)
    store.migrate()
    try:
        with pytest.raises(TargetError, match="the store holds nothing of form 'form_nope'") as refused:
            await run_job(kind, PARAMS[kind].model_validate(settings.jobs[0].params), JobEnv(settings, store))
        assert refused.value.where == "--form" and "formsync sync --form form_nope" in (refused.value.hint or "")
        runtime = JobRuntime(settings, store, check_jobs(settings))
        await runtime.execute("j")
        assert "j" not in runtime.reports
        assert [r.error for r in runs(store, "j")] == [f"TargetError: {refused.value}"]
        assert {p.name for p in tmp_path.iterdir()} <= {"formsync.toml", "store.db", "store.db-wal", "store.db-shm"}
    finally:
        store.close()


def test_a_command_export_chooses_its_files_once_and_writes_the_ones_it_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command checks the export's files before the store opens and hands them to the
    job: chosen once, and the files written are exactly those checked."""
    from pipelines.jobs import kinds

    chosen: list[list[tuple[str, Path]]] = []
    choose = kinds.export_targets

    def counted(*args: Any) -> Any:
        chosen.append(choose(*args))
        return chosen[-1]

    monkeypatch.setattr(kinds, "export_targets", counted)
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/store.db"\n'
                   f'[export]\nout_dir = "{tmp_path}/out"\nformats = ["csv", "parquet"]\n')
    reports = _cli_reports(["export", "--table", "requests"], cfg)
    assert len(chosen) == 1
    assert [(r["format"], Path(r["path"])) for r in reports] == chosen[0]
    assert chosen[0] == [("csv", tmp_path / "out/requests.csv"), ("parquet", tmp_path / "out/requests.parquet")]
    assert all(path.is_file() for _, path in chosen[0])
