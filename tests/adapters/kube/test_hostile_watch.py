"""What a watch stream or a bug can throw at the watchers, end to end into a real store (SQLite and
Postgres): lines that are no watch event are set aside and counted, an exception that ends a watcher
is logged and the watcher restarted, readiness follows how recently each stream was heard from.
Each of these ended `ClusterWatcher.run` (or left readiness green) before the hardening."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inno_notify.adapters import kube
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.kube import ClusterWatcher, WatchOptions, load_api_client
from inno_notify.domain.model import JobStatus
from inno_notify.domain.parsing import ParseConfig
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS
from inno_notify.sim.objects import JobSpec, job_object, job_started, job_succeeded
from tests import stored
from tests.adapters.kube.scripted import ScriptedServer, event_line
from tests.adapters.kube.support import FakeClock, running
from tests.waiting import eventually

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
FAST = WatchOptions(inactivity_timeout=5.0, backoff_base=0.01, backoff_cap=0.05)


def ingestor_for(store: Store) -> Ingestor:
    return Ingestor(
        store,
        ParseConfig(cluster="w"),
        IngestOptions(catch_up_seconds=86400),
        lambda: T0 + timedelta(hours=2),
        T0,
    )


def finished_job(name: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    spec = JobSpec(name=name, namespace="ml", owner="alice@example.com")
    job = job_object(spec, T0)
    return spec.uid, job, job_succeeded(job_started(job, T0), T0 + timedelta(hours=1))


async def recorded(store: Store, uid: str, status: JobStatus = JobStatus.SUCCEEDED) -> None:
    async def is_stored() -> bool:  # rows announce nothing: polled
        job = await stored.get_job(store, "w", uid)
        return job is not None and job.status is status

    await eventually(is_stored, what=f"job {uid} stored as {status}")


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer()
    await server.start()
    yield server
    await server.stop()


async def test_watch_lines_that_are_not_events_are_set_aside_and_the_stream_goes_on(
    store: Store, scripted: ScriptedServer, tmp_path: Path
) -> None:
    uid, job, done = finished_job("after-garbage")
    hostile = [
        b"garbage that is no JSON\n",
        b"[1, 2]\n",
        b"42\n",
        b'"a string"\n',
        b'{"type": "ADDED", "object": [1]}\n',
        b'{"type": "ADDED"}\n',
        b'{"type": "WEIRD", "object": {}}\n',
        b'{"type": {"a": 1}, "object": {}}\n',
        b"{" * 5000 + b"\n",
    ]
    for line in [*hostile, event_line("ADDED", job), event_line("MODIFIED", done)]:
        scripted.lines.put_nowait(line)
    api = await load_api_client(scripted.kubeconfig(tmp_path / "kubeconfig"))
    ingestor = ingestor_for(store)
    cluster = ClusterWatcher(
        api, ingestor.on_event, ingestor.on_relist, kueue=False, resources=(kube.JOBS,), options=FAST
    )
    try:
        async with running(cluster.run()), running(ingestor.run()):
            await recorded(store, uid)
            stats = cluster.watchers["Job"].stats
            assert stats.malformed == {"invalid_json": 2, "not_an_object": 5, "unknown_type": 2}
            assert (stats.crashes, stats.watch_starts, scripted.watches) == (0, 1, 1)
            assert cluster.readiness() == {"watch:Job": True}
    finally:
        await api.close()


async def test_an_overlong_watch_line_is_dropped_without_holding_it(
    store: Store, scripted: ScriptedServer, tmp_path: Path
) -> None:
    uid, job, done = finished_job("after-long-line")
    big = b'{"type": "ADDED", "object": {"x": "' + b"y" * 300_000 + b'"}}\n'
    for line in [big[:100_000], big[100_000:], event_line("ADDED", job), event_line("MODIFIED", done)]:
        scripted.lines.put_nowait(line)
    api = await load_api_client(scripted.kubeconfig(tmp_path / "kubeconfig"))
    ingestor = ingestor_for(store)
    options = WatchOptions(inactivity_timeout=5.0, max_line_bytes=64_000)
    cluster = ClusterWatcher(
        api, ingestor.on_event, ingestor.on_relist, kueue=False, resources=(kube.JOBS,), options=options
    )
    try:
        async with running(cluster.run()), running(ingestor.run()):
            await recorded(store, uid)
            assert cluster.watchers["Job"].stats.malformed == {"line_too_long": 1}
    finally:
        await api.close()


async def test_an_exception_that_ends_a_watcher_restarts_it(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="inno_notify.adapters.kube")
    sim = SimKubeServer(bookmark_interval=0.2)
    await sim.start()
    api = await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))
    ingestor = ingestor_for(store)
    exploded: list[str] = []

    async def on_event(kind: str, event_type: str, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "explode" and not exploded:
            exploded.append(event_type)
            raise RuntimeError("a bug no one foresaw")
        await ingestor.on_event(kind, event_type, obj)

    cluster = ClusterWatcher(api, on_event, ingestor.on_relist, kueue=False, options=FAST)
    try:
        async with running(cluster.run()) as task, running(ingestor.run()):
            await asyncio.wait_for(cluster.wait_ready(), 10)
            uid, job, done = finished_job("explode")
            other_uid, other, other_done = finished_job("other")
            for created, finished in ((job, done), (other, other_done)):
                sim.create(JOBS, created)
                sim.update(JOBS, finished)
            await recorded(store, uid)
            await recorded(store, other_uid)
            assert not task.done()
            assert cluster.watchers["Job"].stats.crashes == 1
    finally:
        await api.close()
        await sim.stop()
    [record] = [r for r in caplog.records if "restarting" in r.getMessage()]
    assert "Job watcher ended (RuntimeError('a bug no one foresaw'))" in record.getMessage()
    assert record.exc_info is not None  # the traceback is logged


async def test_readiness_goes_stale_when_a_stream_falls_silent(store: Store, tmp_path: Path) -> None:
    sim = SimKubeServer(bookmark_interval=0.1)
    await sim.start()
    api = await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))
    ingestor = ingestor_for(store)
    clock = FakeClock()
    options = WatchOptions(inactivity_timeout=60.0, stale_after=30.0, clock=clock)
    cluster = ClusterWatcher(api, ingestor.on_event, ingestor.on_relist, kueue=False, options=options)
    try:
        async with running(cluster.run()), running(ingestor.run()):
            await asyncio.wait_for(cluster.wait_ready(), 10)
            await eventually(lambda: sim.open_watches == 3)
            assert cluster.readiness() == {"watch:Job": True, "watch:Pod": True, "watch:Event": True}
            assert cluster.not_ready_reasons() == {}
            assert sim.stall_watches(True) == 3  # connections stay open, nothing arrives any more
            clock.now += 31
            assert cluster.readiness() == {"watch:Job": False, "watch:Pod": False, "watch:Event": False}
            assert (
                cluster.not_ready_reasons()["watch:Job"] == "no event or bookmark for 31 s (stale after 30 s)"
            )
            assert not cluster.ready
            sim.stall_watches(False)  # bookmarks flow again
            await eventually(lambda: cluster.ready)
            uid, job, done = finished_job("after-stall")
            sim.create(JOBS, job)
            sim.update(JOBS, done)
            await recorded(store, uid)
    finally:
        await api.close()
        await sim.stop()


async def test_not_ready_before_the_first_list_says_why(
    store: Store, scripted: ScriptedServer, tmp_path: Path
) -> None:
    api = await load_api_client(scripted.kubeconfig(tmp_path / "kubeconfig"))
    ingestor = ingestor_for(store)
    cluster = ClusterWatcher(api, ingestor.on_event, ingestor.on_relist, kueue=True, resources=(kube.JOBS,))
    try:
        assert cluster.readiness() == {"watch:Job": False, "watch:Workload": False}
        assert cluster.not_ready_reasons() == {
            "watch:Job": "initial list not received yet",
            "watch:Workload": "Kueue discovery has not answered yet",
        }
    finally:
        await api.close()
