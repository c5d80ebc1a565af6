"""Migrations: an empty database reaches head, a second run is a no-op, and models match migrations."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from inno_notify.adapters.db import create_engine, migrate
from inno_notify.adapters.db.migrate import head_revision
from inno_notify.adapters.db.tables import metadata


def _diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


def _state(connection: Connection) -> tuple[set[str], tuple[str, ...]]:
    tables = set(inspect(connection).get_table_names())
    return tables, MigrationContext.configure(connection).get_current_heads()


async def test_migrate_twice_creates_schema_then_does_nothing(empty_database_url: str) -> None:
    first = await migrate(empty_database_url)
    second = await migrate(empty_database_url)

    assert first[-1] == head_revision()
    assert first == sorted(first)
    assert second == []
    engine = create_engine(empty_database_url)
    try:
        async with engine.connect() as conn:
            tables, heads = await conn.run_sync(_state)
    finally:
        await engine.dispose()
    assert tables == set(metadata.tables) | {"alembic_version"}
    assert heads == (head_revision(),)


async def test_models_and_migrations_agree(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            diff = await conn.run_sync(_diff)
    finally:
        await engine.dispose()
    assert diff == []
