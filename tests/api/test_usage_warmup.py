"""The usage report: one aggregation per window serves every grouping and format, and with
`warm_reports` the report of all time is computed as the app starts, before any request waits on it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy.ext.asyncio import AsyncEngine

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.usage_queries import UsageCell
from inno_notify.adapters.db.usage_repository import UsageRepository
from inno_notify.api import keys
from inno_notify.api.app import create_app

from .data import populate
from .support import NOW, SETTINGS, TOKENS


class CountingUsage(UsageRepository):
    """The real usage repository, counting (and on demand failing) its usage aggregations."""

    def __init__(self, engine: AsyncEngine, fail: bool = False) -> None:
        super().__init__(engine)
        self.windows: list[tuple[datetime | None, datetime | None]] = []
        self.fail = fail

    async def usage_cells(
        self, since: datetime | None = None, until: datetime | None = None, cluster: str | None = None
    ) -> list[UsageCell]:
        self.windows.append((since, until))
        if self.fail:
            raise ConnectionError("database went away")
        return await super().usage_cells(since, until, cluster)


class CountingStore(Store):
    """The real store with a counting usage repository."""

    usage: CountingUsage

    def __init__(self, store: Store, fail: bool = False) -> None:
        super().__init__(store.engine)
        self.usage = CountingUsage(store.engine, fail)


@pytest.fixture
async def counting(store: Store) -> CountingStore:
    await populate(store)
    return CountingStore(store)


async def _client(app: web.Application) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()


async def _get(
    client: TestClient[web.Request, web.Application], path: str, accept: str = "application/json"
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {TOKENS['viewer']}", "Accept": accept}
    async with client.get(path, headers=headers) as response:
        if response.content_type == "application/json":
            return response.status, await response.json()
        return response.status, await response.text()


async def test_one_aggregation_serves_every_grouping_and_format(counting: CountingStore) -> None:
    app = create_app(counting, SETTINGS, clock=lambda: NOW, monotonic=lambda: 0.0)
    async for client in _client(app):
        bodies = {}
        for group_by in ("team", "owner", "namespace"):
            status, bodies[group_by] = await _get(client, f"/api/v1/usage?group_by={group_by}")
            assert status == 200
        status, text = await _get(client, "/api/v1/usage?group_by=owner", "text/csv")
        assert status == 200 and text.startswith("owner,jobs,")
        # Asked again: the same bytes, no new aggregation.
        assert await _get(client, "/api/v1/usage?group_by=team") == (200, bodies["team"])
        await _get(client, "/api/v1/usage?since=2026-11-30T13:00:00Z")
    assert counting.usage.windows == [
        (None, None),
        (datetime.fromisoformat("2026-11-30T13:00:00+00:00"), None),
    ]
    assert [g["group"] for g in bodies["team"]["groups"]] == ["speech", "face", None]
    assert sum(g["jobs"] for g in bodies["owner"]["groups"]) == 5  # every finished job, once


async def test_warm_reports_computes_the_report_before_the_first_request(counting: CountingStore) -> None:
    app = create_app(counting, SETTINGS, clock=lambda: NOW, monotonic=lambda: 0.0, warm_reports=True)
    async for client in _client(app):
        await app[keys.REPORTS_WARMUP]
        assert counting.usage.windows == [(None, None)]
        status, body = await _get(client, "/api/v1/usage?group_by=owner")
        assert status == 200 and body["groups"][0]["group"] == "carol@example.com"
        assert counting.usage.windows == [(None, None)]  # served from the warm report


async def test_a_failed_warm_up_leaves_the_api_serving(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    failing = CountingStore(store, fail=True)
    app = create_app(failing, SETTINGS, clock=lambda: NOW, monotonic=lambda: 0.0, warm_reports=True)
    with caplog.at_level(logging.WARNING, logger="inno_notify.api"):
        async for client in _client(app):
            await app[keys.REPORTS_WARMUP]
            assert "usage warm-up failed" in caplog.text
            status, _ = await _get(client, "/api/v1/jobs")
            assert status == 200
            failing.usage.fail = False
            status, body = await _get(client, "/api/v1/usage")
            assert status == 200 and body["groups"] == []  # computed on demand now
