"""``formsync deploy systemd|nginx|grafana``: the units and the site written from the settings
(``pipelines.operate.deploy``), and the Grafana dashboard (``pipelines.operate.grafana``),
for the real install."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from .context import command
from .errors import UsageError


class Target(str, Enum):
    """What ``formsync deploy`` writes."""

    systemd = "systemd"
    nginx = "nginx"
    grafana = "grafana"


def deploy(
    target: Annotated[Target, typer.Argument(help="systemd: the units of formsync receive and formsync run; "
                                                  "nginx: the site in front of the receiver; "
                                                  "grafana: a dashboard of formsync's metrics.")],
    config: Annotated[Path, typer.Option(help="The TOML settings file the services run with (\\[receiver] port "
                                              "and path, \\[store], \\[deploy]); the units name it.")],
    out: Annotated[Path, typer.Option(help="The directory to write the files in (made if missing).")] = Path("."),
) -> None:
    """Write the systemd units or the nginx site for this installation: ports, addresses
    and paths from --config, the units running this formsync; or the Grafana dashboard
    (the same for every installation). Prints each file written.

    Example: [bold]formsync deploy systemd --config /etc/formsync/formsync.toml --out /etc/systemd/system[/bold]
    """
    with command(config) as ctx:
        from pipelines.operate.deploy import DeployError, hidden_paths, nginx_site, systemd_units
        from pipelines.operate.grafana import DASHBOARD, grafana_dashboard

        settings = ctx.settings()
        where = config.resolve()
        try:
            # This installation's console script, beside its interpreter (a venv's bin/).
            files = (systemd_units(settings, where, Path(sys.executable).parent / "formsync")
                     if target is Target.systemd
                     else {DASHBOARD: grafana_dashboard()} if target is Target.grafana
                     else {"formsync.conf": nginx_site(settings, where)})
        except DeployError as e:
            raise UsageError(e.message, where=f"{config}: {e.setting}" if e.setting != "--config" else "--config",
                             hint="change it in the settings file") from None
        if out.exists() and not out.is_dir():
            raise UsageError(f"{out} is a file", where="--out", hint="give a directory (made if missing)")
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
            typer.echo(str(out / name))
        if target is Target.systemd and (hidden := hidden_paths(settings, where)):
            said = ", ".join(f"{path} ({setting}; hidden by {hides})" for path, setting, hides in hidden)
            typer.echo(f"warning: the units cannot see {said}, which their sandboxing hides; move them, "
                       "e.g. under /etc/formsync and /var/lib/formsync", err=True)
        then = {Target.systemd: "systemctl daemon-reload && systemctl enable --now formsync-receive formsync-run",
                Target.nginx: "nginx -t && systemctl reload nginx",
                Target.grafana: "import it in Grafana (Dashboards, New, Import) or provision it"}[target]
        typer.echo(f"written for {config}; install them (see docs/deploy.md), then: {then}", err=True)
