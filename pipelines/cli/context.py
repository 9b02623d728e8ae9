"""What every ``formsync`` command shares: the settings loaded once, the store opened and
migrated once, the service client, running a coroutine, and ending with the exit code
and message ``pipelines.cli.errors`` gives."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import typer
from pydantic import BaseModel

from .errors import UsageError, WorkFailed, explain, first_line, scrub

if TYPE_CHECKING:
    from connector.client.grant import GrantTokens
    from connector.client.rpc import FormClient
    from connector.config.settings import Settings
    from connector.store import Store
    from pipelines.export.write import Format
    from pipelines.jobs import Hooks, JobEnv, JobParams

T = TypeVar("T")
P = TypeVar("P", bound="JobParams")
log = logging.getLogger("formsync.cli")
_PASSWORD = re.compile(r"://[^/@\s:]*:([^@\s]+)@")
TOKEN_HINT = "put it in the [service] section or in FORMSYNC_SERVICE__TOKEN, or run `formsync login`"


class Context:
    """One command's settings, store and service client. Each is made on first use and
    at most once; ``close`` releases the store."""

    def __init__(self, config: Path | None) -> None:
        self.config = config
        self._settings: Settings | None = None
        self._store: Store | None = None
        self._urls: list[str] = []

    @property
    def where(self) -> str:
        """Where the settings come from, for messages."""
        return str(self.config) if self.config is not None else "settings"

    def settings(self) -> Settings:
        """The settings from ``--config`` and the FORMSYNC_* variables; a missing file, a
        file that is not TOML or a bad key or variable is a ``UsageError`` that never
        echoes a secret. Without ``--config``, says once which defaults it uses."""
        if self._settings is None:
            self._settings = load_checked(self.config)
            if self.config is None:
                note_defaults(self._settings)
        return self._settings

    def service_settings(self) -> Settings:
        """The settings, which must hold ``service.token`` or find a sign-in in the store
        (``formsync login``)."""
        settings = self.settings()
        if settings.service.token is None and not self.signed_in():
            raise UsageError("service.token is not set", where=self.where, hint=TOKEN_HINT)
        return settings

    def signed_in(self) -> bool:
        """Whether the store holds a sign-in to ``service.base_url`` (a SQLite file that
        does not exist yet holds none, and is not made to say so)."""
        from connector.store import Store
        from connector.store._grants import holds_grant

        try:
            probe = Store(self.settings().store.url)  # read only: the command's own store may not migrate
        except Exception:  # an unusable URL: said where the command opens its store
            return False
        try:
            row = probe.grants.get(self.settings().service.base_url.rstrip("/")) if probe.exists() else None
        finally:
            probe.close()
        return holds_grant(row)

    def key_file(self) -> Path:
        """The store's key file: ``store.key_file``, else beside the database or the settings."""
        from connector.config.keyfile import key_path

        return key_path(self.settings().store, self.config)

    def grant(self) -> GrantTokens | None:
        """The stored grant's token source, when ``service.token`` is not set and a sign-in is stored."""
        from connector.client.grant import stored_grant

        if self.settings().service.token is not None:
            return None  # the token wins; the store is not opened for it
        return stored_grant(self.store(), self.settings(), self.config)

    def store(self, url: str | None = None, *, migrate: bool = True, where: str | None = None) -> Store:
        """The store at ``url`` (default: ``store.url``), migrated unless ``migrate`` is
        false. A URL that cannot be used is a ``UsageError``; a database that cannot be
        reached or prepared is ``WorkFailed``."""
        if self._store is None:
            from connector.store import Store
            from connector.store._facade import url_problem

            if url is None:
                import os

                url = self.settings().store.url
                where = "FORMSYNC_STORE__URL" if "FORMSYNC_STORE__URL" in os.environ else f"{self.where}: store.url"
            self._urls.append(url)
            if (problem := url_problem(url)) is not None:
                raise UsageError(problem, where=where, hint="create the directory, or give another path in the URL")
            try:
                self._store = Store(url, key_file=self.key_file())
            except Exception as e:  # SQLAlchemy refuses an unusable URL with several exception types
                raise UsageError(_url_problem(url, first_line(e)), where=where) from None
            if migrate:
                from connector.config.keyfile import KeyFileError

                try:
                    self._store.migrate()
                except KeyFileError:  # the tombstones' key is needed to stamp them: said as itself
                    raise
                except Exception as e:  # SQLAlchemy and Alembic fail with many exception types
                    raise self.unwritable() or WorkFailed(f"cannot prepare the database {url!r}: {first_line(e)}",
                                                          where=where) from None
        return self._store

    def keyed_store(self) -> Store:
        """The store, once its key is checked (``Store.check_key``): what every command
        that brings data in, sends or erases opens, before its first write."""
        store = self.store()
        store.check_key()
        return store

    def unwritable(self) -> WorkFailed | None:
        """After a database failure: the store opened, when it cannot be written now (a
        full or read-only disk, its file locked by another process), said in words."""
        if self._store is None:
            return None
        try:
            problem = self._store.write_problem()
        except Exception:  # the failure being explained matters more than this one
            return None
        if problem is None:
            return None
        return WorkFailed(f"the database {self.store_url()} is {problem}",
                          hint="run again once that is cleared (space freed, the file system writable, the lock "
                               "released): nothing was lost")

    def store_url(self) -> str:
        """The URL of the store opened, its password hidden."""
        return scrub(self._urls[-1]) if self._urls else scrub(self.settings().store.url)

    def secrets(self) -> list[str]:
        """Every secret the settings hold, to keep them out of any message."""
        passwords = [m.group(1) for url in self._urls if (m := _PASSWORD.search(url))]
        if self._settings is None:
            return passwords
        s = self._settings
        found = [s.service.token] if s.service.token else []
        found += [*s.receiver.callback_secrets, *s.receiver.webhook_secrets]
        found += [s.notify.webhook_url] if s.notify.webhook_url else []
        return passwords + [x.get_secret_value() for x in found]

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` to its end."""
        return asyncio.run(work)

    def serve(self, work: Coroutine[Any, Any, None]) -> None:
        """Run a server until it stops; Ctrl-C is the normal way to stop it, not a failure."""
        with suppress(KeyboardInterrupt):
            asyncio.run(work)

    def with_client(self, work: Callable[[FormClient], Awaitable[T]], *, base_url: str | None = None,
                    **overrides: Any) -> T:
        """Run ``work`` with a service client made from the settings (``base_url`` instead of
        ``service.base_url`` when given, ``overrides`` on top, e.g. ``max_retries``); the
        settings must hold ``service.token``, or the store a sign-in."""
        from connector.client.grant import note_token_use
        from connector.client.rpc import FormClient

        service = self.service_settings().service
        if base_url is not None:
            service = service.model_copy(update={"base_url": base_url})
        source = self.grant()  # None with service.token
        if source is None and self._store is not None:  # a command with a store records the token's first use
            note_token_use(self._store, service)

        async def go() -> T:
            async with FormClient.from_settings(service, source, **overrides) as fc:
                return await work(fc)

        return self.run(go())

    def params(self, model: type[P], **flags: Any) -> P:
        """The job's params from the command's flags: a value the kind's model refuses is
        a ``UsageError`` naming the flag."""
        from pydantic import ValidationError

        try:
            return model.model_validate(flags)
        except ValidationError as e:
            err = e.errors()[0]
            name = str(err["loc"][0]) if err["loc"] else ""
            where = f"--{name.replace('_', '-')}" if name in flags else "the command"
            said = {"literal_error": "expected {expected}", "greater_than_equal": "expected {ge} or more",
                    "less_than_equal": "expected {le} or less"}.get(err["type"])
            if said is not None:  # what is accepted, and what was given
                raise UsageError(f"{said.format(**err.get('ctx', {}))}, got {err.get('input')!r}", where=where) from None
            raise UsageError(err["msg"].removeprefix("Value error, "), where=where) from None

    def job_env(self, hooks: Hooks | None = None, stop: asyncio.Event | None = None,
                targets: list[tuple[Format, Path]] | None = None) -> JobEnv:
        """What a job of this command runs with: the settings, the store, the token source
        (the stored grant when ``service.token`` is not set) and an export's files when
        already chosen."""
        from pipelines.jobs import Hooks, JobEnv

        return JobEnv(self.settings(), self.store(), tokens=self.grant(), stop=stop, hooks=hooks or Hooks(),
                      targets=targets)

    def job(self, kind: str, params: JobParams, hooks: Hooks | None = None) -> Any:
        """Run the job of ``kind`` (``pipelines.jobs``) with these params in ``job_env``; its report."""
        from pipelines.jobs import KEYED, run_job
        from pipelines.jobs.kinds import check_before_store

        targets = check_before_store(kind, params, self.settings())
        if kind in KEYED:
            self.keyed_store()  # before any write, the token's first use included
        return self.run(run_job(kind, params, self.job_env(hooks, targets=targets)))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def load_checked(config: Path | None) -> Settings:
    """``load_settings`` with every way it can fail as a ``UsageError``."""
    import os

    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from connector.config.settings import Settings, SettingsFileError, load_settings, read_toml

    from .config_errors import describe

    try:
        return load_settings(config)
    except FileNotFoundError as e:
        raise UsageError(str(e), where="--config", hint="give the path of a TOML settings file "
                         "(see config/formsync.example.toml)") from None
    except SettingsFileError as e:
        raise UsageError(e.reason, where=f"{e.path}:{e.line}:{e.column}" if e.column else
                         f"{e.path}:{e.line}" if e.line else str(e.path)) from None
    except SettingsError as e:  # a variable whose value is not the JSON its setting needs
        field = re.search(r'field "(\w+)"', str(e))
        var = _json_variable(field.group(1) if field else "", os.environ)
        table = var.endswith(("MAPPING", "CUSTOM"))
        example = ('{"E-mail": "email"}' if table else '["csv", "parquet"]' if var.endswith("FORMATS")
                   else '["whsec_..."]')
        raise UsageError(f"expected a JSON {'table' if table else 'list'}, got plain text", where=var,
                         hint=f"write it as JSON, e.g. {var}='{example}'") from None
    except ValidationError as e:
        text = None
        job_ids: list[Any] = []
        if config is not None:
            with suppress(Exception):  # the file was read once already; only line numbers are lost
                doc = read_toml(config)
                text = config.read_text(encoding="utf-8")
                job_ids = [j.get("id") if isinstance(j, dict) else None for j in doc.get("jobs", [])]
        problem = describe(e, Settings, config=str(config) if config else None, text=text,
                           environ=os.environ, job_ids=job_ids)
        raise UsageError(problem.message, where=problem.where) from None


def _json_variable(section: str, environ: Any) -> str:
    """The FORMSYNC_* variable under ``section`` whose value is not JSON (for a list or a
    table), or the section's own variable."""
    import json

    prefix = f"FORMSYNC_{section.upper()}"
    for name, value in sorted(environ.items()):
        if name == prefix or name.startswith(prefix + "__"):
            try:
                json.loads(value)
            except ValueError:
                if name.endswith(("SECRETS", "MAPPING", "FORMATS", "CUSTOM", "JOBS")) or name == prefix:
                    return name
    return prefix + "__*"


def note_defaults(settings: Settings) -> None:
    """One line on stderr naming the database and service a command without ``--config``
    uses, when either is the built-in default."""
    from connector.config.settings import ServiceSettings, StoreSettings

    parts = []
    if settings.store.url == StoreSettings().url:
        parts.append(f"database {settings.store.url}")
    if settings.service.base_url == ServiceSettings().base_url:
        parts.append(f"service {settings.service.base_url}")
    if parts:
        typer.echo(f"note: no --config; using the default {' and '.join(parts)}", err=True)


def _database_error(exc: BaseException) -> bool:
    """Whether the database raised ``exc`` (SQLAlchemy wraps every driver's errors)."""
    return any(cls.__module__.startswith("sqlalchemy.") for cls in type(exc).__mro__)


def _url_problem(url: str, detail: str) -> str:
    """Why ``url`` cannot be used, naming it once and saying which URLs work."""
    said = detail if url in detail else f"cannot use the database URL {url!r}: {detail}"
    return said if "sqlite:///" in said else f"{said}; use sqlite:///path.db, postgresql+psycopg://user@host/db or mysql+pymysql://user@host/db"


def print_report(report: BaseModel) -> None:
    """A pipeline's report as one line of JSON on stdout."""
    typer.echo(report.model_dump_json())


def configure_logging(level: int) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Alembic announces each plugin and migration step at INFO: noise around formsync's own lines.
    logging.getLogger("alembic").setLevel(max(level, logging.WARNING))


@contextmanager
def command(config: Path | None = None, *, log_level: int | None = None) -> Iterator[Context]:
    """The context a command runs in. Whatever escapes it ends the command with the exit
    code and one-line message ``explain`` gives (secrets hidden); Click's own usage errors
    and exits pass through."""
    if log_level is not None:
        configure_logging(log_level)
    ctx = Context(config)
    try:
        yield ctx
    except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, typer.Exit, typer.Abort,
            typer.exceptions.TyperException):
        raise
    except (Exception, KeyboardInterrupt) as e:
        failure = explain((ctx.unwritable() or e) if _database_error(e) else e)
        log.debug("formsync failed", exc_info=True)  # the traceback, for --verbose only
        if failure.bug:
            import traceback

            typer.echo(scrub("".join(traceback.format_exception(e)).rstrip(), ctx.secrets()), err=True)
        typer.echo(failure.line(ctx.secrets()), err=True)
        raise typer.Exit(int(failure.code)) from None
    finally:
        ctx.close()
