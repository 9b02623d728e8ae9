"""Run a console script's entry point as a fresh process would, without paying for the
interpreter's start and the imports each time.

:class:`ForkServer` starts this file as a server process that imports the given modules
once and then, per request, forks a child that takes the request's argv, environment,
working directory and stdin, runs the entry point, and ends as the interpreter would end:
threads joined, ``atexit`` handlers run, streams flushed, the exit code ``SystemExit``
carried. The server runs nothing of the command itself, so no state of a run reaches the
next; the child replaces its streams, environment and directory before the command starts.
:meth:`ForkServer.run` answers as :func:`subprocess.run` with ``capture_output=True,
text=True`` does (:meth:`ForkServer.run_bytes` without ``text``). ``FORMSYNC_TESTS_SUBPROCESS=1``
tells the tests using it to run each command as a process of its own instead.

The server reads one JSON request a line on its stdin and answers one JSON line on stdout.
"""

from __future__ import annotations

import atexit
import importlib
import io
import json
import locale
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# What formsync's commands import when they run, for the fork server to import once: the
# CLI, the settings, the store and the client, and what the commands use of them. Not what
# starts a thread when imported (numpy's OpenBLAS pool, pyarrow's jemalloc: pandas, openpyxl,
# the exports' writers, the load), which the fork server refuses.
SUBPROCESS_ENV = "FORMSYNC_TESTS_SUBPROCESS"
FORMSYNC_ENTRY = "pipelines.cli:main"
FORMSYNC_MODULES = (
    "pipelines.cli", "pipelines.jobs.env", "connector.store", "connector.client", "pipelines.export.nightly",
    "pipelines.export.views", "pipelines.lifecycle.archive.download", "pipelines.rules.names",
    "pipelines.outreach.run", "pipelines.outreach.sheet", "pipelines.sync.poll", "pipelines.operate.jobs",
    "connector.receiver.app", "alembic", "apscheduler")
_PIPE_CAPACITY = 65536  # stdin is written before the child is waited for: more could block both


def forking() -> bool:
    """Whether the tests run formsync's commands in a fork server (the default) rather than
    as processes of their own (``FORMSYNC_TESTS_SUBPROCESS=1``)."""
    return os.environ.get(SUBPROCESS_ENV) != "1"


@contextmanager
def formsync_forks(env: dict[str, str], cwd: Path) -> Iterator[ForkServer | None]:
    """A fork server holding formsync's modules (started with ``env`` in ``cwd``), or None
    when the tests run every command as a process of its own."""
    if not forking():
        yield None
        return
    with ForkServer(FORMSYNC_ENTRY, FORMSYNC_MODULES, env, cwd) as server:
        yield server


def _decode(data: bytes) -> str:
    """``data`` as :func:`subprocess.run` with ``text=True`` returns it."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


class ForkServer:
    """A server process holding ``modules`` imported, forking one child per :meth:`run`
    that runs ``entry`` (``module:function``) with ``sys.argv`` set to the request's argv."""

    def __init__(self, entry: str, modules: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        # Started as a script file: sys.path[0] is then this directory, never a case's
        # working directory, and the server sets it to the console script's as it would be.
        self._proc = subprocess.Popen(
            [sys.executable, __file__, entry, *modules], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=env, cwd=cwd)
        self._send({"ping": True})
        ready = self._receive(120)
        if not ready.get("ready"):
            raise RuntimeError(f"the fork server did not start: {ready}")

    def run(self, argv: Sequence[str], *, cwd: Path, env: dict[str, str], input: str = "",
            timeout: float) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` (argv[0] is the console script) in a forked child; the outcome as
        :func:`subprocess.run` gives it, :class:`subprocess.TimeoutExpired` past ``timeout``."""
        done = self.run_bytes(argv, cwd=cwd, env=env, input=input.encode(locale.getpreferredencoding(False)),
                              timeout=timeout)
        return subprocess.CompletedProcess(done.args, done.returncode, _decode(done.stdout), _decode(done.stderr))

    def run_bytes(self, argv: Sequence[str], *, cwd: Path, env: dict[str, str], input: bytes = b"",
                  timeout: float) -> subprocess.CompletedProcess[bytes]:
        """:meth:`run` with stdin, stdout and stderr as bytes (``subprocess.run`` without ``text``)."""
        stdin = input
        if len(stdin) >= _PIPE_CAPACITY:
            raise ValueError("stdin too long for the fork server's pipe")
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            self._send({"argv": list(argv), "cwd": str(cwd), "env": env, "stdin": stdin.decode("latin-1"),
                        "stdout": str(out), "stderr": str(err), "timeout": timeout})
            reply = self._receive(timeout + 60)
            if "error" in reply:
                raise RuntimeError(f"the fork server could not run {argv}: {reply['error']}")
            stdout, stderr = out.read_bytes(), err.read_bytes()
        if reply.get("timed_out"):
            raise subprocess.TimeoutExpired(list(argv), timeout, stdout, stderr)
        return subprocess.CompletedProcess(list(argv), reply["returncode"], stdout, stderr)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """End the server (its children have all been waited for)."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def _send(self, request: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        self._proc.stdin.flush()

    def _receive(self, timeout: float) -> dict[str, Any]:
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        line = self._proc.stdout.readline() if ready else b""
        if not line:
            raise RuntimeError(f"no answer from the fork server (exit code {self._proc.poll()})")
        reply: dict[str, Any] = json.loads(line)
        return reply


# --- the server side: everything below runs in the server process or its children ---


_replaced: list[Any] = []


def _text_stream(fd: int, mode: str, like: Any) -> io.TextIOWrapper:
    """A new text stream on ``fd`` set up as the interpreter sets up a non-terminal one."""
    raw = io.FileIO(fd, mode, closefd=False)
    buffered: Any = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors, line_buffering=like.line_buffering,
                            write_through=like.write_through)


def _exit_code(exc: SystemExit) -> int:
    """The process exit code the interpreter makes of ``exc``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _finish(code: int) -> int:
    """What the interpreter does at exit: join threads, run atexit, flush the streams."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except Exception:
        return 120  # the interpreter's code when stdout cannot be flushed at exit
    sys.stderr.flush()
    return code


def _child(request: dict[str, Any], stdin_fd: int, entry: Any) -> int:
    """Become the process the request describes, run ``entry`` and return its exit code."""
    out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, target in ((stdin_fd, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    _replaced.extend((sys.stdin, sys.stdout, sys.stderr))  # kept: none is collected while its fd is reused
    sys.stdin = sys.__stdin__ = _text_stream(0, "r", sys.stdin)
    sys.stdout = sys.__stdout__ = _text_stream(1, "w", sys.stdout)
    sys.stderr = sys.__stderr__ = _text_stream(2, "w", sys.stderr)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    # The main module is the console script, as multiprocessing's spawn finds it from here.
    sys.modules["__main__"].__file__ = sys.argv[0]
    try:
        entry()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:
        traceback.print_exc()
        code = 1
    return _finish(code)


def _wait(pid: int, timeout: float) -> dict[str, Any]:
    """The child's exit code, or that it was killed past ``timeout``."""
    pidfd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return {"returncode": os.waitstatus_to_exitcode(status), "timed_out": not ready}


def _threads() -> int:
    """The server's threads, native ones too (a library's pool started by an import)."""
    return len(os.listdir("/proc/self/task"))


def _fork(request: dict[str, Any], entry: Any) -> dict[str, Any]:
    # Another thread's locks would be copied held into the child, its work half done.
    if _threads() != 1:
        return {"error": f"{_threads()} threads in the server: a preloaded module started one"}
    stdin_r, stdin_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(stdin_w)
            code = _child(request, stdin_r, entry)
        finally:
            os._exit(code)
    os.close(stdin_r)
    with open(stdin_w, "wb") as pipe:
        pipe.write(request["stdin"].encode("latin-1"))
    return _wait(pid, request["timeout"])


def _serve(entry_name: str, modules: Sequence[str]) -> None:
    # sys.path[0] as the console script has it (its own directory), not this file's.
    sys.path[0] = str(Path(sys.executable).parent)
    for name in modules:
        importlib.import_module(name)
    module, _, function = entry_name.partition(":")
    entry = getattr(importlib.import_module(module), function)
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    for line in requests:
        request = json.loads(line)
        reply = {"ready": True} if request.get("ping") else _fork(request, entry)
        replies.write(json.dumps(reply).encode() + b"\n")
        replies.flush()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2:])
