"""/healthz, /readyz and /metrics: open, honest about the database and the service's parts."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db import Store
from inno_notify.api.app import create_app
from inno_notify.telemetry import Telemetry

from .support import SETTINGS, Api


async def test_healthz(api: Api) -> None:
    assert await api.get("/healthz", None) == (200, {"status": "ok"})


async def test_ready_when_everything_is(api: Api) -> None:
    status, body = await api.get("/readyz", None)
    assert (status, body) == (
        200,
        {
            "ready": True,
            "checks": {"database": True, "watchers_synced": True, "dispatcher_alive": True},
            "not_ready": [],
        },
    )


async def test_not_ready_until_the_watchers_synced(api: Api) -> None:
    api.readiness["watchers_synced"] = False
    status, body = await api.get("/readyz", None)
    assert (status, body["ready"], body["checks"]["watchers_synced"]) == (503, False, False)
    assert body["not_ready"] == ["watchers_synced"]


async def _serve(app: web.Application) -> TestClient[web.Request, web.Application]:
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


async def test_not_ready_without_a_database() -> None:
    # A server that refuses the connection (port 1), not a SQLite file that cannot be opened: a failed
    # aiosqlite open leaves its worker thread to report to the event loop after the test closed it.
    store = Store.from_url("postgresql+asyncpg://postgres@127.0.0.1:1/inno")
    client = await _serve(create_app(store, SETTINGS, close_store=True))
    try:
        response = await client.get("/readyz")
        body = await response.json()
        assert (response.status, body["checks"]["database"]) == (503, False)
    finally:
        await client.close()


async def test_a_failing_readiness_source_is_not_ready_rather_than_an_error(store: Store) -> None:
    def broken() -> dict[str, bool]:
        raise RuntimeError("dispatcher state unknown")

    client = await _serve(create_app(store, SETTINGS, readiness=broken))
    try:
        response = await client.get("/readyz")
        assert response.status == 503
        assert (await response.json())["checks"] == {"database": True, "service": False}
    finally:
        await client.close()


@pytest.mark.parametrize("given", ["telemetry", "registry"])
async def test_metrics_serves_the_registry_it_was_given(store: Store, given: str) -> None:
    registry = CollectorRegistry()
    telemetry = Telemetry.create(registry)
    telemetry.watch_events.labels("pods", "ADDED").inc(3)
    telemetry.sends.labels("slack", "retry").inc()
    telemetry.outbox_depth.labels("pending").set(7)
    kwargs = {"telemetry": telemetry} if given == "telemetry" else {"metrics_registry": registry}
    client = await _serve(create_app(store, SETTINGS, **kwargs))
    try:
        await client.get("/api/v1/jobs")  # 401, timed when the app has the telemetry
        response = await client.get("/metrics")
        text = await response.text()
    finally:
        await client.close()
    assert response.status == 200 and response.content_type == "text/plain"
    assert 'inno_notify_watch_events_total{resource="pods",type="ADDED"} 3.0' in text
    assert 'inno_notify_sends_total{channel="slack",outcome="retry"} 1.0' in text
    assert 'inno_notify_outbox_depth{status="pending"} 7.0' in text
    timed = 'inno_notify_api_request_seconds_count{method="GET",route="/api/v1/jobs",status="401"} 1.0'
    assert (timed in text) is (given == "telemetry")


def test_every_metric_of_the_issue_is_defined() -> None:
    registry = CollectorRegistry()
    Telemetry.create(registry)
    names = {m.name for m in registry.collect()}
    assert {
        "inno_notify_watch_events",
        "inno_notify_watch_restarts",
        "inno_notify_ingest_lag_seconds",
        "inno_notify_outbox_depth",
        "inno_notify_sends",
        "inno_notify_prometheus_query_seconds",
        "inno_notify_jobs_summarized",
        "inno_notify_api_request_seconds",
    } <= names
