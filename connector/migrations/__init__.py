"""Alembic migrations of the connector's store, run by ``connector.store.Store.migrate``."""
