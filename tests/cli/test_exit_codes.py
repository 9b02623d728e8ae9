"""Every ``formsync`` command ends the same way for the same mistake: the exit code of the
exit codes reference (docs site, from ``ExitCode``) and one line on stderr naming what is wrong and where,
with no traceback and no secret."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from connector.store import Store
from pipelines.cli import app
from pipelines.cli.errors import ExitCode, explain, scrub

FORMSYNC = Path(sys.executable).parent / "formsync"
TOKEN = "fb_NeverShown00000000000000000000"
PASSWORD = "hunter2-never-shown"
SECRET = "whsec_NeverShownEither0000000000"

# Each command with the arguments it needs besides --config: SHEET is replaced by a real sheet.
COMMANDS: dict[str, list[str]] = {
    "receive": ["receive", "--port", "0"],
    "poll": ["poll"],
    "sync": ["sync"],
    "export": ["export", "--format", "csv", "--out", "OUT/x.csv"],
    "outreach": ["outreach", "SHEET", "--form", "form_x"],
    "run": ["run"],
    "status": ["status"],
    "views": ["views"],
    "migrate": ["migrate"],
}
SERVICE_COMMANDS = ("poll", "sync", "outreach", "run")


def write_config(tmp_path: Path, store_url: str, *, token: bool = True) -> Path:
    cfg = tmp_path / "formsync.toml"
    service = f'[service]\ntoken = "{TOKEN}"\n' if token else ""
    cfg.write_text(f'{service}[store]\nurl = "{store_url}"\n[receiver]\ncallback_secrets = ["{SECRET}"]\n'
                   '[[jobs]]\nid = "p"\nkind = "poll"\ninterval_seconds = 5\n')
    return cfg


def invoke(command: str, cfg: Path, tmp_path: Path) -> Result:
    sheet = tmp_path / "contacts.csv"
    sheet.write_text("email\nada@example.com\n")
    args = [a.replace("SHEET", str(sheet)).replace("OUT", str(tmp_path)) for a in COMMANDS[command]]
    return CliRunner().invoke(app, [*args, "--config", str(cfg)], env={"COLUMNS": "400"})


def one_error_line(res: Result, *, secrets: tuple[str, ...] = (TOKEN, PASSWORD, SECRET)) -> str:
    """The single line the command wrote on stderr, checked to hold no traceback or secret."""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    for secret in secrets:
        assert secret not in res.output, res.output
    return lines[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unusable_database_url_is_a_usage_error_with_the_password_hidden(command: str, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, f"oracle://root:{PASSWORD}@127.0.0.1/test")
    res = invoke(command, cfg, tmp_path)
    assert res.exit_code == ExitCode.USAGE == 2, res.output
    line = one_error_line(res)
    assert f"{cfg}: store.url:" in line and "oracle://root:***@127.0.0.1/test" in line
    assert "use sqlite:///path.db, postgresql+psycopg://user@host/db or mysql+pymysql://user@host/db" in line


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unparsable_database_url_is_a_usage_error(command: str, tmp_path: Path) -> None:
    res = invoke(command, write_config(tmp_path, "not a url"), tmp_path)
    assert res.exit_code == 2, res.output
    assert "cannot use the database URL 'not a url'" in one_error_line(res)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unreachable_database_is_a_failure_with_the_password_hidden(command: str, tmp_path: Path) -> None:
    # Port 1 on loopback: nothing listens, the connection is refused at once.
    res = invoke(command, write_config(tmp_path, f"postgresql+psycopg://root:{PASSWORD}@127.0.0.1:1/test"), tmp_path)
    assert res.exit_code == ExitCode.FAILED == 1, res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Connection refused" in errors[0], res.stderr
    assert PASSWORD not in res.output and TOKEN not in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_missing_config_file_is_a_usage_error(command: str, tmp_path: Path) -> None:
    res = invoke(command, tmp_path / "nope.toml", tmp_path)
    assert res.exit_code == 2, res.output
    assert one_error_line(res) == (f"error: --config: config file {tmp_path / 'nope.toml'} does not exist; "
                                   f"give the path of a TOML settings file (see config/formsync.example.toml)")


@pytest.mark.parametrize("command", SERVICE_COMMANDS)
def test_a_missing_token_is_a_usage_error_before_the_database_is_touched(command: str, tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    res = invoke(command, write_config(tmp_path, f"sqlite:///{db}", token=False), tmp_path)
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert "service.token is not set" in line, line
    if command != "run":  # run names the job that needs it instead
        assert line.endswith("service.token is not set; put it in the [service] section or in "
                             "FORMSYNC_SERVICE__TOKEN, or run `formsync login`"), line
    assert not db.exists()


def test_migrate_brings_the_schema_and_says_so_and_a_password_file_mistake_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    res = invoke("migrate", write_config(tmp_path, f"sqlite:///{db}"), tmp_path)
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"the database sqlite:///{db} has this release's schema (migration 0"), res.stdout
    assert "formsync_events" in Store(f"sqlite:///{db}").table_names()
    cfg = write_config(tmp_path, "postgresql+psycopg://root@127.0.0.1:1/test")
    res = CliRunner().invoke(app, ["migrate", "--config", str(cfg)],
                             env={"COLUMNS": "400", "FORMSYNC_STORE__PASSWORD_FILE": str(tmp_path / "nope")})
    assert res.exit_code == 2, res.output
    assert one_error_line(res) == (f"error: FORMSYNC_STORE__PASSWORD_FILE: cannot read {tmp_path / 'nope'} (No such "
                                   "file or directory); give the file that holds the database password, readable "
                                   "by the user formsync runs as")


def test_a_misspelled_secret_key_is_named_but_never_echoed(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[service]\ntokn = "{TOKEN}"\n')
    for command in ("receive", "poll", "sync", "status"):
        res = invoke(command, cfg, tmp_path)
        assert res.exit_code == 2, (command, res.output)
        assert "service.tokn" in one_error_line(res), command


@pytest.mark.parametrize(("args", "where"), [
    (["demo", "--out", "FILE"], "--out"),
    (["sandbox", "--port", "0", "--seed", "MISSING"], "--seed"),
    (["export", "--format", "csv", "--out", "OUT", "--since", "yesterday", "--config", "CFG"], "--since"),
    (["export", "--format", "json", "--out", "OUT", "--config", "CFG"], None),
])
def test_option_mistakes_are_one_line_and_exit_2(args: list[str], where: str | None, tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("keep")
    cfg = write_config(tmp_path, f"sqlite:///{tmp_path}/s.db")
    names: dict[str, Callable[[], str]] = {"FILE": lambda: str(tmp_path / "file.txt"),
                                          "MISSING": lambda: str(tmp_path / "nope.yaml"),
                                          "OUT": lambda: str(tmp_path / "x.out"), "CFG": lambda: str(cfg)}
    res = CliRunner().invoke(app, [names[a]() if a in names else a for a in args], env={"COLUMNS": "400"})
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert where is None or line.startswith(f"error: {where}: "), line


def test_the_mapping_gives_each_kind_of_failure_its_code() -> None:
    from connector.errors import TransportError
    from pipelines.cli.demo import DemoError, OutDirError
    from pipelines.operate.jobs import ConfigError

    assert explain(KeyboardInterrupt()).code == ExitCode.INTERRUPTED == 130
    assert explain(OutDirError("x")).code == 2 and explain(ConfigError("x")).code == 2
    assert explain(DemoError("x")).code == 1 and explain(TransportError("x")).code == 1
    assert explain(ConnectionRefusedError(111, "refused")).code == 1 and explain(ValueError("bad")).code == 2
    from connector.receiver._committer import StoreProcessError

    no_process = explain(StoreProcessError("the receiver's store process could not be started: no room"))
    assert no_process.code == 1 and not no_process.bug and "store_process = false" in (no_process.hint or "")
    unforeseen = explain(ZeroDivisionError("division by zero"))
    assert (unforeseen.code, unforeseen.message) == (1, "unexpected ZeroDivisionError: division by zero")


def test_scrub_hides_secrets_and_url_passwords() -> None:
    text = f"postgresql+psycopg://app:{PASSWORD}@db/x and token {TOKEN}"
    assert scrub(text, [TOKEN]) == "postgresql+psycopg://app:***@db/x and token ***"
    assert explain(RuntimeError("two\nlines")).line() == ("error: unexpected RuntimeError: two; this is a bug in "
                                                         "formsync; please report it with the traceback above")


async def test_ctrl_c_stops_a_one_shot_command_with_130(tmp_path: Path) -> None:
    """``formsync sync`` waiting on a service that never answers: SIGINT ends it with 130
    and one line, no traceback."""
    asked = asyncio.Event()

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.set()
        await reader.read()  # holds the request open until the client goes away
        writer.close()

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cfg = write_config(tmp_path, f"sqlite:///{tmp_path}/s.db")
    cfg.write_text(cfg.read_text().replace("[service]\n", f'[service]\nbase_url = "http://127.0.0.1:{port}"\n'))
    proc = await asyncio.create_subprocess_exec(str(FORMSYNC), "sync", "--config", str(cfg),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                env={**os.environ, "COLUMNS": "400"})
    try:
        await asyncio.wait_for(asked.wait(), 60)
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        server.close()
    assert proc.returncode == ExitCode.INTERRUPTED, err.decode()
    assert err.decode().strip() == "error: interrupted"
