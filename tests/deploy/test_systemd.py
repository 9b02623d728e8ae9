"""The systemd units shipped in config/systemd/ are valid units (systemd-analyze verify,
with ExecStart pointed at this installation), restart on failure, stop with SIGTERM, read
the secrets from an EnvironmentFile, and their command lines parse with the real CLI."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = sorted((ROOT / "config" / "systemd").glob("*.service"))
FORMSYNC = Path(sys.executable).parent / "formsync"
SHIPPED_BIN = "/opt/formsync/.venv/bin/formsync"


def service_section(unit: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(strict=True, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read(unit)
    return parser["Service"]


def test_both_commands_have_a_unit() -> None:
    assert [u.name for u in UNITS] == ["formsync-receive.service", "formsync-run.service"]


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_unit_restarts_stops_on_sigterm_and_reads_an_environment_file(unit: Path) -> None:
    service = service_section(unit)
    assert service["Restart"] == "on-failure" and service["KillSignal"] == "SIGTERM"
    assert service["EnvironmentFile"].startswith("/etc/formsync/") and "TimeoutStopSec" in service
    command = shlex.split(service["ExecStart"])
    assert command[0] == SHIPPED_BIN and command[1] == unit.stem.removeprefix("formsync-")
    # The real CLI takes these options (--help is eager: an unknown option still fails).
    done = subprocess.run([str(FORMSYNC), *command[1:], "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_systemd_analyze_verifies_the_unit(unit: Path, tmp_path: Path) -> None:
    local = tmp_path / unit.name  # the same unit, run from this installation's formsync
    local.write_text(unit.read_text().replace(SHIPPED_BIN, str(FORMSYNC)))
    done = subprocess.run(["systemd-analyze", "verify", str(local)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
