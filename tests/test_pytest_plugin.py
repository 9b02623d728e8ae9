"""The pytest plugin's fixtures, used as a user of formsync would use them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


async def test_client_fixture_talks_to_the_sandbox_fixture(formsync_client, formsync_sandbox):
    pro = formsync_sandbox.workspace("pro")
    fields = await formsync_client.list_fields(pro["forms"]["Contact"])
    assert fields.published and {f.key for f in fields.items} >= {"name", "email", "topic"}
    created = await formsync_client.create_request(pro["forms"]["Contact"], prefill={"name": "Ada"})
    record = await formsync_sandbox.helper("requests.complete", {"requestId": created.id,
                                                                 "answers": {"email": "ada@example.test"}})
    assert record["status"] == "completed"
    assert (await formsync_client.get_request(created.id)).answers["name"] == "Ada"


async def test_each_test_gets_a_fresh_sandbox(formsync_sandbox):
    mail = await formsync_sandbox.helper("mail.list")
    assert mail["items"] == []
    assert {w["plan"] for w in formsync_sandbox.credentials["workspaces"]} == {"free", "pro", "business"}


async def test_the_typed_helpers_drive_the_sandbox(formsync_client, formsync_sandbox):
    helpers = formsync_sandbox.helpers
    before = await helpers.clock_get()
    moved = await helpers.clock_advance(60_000)
    assert moved.now_ms >= before.now_ms + 60_000 and moved.offset_ms == before.offset_ms + 60_000
    form = formsync_sandbox.workspace("pro")["forms"]["Contact"]
    created = await formsync_client.create_request(form, recipient={"email": "grace@example.test"}, delivery="email")
    await helpers.deliveries_flush()  # does the due time-driven work first: the invitation goes out
    mail = await helpers.mail_list(request_id=created.id)
    assert [m.to for m in mail.items] == ["grace@example.test"] and mail.items[0].from_
    record = await helpers.requests_complete(created.id, {"name": "Grace", "email": "grace@example.test"})
    assert record.status == "completed" and record.submission_id and record.answers["name"] == "Grace"
    events = await helpers.events_list(request_id=created.id)
    assert "request.completed" in [e.type for e in events.items]
    assert (await helpers.deliveries_flush()).attempts == []  # no callback URL, no webhook: nothing to attempt
    assert (await helpers.reset()).reset is True
    assert (await helpers.mail_list()).items == []


async def test_a_refused_helper_says_what_was_wrong(formsync_sandbox):
    from formservice.sandbox.client import HelperError

    try:
        await formsync_sandbox.helpers.clock_advance(-1)
    except HelperError as err:
        assert (err.status, err.code, err.details.get("field")) == (400, "VALIDATION_ERROR", "ms")
    else:
        raise AssertionError("a negative advance was accepted")


# A user's project: its own test file and pytest settings, run by pytest in a subprocess
# with the plugin loaded from its entry point, in each of pytest-asyncio's modes.
USER_TEST = '''
import pytest


@pytest.mark.asyncio
async def test_marked(formsync_client, formsync_sandbox):
    fields = await formsync_client.list_fields(formsync_sandbox.workspace("pro")["forms"]["Contact"])
    assert fields.published
'''
UNMARKED_TEST = '''
async def test_unmarked(formsync_sandbox):
    assert (await formsync_sandbox.helper("mail.list"))["items"] == []
'''


def run_user_suite(tmp_path: Path, mode: str, tests: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pytest.ini").write_text(f"[pytest]\nasyncio_mode = {mode}\n"
                                         "asyncio_default_fixture_loop_scope = function\n")
    for name, text in tests.items():
        (tmp_path / name).write_text(text)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_the_fixtures_work_in_each_pytest_asyncio_mode(mode: str, tmp_path: Path) -> None:
    tests = {"test_marked.py": USER_TEST}
    if mode == "auto":
        tests["test_unmarked.py"] = UNMARKED_TEST
    done = run_user_suite(tmp_path, mode, tests)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(tests)} passed" in done.stdout, done.stdout


def test_the_guides_example_is_a_test_as_written(tmp_path: Path) -> None:
    guide = (Path(__file__).resolve().parent.parent / "docs" / "sandbox.md").read_text()
    section = guide[guide.index("## In your pytest suite"):]
    example = re.search(r"```python\n(.*?)```", section, re.S)
    config = re.search(r"```toml\n(.*?)```", section, re.S)
    assert example is not None and config is not None
    # The guide's own configuration, nothing more: any warning pytest-asyncio gives fails the run.
    (tmp_path / "pyproject.toml").write_text(config.group(1))
    (tmp_path / "test_guide.py").write_text(example.group(1))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr


def test_the_guides_snapshot_example_is_a_test_as_written(tmp_path: Path) -> None:
    guide = (Path(__file__).resolve().parent.parent / "docs" / "sandbox.md").read_text()
    section = guide[guide.index("### Snapshots in pytest"):]
    example = re.search(r"```python\n(.*?)```", section, re.S)
    assert example is not None and len(example.group(1).splitlines()) < 30
    done = run_user_suite(tmp_path, "strict", {"test_snapshots.py": example.group(1)})
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


DAY_MS = 24 * 3600 * 1000


@pytest.fixture(scope="session")
def formsync_snapshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This module's snapshot: a day on the clock, one submission and a token of its own."""
    import asyncio

    from formservice.sandbox.runner import SandboxServer

    folder = tmp_path_factory.mktemp("snapshots")

    async def build() -> None:
        async with SandboxServer(tmp_path_factory.mktemp("build"), snapshot_dir=folder) as sb:
            async with sb.helpers() as helpers:
                await helpers.clock_advance(DAY_MS)
                await helpers.submissions_create(sb.workspace("pro")["forms"]["Contact"],
                                                 {"name": "Snap", "email": "snap@example.test"})
                await helpers.snapshot_save("day-one")
                (folder / "token").write_text(sb.workspace("pro")["token"])

    asyncio.run(build())
    return folder


@pytest.mark.sandbox_snapshot("day-one")
@pytest.mark.parametrize("run", [1, 2])
async def test_the_marker_restores_the_snapshot_before_each_test(run, formsync_sandbox, formsync_client,
                                                                 formsync_snapshot_dir):
    assert formsync_sandbox.workspace("pro")["token"] == (formsync_snapshot_dir / "token").read_text()
    assert (await formsync_sandbox.helpers.clock_get()).offset_ms == DAY_MS, f"run {run} starts on day one"
    events = await formsync_sandbox.helpers.events_list(type="submission.completed")
    assert len(events.items) == 1, f"run {run} sees the snapshot's one submission, not the other run's"
    await formsync_sandbox.helpers.clock_advance(DAY_MS)
    await formsync_sandbox.helpers.submissions_create(formsync_sandbox.workspace("pro")["forms"]["Contact"],
                                                      {"name": "More", "email": "more@example.test"})
    assert (await formsync_client.list_fields(formsync_sandbox.workspace("pro")["forms"]["Contact"])).published


def test_the_marker_is_registered(pytestconfig: pytest.Config) -> None:
    assert any(line.startswith("sandbox_snapshot(name)") for line in pytestconfig.getini("markers"))
