"""The production pipeline on a real store, watching the simulated API server through kubernetes-asyncio,
with a clock the test moves: for the workflow, Airflow and KServe tests.

The watch, the ingestor, the workflow tracker and their consumers run for real in the background;
the time-driven parts (usage collection, the workflow summarizer, the dispatcher) are driven one
round at a time at the test's `now`. Measurements come from `StepMeter` (the UsageSource protocol,
ours), messages go to `RecordingSender` (the Sender protocol, ours) through the real renderer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inno_notify.adapters.channels.base import MailMessage, Recipient, RenderedMessage
from inno_notify.adapters.db import Store
from inno_notify.adapters.kube import ClusterWatcher, WatchOptions, load_api_client
from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.measure import PodMeasurement
from inno_notify.domain.model import GpuUsage, Notification, PodUsage
from inno_notify.runtime import Pipeline, build_pipeline
from inno_notify.runtime.configuration import seed_directory
from inno_notify.settings import Settings
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.pipelines import Change, apply_all

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
FAST = WatchOptions(inactivity_timeout=2.0, backoff_base=0.01, backoff_cap=0.05)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass
class RecordingSender:
    """Takes every message; what the provider would have shown is in `sent`."""

    sent: list[tuple[Recipient, RenderedMessage]] = field(default_factory=list)

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        self.sent.append((recipient, message))
        return f"msg-{len(self.sent)}"

    async def aclose(self) -> None:
        return None

    def mails(self) -> list[tuple[str | None, MailMessage]]:
        return [(r.email, m) for r, m in self.sent if isinstance(m, MailMessage)]


@dataclass
class StepMeter:
    """Measures the GPU pods it knows: each GPU busy at `util` percent over the pod's held time."""

    util: Mapping[str, Sequence[float]]

    async def measure_pods(self, targets: Sequence[PodWindow]) -> Mapping[str, PodMeasurement]:
        found = {}
        for window in targets:
            utils = self.util.get(window.uid)
            if utils is None:
                continue
            minutes = window.held_seconds / 60
            gpus = tuple(
                GpuUsage(
                    pod_uid=window.uid,
                    pod_name=window.pod,
                    gpu=str(i),
                    held_minutes=minutes,
                    util_mean_percent=util,
                    util_max_percent=util,
                    fb_used_peak_bytes=20 * 2**30,
                    fb_total_bytes=80 * 2**30,
                    samples=int(window.held_seconds // 15),
                )
                for i, util in enumerate(utils)
            )
            pod = PodUsage(
                window.uid, window.pod, 24 * 2**30, 3.0, 4.0, samples=int(window.held_seconds // 15)
            )
            found[window.uid] = PodMeasurement(window=window, gpus=gpus, pod=pod)
        return found


def settings(database_url: str, **workflows: Any) -> Settings:
    return Settings.model_validate(
        {
            "database_url": database_url,
            "cluster": "test",
            "prometheus": {"metrics_delay_seconds": 60, "give_up_after_seconds": 1800},
            "notify": {"group_wait_seconds": 0},
            "channels": {"email": {"host": "smtp.example", "sender": "bot@example.com"}},
            "workflows": {"airflow_quiet_seconds": 300, **workflows},
            "directory": {
                "users": [
                    {"email": "alice@example.com", "name": "Alice", "channels": ["email"]},
                    {"email": "dana@example.com", "name": "Dana", "channels": ["email"]},
                ],
                "teams": [
                    {"name": "face", "namespaces": ["face-research"], "leads": ["lead@example.com"]},
                    {"name": "data", "namespaces": ["airflow"], "leads": ["lead@example.com"]},
                ],
            },
        }
    )


@dataclass
class Harness:
    sim: SimKubeServer
    store: Store
    pipeline: Pipeline
    watcher: ClusterWatcher
    clock: Clock
    sender: RecordingSender

    def apply(self, changes: Sequence[Change]) -> None:
        apply_all(self.sim, changes)

    async def until(self, condition: Callable[[], Any], within: float = 10.0) -> None:
        """Waits for the watch to bring the cluster's changes in (nothing announces it)."""
        async with asyncio.timeout(within):
            while not await condition():  # noqa: ASYNC110 - the watch announces nothing
                await asyncio.sleep(0.02)
        await self.pipeline.ingestor.drained()

    async def rounds(self, now: datetime) -> None:
        """The time-driven parts, one round each at `now`: usage, workflow summaries, dispatch."""
        self.clock.now = now
        assert self.pipeline.workflows is not None
        await self.pipeline.collector.run_once(now)
        await self.pipeline.workflows.summarizer.run_once(now)
        await self.pipeline.dispatcher.run_once(now)

    async def outbox(self) -> list[Notification]:
        rows, _ = await self.store.outbox.list_notifications(limit=500)
        return sorted(rows, key=lambda n: n.id or 0)


@contextlib.asynccontextmanager
async def harness(
    store: Store,
    database_url: str,
    tmp_path: Path,
    meter: StepMeter,
    *,
    sim: SimKubeServer | None = None,
    started_at: datetime = T0,
    now: datetime = T0,
) -> AsyncIterator[Harness]:
    """The pipeline against a sim API server serving Argo and KServe (a new one unless given)."""
    own_sim = sim is None
    server = sim or SimKubeServer(crds=("argo", "kserve"), bookmark_interval=0.2)
    if own_sim:
        await server.start()
    config = settings(database_url)
    await seed_directory(store, config)
    clock = Clock(now)
    sender = RecordingSender()
    pipeline = build_pipeline(config, store, meter, {"email": sender}, clock, started_at=started_at)
    assert pipeline.workflows is not None
    api = await load_api_client(server.kubeconfig(tmp_path / "kubeconfig"))
    watcher = ClusterWatcher(
        api,
        pipeline.ingestor.on_event,
        pipeline.ingestor.on_relist,
        kueue=False,
        argo=config.workflows.argo,
        kserve=config.workflows.kserve,
        options=FAST,
    )
    tasks = [
        asyncio.create_task(watcher.run()),
        asyncio.create_task(pipeline.ingestor.run()),
    ]
    try:
        async with asyncio.timeout(10):
            await watcher.wait_ready()
        yield Harness(server, store, pipeline, watcher, clock, sender)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await api.close()
        if own_sim:
            await server.stop()
