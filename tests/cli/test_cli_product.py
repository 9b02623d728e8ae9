"""What every command offers besides its work: --version, -h, help without placeholders
on flags, settings errors that point at the file's line or the variable, export's
defaults from [export], the note naming default settings, and a bug's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from connector.config.settings import Settings
from pipelines.cli import app
from pipelines.cli.config_errors import describe, find_line
from pipelines.cli.context import command

COMMANDS = ["sandbox", "receive", "poll", "sync", "export", "outreach", "demo", "run", "status", "deploy"]
ENV = {"COLUMNS": "100"}


def test_version() -> None:
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.startswith("formsync 0.")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_short_help_with_an_example_and_no_bool_placeholder(command: str) -> None:
    res = CliRunner().invoke(app, [command, "-h"], env={"COLUMNS": "80"}, prog_name="formsync")
    assert res.exit_code == 0, res.output
    assert f"Usage: formsync {command}" in res.output and "Example: formsync" in res.output
    assert "<bool>" not in res.output
    # Fits 80 columns with no word cut short by an ellipsis.
    assert "…" not in res.output and all(len(line) <= 80 for line in res.output.splitlines())


def test_the_command_list_gives_one_sentence_each() -> None:
    res = CliRunner().invoke(app, ["-h"], env={"COLUMNS": "200"})
    listed = [ln for ln in res.output.splitlines() if ln.strip("│ ").split(" ")[0] in COMMANDS]
    assert len(listed) == len(COMMANDS) and all(ln.rstrip(" │").endswith(".") for ln in listed), listed


def test_a_click_usage_error_is_one_line() -> None:
    res = CliRunner().invoke(app, ["sandbox", "--port", "99999"], env=ENV, prog_name="formsync")
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        "error: invalid value for '--port': Input should be less than or equal to 65535; "
        "see 'formsync sandbox -h'"]


def test_find_line_points_at_the_key_of_a_table_a_job_and_a_list() -> None:
    text = ('# c\n[service]\ntoken = "x"\n\n[store]\nurl = "y"\n[export]\nformats = ["json"]\n'
            '[[jobs]]\nid = "a"\n[[jobs]]\nid = "b"\ncron = "z"\n')
    assert find_line(text, ["store", "url"]) == 6
    assert find_line(text, ["export", "formats", 0]) == 8
    assert find_line(text, ["jobs", 1, "cron"]) == 13
    assert find_line(text, ["jobs", 1]) == 11
    assert find_line(text, ["service", "nothing"]) == 2  # a key not written: its table


def test_describe_names_the_variable_or_the_line_and_suggests_the_closest_key() -> None:
    with pytest.raises(ValidationError) as e:
        Settings(service={"tokn": "x"})  # type: ignore[arg-type]
    problem = describe(e.value, Settings, config="f.toml", text='[service]\ntokn = "x"\n', environ={})
    assert (problem.where, problem.message) == ("f.toml:2", "unknown setting 'service.tokn'; did you mean "
                                                             "'service.token'?")
    problem = describe(e.value, Settings, config=None, text=None, environ={"FORMSYNC_SERVICE__TOKN": "x"})
    assert problem.where == "FORMSYNC_SERVICE__TOKN"


def write_store_config(tmp_path: Path, extra: str = "") -> Path:
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/s.db"\n{extra}')
    return cfg


def test_export_without_out_writes_each_format_into_out_dir(tmp_path: Path) -> None:
    out_dir = tmp_path / "made" / "here"
    cfg = write_store_config(tmp_path, f'[export]\nout_dir = "{out_dir}"\nformats = ["csv", "parquet"]\n')
    res = CliRunner().invoke(app, ["export", "--table", "requests", "--config", str(cfg)], env=ENV)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out_dir.iterdir()) == ["requests.csv", "requests.parquet", "requests.schema.json"]
    assert len(res.stdout.strip().splitlines()) == 2  # one report per file
    assert "nothing to export" in res.stderr  # a new store holds nothing yet
    res = CliRunner().invoke(app, ["export", "--format", "xlsx", "--table", "all", "--config", str(cfg)], env=ENV)
    assert res.exit_code == 0 and (out_dir / "all.xlsx").is_file(), res.output


def test_export_takes_the_format_from_the_suffix_of_out(tmp_path: Path) -> None:
    cfg = write_store_config(tmp_path)
    res = CliRunner().invoke(app, ["export", "--out", str(tmp_path / "w.parquet"), "--config", str(cfg)], env=ENV)
    assert res.exit_code == 0 and '"format":"parquet"' in res.stdout, res.output


def test_without_config_a_command_names_the_defaults_it_uses_once(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["export", "--format", "csv", "--out", "x.csv"], env=ENV)
    assert res.exit_code == 0, res.output
    notes = [ln for ln in res.stderr.splitlines() if ln.startswith("note: no --config")]
    assert notes == ["note: no --config; using the default database sqlite:///formsync.db and service "
                     "http://127.0.0.1:8787"]
    res = CliRunner().invoke(app, ["export", "--format", "csv", "--out", "x.csv"],
                             env={**ENV, "FORMSYNC_STORE__URL": f"sqlite:///{tmp_path}/mine.db"})
    assert "note: no --config; using the default service http://127.0.0.1:8787" in res.stderr


def test_a_bug_prints_its_traceback_then_says_it_is_a_bug(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as ended, command():
        raise ZeroDivisionError("division by zero")
    assert ended.value.exit_code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "Traceback (most recent call last):" and "ZeroDivisionError" in err[-2]
    assert err[-1] == ("error: unexpected ZeroDivisionError: division by zero; this is a bug in formsync; "
                       "please report it with the traceback above")
