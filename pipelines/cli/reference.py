"""The reference pages of the documentation site, made from the code so they cannot drift:
every command and option (from the Typer app), every setting with its type, default and
environment variable (from the pydantic settings models, described by the comment above
each field, else by ``_NOTES``), the exit codes (from ``ExitCode``), the events (the types
``connector.client.webhooks`` subscribes to and the envelope ``connector.models.Event`` reads) and
the data contract's types (each field type's columns from ``connector.store._schema``, each
column type as the views, Arrow, dlt, CSV, XLSX and pandas write it, from their mappers).
The site's build calls these (``scripts/mkdocs_hooks.py``); the commands print what
``--help`` prints, without Rich markup."""

from __future__ import annotations

import inspect
import io
import re
import textwrap
import tokenize
from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .helptext import plain

if TYPE_CHECKING:
    from connector.store import Column


def _cell(text: str) -> str:
    """Text as one table cell: one line, its pipes escaped outside code spans (the table
    reads a pipe inside backticks as text, and would show the backslash)."""
    parts = " ".join(text.split()).split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|") for i, p in enumerate(parts))


# -- commands ------------------------------------------------------------------------------------


# Typer builds on its own copy of Click, so commands and parameters are read by their
# attributes (``commands``, ``param_type_name``), not by class.


def _option_row(p: Any, ctx: Any) -> str:
    record = p.get_help_record(ctx)
    if record is None:
        return ""
    names, text = record
    return f"| `{names}` | {_cell(plain(text))} |"


def _command(path: str, cmd: Any) -> list[str]:
    lines = [f"## `{path}`", ""]
    doc = plain(cmd.help or "").strip()
    body, _, example = doc.partition("Example:")
    lines += [" ".join(para.split()) + "\n" for para in body.split("\n\n") if para.strip()]
    args = [p for p in cmd.params if p.param_type_name == "argument"]
    if args:
        lines += ["Arguments: " + ", ".join(f"`{(a.metavar or a.name or '').upper()}`" for a in args), ""]
    opts = [p for p in cmd.params if p.param_type_name == "option" and not p.hidden]
    if opts:
        ctx = cmd.make_context(path.rsplit(" ", 1)[-1], [], resilient_parsing=True)
        rows = [r for p in opts if (r := _option_row(p, ctx))]
        lines += ["| Option | What it does |", "|---|---|", *rows, ""]
    if example.strip():
        lines += ["```text", example.strip(), "```", ""]
    return lines


# The commands in the order a user meets them: try it, connect, bring the data in, take it
# out, reach people, run it unattended, look after the data. A command not named goes last.
JOURNEY = ("demo", "sandbox", "login", "logout", "sync", "poll", "receive", "subscribe", "views", "export", "load",
           "files", "outreach", "campaign", "run", "status", "migrate", "deploy", "dead-letters", "purge", "erase",
           "key")


def _journey_key(name: str) -> tuple[int, str]:
    return (JOURNEY.index(name) if name in JOURNEY else len(JOURNEY), name)


def command_paths(cmd: Any, path: str = "formsync") -> dict[str, Any]:
    """Every command under ``cmd`` (a Typer app's Click command), by its path: the top
    level in ``JOURNEY`` order, a group's commands in the order the group declares them; a
    group that also runs on its own (``formsync sandbox``) is one of them."""
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return {path: cmd}
    own = {path: cmd} if getattr(cmd, "invoke_without_command", False) and path != "formsync" else {}
    names = sorted(subs, key=_journey_key) if path == "formsync" else list(subs)
    return own | {p: c for name in names for p, c in command_paths(subs[name], f"{path} {name}").items()}


def commands_markdown(app: typer.Typer) -> str:
    """Every ``formsync`` command: what it does, its arguments, options and example."""
    lines = ["# Commands", "", "Every `formsync` command, as `formsync COMMAND --help` prints it. `-h` works "
             "everywhere; `formsync --version` prints the version.", ""]
    for path, cmd in command_paths(typer.main.get_command(app)).items():
        lines += _command(path, cmd)
    return "\n".join(lines)


# -- settings --------------------------------------------------------------------------------------


def field_comments(cls: type) -> dict[str, str]:
    """The comment lines just above each field of ``cls``'s source, by field name."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[str, str] = {}
    pending: list[str] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.line.strip().startswith("#"):
            pending.append(tok.string.lstrip("#").strip())
        elif tok.type == tokenize.NAME and tok.start[1] == 4 and pending:
            comments[tok.string] = " ".join(pending)
            pending = []
        elif tok.type == tokenize.NAME and tok.start[1] == 4:
            pending = []
    return comments


# What a setting is, where its model has no comment above it (the comment wins when there is one).
_NOTES: dict[str, str] = {
    "service.base_url": "the hosted service, or a sandbox",
    "service.token": "API token `fb_…` or OAuth access token `fbo_…`; unset: the sign-in of `formsync login`",
    "service.workspace_id": "the workspace `sync` reads all forms of; unset: the token's",
    "service.calls_per_minute": "client pacing: calls in any 60 s",
    "service.creates_per_minute": "client pacing: creates in any 60 s",
    "service.timeout_seconds": "per HTTP call",
    "service.max_retries": "retries of throttled, 5xx and dropped calls (safe ones only)",
    "receiver.enabled": "serve the receiver inside `formsync run`",
    "receiver.host": "address to bind",
    "receiver.port": "port to bind (0: a free one)",
    "receiver.path": "event path; `<path>/callbacks` and `<path>/webhooks` too",
    "receiver.scheme": "signatures: `formstep`, `standard` (Standard Webhooks) or `custom`",
    "receiver.webhook_secrets": "your subscriptions' signing secrets",
    "receiver.secrets_file": "an environment file of webhook secrets, re-read when it changes",
    "receiver.tolerance_seconds": "largest signature age, either way",
    "receiver.max_body_bytes": "larger bodies get 413",
    "receiver.tls_key": "the unencrypted PEM key of `receiver.tls_cert`: both or neither",
    "store.url": "SQLite file, `postgresql+psycopg://user@host/db` or `mysql+pymysql://user@host/db`",
    "outreach.delivery": "`email`: the service sends invitations; `none`: you send the url",
    "outreach.callback_url": "your receiver's URL, set on every request",
    "outreach.report_dir": "where `JOB-report.csv` goes",
    "outreach.suppress_bounced": "never send again to an address that bounced or complained",
    "export.out_dir": "where `formsync export` without `--out` writes `TABLE.FORMAT` (made if missing)",
    "export.formats": "the formats `formsync export` without `--format` or `--out` writes",
    "load.destination": "the dlt destination of `formsync load`",
    "load.dataset": "the dataset (schema) `formsync load` loads into",
    "load.table_format": "`delta`: Delta tables on the filesystem destination (see docs/warehouse.md)",
    "notify.command": "a command that takes each notice as JSON on stdin",
    "notify.on": "the kinds of notice sent",
    "notify.timeout_seconds": "how long a notice's POST or command may take",
    "deploy.user": "who the units run as",
    "deploy.group": "the group the units run as",
    "deploy.working_dir": "the units' working directory (writable, with the SQLite database's and absolute export "
                          "and report directories)",
    "deploy.environment_file": "the secrets file the units read",
    "deploy.command": "the formsync executable the units run; unset: this formsync",
    "deploy.stop_timeout_seconds": "`formsync run --stop-timeout` (the unit waits 30 s more)",
    "deploy.server_name": "the nginx site's host name",
    "deploy.listen": "the nginx site's addresses",
    "deploy.tls_cert": "the nginx site's certificate; unset: Let's Encrypt's, by `server_name`",
    "deploy.tls_key": "the nginx site's key; unset: Let's Encrypt's, by `server_name`",
    "jobs.id": "unique job id",
    "jobs.kind": "`outreach`, `poll`, `sync`, `export`, `load`, `remind`, `close`, `files` or `purge`",
    "jobs.cron": "when it runs: five fields, UTC (or `interval_seconds`, not both)",
    "jobs.interval_seconds": "when it runs: every this many seconds (or `cron`, not both)",
    "jobs.after": "run each time a run of the job with this id finishes",
    "jobs.params": "the job's options, by the names of the command's options",
    "jobs.misfire_grace_seconds": "how late a missed run may still start",
}


def _type_name(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("pydantic.types.", "").replace("pathlib.", "")
    text = re.sub(r"<class '([\w.]+)'>", lambda m: m.group(1).rsplit(".", 1)[-1], text)
    return text.replace("NoneType", "None")


def _default(f: FieldInfo) -> str:
    if f.is_required():
        return "required"
    value = f.get_default(call_default_factory=True)
    if isinstance(value, Enum):
        value = value.value
    return "(none)" if value is None else f"`{value!s}`" if value != [] else "`[]`"


def _section(name: str, model: type[BaseModel], env: str) -> list[str]:
    doc = " ".join(inspect.cleandoc(model.__dict__.get("__doc__") or "").split())  # its own, not inherited
    # Three columns, the variable under the setting, so a reader's screen holds the table.
    lines = [f"## `[{name}]`", "", *([doc, ""] if doc else []),
             "| Setting and environment variable | Type and default | What it is |", "|---|---|---|"]
    comments = field_comments(model)
    for field, info in model.model_fields.items():
        var = f"`{env}{name.upper()}__{field.upper()}`" if env else "(file only)"
        lines.append(f"| `{name}.{field}`<br>{var} | {_cell(f'`{_type_name(info.annotation)}`')}<br>default: {_default(info)} | "
                     f"{_cell(info.description or comments.get(field) or _NOTES.get(f'{name}.{field}', ''))} |")
    return [*lines, ""]


def settings_markdown() -> str:
    """Every setting: its TOML section and key, type, default, environment variable and meaning."""
    from connector.config.settings import Settings

    prefix = str(Settings.model_config.get("env_prefix", ""))
    lines = ["# Settings", "", "Every setting, from the settings models (`connector/config/settings.py`). A setting "
             "is read from the TOML file given with `--config` (`config/formsync.example.toml` documents every one), "
             "or from its environment variable `FORMSYNC_<SECTION>__<NAME>`, which wins over the file; "
             "`[[jobs]]` entries are read from the file only.", "",
             "Lists and tables are given to a variable as JSON (`FORMSYNC_EXPORT__FORMATS='[\"csv\",\"parquet\"]'`; "
             "a list given as plain text is refused with the variable's name rather than guessed at). Secrets are "
             "never logged. A mistake in the file is named by its line (`error: formsync.toml:4: unknown setting "
             "'service.tokn'; did you mean 'service.token'?`), a mistake in a variable by the variable; a token or "
             "secret that is empty or has a newline or spaces around it is refused. A command run without "
             "`--config` says on stderr which default database and service it uses (`note: no --config; using the "
             "default database sqlite:///formsync.db and service http://127.0.0.1:8787`), and `export` says when "
             "the store holds nothing to export yet.", ""]
    for name, info in Settings.model_fields.items():
        model = info.annotation
        args = get_args(model)
        if args:  # list[JobSettings]
            model = next(a for a in args if isinstance(a, type))
            lines += _section(name, model, "")
        elif isinstance(model, type) and issubclass(model, BaseModel):
            lines += _section(name, model, prefix)
    return "\n".join(lines)


# -- exit codes ------------------------------------------------------------------------------------


# When each code ends a command, with examples (the exit code table"s words).
_EXIT_WHEN: dict[str, tuple[str, str]] = {
    "DONE": (
        "done; a server (`sandbox`, `receive`, `run`) stopped by Ctrl-C or SIGTERM",
        "`erase` that matched nobody (it says so)"),
    "FAILED": (
        "the work failed: running it again may succeed once the cause is gone",
        "the service refused a call or could not be reached, `campaign remind` on the Free plan "
        "(`PLAN_REQUIRED`), the database is unreachable, its disk full or read-only, its file locked by "
        "another process, a port is taken, the demo could not finish, the receiver refused a `subscribe "
        "check`, the consent page denied (`login`), its `--port` taken, the service's OAuth endpoints "
        "away, the stored sign-in refused by the service (`formsync login` named), `purge` when a form's "
        "retention could not be read (nothing of that form removed)"),
    "USAGE": (
        "usage or configuration error: nothing was done; fix the command line or the settings",
        "a missing or unknown option, a config file that does not exist or is not TOML, a misspelled "
        "setting, `service.token` not set (or empty, or ending with a newline) for a command that calls "
        "the service, a database URL that cannot be used (a SQLite file in a missing directory), `export "
        "--out` naming a directory, a bad `[[jobs]]` entry or a job whose sheet or export directory is "
        "not usable, a remind job scheduled more often than every 10 minutes, a `subscribe` URL the "
        "service cannot deliver to (not https, or this machine while the service is the hosted one), an "
        "unknown event type, a workspace other than `login --workspace` chosen on the consent page, the "
        "store's key file missing, readable by others or not the sign-in's key, a TLS certificate or key "
        "that cannot serve (missing, not PEM, not the certificate's key, encrypted), a `sandbox --seed` "
        "that is not YAML (`seed.yaml:4:4: …`) or not a seed, `erase` without `--email` or "
        "`--external-id` or with an `--email` that is not an address, `sync --reconcile` with `--full` or"
        " `--drafts`"),
    "REJECTED": (
        "`outreach` ran, but rows are in its report (rejected, suppressed, changed since sent, or refused"
        " by the service); every other row was sent, and the last line says `done:` unless the service "
        "refused some; a `--dry-run` that finds rejected rows ends with it too. Likewise `files`: files "
        "that could not be fetched are in its report, the others archived",
        "a topic the form does not offer, an email that is not one, a row edited after it was sent; a "
        "file link that answers 404"),
    "ATTENTION": (
        "`status` found something that needs attention, each in an `attention:` line (not with `--format "
        "prometheus`, which ends with 0 once the metrics are written: `formsync_problems` carries them)",
        "a job whose last run failed, a scheduler that stopped, an outreach that stalled, events set "
        "aside, an API token near its 30 days, a static `fbo_` token, a refused sign-in"),
    "INTERRUPTED": (
        "a one-shot command (`poll`, `sync`, `export`, `views`, `outreach`, `campaign`, `status`, "
        "`dead-letters`, `demo`) interrupted by Ctrl-C (SIGINT)",
        ""),
    "TERMINATED": (
        "`outreach` stopped by SIGTERM (it finishes the row being sent and says how to resume); other "
        "one-shot commands end as the signal ends them, which a shell shows as `143` too",
        ""),
}


def exit_codes_markdown() -> str:
    """The exit codes every command ends with, from ``ExitCode``."""
    from .errors import ExitCode

    comments = field_comments(ExitCode)
    inline = _inline_comments(ExitCode)
    lines = ["# Exit codes", "", "Every `formsync` command ends with one of these codes, and a failure prints one "
             "line on stderr saying what is wrong, where (the option, the config file and key) and how to fix it, "
             "for example `error: formsync.toml: store.url: unsupported database URL 'oracle://app:***@db/x': use "
             "sqlite:///path.db, postgresql+psycopg://user@host/db or mysql+pymysql://user@host/db`. Tokens, signing "
             "secrets and database passwords are shown as `***`. The codes are `ExitCode` in "
             "`pipelines/cli/errors.py`. Anything else is a bug in formsync: its traceback is printed, then a line "
             "saying so (exit code 1). `formsync --version` prints the version; `-h` and `--help` work on every "
             "command. `tests/mistakes/cases/` holds one case per mistake, each run against a sandbox.", "",
             "| Code | Name | Meaning |", "|---|---|---|"]
    whens = ["", "## When each code ends a command", ""]
    for c in ExitCode:
        when, example = _EXIT_WHEN.get(c.name, ("", ""))
        lines.append(f"| `{c.value}` | `{c.name}` | {_cell(inline.get(c.name) or comments.get(c.name) or when)} |")
        if when or example:
            whens.append(f"- **`{c.value}`**: {when}" + (f". For example: {example}." if example else "."))
    lines += whens
    return "\n".join(lines) + "\n"


def _inline_comments(cls: type) -> dict[str, str]:
    """The comment ending each ``NAME = value`` line of ``cls``'s source."""
    found = {}
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r"\s+(\w+)\s*=[^#]*#\s*(.*)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


# -- events ----------------------------------------------------------------------------------------


def _wire_type(annotation: Any) -> str:
    """A field's type as a reader of the JSON body sees it (a time is ISO 8601 text)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _wire_type(args[0])
    if origin in (Union, UnionType):
        return " | ".join(_wire_type(a) for a in args)
    if annotation is datetime:
        return "ISO 8601 time"
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__
    if origin is not None:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(_wire_type(a) for a in args)}]"
    return "any" if annotation is Any else getattr(annotation, "__name__", str(annotation))


def _model_of(annotation: Any) -> type[BaseModel] | None:
    found = [a for a in (annotation, *get_args(annotation)) if isinstance(a, type) and issubclass(a, BaseModel)]
    return found[0] if found else None


def _event_block(path: str, model: type[BaseModel]) -> list[str]:
    """One block of the envelope: its fields (wire name, attribute, type, required), then
    each nested block after it."""
    doc = " ".join(inspect.cleandoc(model.__dict__.get("__doc__") or "").split())
    lines = [f"### `{path}`", "", f"`connector.models.{model.__name__}`" + (f": {doc}" if doc else ""), "",
             "| Field | Python attribute | Type | Required |", "|---|---|---|---|"]
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, info in model.model_fields.items():
        wire = info.alias or name
        sub = _model_of(info.annotation)
        if sub is not None:
            nested.append((f"{path}.{wire}", sub))
        lines.append(f"| `{wire}` | `{name}` | {_cell(f'`{_wire_type(info.annotation)}`')} | "
                     f"{'yes' if info.is_required() else 'no'} |")
    lines.append("")
    for sub_path, sub in nested:
        lines += _event_block(sub_path, sub)
    return lines


def events_markdown() -> str:
    """The event types a subscription takes and the ``type`` each delivers (from
    ``connector.client.webhooks``), and every field of the envelope the receiver reads (from
    ``connector.models.Event``)."""
    from connector.client.webhooks import ABANDONED, DEFAULT_EVENTS, EVENT_TYPES, IDLE_WINDOWS
    from connector.models import Event

    lines = ["# Events", "", "Every event type and every field of the envelope the receiver reads, from the "
             "connector's code (`connector/client/webhooks.py`, `connector/models.py`). A real body of each type, as "
             "the sandbox delivers it, is in the guide [Events: what the receiver gets](../events.md).", "",
             "## Event types", "",
             "| Subscription `eventType` | Delivered `type` | `formsync subscribe create` by default |",
             "|---|---|---|"]
    for event_type, delivered in EVENT_TYPES.items():
        default = "yes" if event_type in DEFAULT_EVENTS else f"no (`--event {event_type}`)"
        lines.append(f"| `{event_type}` | `{delivered}` | {default} |")
    lines += ["", f"`{ABANDONED}` takes an idle window: " + ", ".join(f"`{w}`" for w in IDLE_WINDOWS) + ". "
              "A request's callback gets the `request.*` types of its own request. A `type` not listed here is "
              "still a valid event: it is stored as received.", "",
              "## The envelope", "", "Fields the service adds later are ignored, never refused; a field that is "
              "not required may be absent or null.", ""]
    lines += _event_block("event", Event)
    return "\n".join(lines)


# -- the data contract's types ---------------------------------------------------------------------


def _example_field(field_type: str) -> Any:
    """A field of ``field_type`` keyed ``f`` (a matrix with rows r1 and r2, a group with a text member)."""
    from connector.store import StoredField

    shapes: dict[str, tuple[dict[str, str], ...]] = {"matrix": ({"key": "r1"}, {"key": "r2"}),
                                                     "group": ({"key": "m", "type": "text"},)}
    return StoredField("f", field_type, shape=shapes.get(field_type, ()))


def _field_rows() -> list[str]:
    """Field types (the spec's, as the sandbox lists them) grouped by the columns they make."""
    from connector.store._schema import field_columns
    from formservice.domain.fieldtypes import FIELD_TYPES

    groups: dict[str, list[str]] = {}
    for field_type in FIELD_TYPES:
        cols = field_columns(_example_field(field_type))
        made = ", ".join(f"`{c.name}` {c.type}" for c in cols) or "none (never holds an answer)"
        groups.setdefault(made, []).append(f"`{field_type}`")
    return [f"| {', '.join(types)} | {made} |" for made, types in groups.items()]


def data_types_markdown() -> str:
    """The data contract's type table: each field type's columns and logical types (from
    ``connector.store._schema``), and each logical type in every destination (the views'
    SQL per database, Arrow/Parquet, dlt, CSV and its schema file, XLSX, pandas), from the
    mappers the code writes with."""
    from connector.store import Column
    from connector.store._schema import LOGICAL_TYPES, OWN
    from connector.store._views import SQL_TYPES

    from ..export.columns import CSV_FORMS, CSV_READ_TYPES, PANDAS_TYPES, XLSX_FORMS, arrow_type
    from ..export.load import DLT_TYPES

    member = Column("m", "text")
    lines = ["# Data types", "", "The data contract: a form's table is a function of its field list, never of "
             "the answers (`connector/store/_schema.py`). Each field makes its columns, each column has a logical "
             "type, and each logical type is written the same way by every destination: the typed views, the wide "
             "export, the frames and `formsync load`. The guide is [Your data](../your-data.md#the-data-contract).",
             "", "## Field types and their columns", "",
             "For a field with key `f`. Unknown field types are `json`, like `payment`.", "",
             "| Field type | Columns and their logical types |", "|---|---|", *_field_rows(), "",
             "Every table starts with the submission's own columns: "
             + ", ".join(f"`{c.name}` {c.type}" for c in OWN) + ".", "",
             "## In the SQL views", "", "| Logical type | SQLite | PostgreSQL | MySQL / MariaDB |", "|---|---|---|---|"]
    for t in LOGICAL_TYPES:
        lines.append(f"| `{t}` | " + " | ".join(SQL_TYPES[db][t] for db in ("sqlite", "postgresql", "mysql")) + " |")
    lines += ["", "## In files, frames and loads", "",
              "`records` are lists of objects whose members are typed as the top-level types are (shown with one "
              "text member `m`).", "",
              "| Logical type | Arrow / Parquet | dlt | CSV | CSV schema file: DuckDB, pandas | XLSX | pandas |",
              "|---|---|---|---|---|---|---|"]
    for t in LOGICAL_TYPES:
        arrow = str(arrow_type(Column("f", t, members=(member,))))  # type: ignore[arg-type]
        duck, dtype = CSV_READ_TYPES.get(t, CSV_READ_TYPES["json"])
        lines.append(f"| `{t}` | `{_cell(arrow)}` | `{DLT_TYPES[t]}` | {_cell(CSV_FORMS[t])} | `{duck}`, `{dtype}` | "
                     f"{_cell(XLSX_FORMS[t])} | `{_cell(PANDAS_TYPES[t])}` |")
    return "\n".join(lines + _long_table_lines()) + "\n"


def _long_table_lines() -> list[str]:
    """The long table's columns, ``gone_at``, the requests' and the campaign rows', from
    the data contract (``schema.LONG``, ``GONE_AT``, ``REQUEST_COLUMNS``, ``CAMPAIGN_COLUMNS``)."""
    from connector.store._schema import ARCHIVED_SUFFIX, CAMPAIGN_COLUMNS, GONE_AT, LONG, REQUEST_COLUMNS

    return ["", "## The long table", "",
            "One row per answer, or per matrix row or group instance and member (long exports, `frames.long`, "
            "the load's `answers`), its columns typed as above:", "",
            *_columns_table(LONG), "",
            "`archived` is set on a file list's row: a file or signature field's, or a file or signature member's "
            f"of one group instance, where `formsync files` keeps each file, as `<name>{ARCHIVED_SUFFIX}` does in "
            "the form's table (beside a file or signature field: a list of locations; beside a group with file "
            "or signature members: `records`, per instance an object of those members' lists).", "",
            "## Gone rows", "",
            "With gone rows asked for (`formsync export --include-gone`, `include_gone=True`), the wide and the "
            f"long table end with `{GONE_AT.name}` ({GONE_AT.type}): when `formsync sync --reconcile` found the "
            "submission gone from the service, null on the others. Without, the column is not there.", "",
            "## The requests", "",
            "One row per request, its newest state (requests exports, `frames.requests`, the load's `requests`); "
            "`metadata` is the caller's own data as sent, JSON text:", "", *_columns_table(REQUEST_COLUMNS), "",
            "## The campaign rows", "",
            "The load's `campaign_rows`: one row per sheet row of each outreach job (`job`), with its request as the "
            "store knows it (null where the row has none), replaced whole by each load:", "",
            *_columns_table(CAMPAIGN_COLUMNS), "",
            "Like a form's table, both are declared, never typed from the rows: a load gives every column its type "
            "from the first load on (a time a timestamp with its time zone), a column null in every row included."]


def _columns_table(columns: Sequence[Column]) -> list[str]:
    """A table's columns and their logical types, as Markdown table lines."""
    return ["| Column | Logical type |", "|---|---|", *[f"| `{c.name}` | {c.type} |" for c in columns]]


# -- the committed pages ---------------------------------------------------------------------------

PAGES_DIR = "docs/reference"


def reference_pages() -> dict[str, str]:
    """Each generated reference page (file name under ``docs/reference/`` -> text), the
    same on every machine: no terminal width, no colour."""
    from . import app

    return {"commands.md": commands_markdown(app), "settings.md": settings_markdown(),
            "exit-codes.md": exit_codes_markdown(), "events.md": events_markdown(),
            "data-types.md": data_types_markdown()}


def stale_pages(root: Path) -> list[str]:
    """The reference pages under ``root/docs/reference`` that differ from what the code
    makes now (or are missing), by file name."""
    folder = root / PAGES_DIR
    return [name for name, text in reference_pages().items()
            if not (folder / name).is_file() or (folder / name).read_bytes() != text.encode("utf-8")]


def write_pages(root: Path) -> list[str]:
    """Write the stale reference pages under ``root/docs/reference``; returns their names."""
    stale = stale_pages(root)
    pages = reference_pages()
    for name in stale:
        (root / PAGES_DIR / name).write_bytes(pages[name].encode("utf-8"))
    return stale


if __name__ == "__main__":  # python -m pipelines.cli.reference: regenerate the pages after a change
    import sys

    here = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    for written in write_pages(here):
        print(f"{PAGES_DIR}/{written}")
