"""Settings that cannot be loaded, said in one line: which file and line or which
environment variable, which key, and what is accepted (an unknown key with the closest
known one). Pure functions over the error, the file's text and the environment; no
value is ever echoed but a job's own params, which hold no secret."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

ENV_PREFIX = "FORMSYNC_"
_SECTION = re.compile(r"^\s*\[(\[)?\s*([A-Za-z0-9_.\-]+)\s*\]")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*=")


@dataclass(frozen=True)
class Problem:
    """One settings problem: where it is (a variable, or ``file:line``) and what it is."""

    where: str
    message: str


def env_variable(loc: Sequence[str | int], environ: Mapping[str, str]) -> str | None:
    """The ``FORMSYNC_*`` variable that set the value at ``loc``, if one is set."""
    names = [str(p) for p in loc if isinstance(p, str)]
    for n in range(len(names), 0, -1):
        var = ENV_PREFIX + "__".join(names[:n]).upper()
        if var in environ:
            return var
    return None


def find_line(text: str, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the key at ``loc`` in a TOML document, or of its table when the
    key is not written there (``[[jobs]]`` tables are counted for a job's index)."""
    loc = list(loc)
    while len(loc) > 2 and isinstance(loc[-1], int) and loc[0] != "jobs":  # an item of a list: the list's line
        loc.pop()
    section, key = [str(p) for p in loc[:-1]], loc[-1] if loc else None
    if loc and loc[0] == "jobs" and len(loc) >= 2 and isinstance(loc[1], int):
        section, key = ["jobs", str(loc[1])], (str(loc[2]) if len(loc) > 2 else None)
    current: list[str] = []
    jobs_seen, table_line = -1, None
    for number, line in enumerate(text.splitlines(), start=1):
        if m := _SECTION.match(line):
            current = m.group(2).split(".")
            if m.group(1) and current == ["jobs"]:
                jobs_seen += 1
                current = ["jobs", str(jobs_seen)]
            if current == section:
                table_line = number
            continue
        if key is not None and current == section and (k := _KEY.match(line)) and k.group(1) == str(key):
            return number
        if not section and key is not None and not current and (k := _KEY.match(line)) and k.group(1) == key:
            return number
    if not section and key is not None:  # an unknown top-level table: its header
        for number, line in enumerate(text.splitlines(), start=1):
            if (m := _SECTION.match(line)) and m.group(2).split(".")[0] == key:
                return number
    return table_line


def known_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys the model at ``loc`` (the path of the unknown key's parent) accepts."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        is_model = isinstance(current, type) and issubclass(current, BaseModel)
        field = current.model_fields.get(part) if is_model else None
        if field is None:
            return []
        current = _model_in(field.annotation)
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _model_in(annotation: Any) -> Any:
    """The pydantic model an annotation holds (``X``, ``X | None``, ``list[X]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def describe(error: ValidationError, model: type[BaseModel], *, config: str | None, text: str | None,
             environ: Mapping[str, str], job_ids: Sequence[Any] = ()) -> Problem:
    """The first problem of a settings ``ValidationError`` (with how many more there are)."""
    errors = error.errors()
    err = errors[0]
    loc = list(err["loc"])
    key = ".".join(str(p) for p in loc)
    if len(loc) >= 2 and loc[0] == "jobs" and isinstance(loc[1], int):
        name = job_ids[loc[1]] if loc[1] < len(job_ids) and job_ids[loc[1]] else f"#{loc[1] + 1}"
        key = f"job {name!r}: " + (".".join(str(p) for p in loc[2:]) or "(the job)")
    if err["type"] == "extra_forbidden":
        message = _unknown(loc, known_keys(model, loc[:-1]))
    else:
        msg = err["msg"].removeprefix("Value error, ")
        message = msg if msg.startswith("job ") else f"{key}: {msg}"  # a job's own check names it already
        if loc and loc[0] == "jobs" and err["type"] != "missing" and not isinstance(err.get("input"), dict | list):
            message += f" (got {err['input']!r})"  # a job's params hold no secret
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    var = env_variable(loc, environ)
    if var is not None:
        return Problem(var, message.removeprefix(f"{key}: "))
    line = find_line(text, loc) if text is not None else None
    where = config or "settings"
    return Problem(f"{where}:{line}" if line is not None and config else where, message)


def _unknown(loc: Sequence[str | int], known: list[str]) -> str:
    parent = ".".join(str(p) for p in loc[:-1] if isinstance(p, str))
    name = str(loc[-1])
    full = f"{parent}.{name}" if parent else name
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
    if close:
        return f"unknown setting {full!r}; did you mean {(parent + '.' if parent else '') + close[0]!r}?"
    return f"unknown setting {full!r}; known here: {', '.join(known)}" if known else f"unknown setting {full!r}"


def setting_place(loc: Sequence[str], config: str | None, text: str | None, environ: Mapping[str, str]) -> str:
    """Where the setting at ``loc`` comes from, for a message: ``outreach.mapping
    (formsync.toml:7)``, or ``FORMSYNC_OUTREACH__MAPPING``."""
    var = env_variable(loc, environ)
    if var is not None:
        return var
    key = ".".join(loc)
    line = find_line(text, loc) if text is not None else None
    return f"{key} ({config}:{line})" if config and line is not None else key
