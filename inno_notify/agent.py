"""Composition root of `inno-notify agent` (CONTRACT.md §1): the NVML node agent, one per GPU node.

Builds the NVML sampler on the real ``pynvml`` module (or the one a test passes), the /proc reader
on ``agent.proc_root``, the node's pod directory (``agent.pods``: the API server's watch, the
kubelet's list, or none), the metrics, and an HTTP server on ``agent.listen`` with ``/metrics`` and
``/healthz``; then samples every ``agent.interval_seconds`` until SIGTERM or SIGINT, and shuts NVML
down. Like ``runtime`` for ``serve``, it only composes; the loop is ``service.node_agent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import signal
import ssl
from collections.abc import AsyncIterator, Collection, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from inno_notify.adapters.kube import PODS, ResourceWatcher, load_api_client
from inno_notify.adapters.kube.kubelet import KubeletPods, kubelet_ssl
from inno_notify.adapters.nvml import NvmlSampler, read_cgroups
from inno_notify.domain.agent import CgroupRef
from inno_notify.service.agent_metrics import AgentMetrics
from inno_notify.service.agent_pods import PodDirectory, PolledPods, WatchedPods
from inno_notify.service.node_agent import NodeAgent, ReadCgroups
from inno_notify.settings import AgentSettings, ConfigError, Settings

log = logging.getLogger(__name__)


def check_agent_settings(agent: AgentSettings) -> None:
    """What the settings models cannot check without failing `serve` on the same file."""
    if agent.pods != "none" and not agent.node_name:
        raise ConfigError(
            f"agent.node_name is required with agent.pods: {agent.pods} (the DaemonSet sets "
            "INNO_NOTIFY_AGENT__NODE_NAME from spec.nodeName; agent.pods: none runs without pod names)"
        )


def _cgroup_reader(proc_root: str) -> ReadCgroups:
    root = Path(proc_root)

    def read(pids: Collection[int]) -> Mapping[int, CgroupRef | None]:
        return read_cgroups(root, pids)

    return read


class AgentProcess:
    """The agent's parts, started by ``async with``: ``port`` is where it listens (useful with port 0)."""

    def __init__(self, settings: Settings, nvml: Any, metrics: AgentMetrics | None = None) -> None:
        check_agent_settings(settings.agent)
        self.settings = settings
        agent = settings.agent
        self.sampler = NvmlSampler(nvml, first_window_seconds=agent.interval_seconds)
        self.metrics = metrics or AgentMetrics(agent.node_name or "")
        self.directory: PodDirectory | None = None
        self.node_agent: NodeAgent | None = None
        self.port: int | None = None
        self._stack = contextlib.AsyncExitStack()
        self._background: list[Any] = []

    async def __aenter__(self) -> AgentProcess:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _start(self) -> None:
        agent = self.settings.agent
        self._stack.callback(self.sampler.close)
        self.directory = await self._pods()
        self.node_agent = NodeAgent(
            self.sampler,
            _cgroup_reader(agent.proc_root),
            self.directory,
            self.metrics,
            interval_seconds=agent.interval_seconds,
        )
        runner = web.AppRunner(self._app(self.node_agent), access_log=None)
        await runner.setup()
        self._stack.push_async_callback(runner.cleanup)
        host, _, port = agent.listen.rpartition(":")
        site = web.TCPSite(runner, host.strip("[]") or None, int(port))
        await site.start()
        self.port = int(runner.addresses[0][1])
        log.info(
            "agent: node %s, pods from %s, sampling every %s s, listening on %s",
            agent.node_name or "(none)",
            agent.pods,
            agent.interval_seconds,
            agent.listen,
        )

    async def _pods(self) -> PodDirectory | None:
        agent = self.settings.agent
        if agent.pods == "none":
            return None
        if agent.pods == "kubelet":
            url = agent.kubelet_url or f"https://{agent.node_name}:10250"
            tls: ssl.SSLContext | bool = False
            if url.startswith("https:"):
                try:
                    tls = kubelet_ssl(agent.kubelet_ca_file, verify=agent.kubelet_verify_tls)
                except OSError as exc:
                    raise ConfigError(
                        f"agent.kubelet_ca_file: cannot read {agent.kubelet_ca_file!r}: {exc.strerror or exc}"
                    ) from None
            kubelet = KubeletPods(url, agent.token_file, ssl_context=tls)
            self._stack.push_async_callback(kubelet.close)
            return PolledPods(kubelet.list_pods, min_refresh_seconds=agent.pod_refresh_seconds)
        kube = self.settings.kubernetes
        api = await load_api_client(kube.kubeconfig, kube.context)
        self._stack.push_async_callback(api.close)
        watched = WatchedPods()
        resource = dataclasses.replace(PODS, field_selector=f"spec.nodeName={agent.node_name}")
        self._background.append(ResourceWatcher(api, resource, watched.on_event, watched.on_relist).run)
        return watched

    def _app(self, node_agent: NodeAgent) -> web.Application:
        async def metrics(request: web.Request) -> web.Response:
            response = web.Response(body=self.metrics.render())
            response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
            response.charset = "utf-8"
            return response

        async def healthz(request: web.Request) -> web.Response:
            ok, detail = node_agent.healthy()
            return web.Response(text=detail + "\n", status=200 if ok else 503)

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/healthz", healthz)
        return app

    async def run(self, stop: asyncio.Event) -> None:
        """Samples until ``stop`` is set; background watches end with it."""
        assert self.node_agent is not None, "use `async with AgentProcess(...)` first"
        async with asyncio.TaskGroup() as group:
            watches = [group.create_task(start(), name="agent-pods") for start in self._background]
            await self.node_agent.run(stop)
            for task in watches:
                task.cancel()


@contextlib.asynccontextmanager
async def agent_process(
    settings: Settings, nvml: Any | None = None, metrics: AgentMetrics | None = None
) -> AsyncIterator[AgentProcess]:
    """The agent's parts on ``nvml`` (default: the real ``pynvml`` module), started and then closed."""
    if nvml is None:
        import pynvml  # NVIDIA's nvidia-ml-py; importing it loads no library yet

        nvml = pynvml
    async with AgentProcess(settings, nvml, metrics) as process:
        yield process


def _install_signal_handlers(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, functools.partial(_on_signal, stop, sig))


def _on_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    log.info("agent: %s received, stopping", sig.name)
    stop.set()


async def run_agent(settings: Settings, stop: asyncio.Event | None = None, nvml: Any | None = None) -> None:
    """`inno-notify agent`: runs until SIGTERM/SIGINT (or ``stop``), then exits cleanly."""
    check_agent_settings(settings.agent)
    if stop is None:
        stop = asyncio.Event()
        _install_signal_handlers(stop)
    async with agent_process(settings, nvml) as process:
        await process.run(stop)
    log.info("agent: stopped after %d sample(s)", process.node_agent.samples if process.node_agent else 0)
