"""The store's engine and its two kinds of transactions, shared by the ``Store`` and its
repositories: a session (read and write, committed on success) and a read-only session
(on SQLite it does not take the write lock, so long reads never hold up the receiver)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session

from ._sqlite import READ_OPTION
from ._writer import Writer

T = TypeVar("T")
IN_LIST = 500  # values bound in one IN list: far under every database's limit on parameters


def in_lists(values: Sequence[T], size: int = IN_LIST) -> Iterator[Sequence[T]]:
    """``values`` in slices of at most ``size``, one IN list per statement."""
    for start in range(0, len(values), size):
        yield values[start:start + size]


@dataclass(frozen=True)
class Database:
    """An engine and the writer class of its database."""

    engine: Engine
    writer: type[Writer]

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session for reads and writes; committed on success. A row a constraint
        refuses raises ``IntegrityError`` on every database (MySQL's driver files a CHECK
        refusal as an operational error)."""
        try:
            with Session(self.engine) as s:
                yield s
                s.commit()
        except OperationalError as e:
            if e.orig is not None and self.writer.refused(e.orig):
                raise IntegrityError(e.statement, e.params, e.orig) from e
            raise

    @contextmanager
    def reader(self) -> Iterator[Session]:
        """A read-only session."""
        with Session(self.engine.execution_options(**{READ_OPTION: True})) as s:
            yield s

    def table_names(self) -> set[str]:
        """The tables the database holds now (none before the first migration)."""
        return set(inspect(self.engine).get_table_names())
