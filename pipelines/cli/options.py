"""The ``--config`` option most ``formsync`` commands take, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

CONFIG_HELP = "TOML settings file (the example: config/formsync.example.toml); FORMSYNC_* variables win over it."

ConfigOption = Annotated[Path | None, typer.Option(help=CONFIG_HELP)]
