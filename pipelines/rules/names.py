"""The one rule for the names a user gives to what formsync keeps under a name: an
incremental export's name (``export --since-last NAME``), an outreach job (``outreach
--job``) and a scheduled job's id (``[[jobs]] id``). A name is used in file names and
in the store's keys, so it is a slug: it can never reach another directory (no ``/``,
no ``..`` start) nor be blank."""

from __future__ import annotations

import re

MAX_NAME = 100
_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SLUG_RULE = (f"letters, digits, '.', '_' and '-', starting with a letter or digit, at most {MAX_NAME} "
             f"characters (e.g. nightly, spring-2026)")


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a slug (see ``SLUG_RULE``), in words; None when it is one."""
    if not name.strip():
        return "a blank name"
    if len(name) > MAX_NAME:
        return f"a name of {len(name)} characters"
    if _SLUG.fullmatch(name) is None:
        bad = next((c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))), None)
        return f"{name!r} holds {bad!r}" if bad is not None else f"{name!r} starts with {name[0]!r}"
    return None


def check_name(name: str, what: str) -> str:
    """``name`` when it is a slug; else a ``ValueError`` in one line naming ``what``
    (say ``--since-last``), the problem and the rule."""
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(f"{what}: {problem}; a name is {SLUG_RULE}")
    return name
