"""Restarts and relists never re-send: the whole pipeline over the sim API server, twice, then a 410.

1,000 finished jobs are summarized and delivered by a first service instance; a second instance
on the same database lists them all again, and then loses its watch to a compacted history and
relists: neither sends a single message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from inno_notify.adapters.channels.base import MailMessage, Recipient, RenderedMessage
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.kube import ClusterWatcher, WatchOptions, load_api_client
from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.measure import PodMeasurement
from inno_notify.domain.model import DeliveryStatus
from inno_notify.runtime import build_pipeline, seed_directory
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

N_JOBS = 1000
NOW = datetime.now(UTC).replace(microsecond=0)


class CountingMailbox:
    """Our own Sender protocol: counts what would have gone out."""

    def __init__(self) -> None:
        self.messages = 0

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        assert isinstance(message, MailMessage)
        self.messages += 1
        return f"<{self.messages}@test>"

    async def aclose(self) -> None:
        return None


class NoMetrics:
    """No Prometheus in this test: every figure is missing, the summaries still go out."""

    async def measure_pods(self, targets: Sequence[PodWindow]) -> Mapping[str, PodMeasurement]:
        return {}


def fill(sim: SimKubeServer) -> None:
    for i in range(N_JOBS):
        owner = f"user{i % 20}@example.com"
        spec = JobSpec(name=f"done-{i:04d}", namespace="ns", owner=owner, gpus=1)
        start = NOW - timedelta(minutes=30)
        job = job_object(spec, start)
        pod = pod_object(job, f"{i:05d}", start)
        running = pod_running(pod, "node", start + timedelta(seconds=5), start + timedelta(seconds=9))
        sim.create(PODS, pod_terminated(running, NOW - timedelta(minutes=5), 0))
        sim.create(JOBS, job_succeeded(job_started(job, start), NOW - timedelta(minutes=5)))


async def run_instance(
    settings: Settings, sim: SimKubeServer, kubeconfig: Path, until: Any, extra: Any = None
) -> CountingMailbox:
    """One service instance (watch, ingest, usage, dispatch) until `until(store)` holds."""
    store = Store.from_url(settings.database_url)
    await seed_directory(store, settings)
    mailbox = CountingMailbox()
    pipeline = build_pipeline(
        settings,
        store,
        NoMetrics(),
        {"email": mailbox},
        lambda: datetime.now(UTC),
        started_at=NOW,
        poll_seconds=0.05,
    )
    api = await load_api_client(kubeconfig)
    watcher = ClusterWatcher(
        api,
        pipeline.ingestor.on_event,
        pipeline.ingestor.on_relist,
        kueue=False,
        options=WatchOptions(backoff_base=0.01, backoff_cap=0.05),
    )
    stop = asyncio.Event()
    tasks = [asyncio.create_task(watcher.run())]
    tasks += [asyncio.create_task(component(stop)) for _, component in pipeline.components]
    try:
        await asyncio.wait_for(watcher.wait_ready(), 30)
        await asyncio.wait_for(pipeline.ingestor.drained(), 30)
        if extra is not None:
            await extra(pipeline)
        async with asyncio.timeout(60):
            while True:
                if await until(store):
                    break
                await asyncio.sleep(0.1)
    finally:
        stop.set()
        for task in tasks[1:]:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
        tasks[0].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tasks[0]
        await api.close()
        await store.close()
    return mailbox


async def sent_rows(store: Store) -> int:
    return (await store.outbox_depth())["sent"]


async def test_restart_and_relist_send_nothing_again(database_url: str, tmp_path: Path) -> None:
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    kubeconfig = sim.kubeconfig(tmp_path / "kubeconfig")
    fill(sim)
    settings = Settings.model_validate(
        {
            "database_url": database_url,
            "cluster": "replay",
            "prometheus": {"metrics_delay_seconds": 0},
            "notify": {"group_wait_seconds": 0},
            "channels": {"email": {"host": "unused", "sender": "bot@example.com"}},
        }
    )
    try:

        async def all_sent(store: Store) -> bool:
            depth = await store.outbox_depth()
            return depth["sent"] == N_JOBS and depth["pending"] == 0

        first = await run_instance(settings, sim, kubeconfig, all_sent)
        assert 20 <= first.messages <= N_JOBS  # 20 owners, summaries grouped per owner

        restarted = await run_instance(settings, sim, kubeconfig, quiet_period())
        assert restarted.messages == 0

        async def lose_history(pipeline: Any) -> None:
            sim.compact()
            sim.drop_watches()  # the watch comes back from a compacted version: 410, relist

        relisted = await run_instance(settings, sim, kubeconfig, quiet_period(), lose_history)
        assert relisted.messages == 0
        store = Store.from_url(database_url)
        try:
            depth = await store.outbox_depth()
        finally:
            await store.close()
        assert depth == {DeliveryStatus.SENT.value: N_JOBS, "pending": 0, "failed": 0}
    finally:
        await sim.stop()


def quiet_period(checks: int = 20) -> Any:
    """Holds for `checks` polls (about two seconds of pipeline rounds) in which anything could go out."""
    seen: list[int] = []

    async def until(store: Store) -> bool:
        seen.append(await sent_rows(store))
        return len(seen) >= checks

    return until
