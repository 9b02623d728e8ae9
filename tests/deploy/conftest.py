"""Fixtures of the deploy tests: the connector tests' PostgreSQL database (``pg_database``)."""

from tests.connector.conftest import pg_database

__all__ = ["pg_database"]
