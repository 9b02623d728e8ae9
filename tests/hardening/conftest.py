"""Fixtures of the hardening suites: the connector tests' PostgreSQL databases
(``pg_database``, ``db_url``), shared rather than redefined."""

from tests.connector.conftest import db_url, pg_database

__all__ = ["db_url", "pg_database"]
