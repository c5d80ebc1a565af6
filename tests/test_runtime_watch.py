"""The watch wiring of the composition root: per-resource readiness in `serve`'s /readyz, and the
telemetry component exporting watch restarts (crashes included) and watch lines set aside."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.kube import ClusterWatcher
from inno_notify.runtime import serve
from inno_notify.service.telemetry_sampler import telemetry_component
from inno_notify.settings import Settings
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.telemetry import Telemetry
from tests.test_serve import TOKEN, free_port
from tests.test_serve import eventually as eventually_answers
from tests.waiting import eventually


async def _ignore(*_args: Any) -> None:
    return None


async def test_telemetry_exports_watch_crashes_and_set_aside_lines_as_they_grow(store: Store) -> None:
    registry = CollectorRegistry()
    watcher = ClusterWatcher(None, _ignore, _ignore, kueue=False)  # type: ignore[arg-type]  # never run
    stats = watcher.watchers["Job"].stats
    component = telemetry_component(store, Telemetry.create(registry), watcher, interval=0.01)

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    async def run_until_exported(crashes: float) -> None:
        """Runs the component until its samples carry `crashes`; the other figures were read with it."""
        stop = asyncio.Event()
        task = asyncio.create_task(component(stop))
        try:
            await eventually(
                lambda: sample("inno_notify_watch_restarts_total", resource="Job", reason="crash") == crashes
            )
        finally:
            stop.set()
            await asyncio.wait_for(task, 5)

    stats.crashes, stats.gone, stats.malformed = 2, 1, {"invalid_json": 3}
    await run_until_exported(2)
    stats.crashes, stats.malformed["not_an_object"] = 5, 1
    await run_until_exported(5)  # the counter grew by 3: a total exported twice would show 7
    assert sample("inno_notify_watch_restarts_total", resource="Job", reason="crash") == 5
    assert sample("inno_notify_watch_restarts_total", resource="Job", reason="gone") == 1
    assert sample("inno_notify_rejected_objects_total", resource="Job", reason="invalid_json") == 3
    assert sample("inno_notify_rejected_objects_total", resource="Job", reason="not_an_object") == 1


async def test_serve_reports_readiness_per_watched_resource(tmp_path: Path) -> None:
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    port = free_port()
    settings = Settings.model_validate(
        {
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
            "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
            "prometheus": {"url": "http://127.0.0.1:9"},
            "api": {
                "listen": f"127.0.0.1:{port}",
                "tokens": [
                    {"name": "t", "sha256": hashlib.sha256(TOKEN.encode()).hexdigest(), "role": "admin"}
                ],
            },
        }
    )
    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    try:
        async with aiohttp.ClientSession() as session:
            body = await eventually_answers(session, f"http://127.0.0.1:{port}/readyz", lambda b: b["ready"])
        assert body["checks"] == {
            "database": True,
            "watch:Job": True,
            "watch:Pod": True,
            "watch:Event": True,
            "dispatcher_alive": True,
        }
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=10)
        await sim.stop()
