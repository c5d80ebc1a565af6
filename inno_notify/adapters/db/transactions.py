"""The three kinds of transaction every repository of the store opens, defined once.

- `read()`: reads only. On SQLite its transaction takes no write lock, so it runs beside an
  ingest batch instead of queueing behind it (engine.py says why).
- `_write()`: a write any replica may make (an admin's edit, a person's preferences).
- `_leader_write()`: a leader-only write. The fence (leases.py) is its first statement, and
  raises LostLeadership once this replica's leadership term is over. Without election the fence
  is UNFENCED and costs nothing.
- `_claim_write()`: a leader-only write that leases rows (jobs' usage, workflows' summaries, the
  outbox) under a fresh claim token and the term the fence vouches for.
- `_settling_write(write)`: a leader-only write that settles or releases claimed rows, run once
  more on a fresh connection when its connection was lost (a backend terminated, a database
  restart): one lost connection must not leave a claimed row to wait out its whole lease.

A repository method is one of these transactions composed of the query modules' functions, so
that callers never see a row or a connection. A method that is one query function run on a read
connection is `reads(that function)`, with the function's parameters and docstring.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Concatenate, ParamSpec, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from inno_notify.adapters.db.engine import READ_INTENT, is_connection_lost
from inno_notify.adapters.db.leases import UNFENCED, Fence

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# How long a claimed job or workflow stays leased to its claimer before it is due again.
DEFAULT_USAGE_LEASE_SECONDS = 300.0


class Repository:
    """Base of the store's repositories: an engine, its read-intent twin and the fence."""

    def __init__(self, engine: AsyncEngine, fence: Fence = UNFENCED) -> None:
        self._engine = engine
        self._reader = engine.execution_options(**READ_INTENT)
        self._fence = fence

    def read(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for reads only (see the module docstring)."""
        return self._reader.connect()

    def _write(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A write transaction any replica may run; it takes the write lock up front."""
        return self._engine.begin()

    @contextlib.asynccontextmanager
    async def _leader_write(self) -> AsyncIterator[AsyncConnection]:
        """A leader-only write transaction: the fence is its first statement."""
        async with self._engine.begin() as conn:
            await self._fence.check(conn)
            yield conn

    @contextlib.asynccontextmanager
    async def _claim_write(self) -> AsyncIterator[tuple[AsyncConnection, str, int | None]]:
        """A leader-only write that claims rows: (connection, a fresh claim token, the term the
        fence vouches for, None without election)."""
        async with self._engine.begin() as conn:
            term = await self._fence.check(conn)
            yield conn, secrets.token_hex(16), term

    async def _settling_write(self, write: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """`write` in a leader-only write transaction, and once more in a new transaction on a
        fresh connection if the first one's connection was lost (engine.is_connection_lost); any
        other error, or a second lost connection, is raised.

        Only for writes that may run twice: a connection lost during COMMIT leaves unknown whether
        the first try committed. The writes that settle claimed rows check the claim first, so a
        second try after an unseen commit stores nothing (the claim ended with the first) and the
        rest of what they write is an upsert or keyed on a dedup key."""
        try:
            async with self._leader_write() as conn:
                return await write(conn)
        except Exception as exc:
            if not is_connection_lost(exc):
                raise
            log.warning("a write lost its database connection (%s); trying it once more on a fresh one", exc)
        async with self._leader_write() as conn:
            return await write(conn)


def reads(
    query: Callable[Concatenate[AsyncConnection, P], Awaitable[T]],
) -> Callable[Concatenate[Repository, P], Awaitable[T]]:
    """A repository method that runs `query` on a read connection (Repository.read)."""

    @functools.wraps(query)
    async def method(self: Repository, /, *args: P.args, **kwargs: P.kwargs) -> T:
        async with self.read() as conn:
            return await query(conn, *args, **kwargs)

    return method
