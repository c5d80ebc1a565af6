"""Pytest plugin with the database fixtures: a throwaway Postgres database per run, SQLite files.

Register it in tests/conftest.py (`pytest_plugins = ["tests.db_support"]`). Postgres is required:
if it cannot be reached the fixtures fail loudly, because a silently skipped dialect is how
"works on SQLite only" bugs ship. Set INNO_NOTIFY_TEST_NO_POSTGRES=1 to skip the Postgres
variants on purpose; INNO_NOTIFY_TEST_POSTGRES_URL points at another server (an admin database).

- `db_dialect`: "sqlite" or "postgres" (tests using the fixtures below run once per dialect)
- `database_url`: a migrated, empty database of that dialect (Postgres: one database per run,
  truncated before each test; SQLite: a copy of a migrated template file)
- `empty_database_url`: a database that has never been migrated (for migration tests)
- `store`: a Store over `database_url`; `leases`: a LeaseRepository over it

Helpers for tests that need more: `connect` (a raw asyncpg connection to a Postgres URL),
`postgres_database` (a database of a test's own), `closing` (a store or lease repository closed
after a block).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import asyncpg
import pytest
from sqlalchemy.engine import URL, make_url

from inno_notify.adapters.db import Store, migrate
from inno_notify.adapters.db.leases import LeaseRepository
from inno_notify.adapters.db.tables import metadata

T = TypeVar("T")

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"


def _no_postgres() -> bool:
    return os.environ.get("INNO_NOTIFY_TEST_NO_POSTGRES") == "1"


def _admin_url() -> URL:
    return make_url(os.environ.get("INNO_NOTIFY_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL))


async def connect(url: str | URL, within: float = 60) -> asyncpg.Connection:
    """A plain asyncpg connection to the Postgres database of a SQLAlchemy URL (for what the store
    does not do: administration, looking at the server's own views)."""
    parsed = make_url(url)
    return await asyncpg.connect(
        user=parsed.username,
        password=parsed.password,
        host=parsed.host,
        port=parsed.port,
        database=parsed.database,
        timeout=within,
    )


async def _admin_execute(sql: str) -> None:
    url = _admin_url()
    try:
        conn = await connect(url, within=10)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"PostgreSQL not reachable at {url.render_as_string(hide_password=True)}: {exc!r}. "
            "Start it, point INNO_NOTIFY_TEST_POSTGRES_URL at one, or set INNO_NOTIFY_TEST_NO_POSTGRES=1.",
            pytrace=False,
        )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def create_postgres_database(label: str) -> str:
    """Creates a new, empty database and returns its SQLAlchemy URL."""
    name = f"inno_test_{label}_{uuid.uuid4().hex[:10]}"
    await _admin_execute(f'CREATE DATABASE "{name}"')
    # A commit returns without waiting for its WAL to reach the disk: what it wrote is visible to
    # every other session at once all the same; only a crash of the server itself (which no test
    # causes) could lose the last commits of a database that is dropped after the run anyway.
    await _admin_execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    return _admin_url().set(database=name).render_as_string(hide_password=False)


async def drop_postgres_database(url: str) -> None:
    await _admin_execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


@asynccontextmanager
async def postgres_database(label: str, *, migrated: bool = False) -> AsyncIterator[str]:
    """A new database of the block's own (migrated if asked), dropped after it with whatever is
    still connected to it."""
    url = await create_postgres_database(label)
    try:
        if migrated:
            await migrate(url)
        yield url
    finally:
        await drop_postgres_database(url)


class _Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


@asynccontextmanager
async def closing(resource: C) -> AsyncIterator[C]:
    """`resource` (a Store, a LeaseRepository), closed after the block however it ends."""
    try:
        yield resource
    finally:
        await resource.close()


# Emptying the tables between tests: TRUNCATE (each table new and empty, as after the migration),
# but only of the tables that ever held a row since they were last emptied (a heap of any pages);
# truncating all of them took 70-400 ms (new files for every table and index) before each of the
# ~1,000 Postgres tests, where a test writes a few. Every id sequence is restarted either way, as
# RESTART IDENTITY did.
_TABLES = [t.name for t in metadata.sorted_tables]
_WRITTEN = (
    "SELECT name FROM unnest($1::text[]) AS name WHERE pg_relation_size(quote_ident(name)::regclass) > 0"
)
_RESTART_SEQUENCES = "SELECT setval(seqrelid, seqstart, false) FROM pg_sequence"


async def truncate_all(url: str) -> None:
    """Every table of the schema empty and every id sequence restarted; the migrations' records kept."""
    conn = await connect(url)
    try:
        written = [row["name"] for row in await conn.fetch(_WRITTEN, _TABLES)]
        async with conn.transaction():
            if written:
                quoted = ", ".join(f'"{name}"' for name in written)
                await conn.execute(f"TRUNCATE {quoted} CASCADE")
            await conn.execute(_RESTART_SEQUENCES)
    finally:
        await conn.close()


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Runs session-wide setup on a loop of its own, in a thread: it may be first requested from
    inside a test's running event loop (through getfixturevalue), where asyncio.run is refused."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(scope="session")
def postgres_session_database() -> Iterator[str]:
    """One migrated throwaway database for the whole run, dropped at the end."""
    if _no_postgres():
        pytest.skip("INNO_NOTIFY_TEST_NO_POSTGRES=1")
    url = _run(create_postgres_database("run"))
    try:
        _run(migrate(url))
        yield url
    finally:
        _run(drop_postgres_database(url))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file; each test gets a copy (faster than migrating per test)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    _run(migrate(_sqlite_url(path)))
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_dialect(request: pytest.FixtureRequest) -> str:
    dialect: str = request.param
    if dialect == "postgres" and _no_postgres():
        pytest.skip("INNO_NOTIFY_TEST_NO_POSTGRES=1")
    return dialect


@pytest.fixture
async def database_url(db_dialect: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if db_dialect == "postgres":
        url: str = request.getfixturevalue("postgres_session_database")
        await truncate_all(url)
        return url
    template: Path = request.getfixturevalue("sqlite_template")
    path = tmp_path / "store.db"
    shutil.copyfile(template, path)
    return _sqlite_url(path)


@pytest.fixture
async def empty_database_url(db_dialect: str, tmp_path: Path) -> AsyncIterator[str]:
    if db_dialect == "postgres":
        async with postgres_database("empty") as url:
            yield url
    else:
        yield _sqlite_url(tmp_path / "empty.db")


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with closing(Store.from_url(database_url)) as the_store:
        yield the_store


@pytest.fixture
async def leases(database_url: str) -> AsyncIterator[LeaseRepository]:
    async with closing(LeaseRepository.from_url(database_url)) as repository:
        yield repository
