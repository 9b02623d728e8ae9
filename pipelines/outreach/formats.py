"""Dates and numbers as spreadsheets write them, read per column: ``31/01/2026``,
``01/31/2026``, ``31.01.2026``, ISO ``2026-01-31`` and Excel serials (``46053``); ``5,5``,
``1.234,5``, ``1,234.5``, ``1 234,5``. A column's day/month order and decimal mark are
detected from all its cells where that is unambiguous, or declared (``--date-format``,
``--decimal``). Pure functions: no I/O here."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

# Day/month orders of a date written with separators, and the decimal marks of a number.
DAY_FIRST, MONTH_FIRST = "dd/mm/yyyy", "mm/dd/yyyy"
DATE_ORDERS = (DAY_FIRST, MONTH_FIRST)
POINT, COMMA = "point", "comma"
DECIMALS = (POINT, COMMA)
# What --date-format and --decimal accept (and the job params date_format, decimal).
DATE_FORMAT_NAMES = {"dd/mm/yyyy": DAY_FIRST, "dd.mm.yyyy": DAY_FIRST, "dd-mm-yyyy": DAY_FIRST,
                     "mm/dd/yyyy": MONTH_FIRST, "mm-dd-yyyy": MONTH_FIRST}
DECIMAL_NAMES = {"point": POINT, ".": POINT, "comma": COMMA, ",": COMMA}
DATES_ACCEPTED = "YYYY-MM-DD, dd/mm/yyyy, mm/dd/yyyy, dd.mm.yyyy or an Excel serial"

_SEPARATED = re.compile(r"^(\d{1,2})([/.\-])(\d{1,2})\2(\d{4})$")
_EXCEL_EPOCH = date(1899, 12, 30)  # serial 1 is 1900-01-01 (Excel's phantom 29 Feb 1900 aside)
_EXCEL_LAST = 2958465  # 9999-12-31
_SPACES = re.compile(r"[\s\u00a0\u202f']")  # thousands separators that are never decimal marks


def date_format_name(given: str) -> str:
    """The day/month order a ``--date-format`` value names; ``ValueError`` listing the
    accepted values otherwise."""
    found = DATE_FORMAT_NAMES.get(given.strip().lower())
    if found is None:
        raise ValueError(f"{given!r} is not a date format formsync reads; use one of {', '.join(DATE_FORMAT_NAMES)} "
                         "(ISO dates and Excel serials are read whatever it says)")
    return found


def decimal_name(given: str) -> str:
    """The decimal mark a ``--decimal`` value names; ``ValueError`` otherwise."""
    found = DECIMAL_NAMES.get(given.strip().lower())
    if found is None:
        raise ValueError(f"{given!r} is not a decimal mark; use point or comma")
    return found


def date_readings(text: str) -> dict[str, date]:
    """The date a cell is, under each day/month order it can be read with (both orders
    give the same date for ISO, Excel serials and ``dd.mm.yyyy``); empty when it is no date."""
    s = text.strip()
    if (m := _SEPARATED.match(s)) is not None:
        a, sep, b, year = int(m[1]), m[2], int(m[3]), int(m[4])
        out = {order: d for order, (day, month) in ((DAY_FIRST, (a, b)), (MONTH_FIRST, (b, a)))
               if (d := _date(year, month, day)) is not None}
        if sep == "." and DAY_FIRST in out:  # dotted dates are day first wherever they are written
            return dict.fromkeys(DATE_ORDERS, out[DAY_FIRST])
        return out if sep != "." else {}
    found = _iso(s) or _excel(s)
    return dict.fromkeys(DATE_ORDERS, found) if found is not None else {}


def _date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _iso(s: str) -> date | None:
    try:
        return date.fromisoformat(s[:10])
    except ValueError:
        return None


def _excel(s: str) -> date | None:
    try:
        serial = float(s)
    except ValueError:
        return None
    if not serial.is_integer() or not 1 <= serial <= _EXCEL_LAST:
        return None
    return _EXCEL_EPOCH + timedelta(days=int(serial))


def number_readings(text: str) -> dict[str, int | float]:
    """The number a cell is under each decimal mark it can be read with: ``5,5`` only with
    a comma, ``1,234.5`` only with a point, ``1,234`` with both (1234 or 1.234), ``42``
    with both (the same); empty when it is no number."""
    s = _SPACES.sub("", text.strip())
    out: dict[str, int | float] = {}
    for mark, point, thousands in ((POINT, ".", ","), (COMMA, ",", ".")):
        value = _number(s, point, thousands)
        if value is not None:
            out[mark] = value
    return out


def _number(s: str, point: str, thousands: str) -> int | float | None:
    t = re.escape(thousands)
    whole = rf"\d{{1,3}}(?:{t}\d{{3}})+|\d+"
    m = re.fullmatch(rf"([+-]?)({whole})?(?:{re.escape(point)}(\d+))?", s)
    if m is None or (m[2] is None and m[3] is None):
        return None
    num = float(f"{m[1]}{(m[2] or '0').replace(thousands, '')}.{m[3] or '0'}")
    return int(num) if num.is_integer() and m[3] is None else num


@dataclass(frozen=True)
class Settled:
    """How a column's cells are read: the ``choice`` (a day/month order or a decimal mark),
    or the one ``problem`` that keeps the column from being read."""

    choice: str | None = None
    problem: str | None = None
    unclear: bool = False  # the problem is cells that read two ways (not cells that read none)


@dataclass(frozen=True)
class _Kind:
    """What the settling needs to know of a kind of value."""

    what: str  # "date", "number"
    readings: Callable[[str], Mapping[str, Any]]
    choices: tuple[str, str]
    option: str  # the command-line option that declares the choice
    param: str  # the scheduled job's param that declares it
    accepted: str


DATES = _Kind("date", date_readings, DATE_ORDERS, "--date-format", "date_format", DATES_ACCEPTED)
NUMBERS = _Kind("number", number_readings, DECIMALS, "--decimal", "decimal",
                "numbers such as 42, 5.5, 5,5, 1,234.5 or 1.234,5")


def read_as(kind: _Kind, text: str, reading: str | None = None) -> Any:
    """The value a cell is under its column's ``reading`` (default: the kind's first
    choice): a ``date`` or a number; None when it is none."""
    return kind.readings(text).get(reading or kind.choices[0])


def settle(kind: _Kind, column: str, cells: Sequence[tuple[int, str]], declared: str | None) -> Settled:
    """Read a column's cells ``(row number, text)`` as ``kind``: with the ``declared``
    choice when given, else the one choice that reads every cell that only one reads,
    when no cell means two things. A column filled in at least half its rows (and two)
    none of whose cells reads, or whose cells mean two things, is one problem naming the
    option; a cell that reads no way in another column is that row's problem."""
    reads = [(n, text, kind.readings(text)) for n, text in cells if text.strip()]
    if not reads:
        return Settled(declared or kind.choices[0])
    usable = [r for r in reads if (declared in r[2] if declared else r[2])]
    if not usable and len(reads) >= max(2, len(cells) / 2):  # a column mostly filled, none of it readable
        n, text, _ = reads[0]
        under = f" as {declared} ({kind.option})" if declared else ""
        return Settled(problem=f"column `{column}`: none of its {len(reads):,} cells is a {kind.what}{under} "
                               f"(row {n}: {text!r}); accepted: {kind.accepted}; fix the column or map it elsewhere")
    if declared:
        return Settled(declared)
    needs = {next(iter(r)) for _, _, r in reads if len(r) == 1}
    if len(needs) == 1:
        return Settled(needs.pop())
    both = " or ".join(f"{kind.option} {c}" for c in kind.choices)
    if needs:
        first = {next(iter(r)): (n, text) for n, text, r in reads if len(r) == 1}
        said = " and ".join(f"row {n}: {text!r} as {c}" for c, (n, text) in sorted(first.items()))
        return Settled(problem=f"column `{column}` mixes {kind.what}s written two ways ({said}); "
                               f"make them alike, or give {both} (job param {kind.param})", unclear=True)
    unclear = next(((n, text, r) for n, text, r in reads if len(set(r.values())) > 1), None)
    if unclear is None:
        return Settled(kind.choices[0])
    n, text, r = unclear
    meanings = " or ".join(str(v) for v in r.values())
    return Settled(problem=f"column `{column}`: {kind.what}s such as {text!r} (row {n}) read as {meanings}; "
                           f"say which with {both} (job param {kind.param})", unclear=True)
