"""The reference pages of the documentation site, made from the code so they cannot drift:
every command and option (from the Typer app), every setting with its type, default and
environment variable (from the pydantic settings models, described by the comment above
each field), and the exit codes (from ``ExitCode``). The site's build calls these
(``scripts/mkdocs_hooks.py``); they print what ``--help`` prints, without Rich markup."""

from __future__ import annotations

import inspect
import io
import re
import textwrap
import tokenize
from enum import Enum
from typing import Any, get_args

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from .helptext import plain


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


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


def command_paths(cmd: Any, path: str = "formsync") -> dict[str, Any]:
    """Every command under ``cmd`` (a Typer app's Click command), by its path, sorted."""
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return {path: cmd}
    return {p: c for name in sorted(subs) for p, c in command_paths(subs[name], f"{path} {name}").items()}


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
    lines = [f"## `[{name}]`", "", *([doc, ""] if doc else []),
             "| Setting | Type | Default | Environment variable | What it is |", "|---|---|---|---|---|"]
    comments = field_comments(model)
    for field, info in model.model_fields.items():
        var = f"`{env}{name.upper()}__{field.upper()}`" if env else "(file only)"
        lines.append(f"| `{name}.{field}` | `{_cell(_type_name(info.annotation))}` | {_default(info)} | {var} | "
                     f"{_cell(info.description or comments.get(field, ''))} |")
    return [*lines, ""]


def settings_markdown() -> str:
    """Every setting: its TOML section and key, type, default, environment variable and meaning."""
    from connector.config.settings import Settings

    prefix = str(Settings.model_config.get("env_prefix", ""))
    lines = ["# Settings", "", "Every setting, from the settings models (`connector/config/settings.py`). A setting "
             "is read from the TOML file given with `--config`, or from its environment variable (which wins); "
             "`[[jobs]]` entries are read from the file only.", ""]
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


def exit_codes_markdown() -> str:
    """The exit codes every command ends with, from ``ExitCode``."""
    from .errors import ExitCode

    comments = field_comments(ExitCode)
    inline = _inline_comments(ExitCode)
    lines = ["# Exit codes", "", "Every `formsync` command ends with one of these codes; a failure prints one "
             "line on stderr saying what is wrong, where and how to fix it.", "",
             "| Code | Name | Meaning |", "|---|---|---|"]
    lines += [f"| `{c.value}` | `{c.name}` | {_cell(inline.get(c.name) or comments.get(c.name, ''))} |"
              for c in ExitCode]
    return "\n".join(lines) + "\n"


def _inline_comments(cls: type) -> dict[str, str]:
    """The comment ending each ``NAME = value`` line of ``cls``'s source."""
    found = {}
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r"\s+(\w+)\s*=[^#]*#\s*(.*)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found
