"""Fixtures shared by the pipeline tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.store import Store

# pg_database: a fresh PostgreSQL database, for the load's destination; db_url (with
# mysql_database): each database in turn, for the tests run on every database.
from tests.connector.conftest import db_url, mysql_database, pg_database  # noqa: F401


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An empty, migrated connector store on a SQLite file in ``tmp_path`` (a module may
    override it with a filled one)."""
    s = Store(f"sqlite:///{tmp_path}/s.db")
    s.migrate()
    return s
