"""ClusterWatcher: readiness after every initial list, and the Kueue decision per kubernetes.kueue."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters.kube import ClusterWatcher, KueueMode, WatchOptions, load_api_client
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import CORE_EVENTS, JOBS, PODS, WORKLOADS_V1BETA1, WORKLOADS_V1BETA2
from tests.adapters.kube.support import Consumer, job, running
from tests.waiting import eventually

FAST = WatchOptions(inactivity_timeout=2.0, backoff_base=0.01, backoff_cap=0.05)
RECHECK = 0.02


class RecordingSleep:
    """The watchers' sleep: records each delay, then sleeps it for real (the rechecks are short)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(seconds)


def workload(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": {"queueName": "lq"}}


async def start_sim(kueue_versions: tuple[str, ...], tmp_path: Path) -> tuple[SimKubeServer, ApiClient]:
    sim = SimKubeServer(kueue_versions=kueue_versions, bookmark_interval=0.2)
    await sim.start()
    return sim, await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))


@pytest.mark.parametrize(
    ("served", "mode", "expected"),
    [
        (("v1beta1", "v1beta2"), "auto", "v1beta2"),
        (("v1beta1",), "auto", "v1beta1"),
        (("v1beta2",), True, "v1beta2"),
        (("v1beta1", "v1beta2"), False, ""),
        ((), "auto", ""),
    ],
)
async def test_kueue_workloads_are_watched_in_the_preferred_version(
    served: tuple[str, ...], mode: KueueMode, expected: str, tmp_path: Path, consumer: Consumer
) -> None:
    sim, api = await start_sim(served, tmp_path)
    try:
        sim.create(JOBS, job("train"))
        if served:
            sim.create(
                WORKLOADS_V1BETA1 if "v1beta1" in served else WORKLOADS_V1BETA2, workload("job-train-1")
            )
        cluster = ClusterWatcher(api, consumer.on_event, consumer.on_relist, kueue=mode, options=FAST)
        async with running(cluster.run()):
            await asyncio.wait_for(cluster.wait_ready(), 5)
            assert cluster.ready
    finally:
        await api.close()
        await sim.stop()
    assert cluster.kueue_version == expected
    assert ("Workload" in cluster.watchers) == bool(expected)
    assert len(consumer.objects["Job"]) == 1
    if expected:
        [obj] = consumer.objects["Workload"].values()
        assert obj["apiVersion"] == f"kueue.x-k8s.io/{expected}"
    else:
        assert not consumer.objects["Workload"]


async def test_absent_kueue_in_auto_mode_is_quiet(
    tmp_path: Path, consumer: Consumer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="inno_notify.adapters.kube")
    sim, api = await start_sim((), tmp_path)
    try:
        cluster = ClusterWatcher(api, consumer.on_event, consumer.on_relist, options=FAST)
        async with running(cluster.run()):
            await asyncio.wait_for(cluster.wait_ready(), 5)
            lists_when_ready = sim.stats.lists
    finally:
        await api.close()
        await sim.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in caplog.records if "Kueue" in r.getMessage()] == [
        "Kueue is not installed: Workloads are not watched"
    ]
    assert sim.stats.failed == 0
    assert lists_when_ready == 3  # Jobs, Pods, Events


async def test_required_kueue_installed_later_is_picked_up_with_one_warning(
    tmp_path: Path, consumer: Consumer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inno_notify.adapters.kube")
    sim, api = await start_sim((), tmp_path)
    sleep = RecordingSleep()
    try:
        cluster = ClusterWatcher(
            api,
            consumer.on_event,
            consumer.on_relist,
            kueue=True,
            options=replace(FAST, sleep=sleep),
            kueue_recheck_seconds=RECHECK,
        )
        async with running(cluster.run()):
            await asyncio.wait_for(cluster.wait_ready(), 5)
            assert cluster.kueue_version == ""
            # Three rechecks go by while Kueue is still absent (nothing else sleeps: no failures).
            await eventually(lambda: sleep.delays.count(RECHECK) >= 3)
            sim.kueue_versions = ("v1beta2",)
            sim.create(WORKLOADS_V1BETA2, workload("job-a-1"))
            await consumer.wait_for(lambda: len(consumer.objects["Workload"]) == 1)
    finally:
        await api.close()
        await sim.stop()
    assert cluster.kueue_version == "v1beta2"
    assert [r.getMessage() for r in caplog.records] == [
        "kubernetes.kueue is true but Kueue is not installed; checking again every 0.02 s"
    ]
    assert sim.stats.failed == 0 and set(sleep.delays) == {RECHECK}


async def test_not_ready_until_every_initial_list_is_applied(tmp_path: Path, consumer: Consumer) -> None:
    sim, api = await start_sim((), tmp_path)
    sim.create(JOBS, job("a"))
    sim.create(PODS, {"metadata": {"name": "a-xyz", "namespace": "ml"}})
    sim.create(CORE_EVENTS, {"metadata": {"name": "a.1", "namespace": "ml"}, "reason": "Completed"})
    pods_applied = asyncio.Event()

    async def slow_relist(kind: str, uids: frozenset[str]) -> None:
        if kind == "Pod":
            await pods_applied.wait()
        await consumer.on_relist(kind, uids)

    try:
        cluster = ClusterWatcher(api, consumer.on_event, slow_relist, kueue=False, options=FAST)
        async with running(cluster.run()):
            await asyncio.wait_for(cluster.watchers["Job"].synced.wait(), 5)
            await asyncio.wait_for(cluster.watchers["Event"].synced.wait(), 5)
            assert not cluster.ready
            pods_applied.set()
            await asyncio.wait_for(cluster.wait_ready(), 5)
            assert cluster.ready
    finally:
        await api.close()
        await sim.stop()
    assert {kind: len(objs) for kind, objs in consumer.objects.items()} == {"Job": 1, "Pod": 1, "Event": 1}
