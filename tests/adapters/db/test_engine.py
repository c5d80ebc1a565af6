"""The engine: statements are time-limited (and the engine goes on after one is cut), `migrate` is
not, and on SQLite reads take no write lock while writes still take it up front."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from inno_notify.adapters.db import Store, create_engine, migrate
from inno_notify.adapters.db.engine import is_statement_timeout
from inno_notify.adapters.db.migrate import _PG_MIGRATE_LOCK
from inno_notify.adapters.db.tables import checkpoints
from tests import stored
from tests.db_support import connect

from .records import job, user

# A statement that runs for seconds on each database (SQLite has no sleep: count to a billion).
SLOW = {
    "postgres": "SELECT pg_sleep(30)",
    "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
    "SELECT count(*) FROM c",
}


@pytest.fixture
async def limited(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url, statement_timeout_seconds=0.2, pool_size=1)
    try:
        yield engine
    finally:
        await engine.dispose()


async def test_a_long_statement_is_cut_and_the_engine_goes_on(limited: AsyncEngine, db_dialect: str) -> None:
    async with limited.connect() as conn:
        with pytest.raises(DBAPIError) as cut:
            await conn.execute(sa.text(SLOW[db_dialect]))
    assert is_statement_timeout(cut.value)
    # The same pool (of one connection) serves the next statement at once.
    async with limited.connect() as conn:
        assert (await conn.execute(sa.text("SELECT 1"))).scalar() == 1


async def test_the_store_goes_on_after_a_statement_is_cut(database_url: str, db_dialect: str) -> None:
    store = Store.from_url(database_url, statement_timeout_seconds=0.2)
    try:
        with pytest.raises(DBAPIError) as cut:
            async with store.read() as conn:
                await conn.execute(sa.text(SLOW[db_dialect]))
        assert is_statement_timeout(cut.value)
        await store.directory.upsert_user(user("after@example.com"))
        assert [u.email for u in await store.directory.list_users()] == ["after@example.com"]
    finally:
        await store.close()


async def test_a_cancelled_statement_still_stops_at_its_limit(limited: AsyncEngine, db_dialect: str) -> None:
    """A request cancelled mid-statement (the API's handler timeout) must not leave the statement
    running: on SQLite it runs on in the driver's thread, holding the write lock, until its limit
    stops it; on Postgres asyncpg cancels it on the server."""
    with pytest.raises(TimeoutError):
        async with limited.begin() as conn:
            await asyncio.wait_for(conn.execute(sa.text(SLOW[db_dialect])), 0.05)
    # A writer gets the lock (SQLite would answer "database is locked" after its busy timeout).
    async with limited.begin() as conn:
        await conn.execute(sa.insert(checkpoints).values(key="after-cancel", value="written"))
    async with limited.connect() as conn:
        assert (await conn.execute(sa.select(checkpoints.c.value))).scalar() == "written"


async def test_other_errors_are_not_taken_for_a_timeout(limited: AsyncEngine) -> None:
    async with limited.connect() as conn:
        with pytest.raises(DBAPIError) as failed:
            await conn.execute(sa.text("SELECT * FROM no_such_table"))
    assert not is_statement_timeout(failed.value)
    assert not is_statement_timeout(TimeoutError())


@pytest.mark.postgres
@pytest.mark.parametrize(("seconds", "shown"), [(None, "0"), (0, "0"), (60, "1min"), (2.5, "2500ms")])
async def test_postgres_sessions_carry_the_timeout(
    database_url: str, db_dialect: str, seconds: float | None, shown: str
) -> None:
    if db_dialect != "postgres":
        pytest.skip("Postgres setting")
    engine = create_engine(database_url, statement_timeout_seconds=seconds)
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(sa.text("SHOW statement_timeout"))).scalar() == shown
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_migrate_is_not_cut_by_a_statement_timeout(empty_database_url: str, db_dialect: str) -> None:
    """A database-wide statement_timeout (a DBA's, or ours) must not cut a migration that waits on
    another replica's migration lock."""
    if db_dialect != "postgres":
        pytest.skip("Postgres lock")
    name = make_url(empty_database_url).database
    admin = await connect(empty_database_url)
    try:
        await admin.execute(f'ALTER DATABASE "{name}" SET statement_timeout = 50')
        holder = await connect(empty_database_url)
        try:
            await holder.execute("SET statement_timeout = 0")
            await holder.execute("SELECT pg_advisory_lock($1)", _PG_MIGRATE_LOCK)
            migrating = asyncio.create_task(migrate(empty_database_url))
            waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            for _ in range(500):
                if await admin.fetchval(waiting) or migrating.done():
                    break
                await asyncio.sleep(0.01)
            assert not migrating.done() and await admin.fetchval(waiting) == 1
            # Hold the lock for six times the database's statement timeout, then let it go.
            await holder.execute("SELECT pg_sleep(0.3)")
            await holder.execute("SELECT pg_advisory_unlock($1)", _PG_MIGRATE_LOCK)
            applied = await migrating
        finally:
            await holder.close()
    finally:
        await admin.close()
    assert applied  # every revision, on a database whose sessions are otherwise cut after 50 ms


async def test_sqlite_keeps_wal(store: Store, db_dialect: str) -> None:
    if db_dialect != "sqlite":
        pytest.skip("SQLite journal mode")
    async with store.read() as conn:
        assert (await conn.execute(sa.text("PRAGMA journal_mode"))).scalar() == "wal"


async def test_reads_run_beside_an_open_write_transaction(store: Store) -> None:
    """An ingest batch holds the write transaction (on SQLite, the database's one write lock);
    readiness and API reads go on meanwhile and see the last committed state."""
    await stored.upsert_jobs(store, [job("committed")])
    async with store.jobs.ingest_transaction() as tx:
        await tx.write("default", [job("in-flight")], [], [])
        await store.ping()
        seen = await stored.get_jobs(store, "default", ["committed", "in-flight"])
        assert list(seen) == ["committed"]
        assert await store.directory.list_users() == []
    assert set(await stored.get_jobs(store, "default", ["committed", "in-flight"])) == {
        "committed",
        "in-flight",
    }


async def test_read_merge_write_batches_still_serialise(store: Store) -> None:
    """Two batches that read, merge and write at once both commit: writes still take the write
    lock before their first read, so neither fails with "database is locked"."""
    await stored.upsert_jobs(store, [job("shared", owner="first@example.com")])
    gate = asyncio.Event()

    async def batch(owner: str) -> None:
        async with store.jobs.ingest_transaction() as tx:
            current = (await tx.get_jobs("default", ["shared"]))["shared"]
            await gate.wait()
            await tx.write("default", [job("shared", owner=owner, name=current.name)], [], [])

    first = asyncio.create_task(batch("a@example.com"))
    second = asyncio.create_task(batch("b@example.com"))
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, second)
    shared = await stored.get_job(store, "default", "shared")
    assert shared is not None and shared.owner in {"a@example.com", "b@example.com"}
