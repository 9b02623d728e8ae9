"""How a ``formsync`` command ends: the exit codes, and the one mapping from an exception
to its exit code and its one-line message.

Every command runs inside ``pipelines.cli.context.command``, which hands whatever escapes
the command to :func:`explain` and prints the line it returns on stderr. The table
``RULES`` below is the only place that decides which failure is the user's to fix (2) and
which is the work failing (1); docs/reference/exit-codes.md (made from ``ExitCode`` by
``pipelines.cli.reference``) documents the codes.
"""

from __future__ import annotations

import errno
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes of every ``formsync`` command."""

    DONE = 0
    FAILED = 1  # the work failed: the service refused, the database or network was unreachable
    USAGE = 2  # a usage or configuration error: fix the command line or the settings and run again
    REJECTED = 3  # outreach (files) ran, but rows (files) are in its report; the rest were sent (archived)
    ATTENTION = 4  # status: something needs attention (a failed job, a stopped scheduler, a stalled outreach)
    INTERRUPTED = 130  # Ctrl-C (SIGINT) stopped a one-shot command: 128 + 2, as shells report it
    TERMINATED = 143  # SIGTERM stopped a one-shot command: 128 + 15


class CommandError(Exception):
    """A failure a command explains itself: ``message`` says what is wrong, ``where`` names
    the option, file or setting at fault, ``hint`` says how to fix it."""

    code = ExitCode.FAILED

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.where, self.hint = message, where, hint


class UsageError(CommandError):
    """The command line or the settings are wrong; nothing was done."""

    code = ExitCode.USAGE


class WorkFailed(CommandError):
    """The command was right but its work failed (a database or the service)."""

    code = ExitCode.FAILED


@dataclass(frozen=True)
class Failure:
    """What a command prints (one line on stderr) and the code it exits with."""

    code: ExitCode
    message: str
    where: str | None = None
    hint: str | None = None
    bug: bool = False  # not foreseen: the traceback is printed above the line

    def line(self, secrets: Iterable[str] = (), *, label: str = "error") -> str:
        """``error: WHERE: MESSAGE; HINT`` on one line (``label`` instead of ``error`` for
        an outcome that is no failure, such as a dry run's), with every secret and any
        password in a URL replaced by ``***``."""
        text = "; ".join(p for p in (self.message, self.hint) if p)
        if self.where:
            text = f"{self.where}: {text}"
        return f"{label}: " + scrub(" ".join(text.split()), secrets)


@dataclass(frozen=True)
class Rule:
    """Exceptions of ``module``.``name`` (and its subclasses) end with ``code``; the message
    is the exception's first line after ``prefix``."""

    module: str
    name: str
    code: ExitCode
    prefix: str = ""
    where: str | None = None
    hint: str | None = None
    own_place: bool = False  # the exception's own ``where`` and ``hint`` attributes say where and how

    def matches(self, exc: BaseException) -> bool:
        # A class whose module was never imported cannot have raised: looking it up in
        # sys.modules keeps `formsync --help` from importing every library.
        cls = getattr(sys.modules.get(self.module), self.name, None)
        return isinstance(cls, type) and isinstance(exc, cls)


# First match wins: subclasses before their bases.
RULES: tuple[Rule, ...] = (
    Rule("pipelines.cli.demo", "OutDirError", ExitCode.USAGE, where="--out"),
    Rule("pipelines.cli.demo", "DemoError", ExitCode.FAILED, prefix="the demo stopped: "),
    Rule("pipelines.operate.jobs", "ConfigError", ExitCode.USAGE, where="--config"),
    # A job's files or inputs that cannot be chosen as asked: the exception names where and the fix.
    Rule("pipelines.jobs.kinds", "TargetError", ExitCode.USAGE, own_place=True),
    # A sheet that cannot be read, a form that takes no requests, columns that match nothing.
    Rule("pipelines.outreach.sheet", "SheetError", ExitCode.USAGE),
    Rule("pipelines.outreach.checks", "OutreachRefused", ExitCode.USAGE),
    Rule("connector.errors", "Unauthorized", ExitCode.FAILED,
         hint="check service.token (or FORMSYNC_SERVICE__TOKEN), or run `formsync login`"),
    Rule("connector.receiver.tls", "TlsSettingError", ExitCode.USAGE),
    Rule("connector.config.keyfile", "KeyFileError", ExitCode.USAGE),
    Rule("connector.client.grant", "GrantError", ExitCode.FAILED),
    Rule("pipelines.connect.login", "LoginRefused", ExitCode.FAILED),
    Rule("connector.client.oauth", "OAuthRefused", ExitCode.FAILED, prefix="the service refused the sign-in: ",
         hint="run `formsync login` again"),
    Rule("connector.client.oauth", "OAuthUnavailable", ExitCode.FAILED, prefix="cannot sign in: ",
         hint="check service.base_url and try again later; nothing was stored"),
    Rule("formservice.sandbox.client", "HelperError", ExitCode.FAILED, prefix="the sandbox refused: ",
         hint="check service.base_url names a running sandbox and the token or sign-in is its workspace's"),
    Rule("connector.errors", "DefaultServiceAbsent", ExitCode.USAGE, where="service.base_url"),
    Rule("connector.errors", "FormsyncError", ExitCode.FAILED),
    Rule("aiohttp", "ClientError", ExitCode.FAILED, prefix="cannot reach the service: "),
    Rule("connector.receiver._committer", "StoreProcessError", ExitCode.FAILED,
         hint="or store in a thread of the receiver: receiver.store_process = false "
              "(FORMSYNC_RECEIVER__STORE_PROCESS=false)"),
    Rule("sqlalchemy.exc", "SQLAlchemyError", ExitCode.FAILED, prefix="database: ",
         hint="check store.url and that the database is running"),
    Rule("builtins", "OSError", ExitCode.FAILED),
    # The pipelines refuse a bad argument (an export format, a receiver setting) with ValueError.
    Rule("builtins", "ValueError", ExitCode.USAGE),
    Rule("builtins", "KeyboardInterrupt", ExitCode.INTERRUPTED, prefix="interrupted"),
)


def explain(exc: BaseException) -> Failure:
    """The exit code and message for an exception that ended a command. One not foreseen
    is a bug: a failure (1) named by its type, whose traceback is worth reporting."""
    if isinstance(exc, CommandError):
        return Failure(exc.code, exc.message, exc.where, exc.hint)
    if isinstance(exc, OSError) and (said := _os_error(exc)) is not None:
        return said
    for rule in RULES:
        if rule.matches(exc):
            if rule.own_place:
                return Failure(rule.code, rule.prefix + first_line(exc), getattr(exc, "where", None),
                               getattr(exc, "hint", None))
            return Failure(rule.code, rule.prefix + first_line(exc), rule.where, rule.hint)
    return Failure(ExitCode.FAILED, f"unexpected {type(exc).__name__}: {first_line(exc)}",
                   hint="this is a bug in formsync; please report it with the traceback above", bug=True)


_BIND = re.compile(r"address \('?([^',]+)'?, (\d+)\)")


def bind_failure(exc: OSError, setting: str = "--port, or receiver.port") -> Failure | None:
    """A port that cannot be bound, in words naming ``setting`` (what chooses the port);
    None for any other ``OSError``."""
    if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES) and (m := _BIND.search(str(exc))):
        host, port = m.groups()
        why = {errno.EADDRINUSE: f"port {port} on {host} is in use",
               errno.EADDRNOTAVAIL: f"address {host} is not one of this machine's",
               errno.EACCES: f"port {port} needs administrator rights"}[exc.errno]
        return Failure(ExitCode.FAILED, f"cannot listen on {host}:{port}: {why}",
                       hint=f"choose another port ({setting}; 0 picks a free one)")
    return None


def _os_error(exc: OSError) -> Failure | None:
    """A port that cannot be bound, or a file that cannot be read or written, in words."""
    if (said := bind_failure(exc)) is not None:
        return said
    if exc.filename is not None and exc.strerror:
        return Failure(ExitCode.FAILED, f"{exc.strerror.lower()}", str(exc.filename))
    return None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (SQLAlchemy adds lines of background)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


_URL_PASSWORD = re.compile(r"(://[^/@\s:]*):[^@\s]+@")


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` and the password of any URL replaced by ``***``."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _URL_PASSWORD.sub(r"\1:***@", text)
