"""Restarts and relists never re-send: the whole pipeline over the sim API server, twice, then a 410.

300 finished jobs are summarized and delivered by a first service instance; a second instance
on the same database lists them all again, and then loses its watch to a compacted history and
relists: neither sends a single message. Every LIST comes in pages (100 objects a page, three pages
of jobs and three of pods), so each listing carries continue tokens as a big cluster's does; more
jobs would only make the first instance's summaries take longer (~11 ms each on a 2-core machine).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inno_notify.adapters.channels.base import MailMessage, Recipient, RenderedMessage
from inno_notify.adapters.db.repository import Store, SummaryState
from inno_notify.adapters.kube import ClusterWatcher, WatchOptions, load_api_client
from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.measure import PodMeasurement
from inno_notify.domain.model import DeliveryStatus
from inno_notify.runtime import Pipeline, build_pipeline
from inno_notify.runtime.configuration import seed_directory
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
from tests.waiting import eventually

pytestmark = pytest.mark.slow

N_JOBS = 300
# Objects per LIST page: a few pages for each resource, as a cluster of thousands of jobs has.
PAGE_SIZE = 100
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


def fill(sim: SimKubeServer) -> list[str]:
    uids = []
    for i in range(N_JOBS):
        owner = f"user{i % 20}@example.com"
        spec = JobSpec(name=f"done-{i:04d}", namespace="ns", owner=owner, gpus=1)
        start = NOW - timedelta(minutes=30)
        job = job_object(spec, start)
        pod = pod_object(job, f"{i:05d}", start)
        running = pod_running(pod, "node", start + timedelta(seconds=5), start + timedelta(seconds=9))
        sim.create(PODS, pod_terminated(running, NOW - timedelta(minutes=5), 0))
        sim.create(JOBS, job_succeeded(job_started(job, start), NOW - timedelta(minutes=5)))
        uids.append(spec.uid)
    return uids


# What an instance does once its watch is ready and everything listed is ingested.
Settle = Callable[[Pipeline, ClusterWatcher, Store], Awaitable[None]]


async def run_instance(
    settings: Settings, sim: SimKubeServer, kubeconfig: Path, settle: Settle
) -> CountingMailbox:
    """One service instance (watch, ingest, usage, dispatch) until `settle` returns."""
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
        options=WatchOptions(backoff_base=0.01, backoff_cap=0.05, page_size=PAGE_SIZE),
    )
    stop = asyncio.Event()
    tasks = [asyncio.create_task(watcher.run())]
    tasks += [asyncio.create_task(component(stop)) for _, component in pipeline.components]
    try:
        await asyncio.wait_for(watcher.wait_ready(), 30)
        await asyncio.wait_for(pipeline.ingestor.drained(), 30)
        await settle(pipeline, watcher, store)
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


async def all_sent(pipeline: Pipeline, watcher: ClusterWatcher, store: Store) -> None:
    async def done() -> bool:
        depth = await store.outbox.outbox_depth()
        return depth["sent"] == N_JOBS and depth["pending"] == 0

    # A bound for failing loudly, not a speed: the run takes ~4 s on a quiet 2-core machine.
    await eventually(done, within=300, what=f"{N_JOBS} summaries sent")


def nothing_left_to_send(uids: list[str]) -> Settle:
    """Checks, once everything listed is ingested, that no message can go out now or later.

    Messages only go out of pending outbox rows, and rows are only planned for jobs awaiting their
    summary: with no job newly finished, every job summarized and no row pending, nothing is left.
    """

    async def check(pipeline: Pipeline, watcher: ClusterWatcher, store: Store) -> None:
        assert pipeline.ingestor.stats.terminal_marked == 0
        states = await store.jobs.summary_states("replay", uids)
        assert list(states.values()) == [SummaryState.SUMMARIZED] * N_JOBS
        assert await store.outbox.outbox_depth() == {
            DeliveryStatus.SENT.value: N_JOBS,
            "pending": 0,
            "failed": 0,
        }
        assert pipeline.collector.stats.notifications_planned == 0

    return check


def history_lost(sim: SimKubeServer, then: Settle) -> Settle:
    """The watches come back from a compacted version (410) and every resource is listed again."""

    async def lose(pipeline: Pipeline, watcher: ClusterWatcher, store: Store) -> None:
        relists, gone = pipeline.ingestor.stats.relists, sim.stats.gone
        # Two writes no watch gets to send move the version past what any watch has seen (a bookmark
        # may have brought it up to date): compacted up to here, every watch comes back to a 410.
        stray = sim.create(JOBS, job_object(JobSpec(name="stray", namespace="ns"), NOW))
        sim.delete(JOBS, "ns", stray["metadata"]["name"])
        sim.compact()
        sim.drop_watches()
        await eventually(
            lambda: pipeline.ingestor.stats.relists >= relists + len(watcher.watchers),
            what="every resource listed again and the lists ingested",
        )
        await asyncio.wait_for(pipeline.ingestor.drained(), 30)
        assert sim.stats.gone - gone == len(watcher.watchers)
        await then(pipeline, watcher, store)

    return lose


async def test_restart_and_relist_send_nothing_again(database_url: str, tmp_path: Path) -> None:
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    kubeconfig = sim.kubeconfig(tmp_path / "kubeconfig")
    uids = fill(sim)
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
        first = await run_instance(settings, sim, kubeconfig, all_sent)
        assert 20 <= first.messages <= N_JOBS  # 20 owners, summaries grouped per owner
        # The jobs and the pods were listed page by page (other resources: one empty page each).
        assert sim.stats.lists >= 2 * -(-N_JOBS // PAGE_SIZE)

        restarted = await run_instance(settings, sim, kubeconfig, nothing_left_to_send(uids))
        assert restarted.messages == 0

        relisted = await run_instance(
            settings, sim, kubeconfig, history_lost(sim, nothing_left_to_send(uids))
        )
        assert relisted.messages == 0
    finally:
        await sim.stop()
