"""``formsync deploy``: the systemd units of ``formsync receive`` and ``formsync run``, and
the nginx site in front of the receiver, for one installation: ports, addresses and paths
from its settings (``[receiver]``, ``[store]``, ``[deploy]``). Pure: settings in, file texts
out (templates in ``pipelines/operate/templates``); each value either fits or is a
``DeployError`` naming its setting."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined
from sqlalchemy.engine import make_url

from connector.config.settings import Settings

UNITS = ("formsync-receive.service", "formsync-run.service")
SITE = "formsync.conf"
_PLAIN = re.compile(r"[A-Za-z0-9_./@:+=,-]+")  # nothing systemd or nginx would read as syntax
_NAMES = re.compile(r"[A-Za-z0-9.*_-]+( [A-Za-z0-9.*_-]+)*")
_LISTEN = re.compile(r"(\[[0-9A-Fa-f:.]+\]:|[A-Za-z0-9.-]+:)?[0-9]{1,5}")


class DeployError(ValueError):
    """A setting the units or the site cannot be written with: ``setting`` and why."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting, self.message = setting, message


@cache
def _templates() -> Environment:
    return Environment(loader=PackageLoader("pipelines.operate", "templates"), undefined=StrictUndefined,
                       keep_trailing_newline=True, autoescape=False)


def _path(value: Path, setting: str) -> str:
    """``value`` as systemd and nginx read a path: absolute, nothing to quote."""
    if not value.is_absolute():
        raise DeployError(setting, f"{value} is not an absolute path; systemd and nginx need one")
    if not _PLAIN.fullmatch(str(value)):
        raise DeployError(setting, f"{value} has a space or a quote, which the unit would read otherwise; "
                                   "use a path without one")
    return str(value)


def writable_paths(settings: Settings) -> list[str]:
    """What the units let the services write (``ProtectSystem=strict`` makes the rest
    read-only): the working directory, the SQLite database's directory, and the export
    and report directories when given as absolute paths."""
    paths = [_path(settings.deploy.working_dir, "deploy.working_dir")]
    url = make_url(settings.store.url)
    if url.get_backend_name() == "sqlite" and url.database and Path(url.database).is_absolute():
        paths.append(_path(Path(url.database).parent, "store.url"))
    for value, setting in ((settings.export.out_dir, "export.out_dir"),
                           (settings.outreach.report_dir, "outreach.report_dir")):
        if value.is_absolute():
            paths.append(_path(value, setting))
    return list(dict.fromkeys(paths))


def systemd_units(settings: Settings, config: Path, command: Path) -> dict[str, str]:
    """The two units (file name -> text), running ``command`` (the formsync executable,
    unless ``deploy.command`` names another) with ``--config config``."""
    d = settings.deploy
    values = {"config": _path(config, "--config"), "user": d.user, "group": d.group,
              "working_dir": _path(d.working_dir, "deploy.working_dir"),
              "environment_file": _path(d.environment_file, "deploy.environment_file"),
              "command": _path(d.command or command, "deploy.command"), "stop_timeout": d.stop_timeout_seconds,
              "writable": writable_paths(settings)}
    for name, setting in ((d.user, "deploy.user"), (d.group, "deploy.group")):
        if not re.fullmatch(r"[a-z_][a-z0-9_-]*", name):
            raise DeployError(setting, f"{name!r} is not a user or group name systemd takes")
    return {unit: _templates().get_template(unit + ".j2").render(values) for unit in UNITS}


# Where the units' sandboxing hides files: each unit gets an empty /tmp and /var/tmp of its
# own (PrivateTmp=yes), and no /home, /root or /run/user (ProtectHome=yes).
HIDDEN = (("/tmp", "PrivateTmp=yes"), ("/var/tmp", "PrivateTmp=yes"), ("/home", "ProtectHome=yes"),
          ("/root", "ProtectHome=yes"), ("/run/user", "ProtectHome=yes"))


def hidden_paths(settings: Settings, config: Path) -> list[tuple[str, str, str]]:
    """The files and directories the units need that their sandboxing hides, as
    ``(path, setting, what hides it)``: the settings file, the working directory, the
    SQLite database, the store's key, the TLS files, the environment file."""
    r, d = settings.receiver, settings.deploy
    needed: list[tuple[Path | None, str]] = [
        (config, "--config"), (d.working_dir, "deploy.working_dir"), (d.environment_file, "deploy.environment_file"),
        (settings.store.key_file, "store.key_file"), (r.tls_cert, "receiver.tls_cert"), (r.tls_key, "receiver.tls_key")]
    url = make_url(settings.store.url)
    if url.get_backend_name() == "sqlite" and url.database:
        needed.append((Path(url.database), "store.url"))
    found = []
    for path, setting in needed:
        if path is None or not path.is_absolute():
            continue
        for top, hides in HIDDEN:
            if path.is_relative_to(top):
                found.append((str(path), setting, hides))
                break
    return found


def upstream(settings: Settings) -> str:
    """Where nginx passes deliveries on: the receiver's address and port (loopback when it
    listens on every address)."""
    r = settings.receiver
    if r.port == 0:
        raise DeployError("receiver.port", "is 0 (a free port at each start); nginx needs a fixed one, e.g. 8788")
    if r.tls_cert is not None:
        raise DeployError("receiver.tls_cert", "is set: the receiver serves https itself; behind nginx, which ends "
                                               "TLS, leave receiver.tls_cert and tls_key unset")
    host = "127.0.0.1" if r.host in ("", "0.0.0.0") else "[::1]" if r.host == "::" else r.host
    return f"[{host}]:{r.port}" if ":" in host and not host.startswith("[") else f"{host}:{r.port}"


def nginx_site(settings: Settings, config: Path) -> str:
    """The nginx server block: TLS on ``deploy.listen`` for ``deploy.server_name``, the
    receiver's path passed on to it with the client's address and scheme."""
    d, r = settings.deploy, settings.receiver
    if not _NAMES.fullmatch(d.server_name):
        raise DeployError("deploy.server_name", f"{d.server_name!r} is not a host name (or names) nginx takes")
    for address in d.listen:
        if not _LISTEN.fullmatch(address):
            raise DeployError("deploy.listen", f"{address!r} is not a port or ADDRESS:PORT nginx listens on")
    live = Path("/etc/letsencrypt/live") / d.server_name.split()[0]
    return _templates().get_template(SITE + ".j2").render(
        config=_path(config, "--config"), listen=d.listen, server_name=d.server_name,
        tls_cert=_path(d.tls_cert or live / "fullchain.pem", "deploy.tls_cert"),
        tls_key=_path(d.tls_key or live / "privkey.pem", "deploy.tls_key"),
        max_body=r.max_body_bytes, client_max_body=f"{r.max_body_bytes // (1024 * 1024) + 1}m",
        path=_path(Path(r.path.rstrip("/") or "/"), "receiver.path"), upstream=upstream(settings))
