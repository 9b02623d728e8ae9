"""compose.yaml and the Containerfile, read as a container engine reads them: every command a
service names is a formsync command (or the receiver's gunicorn application), the receiver's
health check asks /readyz on the port it listens on, every secret is a file mounted under
/run/secrets and no environment value is one, the migrate service runs once before the
receiver and the scheduler, and the store's key lives on a named volume in the non-root
user's home. tests/deploy/test_container.py runs the services themselves."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from connector.config.settings import DeploySettings, ReceiverSettings, load_settings
from pipelines.cli import app

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
IMAGE = COMPOSE["x-formsync"]["image"]
FORMSYNC = sorted(name for name, svc in SERVICES.items() if svc.get("image") == IMAGE)
CONTAINERFILE = (ROOT / "Containerfile").read_text()
SECRET_SETTINGS = ("TOKEN", "SECRETS", "WEBHOOK_URL", "PASSWORD")  # FORMSYNC_* names a secret value goes in


def test_the_formsync_services_are_the_migration_the_receiver_and_the_scheduler() -> None:
    assert FORMSYNC == ["migrate", "receiver", "scheduler"]
    assert all(SERVICES[name].get("build") == "." for name in FORMSYNC)


@pytest.mark.parametrize("name", ["migrate", "scheduler"])
def test_each_command_is_a_formsync_command_with_the_settings_file_compose_mounts(name: str) -> None:
    svc = SERVICES[name]
    assert "entrypoint" not in svc, "the image's entrypoint, formsync"
    command = svc["command"]
    done = CliRunner().invoke(app, [command[0], "--help"])
    assert done.exit_code == 0, done.output
    assert command[command.index("--config") + 1] == svc["environment"]["FORMSYNC_CONFIG"] == "/run/secrets/formsync.toml"


def test_the_receiver_runs_the_gunicorn_application_the_deploy_guide_runs() -> None:
    svc = SERVICES["receiver"]
    assert svc["entrypoint"] == ["gunicorn"]
    command = svc["command"]
    conf = command[command.index("-c") + 1]
    assert conf == "python:connector.gunicorn_conf" and importlib.util.find_spec("connector.gunicorn_conf")
    module, _, attr = next(a for a in command if a.endswith(":receiver_app")).partition(":")
    assert callable(getattr(importlib.import_module(module), attr))
    assert int(command[command.index("--workers") + 1]) >= 2
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(dep.startswith("gunicorn") for dep in pyproject["project"]["dependencies"]), "in the image's venv"


def test_health_checks_ask_readyz_where_the_receiver_listens_and_the_database_is_checked() -> None:
    port = ReceiverSettings().port
    check = SERVICES["receiver"]["healthcheck"]["test"]
    assert check[0] == "CMD-SHELL" and f"'http://127.0.0.1:{port}/readyz'" in check[1]
    assert SERVICES["receiver"]["ports"] == [f"{port}:{port}"]
    assert SERVICES["receiver"]["environment"]["FORMSYNC_RECEIVER__HOST"] == "0.0.0.0"
    assert SERVICES["db"]["healthcheck"]["test"][0] == "CMD-SHELL"
    assert "pg_isready" in SERVICES["db"]["healthcheck"]["test"][1]


def test_the_migration_runs_once_and_first() -> None:
    migrate = SERVICES["migrate"]
    assert migrate["command"][0] == "migrate" and migrate["restart"] == "no"
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    for name in ("receiver", "scheduler"):
        assert SERVICES[name]["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
        assert SERVICES[name]["restart"] == "unless-stopped"


def test_secrets_are_files_under_run_secrets_and_no_environment_value_is_one() -> None:
    declared = COMPOSE["secrets"]
    assert all(set(s) == {"file"} and s["file"].startswith("./secrets/") for s in declared.values()), declared
    for name in FORMSYNC:
        svc = SERVICES[name]
        assert svc["secrets"] == ["formsync.toml", "db_password"]
        env = svc["environment"]
        assert not [k for k in env if not k.endswith("_FILE") and any(word in k for word in SECRET_SETTINGS)], env
        assert make_url(env["FORMSYNC_STORE__URL"]).password is None
        assert env["FORMSYNC_STORE__PASSWORD_FILE"] == "/run/secrets/db_password"
    db = SERVICES["db"]
    assert db["secrets"] == ["db_password"] and "POSTGRES_PASSWORD" not in db["environment"]
    assert db["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/db_password"
    assert make_url(SERVICES["migrate"]["environment"]["FORMSYNC_STORE__URL"]).username == \
        db["environment"]["POSTGRES_USER"]


def test_the_environment_names_settings_that_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "db_password").write_text("pw\n")
    (tmp_path / "formsync.toml").write_text("")
    for name in list(os.environ):
        if name.startswith("FORMSYNC_"):
            monkeypatch.delenv(name)
    env = SERVICES["receiver"]["environment"]
    for name, value in env.items():
        if name.startswith("FORMSYNC_") and name != "FORMSYNC_CONFIG":
            monkeypatch.setenv(name, value.replace("/run/secrets/", f"{tmp_path}/"))
    settings = load_settings(tmp_path / "formsync.toml")
    assert make_url(settings.store.url).password == "pw" and settings.receiver.host == "0.0.0.0"


def test_the_key_lives_on_a_named_volume_in_the_non_root_users_home() -> None:
    assert re.search(r"^USER 10001:10001$", CONTAINERFILE, re.M)
    home = re.findall(r"^WORKDIR (\S+)$", CONTAINERFILE, re.M)[-1]  # the final stage's
    assert re.search(rf"install -d -m 0700 -o formsync -g formsync {home}$", CONTAINERFILE, re.M)
    for name in FORMSYNC:
        svc = SERVICES[name]
        assert svc["volumes"] == [f"formsync-data:{home}"]
        assert Path(svc["environment"]["FORMSYNC_STORE__KEY_FILE"]).parent == Path(home)
    assert "formsync-data" in COMPOSE["volumes"]


def test_stops_leave_time_to_commit_and_to_finish_a_row() -> None:
    assert SERVICES["scheduler"]["stop_grace_period"] == f"{DeploySettings().stop_timeout_seconds + 30}s"
    assert int(SERVICES["receiver"]["stop_grace_period"].removesuffix("s")) > 30  # gunicorn's graceful timeout


def test_the_containerfile_builds_in_two_stages_from_a_base_argument() -> None:
    assert re.findall(r"^ARG (BASE|EXTRAS)=(.*)$", CONTAINERFILE, re.M) == [("BASE", "python:3.11-slim"),
                                                                             ("EXTRAS", "")]
    assert re.findall(r"^FROM (\S+)", CONTAINERFILE, re.M) == ["${BASE}", "${BASE}"]
    assert "COPY --from=builder /opt/formsync /opt/formsync" in CONTAINERFILE
    assert '".${EXTRAS:+[$EXTRAS]}"' in CONTAINERFILE, "EXTRAS=warehouse installs .[warehouse]"
    assert re.search(r'^ENTRYPOINT \["formsync"\]$', CONTAINERFILE, re.M)


def test_the_build_context_is_the_package_alone() -> None:
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"
    kept = [line[1:] for line in lines if line.startswith("!")]
    assert kept == ["pyproject.toml", "README.md", "connector", "pipelines", "formservice"]
    assert all((ROOT / path).exists() for path in kept)
    copied = re.findall(r"^COPY (?!--from)(.+?) \S+$", CONTAINERFILE, re.M)
    assert sorted(" ".join(copied).split()) == sorted(kept)
