"""A ``formsync sandbox`` in its own process on a free port, for the pipeline benchmarks
(outreach, poll, sync): started with a fresh data directory, its credentials read back,
its test helpers called through the typed helpers client, stopped with SIGTERM (SIGKILL
if it lingers)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from formservice.sandbox.client import SandboxHelpers

FORMSYNC = Path(sys.executable).with_name("formsync")
START_TIMEOUT = 60.0


class SandboxProcess:
    """``with SandboxProcess() as sb:`` runs the sandbox; ``sb.base_url``, ``sb.token(plan)``
    and ``sb.form(plan, name)`` come from its credentials file."""

    def __init__(self) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="formsync-bench-"))
        self.creds_path = self.work / "credentials.json"
        self.proc: subprocess.Popen[bytes] | None = None
        self.creds: dict[str, Any] = {}

    def __enter__(self) -> SandboxProcess:
        self.start()
        return self

    def start(self) -> None:
        """Start the process (seeding the data directory on the first start) and read
        its credentials."""
        self.creds_path.unlink(missing_ok=True)
        cmd = [str(FORMSYNC), "sandbox", "--port", "0", "--data-dir", str(self.work / "data"),
               "--credentials-file", str(self.creds_path)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"the sandbox exited with {self.proc.returncode}: {err[-2000:]}")
            try:
                self.creds = json.loads(self.creds_path.read_text())
                break
            except (FileNotFoundError, ValueError):  # not written yet, or half written
                time.sleep(0.1)
        else:
            self.__exit__(None, None, None)
            raise RuntimeError(f"the sandbox wrote no credentials within {START_TIMEOUT:.0f} s")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within 10 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        shutil.rmtree(self.work, ignore_errors=True)

    def invoke_many(self, method: str, params: list[dict[str, Any]], plan: str = "pro", *,
                    helper: bool = False) -> list[Any]:
        """Run ``method`` once per params object, in this process, on the stopped sandbox's
        data directory (a test helper such as ``submissions.create`` when ``helper``),
        through the service's own call path (validation, domain code, one
        transaction each) without HTTP or the rate limits: how a benchmark makes thousands
        of requests or submissions in seconds. The process must be stopped (``stop``)
        and is started again with ``start``."""
        from formservice.sandbox.helpers import HELPERS
        from formservice.service import Service

        if self.proc is not None:
            raise RuntimeError("stop the sandbox process before writing to its data directory")
        service = Service(self.work / "data", base_url=self.base_url)
        try:
            caller = service.authenticate(f"Bearer {self.token(plan)}", "127.0.0.1")
            if helper:
                return [service.invoke(caller, method, p, throttle=False, registry=HELPERS) for p in params]
            return [service.invoke(caller, method, p, throttle=False) for p in params]
        finally:
            service.engine.dispose()

    @property
    def base_url(self) -> str:
        return str(self.creds["baseUrl"])

    def workspace(self, plan: str) -> dict[str, Any]:
        return next(w for w in self.creds["workspaces"] if w["plan"] == plan)

    def token(self, plan: str = "pro") -> str:
        return str(self.workspace(plan)["token"])

    def form(self, name: str, plan: str = "pro") -> str:
        return str(self.workspace(plan)["forms"][name])

    def helpers(self, http: aiohttp.ClientSession, plan: str = "pro") -> SandboxHelpers:
        """The typed helpers client on ``http``, as the owner of the ``plan`` workspace."""
        return SandboxHelpers(self.base_url, self.token(plan), http=http)



def most_in_window(times_ms: list[int], window_ms: int) -> int:
    """The largest number of ``times_ms`` (ascending) in any window ``(t - window, t]``,
    as the service counts."""
    most, left = 0, 0
    for right, t in enumerate(times_ms):
        while times_ms[left] <= t - window_ms:
            left += 1
        most = max(most, right - left + 1)
    return most
