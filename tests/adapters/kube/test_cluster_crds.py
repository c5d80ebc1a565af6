"""ClusterWatcher and the optional CRDs of pipelines: Argo Workflows and KServe InferenceServices are
watched per `workflows.argo` / `workflows.kserve` (auto: when served at start; true: also once
installed later, with one warning; false: never), and readiness waits for their discovery and lists."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from inno_notify.adapters.kube import ClusterWatcher, OptionalMode, WatchOptions, load_api_client
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import ARGO_WORKFLOWS, INFERENCE_SERVICES
from tests.adapters.kube.support import Consumer, running

FAST = WatchOptions(inactivity_timeout=2.0, backoff_base=0.01, backoff_cap=0.05)


def wf(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": {"entrypoint": "main"}, "status": {}}


@pytest.mark.parametrize(
    ("crds", "argo", "kserve", "watched"),
    [
        (("argo", "kserve"), "auto", "auto", {"Workflow", "InferenceService"}),
        (("argo",), "auto", "auto", {"Workflow"}),
        (("argo", "kserve"), False, "auto", {"InferenceService"}),
        ((), "auto", "auto", set()),
    ],
)
async def test_pipelines_crds_are_watched_per_their_setting(
    tmp_path: Path,
    consumer: Consumer,
    crds: tuple[str, ...],
    argo: OptionalMode,
    kserve: OptionalMode,
    watched: set[str],
) -> None:
    sim = SimKubeServer(crds=crds, bookmark_interval=0.2)
    await sim.start()
    if "argo" in crds:
        sim.create(ARGO_WORKFLOWS, wf("a"))
    if "kserve" in crds:
        sim.create(INFERENCE_SERVICES, {"metadata": {"name": "m", "namespace": "ml"}, "spec": {}})
    api = await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))
    try:
        cluster = ClusterWatcher(
            api, consumer.on_event, consumer.on_relist, kueue=False, argo=argo, kserve=kserve, options=FAST
        )
        async with running(cluster.run()):
            await asyncio.wait_for(cluster.wait_ready(), 5)
            assert {kind for kind in ("Workflow", "InferenceService") if cluster.watching(kind)} == watched
            assert set(cluster.readiness()) >= {f"watch:{kind}" for kind in watched}
            assert cluster.ready
    finally:
        await api.close()
        await sim.stop()
    assert {kind for kind in ("Workflow", "InferenceService") if consumer.objects[kind]} == watched


async def test_argo_required_and_installed_later_is_picked_up_with_one_warning(
    tmp_path: Path, consumer: Consumer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inno_notify.adapters.kube")
    sim = SimKubeServer(bookmark_interval=0.2)
    await sim.start()
    api = await load_api_client(sim.kubeconfig(tmp_path / "kubeconfig"))
    try:
        cluster = ClusterWatcher(
            api,
            consumer.on_event,
            consumer.on_relist,
            kueue=False,
            argo=True,
            options=FAST,
            kueue_recheck_seconds=0.02,
        )
        async with running(cluster.run()):
            await asyncio.wait_for(cluster.wait_ready(), 5)
            assert cluster.served["Workflow"] == "" and not cluster.watching("Workflow")
            sim.crds = ("argo",)
            sim.create(ARGO_WORKFLOWS, wf("late"))
            await consumer.wait_for(lambda: len(consumer.objects["Workflow"]) == 1)
    finally:
        await api.close()
        await sim.stop()
    assert cluster.served["Workflow"] == "v1alpha1"
    assert [r.getMessage() for r in caplog.records] == [
        "workflows.argo is true but Argo Workflows is not installed; checking again every 0.02 s"
    ]
