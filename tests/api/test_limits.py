"""The API's limits: a handler past its time limit answers 503 and its statement is cancelled, a
statement past the store's limit is a 503 too, and report computations in flight are bounded, so
that slow or many requests cannot take every connection of the pool."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import aiohttp
import pytest
import sqlalchemy as sa
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy.ext.asyncio import AsyncEngine

from inno_notify.adapters.db import JobFilter, Store, create_engine
from inno_notify.adapters.db.job_details import JobPage
from inno_notify.adapters.db.job_repository import JobRepository
from inno_notify.adapters.db.usage_queries import UsageCell
from inno_notify.adapters.db.usage_repository import UsageRepository
from inno_notify.api import keys, openapi
from inno_notify.api.app import API_POOL_SIZE, create_api_store, create_app
from inno_notify.api.cache import MAX_INFLIGHT
from tests.adapters.db.test_engine import SLOW
from tests.db_support import connect
from tests.waiting import eventually

from .support import NOW, SETTINGS, TOKENS, Recorder, check_conforms

# A request that outlives this on the client means the API did not cut it.
CLIENT_TIMEOUT = aiohttp.ClientTimeout(total=15)


class SlowJobs(JobRepository):
    """The real job repository whose job list first runs a statement that takes seconds."""

    def __init__(self, engine: AsyncEngine, dialect: str) -> None:
        super().__init__(engine)
        self.dialect = dialect

    async def job_page(self, filters: JobFilter, limit: int = 50, cursor: str | None = None) -> JobPage:
        async with self.read() as conn:
            await conn.execute(sa.text(SLOW[self.dialect]))
        return await super().job_page(filters, limit, cursor)


class SlowJobsStore(Store):
    """The real store whose job list first runs a statement that takes seconds."""

    def __init__(self, store: Store, dialect: str) -> None:
        super().__init__(store.engine)
        self.jobs = SlowJobs(store.engine, dialect)


class GatedUsage(UsageRepository):
    """The real usage repository whose aggregations wait until the test opens the gate."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self.gate = asyncio.Event()
        self.started = 0

    async def usage_cells(
        self, since: datetime | None = None, until: datetime | None = None, cluster: str | None = None
    ) -> list[UsageCell]:
        self.started += 1
        await self.gate.wait()
        return await super().usage_cells(since, until, cluster)


class GatedUsageStore(Store):
    """The real store whose usage aggregations wait until the test opens the gate."""

    usage: GatedUsage

    def __init__(self, store: Store) -> None:
        super().__init__(store.engine)
        self.usage = GatedUsage(store.engine)


@contextlib.asynccontextmanager
async def _serve(store: Store, **options: Any) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = create_app(store, SETTINGS, clock=lambda: NOW, **options)
    recorder = Recorder()
    app.middlewares.insert(0, recorder.middleware)
    client = TestClient(TestServer(app), timeout=CLIENT_TIMEOUT)
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()
    check_conforms(openapi.build(), recorder.seen)


async def _get(
    client: TestClient[web.Request, web.Application], path: str, **params: str
) -> tuple[int, Any, Any]:
    headers = {"Authorization": f"Bearer {TOKENS['viewer']}"}
    async with client.get(path, headers=headers, params=params) as response:
        return response.status, await response.json(), response.headers


async def _active_statements(url: str, text: str) -> int:
    conn = await connect(url)
    try:
        query = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = $1"
        count: int = await conn.fetchval(query, text)
        return count
    finally:
        await conn.close()


async def test_a_handler_past_its_limit_is_503_and_its_statement_is_cancelled(
    database_url: str, db_dialect: str
) -> None:
    # On Postgres the statement limit is far away, so only the handler's cancellation can stop the
    # statement; on SQLite (no cancel from outside its thread) the API's store stops it at the
    # handler limit, as create_api_store sets it up.
    base = (
        Store(create_engine(database_url, pre_ping=False))
        if db_dialect == "postgres"
        else create_api_store(database_url, handler_timeout_seconds=0.3)
    )
    store = SlowJobsStore(base, db_dialect)
    try:
        async with _serve(store, handler_timeout_seconds=0.3) as client:
            status, body, headers = await _get(client, "/api/v1/jobs")
            assert (status, body["error"]["code"]) == (503, "timeout")
            assert "0.3 s" in body["error"]["message"] and headers["Retry-After"] == "5"
            if db_dialect == "postgres":  # the cancel request reaches the server within milliseconds

                async def stopped() -> bool:
                    return await _active_statements(database_url, SLOW["postgres"]) == 0

                await eventually(stopped, what="the cancelled statement stopped on the server")
            # The API goes on: the next request is answered from the same pool.
            status, body, _ = await _get(client, "/api/v1/users")
            assert (status, body) == (200, {"items": [], "next_cursor": None})
    finally:
        await base.close()


async def test_a_statement_past_the_stores_limit_is_503(database_url: str, db_dialect: str) -> None:
    base = Store(create_engine(database_url, pre_ping=False, statement_timeout_seconds=0.2))
    try:
        async with _serve(SlowJobsStore(base, db_dialect), handler_timeout_seconds=30) as client:
            status, body, headers = await _get(client, "/api/v1/jobs")
            assert (status, body["error"]["code"]) == (503, "timeout")
            assert "statement" in body["error"]["message"] and headers["Retry-After"] == "5"
    finally:
        await base.close()


@pytest.mark.postgres
@pytest.mark.parametrize(("setting", "shown"), [(None, "0"), (0, "0"), (60.0, "30s"), (10.0, "10s")])
async def test_the_api_stores_statements_stop_at_the_handler_limit(
    database_url: str, db_dialect: str, setting: float | None, shown: str
) -> None:
    if db_dialect != "postgres":
        pytest.skip("Postgres setting")
    store = create_api_store(database_url, setting, handler_timeout_seconds=30.0)
    try:
        async with store.read() as conn:
            assert (await conn.execute(sa.text("SHOW statement_timeout"))).scalar() == shown
    finally:
        await store.close()


async def test_many_windows_at_once_are_refused_not_queued(store: Store) -> None:
    """Each usage window is a full aggregation: beyond MAX_INFLIGHT of them at once the API answers
    503 `busy` at once instead of starting another, and the bound holds for any window sent."""
    gated = GatedUsageStore(store)
    async with _serve(gated) as client:
        windows = [f"2026-11-{day:02d}T00:00:00Z" for day in range(1, MAX_INFLIGHT + 1)]
        waiting = [asyncio.create_task(_get(client, "/api/v1/usage", since=since)) for since in windows]
        cache = client.app[keys.USAGE_CACHE]
        await eventually(lambda: gated.usage.started == MAX_INFLIGHT)
        assert cache.inflight == MAX_INFLIGHT

        status, body, headers = await _get(client, "/api/v1/usage", since="2026-10-01T00:00:00Z")
        assert (status, body["error"]["code"], headers["Retry-After"]) == (503, "busy", "5")
        assert gated.usage.started == MAX_INFLIGHT  # refused without starting a computation

        gated.usage.gate.set()
        answers: Sequence[tuple[int, Any, Any]] = await asyncio.gather(*waiting)
        assert [status for status, _, _ in answers] == [200] * MAX_INFLIGHT
        assert cache.inflight == 0
        status, _, _ = await _get(client, "/api/v1/usage", since="2026-10-01T00:00:00Z")
        assert status == 200


async def test_the_api_store_keeps_the_connections_a_burst_opened(database_url: str, db_dialect: str) -> None:
    """A burst beyond the pool's size waits for connections instead of opening ones that are closed
    when they come back (each new Postgres connection costs both sides CPU at the worst moment)."""
    if db_dialect != "postgres":
        pytest.skip("SQLite opens no connections over the network")
    store = create_api_store(database_url)
    opened: list[object] = []
    closed: list[object] = []
    sa.event.listen(store.engine.sync_engine, "connect", lambda conn, _: opened.append(conn))
    sa.event.listen(store.engine.sync_engine, "close", lambda conn, _: closed.append(conn))
    holding = asyncio.Event()

    async def one() -> None:
        async with store.read() as conn:
            await conn.execute(sa.text("SELECT 1"))
            await holding.wait()

    try:
        for _ in range(2):
            burst = [asyncio.create_task(one()) for _ in range(API_POOL_SIZE + 5)]
            await eventually(lambda: len(opened) == API_POOL_SIZE)
            holding.set()
            await asyncio.gather(*burst)
            holding.clear()
        assert (len(opened), closed) == (API_POOL_SIZE, [])
    finally:
        await store.close()
