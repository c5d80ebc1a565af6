"""Builds the async engine for either dialect with the settings each one needs to behave.

SQLite (the embedded default) needs WAL so readers do not block the writer, foreign keys turned
on per connection, a busy timeout instead of instant "database is locked" errors, and real
transactions (the driver's own implicit BEGIN handling skips them for SELECT and DDL). Postgres
needs only pool sizing. JSON goes through orjson on both.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 10_000
POSTGRES_POOL_SIZE = 10
POSTGRES_MAX_OVERFLOW = 10


def _json_dumps(value: object) -> str:
    return orjson.dumps(value).decode()


def create_engine(
    url: str, *, pool_size: int = POSTGRES_POOL_SIZE, echo: bool = False, pre_ping: bool = True
) -> AsyncEngine:
    """An AsyncEngine for `sqlite+aiosqlite://…` or `postgresql+asyncpg://…`.

    `pre_ping` tests each pooled Postgres connection with a round trip before handing it out. The
    service keeps it (a long-lived worker must survive a database restart); the admin API turns it
    off, because on its hottest path the ping is one round trip in every few, and a dead pooled
    connection there costs one failed request, which the client retries.
    """
    parsed = make_url(url)
    common: dict[str, Any] = {"echo": echo, "json_serializer": _json_dumps, "json_deserializer": orjson.loads}
    if parsed.get_backend_name() == "sqlite":
        engine = create_async_engine(url, **common)
        _configure_sqlite(engine)
        return engine
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=POSTGRES_MAX_OVERFLOW,
        pool_pre_ping=pre_ping,
        **common,
    )


def _configure_sqlite(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy's "begin" hook below (the documented recipe).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        # IMMEDIATE takes the write lock up front: a deferred transaction that reads and then
        # writes fails at once with "database is locked" (no busy wait) when another connection
        # wrote in between, which is exactly what a read-merge-write batch does. One writer at a
        # time is SQLite's model anyway; readers in WAL mode are not blocked by it.
        connection.exec_driver_sql("BEGIN IMMEDIATE")
