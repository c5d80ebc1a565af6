"""Ingestion through faults: kubernetes-asyncio over real HTTP to the simulated API server, into the store.

Every scenario finishes 50 jobs while something goes wrong, then checks that each job's terminal
state was recorded, and recorded exactly once (the store counts first transitions only, so the sum
over every ingestor that ran is the number of distinct jobs that ended).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters.db.repository import Store, SummaryState
from inno_notify.adapters.kube import ClusterWatcher, WatcherStats, WatchOptions, load_api_client
from inno_notify.domain.model import JobStatus
from inno_notify.domain.parsing import ParseConfig
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS, PODS
from inno_notify.sim.objects import (
    JobSpec,
    job_failed,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
)
from tests import stored
from tests.waiting import eventually

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
N_JOBS = 50


class FakeTime:
    """The sim server's failure clock: tests move it instead of sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(
        self, sim: SimKubeServer, time: FakeTime, store: Store, kubeconfig: Path, *, pages: bool = False
    ) -> None:
        # pages: wired as `serve` wires it (LIST pages whole, a restart's lists metadata first);
        # else object by object.
        self.pages = pages
        self.sim = sim
        self.time = time
        self.store = store
        self.kubeconfig = kubeconfig
        self.ingestors: list[Ingestor] = []
        self.watcher: ClusterWatcher | None = None
        self.jobs: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.expected: dict[str, JobStatus] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._api: ApiClient | None = None

    async def start_service(self) -> None:
        """One service instance: a fresh watcher and ingestor on the same store (a restart)."""
        api = self._api = await load_api_client(self.kubeconfig)
        ingestor = Ingestor(
            self.store,
            ParseConfig(cluster="faults"),
            IngestOptions(catch_up_seconds=10 * 86400),
            lambda: T0 + timedelta(hours=3),
            T0,
        )
        options = WatchOptions(inactivity_timeout=0.5, backoff_base=0.01, backoff_cap=0.05)
        watcher = ClusterWatcher(
            api,
            ingestor.on_event,
            ingestor.on_relist,
            kueue=False,
            options=options,
            on_listed=ingestor.on_listed if self.pages else None,
            known=ingestor if self.pages else None,
        )
        self.ingestors.append(ingestor)
        self.watcher = watcher
        self._tasks = [asyncio.create_task(watcher.run()), asyncio.create_task(ingestor.run())]
        await asyncio.wait_for(watcher.wait_ready(), 10)
        await eventually(lambda: self.sim.open_watches >= 3, what="the watches of jobs, pods and events")

    @property
    def ingestor(self) -> Ingestor:
        """The running instance's ingestor (earlier ones were stopped)."""
        return self.ingestors[-1]

    def watcher_stats(self) -> list[WatcherStats]:
        assert self.watcher is not None
        return [w.stats for w in self.watcher.watchers.values()]

    async def rewatched(self) -> None:
        """Waits until the three watches the sim just dropped are replaced by three new ones."""
        started = self.sim.stats.watches
        await eventually(
            lambda: self.sim.stats.watches >= started + 3 and self.sim.open_watches == 3,
            what="three new watches after the drop",
        )

    async def stop_service(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._api is not None:
            await self._api.close()

    def submit_all(self) -> None:
        for i in range(N_JOBS):
            spec = JobSpec(name=f"fault-{i:02d}", namespace="ns", owner="alice@example.com", gpus=1)
            job = job_object(spec, T0)
            pod = pod_object(job, f"p{i:04d}", T0 + timedelta(seconds=1))
            self.jobs[spec.uid] = self.sim.create(JOBS, job_started(job, T0 + timedelta(seconds=1)))
            self.pods[spec.uid] = self.sim.create(
                PODS, pod_running(pod, "node-1", T0 + timedelta(seconds=2), T0 + timedelta(seconds=5))
            )

    def finish(self, uids: list[str]) -> None:
        for n, uid in enumerate(uids):
            end = T0 + timedelta(minutes=30 + n)
            code = 0 if n % 3 else 1
            self.sim.update(PODS, pod_terminated(self.pods[uid], end, code))
            final = job_succeeded(self.jobs[uid], end) if code == 0 else job_failed(self.jobs[uid], end)
            self.sim.update(JOBS, final)
            self.expected[uid] = JobStatus.SUCCEEDED if code == 0 else JobStatus.FAILED

    async def settled(self) -> None:
        async def all_stored() -> bool:  # rows announce nothing: polled
            found = await stored.get_jobs(self.store, "faults", list(self.expected))
            return all(uid in found and found[uid].status is st for uid, st in self.expected.items())

        await eventually(all_stored, within=15, what="every finished job stored with its final status")

    async def check_exactly_once(self) -> None:
        await self.settled()
        await asyncio.wait_for(self.ingestor.drained(), 5)
        assert sum(i.stats.terminal_marked for i in self.ingestors) == len(self.expected)
        for uid in self.expected:
            assert await stored.summary_state(self.store, "faults", uid) is SummaryState.AWAITING_USAGE


@pytest.fixture(params=["events", "pages"])
async def harness(store: Store, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    time = FakeTime()
    sim = SimKubeServer(bookmark_interval=0.2, clock=time)
    await sim.start()
    h = Harness(sim, time, store, sim.kubeconfig(tmp_path / "kubeconfig"), pages=request.param == "pages")
    h.submit_all()
    await h.start_service()
    try:
        yield h
    finally:
        await h.stop_service()
        await sim.stop()


async def test_watches_dropped_while_jobs_finish(harness: Harness) -> None:
    uids = list(harness.jobs)
    for chunk in range(5):
        harness.finish(uids[chunk * 10 : (chunk + 1) * 10])
        assert harness.sim.drop_watches() == 3
        await harness.rewatched()  # so that the next drop cuts live watches again
    await harness.check_exactly_once()


async def test_history_compacted_past_the_client_version_relists(harness: Harness) -> None:
    uids = list(harness.jobs)
    harness.finish(uids[:20])
    await harness.settled()
    await harness.stop_service()
    harness.finish(uids[20:])
    # Ten finished jobs are deleted by their TTL before we come back, and history is compacted.
    for uid in uids[40:]:
        harness.sim.delete(PODS, "ns", harness.pods[uid]["metadata"]["name"])
        harness.sim.delete(JOBS, "ns", harness.jobs[uid]["metadata"]["name"])
    harness.sim.compact()
    for uid in uids[40:]:
        harness.expected[uid] = JobStatus.DELETED
    await harness.start_service()
    await harness.check_exactly_once()
    closed = await stored.get_jobs(harness.store, "faults", uids[40:])
    assert all(job.finished_at is not None for job in closed.values())


async def test_a_silently_stalled_stream_is_restarted(harness: Harness) -> None:
    assert harness.sim.stall_watches(True) > 0
    harness.finish(list(harness.jobs))
    await harness.check_exactly_once()


async def test_server_errors_for_a_while(harness: Harness) -> None:
    uids = list(harness.jobs)

    async def all_recorded() -> bool:
        return len(await stored.get_jobs(harness.store, "faults", uids)) == N_JOBS

    await eventually(all_recorded)
    harness.sim.fail_requests(500, seconds=30)
    harness.sim.drop_watches()
    harness.finish(uids[:25])
    # Every watcher has been refused twice since the drop and the ingestor has written all it got:
    # nothing of the 25 can have come through.
    failures = [stats.failures for stats in harness.watcher_stats()]
    await eventually(
        lambda: all(s.failures >= f + 2 for s, f in zip(harness.watcher_stats(), failures, strict=True)),
        what="two refused reconnects per watcher",
    )
    await asyncio.wait_for(harness.ingestor.drained(), 5)
    found = await stored.get_jobs(harness.store, "faults", uids[:25])
    assert {job.status for job in found.values()} == {JobStatus.RUNNING}
    harness.time.now += 31  # 30 s of failures pass
    harness.finish(uids[25:])
    await harness.check_exactly_once()


async def test_service_restarted_mid_stream(harness: Harness) -> None:
    uids = list(harness.jobs)
    rng = random.Random(3)
    rng.shuffle(uids)
    harness.finish(uids[:15])
    # Stopped once the first finished jobs are recorded: the rest of the stream is cut off.
    await eventually(lambda: harness.ingestor.stats.terminal_marked > 0)
    await harness.stop_service()
    harness.finish(uids[15:35])
    await harness.start_service()
    harness.finish(uids[35:])
    await harness.check_exactly_once()
    if harness.pages:
        # The restart asked for metadata first and fetched only what changed while it was away:
        # the jobs and pods that finished then, and those whose end the first instance had not
        # written yet (at most the 15 that finished before it stopped).
        assert harness.sim.stats.metadata_lists >= 2
        assert 40 <= harness.sim.stats.gets <= 70
        assert harness.ingestor.stats.unchanged >= 30
