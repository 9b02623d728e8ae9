"""``formsync deploy`` as a user runs it: a settings file, no FORMSYNC_* variable."""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner, Result

from pipelines.cli import app


def deploy(tmp_path: Path, target: str, settings: str) -> tuple[Path, Result]:
    """The settings file written from ``settings`` and ``formsync deploy TARGET --out
    tmp_path/TARGET``'s result (checked to have ended with 0)."""
    cfg = tmp_path / "formsync.toml"
    cfg.write_text(settings)
    done = CliRunner().invoke(app, ["deploy", target, "--config", str(cfg), "--out", str(tmp_path / target)],
                              env={k: None for k in os.environ if k.startswith("FORMSYNC_")})
    assert done.exit_code == 0, done.output
    return cfg, done
