"""The Kueue queue watch end to end: the sim API server serves ClusterQueues and LocalQueues (real
captures), the cluster watcher lists and watches them, the queue tracker keeps the store's copy:
created, changed, deleted live, deleted while away (a relist), and a hostile queue set aside."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters.db import Store
from inno_notify.adapters.kube import ClusterWatcher, WatchOptions, load_api_client
from inno_notify.domain.kueue_queues import ClusterQueueQuota, LocalQueueRef
from inno_notify.service.kueue_queues import QueueTracker
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import CLUSTER_QUEUES, LOCAL_QUEUES
from tests import stored
from tests.adapters.kube.support import running
from tests.waiting import eventually

FIXTURES = Path(__file__).parents[1] / "fixtures" / "kueue"
FAST = WatchOptions(inactivity_timeout=2.0, backoff_base=0.01, backoff_cap=0.05)
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def fixture(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    # What the sim server assigns itself.
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation", "finalizers", "annotations"):
        obj.get("metadata", {}).pop(key, None)
    return obj


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[tuple[SimKubeServer, ApiClient]]:
    server = SimKubeServer(kueue_versions=("v1beta1", "v1beta2"), bookmark_interval=0.2)
    await server.start()
    api = await load_api_client(server.kubeconfig(tmp_path / "kubeconfig"))
    try:
        yield server, api
    finally:
        await api.close()
        await server.stop()


async def test_queues_follow_the_cluster(sim: tuple[SimKubeServer, ApiClient], store: Store) -> None:
    server, api = sim
    cq_type, lq_type = CLUSTER_QUEUES["v1beta1"], LOCAL_QUEUES["v1beta1"]
    server.create(cq_type, fixture("clusterqueue-gpu-flavors-v0.5.2.json"))  # 8 + 4 GPUs
    server.create(lq_type, fixture("localqueue-v0.5.2.json"))  # ml-user/lq-all-resources
    tracker = QueueTracker(store, "default", {"nvidia.com/gpu": 1.0}, lambda: NOW)

    async def cqs() -> list[ClusterQueueQuota]:
        return await store.queues.list_cluster_queues("default")

    async def lqs() -> list[LocalQueueRef]:
        return await store.queues.list_local_queues("default")

    cluster = ClusterWatcher(api, tracker.on_event, tracker.on_relist, kueue="auto", options=FAST)
    async with running(cluster.run()):
        await cluster.wait_ready()
        assert {"watch:ClusterQueue", "watch:LocalQueue"} <= set(cluster.readiness())
        await eventually(lambda: _equal(cqs, [ClusterQueueQuota("cq-all-resources", 12.0)]))
        await eventually(
            lambda: _equal(lqs, [LocalQueueRef("ml-user", "lq-all-resources", "cq-all-resources")])
        )

        # A quota raised, a second ClusterQueue, a LocalQueue deleted: each arrives by the watch.
        changed = copy.deepcopy(server.store.get(cq_type, None, "cq-all-resources"))
        changed["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["nominalQuota"] = "12"
        server.update(cq_type, changed)
        gpu40 = fixture("clusterqueue-gpu40-reserving-4-admitted-3-excerpt.json")
        server.create(CLUSTER_QUEUES["v1beta2"], {"metadata": {"name": "cq-40"}, **gpu40})
        server.delete(lq_type, "ml-user", "lq-all-resources")
        await eventually(
            lambda: _equal(
                cqs, [ClusterQueueQuota("cq-40", 40.0), ClusterQueueQuota("cq-all-resources", 20.0)]
            )
        )
        await eventually(lambda: _equal(lqs, []))

        # A hostile ClusterQueue is set aside and counted; the others stay.
        bad = {"metadata": {"name": "cq-bad"}, "spec": {"resourceGroups": [{"flavors": [
            {"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "lots"}]}
        ]}]}}  # fmt: skip
        server.create(cq_type, bad)
        await eventually(lambda: tracker.rejected == 1)
        rejected = await stored.rejected_objects(store)
        assert [(r.kind, r.name, r.reason) for r in rejected] == [("ClusterQueue", "cq-bad", "bad_quantity")]
        assert [q.name for q in await cqs()] == ["cq-40", "cq-all-resources"]

    # Deleted while nobody watched: the next start's list drops it.
    server.delete(cq_type, None, "cq-40")
    cluster = ClusterWatcher(api, tracker.on_event, tracker.on_relist, kueue="auto", options=FAST)
    async with running(cluster.run()):
        await cluster.wait_ready()
        await eventually(lambda: _equal(cqs, [ClusterQueueQuota("cq-all-resources", 20.0)]))


async def _equal(read: Any, expected: list[Any]) -> bool:
    return bool(await read() == expected)
