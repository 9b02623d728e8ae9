"""The fork server (tests/forkserver.py) runs a command as a process of its own would:
the same exit code, stdout and stderr for each way a process ends, its own argv, working
directory, environment and stdin, and nothing of one run left for the next."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.forkserver import ForkServer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with ForkServer("tests.forkprobe:main", ["tests.forkprobe"], env, tmp_path_factory.mktemp("server")) as s:
        yield s


def _both(server: ForkServer, args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], ...]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PROBE_VAR": f"value for {args[0]}"}
    own = subprocess.run([sys.executable, "-m", "tests.forkprobe", *args], cwd=cwd, env=env, input="typed\n",
                         capture_output=True, text=True, timeout=60)
    forked = server.run([sys.executable, *args], cwd=cwd, env=env, input="typed\n", timeout=60)
    return own, forked


@pytest.mark.parametrize("args", [["exit", "0"], ["exit", "3"], ["message"], ["atexit"], ["thread"]],
                         ids=lambda a: "-".join(a))
def test_a_forked_run_ends_as_its_own_process(server: ForkServer, args: list[str], tmp_path: Path) -> None:
    own, forked = _both(server, args, tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (own.returncode, own.stdout, own.stderr)
    assert f"cwd {tmp_path}" in forked.stdout and "stdin 'typed\\n'" in forked.stdout
    assert f"var value for {args[0]}" in forked.stdout


def test_an_uncaught_exception_prints_its_traceback_and_ends_with_1(server: ForkServer, tmp_path: Path) -> None:
    own, forked = _both(server, ["raise"], tmp_path)
    assert forked.returncode == own.returncode == 1
    assert forked.stderr.startswith("to stderr\nTraceback")
    assert forked.stderr.splitlines()[-1] == own.stderr.splitlines()[-1] == "RuntimeError: boom"


def test_nothing_of_a_run_is_left_for_the_next(server: ForkServer, tmp_path: Path) -> None:
    first = server.run([sys.executable, "atexit"], cwd=tmp_path, env={**os.environ, "PROBE_VAR": "first"},
                       timeout=60)
    env = {k: v for k, v in os.environ.items() if k != "PROBE_VAR"}
    second = server.run([sys.executable, "exit", "0"], cwd=ROOT, env=env, timeout=60)
    assert "at exit" in first.stdout and "var first" in first.stdout
    assert second.stdout == f"argv ['exit', '0']\ncwd {ROOT}\nvar None\nstdin ''\n"


def test_a_run_past_its_timeout_is_killed(server: ForkServer, tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        server.run([sys.executable, "thread"], cwd=tmp_path, env=dict(os.environ), input="", timeout=0.05)
