"""`inno-notify agent` as a whole: pods from the simulated API server (list+watch by node) or a fake kubelet,
NVML from the fake module, /proc from a fake tree, and /metrics and /healthz over HTTP; the command itself
in a subprocess, stopped with SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from inno_notify.agent import agent_process, run_agent
from inno_notify.service.agent_metrics import Snapshot
from inno_notify.settings import ConfigError, Settings
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import PODS
from tests.adapters.nvml.fake_nvml import FakeNvml
from tests.adapters.prometheus.promserver import free_port
from tests.service.agent_support import (
    A100,
    GIB,
    NODE,
    POD_A,
    POD_B,
    POD_M,
    CountingMetrics,
    node_gpus,
    node_proc,
    pod_object,
    process_labels,
    scrape,
    series,
)
from tests.waiting import eventually


def agent_settings(tmp_path: Path, **agent: Any) -> Settings:
    return Settings.model_validate(
        {
            "kubernetes": {"kubeconfig": str(tmp_path / "kubeconfig")},
            "agent": {
                "node_name": NODE,
                "listen": "127.0.0.1:0",
                "proc_root": str(tmp_path / "proc"),
                "interval_seconds": 0.05,
                **agent,
            },
        }
    )


def attributed(snapshot: Snapshot) -> set[str]:
    return {s.key.pod for s in snapshot.attribution.series}


async def get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimKubeServer]:
    server = SimKubeServer(bookmark_interval=0.2)
    await server.start()
    server.kubeconfig(tmp_path / "kubeconfig")
    yield server
    await server.stop()


async def test_pods_from_the_api_server_watch(sim: SimKubeServer, tmp_path: Path) -> None:
    sim.create(PODS, POD_A)
    sim.create(PODS, POD_M)
    # The same pod name on another node: the agent's field selector leaves it out.
    sim.create(
        PODS, pod_object("9" * 8 + "-0000-4000-8000-000000000009", "other", "elsewhere", {}, node="n2")
    )
    node_proc(tmp_path / "proc")
    nvml = FakeNvml(node_gpus())
    metrics = CountingMetrics(NODE, until=lambda s: attributed(s) == {"train-a", "mig-job"})
    stop = asyncio.Event()
    async with agent_process(agent_settings(tmp_path), nvml, metrics) as process:
        assert process.port is not None
        task = asyncio.create_task(process.run(stop))
        await metrics.wait()
        status, text = await get(process.port, "/metrics")
        assert status == 200
        scraped = scrape(text)
        assert series(scraped, "inno_notify_gpu_process_memory_bytes") == {
            process_labels("face", "train-a", "trainer"): 5 * GIB,
            process_labels("vision", "mig-job", "worker", A100, "3g.40gb", "1"): 9 * GIB,
        }
        # eval-b has processes on the GPU but its pod is not in the list yet.
        unattributed = series(scraped, "inno_notify_gpu_unattributed_memory_bytes")
        assert {dict(k)["reason"]: v for k, v in unattributed.items()} == {
            "not_in_pod": 1 * GIB,
            "pod_unknown": 8 * GIB,
        }
        assert scraped[("inno_notify_agent_pods_known", frozenset())] == 2

        # The pod shows up through the watch; the next samples name its processes.
        metrics.until = lambda s: "eval-b" in attributed(s)
        sim.create(PODS, POD_B)
        await metrics.wait()
        memory = series(
            scrape((await get(process.port, "/metrics"))[1]), "inno_notify_gpu_process_memory_bytes"
        )
        assert memory[process_labels("speech", "eval-b", "main")] == 8 * GIB

        assert await get(process.port, "/healthz") == (200, "ok\n")
        stop.set()
        await asyncio.wait_for(task, 10)
    assert nvml.shutdown_calls == 1 and not nvml.initialized


async def test_every_pod_request_of_the_agent_names_its_own_node(sim: SimKubeServer, tmp_path: Path) -> None:
    """RBAC cannot bind `list pods` to a node, so the agent itself asks only for its node's pods:
    its list and its watch both carry fieldSelector=spec.nodeName=<node> (docs/agent.md)."""
    sim.create(PODS, POD_A)
    sim.create(
        PODS, pod_object("9" * 8 + "-0000-4000-8000-000000000009", "other", "elsewhere", {}, node="n2")
    )
    node_proc(tmp_path / "proc")
    metrics = CountingMetrics(NODE, until=lambda s: "train-a" in attributed(s))
    stop = asyncio.Event()
    async with agent_process(agent_settings(tmp_path), FakeNvml(node_gpus()), metrics) as process:
        task = asyncio.create_task(process.run(stop))
        await metrics.wait()
        await eventually(lambda: sim.stats.watches >= 1, what="the agent watches its pods")
        stop.set()
        await asyncio.wait_for(task, 10)
    pod_requests = [(path, query) for path, query in sim.requests if path.endswith("/pods")]
    assert any(query.get("watch") in ("true", "1") for _, query in pod_requests), pod_requests
    assert any(query.get("watch") not in ("true", "1") for _, query in pod_requests), pod_requests
    for path, query in pod_requests:
        assert path == "/api/v1/pods", path
        assert query.get("fieldSelector") == f"spec.nodeName={NODE}", (path, query)
    assert all(not path.startswith("/api/v1/namespaces/") for path, _ in sim.requests), "no get by name"


async def test_pods_from_the_kubelet(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    seen_tokens: list[str] = []

    async def pods(request: web.Request) -> web.Response:
        seen_tokens.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != "Bearer first-token":
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401)
        return web.json_response({"kind": "PodList", "apiVersion": "v1", "items": [POD_A, POD_B, POD_M, 7]})

    app = web.Application()
    app.router.add_get("/pods", pods)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    kubelet = f"http://127.0.0.1:{runner.addresses[0][1]}"
    node_proc(tmp_path / "proc")
    metrics = CountingMetrics(NODE, until=lambda s: attributed(s) == {"train-a", "eval-b", "mig-job"})
    settings = agent_settings(
        tmp_path, pods="kubelet", kubelet_url=kubelet, token_file=str(token_file), pod_refresh_seconds=0.01
    )
    stop = asyncio.Event()
    try:
        async with agent_process(settings, FakeNvml(node_gpus()), metrics) as process:
            task = asyncio.create_task(process.run(stop))
            await metrics.wait()
            assert seen_tokens[0] == "Bearer first-token"
            stop.set()
            await asyncio.wait_for(task, 10)
    finally:
        await runner.cleanup()


async def test_without_a_node_name_the_agent_refuses_to_start(tmp_path: Path) -> None:
    settings = Settings.model_validate({"agent": {"listen": "127.0.0.1:0"}})
    with pytest.raises(ConfigError, match=r"agent\.node_name is required"):
        await run_agent(settings, asyncio.Event(), FakeNvml([]))


def _wait_http(url: str, deadline: float) -> tuple[int, str]:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return response.status, response.read().decode()
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_command_runs_without_a_driver_and_stops_on_sigterm(tmp_path: Path) -> None:
    """On a machine without libnvidia-ml the agent still serves: NVML down, the gap says why."""
    port = free_port()
    env = {
        **os.environ,
        "INNO_NOTIFY_AGENT__PODS": "none",
        "INNO_NOTIFY_AGENT__LISTEN": f"127.0.0.1:{port}",
        "INNO_NOTIFY_AGENT__INTERVAL_SECONDS": "0.1",
        "INNO_NOTIFY_AGENT__PROC_ROOT": str(tmp_path),
    }
    env.pop("INNO_NOTIFY_CONFIG", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "inno_notify", "agent"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        assert _wait_http(f"http://127.0.0.1:{port}/healthz", deadline) == (200, "ok\n")
        _, text = _wait_http(f"http://127.0.0.1:{port}/metrics", deadline)
        scraped = scrape(text)
        assert scraped[("inno_notify_agent_nvml_up", frozenset())] == 0
        reasons = {dict(k)["reason"] for k in series(scraped, "inno_notify_agent_gaps")}
        # No libnvidia-ml.so.1 here; on a GPU machine this test's process would see the driver.
        assert reasons <= {"library_not_found", "driver_not_loaded"} and reasons
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert "SIGTERM received" in stderr
