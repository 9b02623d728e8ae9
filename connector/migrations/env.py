"""Alembic environment of the connector's store.

``Store.migrate()`` builds the Alembic config in code and hands over its open connection
(``config.attributes["connection"]``). Run through the ``alembic`` command instead, the
``sqlalchemy.url`` main option names the database. Only the store's own tables
(``formsync_*``) are considered, so the user's other tables in the same database are
never touched."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from connector.store._mysql import compare_column_type
from connector.store._tables import METADATA, VERSION_TABLE

config = context.config


def _ours(name: str | None, type_: str, parent_names: object) -> bool:
    return type_ != "table" or bool(name and name.startswith("formsync_"))


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=METADATA,
        version_table=VERSION_TABLE,
        include_name=_ours,
        compare_type=compare_column_type,
        # SQLite alters tables by copying them; later migrations need batch mode there.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=METADATA,
                      version_table=VERSION_TABLE, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
