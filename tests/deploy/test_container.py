"""The image the Containerfile builds and the services compose.yaml declares, on this
machine's podman (tests/deploy/podman.py: a storage root of the test's own, a bookworm base
made with mmdebstrap). The image's entrypoint is formsync, run as uid 10001; ``formsync demo``
runs in it; compose.yaml's migrate, receiver and scheduler services run as written there,
against this machine's PostgreSQL (host networking, the secrets mounted where compose mounts
them): the migration once, the receiver under gunicorn answering /healthz, /readyz and its
own health check, storing a signed delivery, every process as uid 10001; the store's key on
the volume with mode 0600; the scheduler leading, then stopping cleanly on SIGTERM.

Where no container can run here, the run tests are skipped with podman's own words, and the
build and the image's configuration are still checked."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

from connector.store import Store
from connector.store._tables import RawEvent
from tests.connector.test_receiver import CB_SECRET, encode, envelope, rows, signed
from tests.deploy import podman as harness
from tests.deploy.podman import Podman
from tests.deploy.test_nginx import free_port

COMPOSE = yaml.safe_load((harness.ROOT / "compose.yaml").read_text())
IMAGE = COMPOSE["services"]["receiver"]["image"]
UID = "10001"
VOLUME = "formsync-data"
DB_PASSWORD = "never-shown-db-password"
CONFIG = COMPOSE["x-formsync"]["environment"]["FORMSYNC_CONFIG"]

_why = harness.available()
# CI must never pass by skipping: there a missing podman or mmdebstrap fails the tests.
pytestmark = [pytest.mark.slow,  # a base system, an image build, then containers: one to three minutes
              pytest.mark.skipif(_why is not None and not (os.environ.get("CI") or os.environ.get("FORMSYNC_CI")),
                                 reason=_why or "")]


@pytest.fixture(scope="module")
def podman() -> Iterator[Podman]:
    assert _why is None, _why
    built = harness.image_with_base(IMAGE)
    try:
        yield built
    finally:
        harness.remove(built)
        print(f"\ncontainer test steps (s): {built.timings}; podman's first refusal: {built.refused}")


@pytest.fixture
def runs(podman: Podman) -> Podman:
    """``podman``, once a container is seen to run here (else the test is skipped with why)."""
    if podman.run_error is not None:
        pytest.skip(f"podman run cannot work on this machine: {podman.run_error}")
    return podman


def test_the_image_runs_formsync_as_uid_10001(podman: Podman) -> None:
    config = json.loads(podman("image", "inspect", IMAGE).stdout)[0]["Config"]
    assert config["Entrypoint"] == ["formsync"] and config["Cmd"] == ["--help"]
    assert config["User"] == f"{UID}:{UID}" and config["WorkingDir"] == "/var/lib/formsync"
    if podman.run_error is not None:
        pytest.skip(f"the image is built and its entrypoint set; podman run cannot work here: {podman.run_error}")
    assert podman("run", "--rm", IMAGE, "--version").stdout.strip() == "formsync 0.1.0"
    ids = podman("run", "--rm", "--entrypoint", "id", IMAGE).stdout.split()
    assert ids[:2] == [f"uid={UID}(formsync)", f"gid={UID}(formsync)"], ids


def test_formsync_demo_runs_in_the_image(runs: Podman) -> None:
    done = runs("run", "--rm", "--network=host", "--entrypoint", "sh", IMAGE, "-c",
                "formsync demo --out /tmp/x --quiet > /dev/null && ls /tmp/x", timeout=300)
    assert {"responses.csv", "responses.parquet", "summary.json"} <= set(done.stdout.split()), done.stdout


@pytest.fixture
def deployment(runs: Podman, pg_database: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """compose.yaml's secrets written where it names them (a 0700 folder, files 0444, as
    docs/deploy.md says), its key volume made, and the receiver's port: a free one, as
    this test runs on the host's network."""
    port = free_port()
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    for name, declared in COMPOSE["secrets"].items():
        file = tmp_path / declared["file"]
        assert file.parent == secrets, f"{name}: compose.yaml keeps every secret under ./secrets"
    (secrets / "formsync.toml").write_text(
        f'[receiver]\nport = {port}\ncallback_secrets = ["{CB_SECRET}"]\n'
        '[[jobs]]\nid = "views"\nkind = "views"\ninterval_seconds = 3600\nrun_at_start = true\n')
    (secrets / "db_password").write_text(DB_PASSWORD + "\n")
    for file in secrets.iterdir():
        file.chmod(0o444)
    runs("volume", "create", VOLUME)
    yield {"port": port, "dir": tmp_path, "db": pg_database}
    runs("rm", "--all", "--force", "--time", "0", check=False)
    runs("volume", "rm", "--force", VOLUME, check=False)


def service(name: str, deployment: dict[str, Any], command: list[str] | None = None, *,
            detach: bool = False) -> list[str]:
    """``podman run`` for compose.yaml's service ``name`` as compose runs it, on the host's
    network: its environment (the store's URL pointed at this machine's PostgreSQL), its
    secrets mounted at /run/secrets, its volume, entrypoint and command (or ``command``)."""
    svc, db = COMPOSE["services"][name], make_url(deployment["db"])
    url = make_url(svc["environment"]["FORMSYNC_STORE__URL"]).set(
        host=db.host, port=db.port, username=db.username, database=db.database)
    env = {**svc["environment"], "FORMSYNC_STORE__URL": url.render_as_string(hide_password=False)}
    args = ["run", "--network=host", *(["--detach", "--name", f"formsync-{name}"] if detach else ["--rm"])]
    args += [a for k, v in env.items() for a in ("--env", f"{k}={v}")]
    args += [a for s in svc["secrets"] for a in
             ("--volume", f"{deployment['dir'] / COMPOSE['secrets'][s]['file']}:/run/secrets/{s}:ro")]
    args += [a for v in svc["volumes"] for a in ("--volume", v)]
    if "entrypoint" in svc:
        args += ["--entrypoint", json.dumps(svc["entrypoint"])]
    return [*args, svc["image"], *(command or svc.get("command") or [])]


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_ready(podman: Podman, base: str) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            if get(base + "/readyz")[0] == 200:
                return
        except (urllib.error.URLError, ConnectionError):
            pass
        state = podman("inspect", "--format", "{{.State.Status}}", "formsync-receiver").stdout.strip()
        assert state == "running", podman("logs", "formsync-receiver").stderr
        assert time.monotonic() < deadline, "the receiver was not ready within 90 s"
        time.sleep(0.5)


def test_compose_services_run_as_written(runs: Podman, deployment: dict[str, Any]) -> None:
    migrated = runs(*service("migrate", deployment), timeout=120)
    assert migrated.stdout.startswith("the database postgresql+psycopg://postgres:***@"), migrated.stdout
    assert DB_PASSWORD not in migrated.stdout + migrated.stderr
    runs(*service("receiver", deployment, detach=True))
    base = f"http://127.0.0.1:{deployment['port']}"
    wait_ready(runs, base)
    assert get(base + "/healthz") == (200, {"ok": True, "database": "up", "queued": 0})
    check = COMPOSE["services"]["receiver"]["healthcheck"]["test"]
    assert check[0] == "CMD-SHELL"
    runs("exec", "formsync-receiver", "sh", "-c", check[1].replace(":8788/", f":{deployment['port']}/"))
    body = encode(envelope("evt_container"))
    request = urllib.request.Request(base + "/formsync/events/callbacks", data=body, headers=signed(body))
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert (resp.status, json.loads(resp.read())["status"]) == (200, "stored")
    uids = runs("exec", "formsync-receiver", "sh", "-c", "grep -h ^Uid: /proc/[0-9]*/status").stdout
    assert {line.split()[1] for line in uids.splitlines()} == {UID}, uids  # gunicorn, its workers, their stores
    store = Store(deployment["db"])
    try:
        assert [e.id for e in rows(store, RawEvent)] == ["evt_container"]
    finally:
        store.close()


def test_the_key_lands_on_the_volume_closed_to_others_and_the_scheduler_leads_then_stops(
        runs: Podman, deployment: dict[str, Any]) -> None:
    runs(*service("migrate", deployment), timeout=120)
    runs(*service("scheduler", deployment, detach=True))
    # The key made by a command that needs it, in the environment the services share.
    runs(*service("migrate", deployment, ["key", "reset", "--forget-erasures", "--config", CONFIG]))
    key = COMPOSE["services"]["scheduler"]["environment"]["FORMSYNC_STORE__KEY_FILE"]
    shown = runs("run", "--rm", "--volume", f"{VOLUME}:/var/lib/formsync", "--entrypoint", "stat", IMAGE,
                 "--format", "%u %a %s", "/var/lib/formsync", key).stdout.splitlines()
    assert shown[0].split()[:2] == [UID, "700"] and shown[1] == f"{UID} 600 32", shown
    deadline = time.monotonic() + 60
    while "scheduler alive" not in (status := runs("exec", "formsync-scheduler", "formsync", "status", "--config",
                                                   CONFIG, check=False)).stdout:
        assert time.monotonic() < deadline, status.stdout + status.stderr
        time.sleep(1)
    runs("stop", "--time", "60", "formsync-scheduler", timeout=90)
    assert runs("inspect", "--format", "{{.State.ExitCode}}", "formsync-scheduler").stdout.strip() == "0"
