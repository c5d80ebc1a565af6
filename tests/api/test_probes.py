"""The probe app on probes.listen: open, only /healthz, /readyz and /metrics, naming what is not ready."""

from __future__ import annotations

import socket
from collections.abc import Mapping

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db import Store
from inno_notify.api.probes import ProbesBindError, create_probe_app, start_probes
from inno_notify.telemetry import Telemetry


async def _client(
    store: Store, readiness: Mapping[str, bool], registry: CollectorRegistry
) -> TestClient[web.Request, web.Application]:
    client = TestClient(TestServer(create_probe_app(store, lambda: readiness, registry)))
    await client.start_server()
    return client


async def test_ready_lists_nothing_and_metrics_need_no_token(store: Store) -> None:
    telemetry = Telemetry.create(CollectorRegistry())
    telemetry.sends.labels("email", "sent").inc(2)
    client = await _client(store, {"dispatcher_alive": True}, telemetry.registry)
    try:
        ready = await client.get("/readyz")
        assert (ready.status, await ready.json()) == (
            200,
            {"ready": True, "checks": {"database": True, "dispatcher_alive": True}, "not_ready": []},
        )
        assert (await client.get("/healthz")).status == 200
        metrics = await client.get("/metrics")
        assert 'inno_notify_sends_total{channel="email",outcome="sent"} 2.0' in await metrics.text()
    finally:
        await client.close()


async def test_not_ready_names_every_failing_check(store: Store) -> None:
    readiness = {"watch:Job": False, "watch:Pod": True, "watchers_synced": False, "dispatcher_alive": True}
    client = await _client(store, readiness, CollectorRegistry())
    try:
        response = await client.get("/readyz")
        body = await response.json()
        assert response.status == 503 and body["ready"] is False
        assert body["not_ready"] == ["watch:Job", "watchers_synced"]
    finally:
        await client.close()


@pytest.mark.parametrize("path", ["/api/v1/jobs", "/api/v1/openapi.json", "/"])
async def test_nothing_else_is_served(store: Store, path: str) -> None:
    client = await _client(store, {}, CollectorRegistry())
    try:
        assert (await client.get(path)).status == 404
    finally:
        await client.close()


async def test_a_taken_port_is_one_clear_error(store: Store) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(ProbesBindError, match=f"probes: cannot listen on {listen} \\(probes.listen\\)"):
            await start_probes(create_probe_app(store, dict, CollectorRegistry()), listen)
