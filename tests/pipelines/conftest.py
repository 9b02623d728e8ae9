"""Fixtures shared by the pipeline tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.store import Store
from tests.connector.conftest import pg_database  # noqa: F401  (a fresh PostgreSQL database, for the load's destination)
from tests.stores import migrated_store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An empty, migrated connector store on a SQLite file in ``tmp_path`` (a module may
    override it with a filled one)."""
    s = migrated_store(f"sqlite:///{tmp_path}/s.db")
    return s
