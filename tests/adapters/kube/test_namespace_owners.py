"""The namespaces' owner annotation (a Kubeflow profile's `owner`): read before the base watchers
start, so no Job or pod is handed over before its namespace's owner is known; read again at every
recheck (a profile made later); and where listing namespaces is forbidden (403, as RBAC answers
without the grant), said once and never asked again, the watch unharmed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inno_notify.adapters.kube import ClusterWatcher, load_api_client
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS, NAMESPACES
from tests.adapters.kube.support import Consumer, job, running
from tests.adapters.kube.test_cluster import FAST, RECHECK, RecordingSleep
from tests.waiting import eventually


def namespace(name: str, **annotations: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": annotations}}


class Owners:
    """Records what the watcher hands over, and how many Jobs the consumer had by then."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.seen: list[tuple[dict[str, str], int]] = []

    def __call__(self, owners: Mapping[str, str]) -> None:
        self.seen.append((dict(owners), len(self.consumer.objects["Job"])))


def watching(api: Any, consumer: Consumer, owners: Owners, options: Any = FAST) -> ClusterWatcher:
    """Jobs and pods watched (no Kueue), the namespaces' `owner` annotation read, rechecked fast."""
    return ClusterWatcher(
        api,
        consumer.on_event,
        consumer.on_relist,
        kueue=False,
        options=options,
        kueue_recheck_seconds=RECHECK,
        namespace_owner_key="owner",
        on_namespace_owners=owners,
    )


async def test_namespace_owners_come_before_the_first_job_and_are_read_again(
    tmp_path: Path, consumer: Consumer
) -> None:
    sim = SimKubeServer(bookmark_interval=0.2)
    await sim.start()
    api = await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))
    sim.create(NAMESPACES, namespace("kubeflow-bob", owner="bob@example.com"))
    sim.create(NAMESPACES, namespace("shared", team="vision"))
    sim.create(JOBS, job("train"))
    owners = Owners(consumer)
    sleep = RecordingSleep()
    try:
        cluster = watching(api, consumer, owners, replace(FAST, sleep=sleep))
        async with running(cluster.run()):
            await asyncio.wait_for(cluster.wait_ready(), 5)
            sim.create(NAMESPACES, namespace("kubeflow-carol", owner="carol@example.com"))
            await eventually(lambda: any("kubeflow-carol" in seen for seen, _ in owners.seen))
    finally:
        await api.close()
        await sim.stop()
    first, jobs_by_then = owners.seen[0]
    assert (first, jobs_by_then) == ({"kubeflow-bob": "bob@example.com"}, 0)
    assert RECHECK in sleep.delays


async def test_a_forbidden_namespace_list_is_said_once_and_the_watch_goes_on(
    tmp_path: Path, consumer: Consumer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inno_notify.adapters.kube")
    sim = SimKubeServer(bookmark_interval=0.2, forbidden=("namespaces",))
    await sim.start()
    api = await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))
    sim.create(JOBS, job("train"))
    owners = Owners(consumer)
    try:
        cluster = watching(api, consumer, owners)
        async with running(cluster.run()):
            await asyncio.wait_for(cluster.wait_ready(), 5)
            assert cluster.ready and len(consumer.objects["Job"]) == 1
            asked = [path for path, _ in sim.requests if path == "/api/v1/namespaces"]
    finally:
        await api.close()
        await sim.stop()
    assert owners.seen == [] and len(asked) == 1
    warnings = [r.getMessage() for r in caplog.records if "namespaces" in r.getMessage()]
    assert len(warnings) == 1 and "forbidden" in warnings[0]
