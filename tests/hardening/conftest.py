"""Fixtures of the hardening suites: the connector tests' databases (``pg_database``,
``mysql_database``, ``db_url``), shared rather than redefined."""

from tests.connector.conftest import db_url, mysql_database, pg_database

__all__ = ["db_url", "mysql_database", "pg_database"]
