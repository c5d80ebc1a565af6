"""`serve` assembled from settings: watch → store → REST API, against the simulated cluster."""

from __future__ import annotations

import asyncio
import hashlib
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp

from inno_notify.runtime import serve
from inno_notify.settings import Settings
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS, PODS
from inno_notify.sim.objects import (
    JobSpec,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
)

TOKEN = "test-admin-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def get_json(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with session.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as response:
        return response.status, await response.json(content_type=None)


async def eventually(session: aiohttp.ClientSession, url: str, accept: Any, within: float = 20.0) -> Any:
    """Polls an endpoint of the running service until `accept(body)` holds."""
    async with asyncio.timeout(within):
        while True:
            try:
                status, body = await get_json(session, url)
                if status == 200 and accept(body):
                    return body
            except aiohttp.ClientConnectionError:
                pass  # not listening yet
            await asyncio.sleep(0.1)


async def test_serve_watches_stores_and_answers_the_api(tmp_path: Path) -> None:
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    port = free_port()
    settings = Settings.model_validate(
        {
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}",
            "cluster": "it",
            "kubernetes": {"kubeconfig": str(sim.kubeconfig(tmp_path / "kubeconfig")), "kueue": False},
            # Nothing listens there: usage collection retries quietly; the watch path is under test.
            "prometheus": {"url": "http://127.0.0.1:9", "metrics_delay_seconds": 0},
            "api": {
                "listen": f"127.0.0.1:{port}",
                "tokens": [
                    {"name": "t", "sha256": hashlib.sha256(TOKEN.encode()).hexdigest(), "role": "admin"}
                ],
            },
            "directory": {"teams": [{"name": "face", "namespaces": ["face-research"]}]},
        }
    )
    stop = asyncio.Event()
    service = asyncio.create_task(serve(settings, stop))
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            await eventually(session, f"{base}/readyz", lambda body: True)
            now = datetime.now(UTC).replace(microsecond=0)
            spec = JobSpec(name="train-e2e", namespace="face-research", owner="alice@example.com", gpus=2)
            job = sim.create(JOBS, job_started(job_object(spec, now - timedelta(minutes=10)), now))
            pod = sim.create(PODS, pod_object(job, "abcde", now - timedelta(minutes=10)))
            running = sim.update(PODS, pod_running(pod, "gpu-1", now - timedelta(minutes=9), now))
            sim.update(PODS, pod_terminated(running, now, 0))
            sim.update(JOBS, job_succeeded(job, now + timedelta(seconds=1)))

            body = await eventually(
                session,
                f"{base}/api/v1/jobs?team=face",
                lambda b: any(item["status"] == "succeeded" for item in b["items"]),
            )
            item = body["items"][0]
            assert (item["name"], item["owner"], item["team"]) == ("train-e2e", "alice@example.com", "face")
            assert item["requested"]["gpus"] == 2.0
            assert item["exit_code"] == 0

            async with session.get(f"{base}/metrics") as response:
                metrics = await response.text()
            assert 'inno_notify_watch_events_total{resource="Job",type="MODIFIED"}' in metrics
            assert "inno_notify_outbox_depth" in metrics and "inno_notify_sends_total" in metrics
    finally:
        stop.set()
        await asyncio.wait_for(service, timeout=10)
        await sim.stop()
