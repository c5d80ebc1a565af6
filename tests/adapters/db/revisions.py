"""A database taken up and down the migration chain, for the tests of one revision's data changes:
seed rows as the revision before left them, migrate, read what the revision made of them, go down
and check what the downgrade left, then up to head again (tests/adapters/db/test_migrate_*.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from inno_notify.adapters.db import create_engine, migrate
from inno_notify.adapters.db.migrate import alembic_config

T = TypeVar("T")
Step = Callable[[Connection], Any]


def to(revision: str, down: bool = False) -> Step:
    """A step that migrates (or, `down`, downgrades) the connection's database to `revision`."""

    def step(connection: Connection) -> None:
        cfg = alembic_config()
        cfg.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(cfg, revision)

    return step


def columns_of(table: str) -> Callable[[Connection], set[str]]:
    return lambda connection: {col["name"] for col in sa.inspect(connection).get_columns(table)}


def tables(connection: Connection) -> set[str]:
    return set(sa.inspect(connection).get_table_names())


class Trip:
    """One database's trip along the chain: each `run` is one transaction of steps."""

    def __init__(self, engine: AsyncEngine, url: str) -> None:
        self.engine = engine
        self.url = url

    async def run(self, *steps: Step) -> Any:
        """Runs the steps in order in one transaction; returns what the last one returned."""
        result = None
        async with self.engine.begin() as conn:
            for step in steps:
                result = await conn.run_sync(step)
        return result

    async def up_to_head(self) -> list[str]:
        """Migrates to head the way `inno-notify migrate` does; the revisions applied."""
        return await migrate(self.url)


@asynccontextmanager
async def trip(url: str) -> AsyncIterator[Trip]:
    engine = create_engine(url, statement_timeout_seconds=None)
    try:
        yield Trip(engine, url)
    finally:
        await engine.dispose()
