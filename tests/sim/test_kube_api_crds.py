"""The simulated API server serves Argo Workflows and KServe InferenceServices (and the pods they make)
like any resource: discovery, consistent LISTs carrying kind/apiVersion on every item, watches from a
resourceVersion with bookmarks, 410 Gone past a compaction; checked with kubernetes-asyncio's
CustomObjectsApi and Watch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiClient, ApisApi, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import ARGO_WORKFLOWS, INFERENCE_SERVICES, PODS
from inno_notify.sim.pipelines import (
    SimArgoWorkflow,
    SimAttempt,
    SimInferenceService,
    SimStep,
    apply_all,
    argo_changes,
    serving_changes,
)

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def workflow() -> SimArgoWorkflow:
    return SimArgoWorkflow(
        name="pipe-x7k2p",
        namespace="ml",
        created=T0,
        steps=(
            SimStep("prepare", (SimAttempt(T0 + timedelta(minutes=1), 60),)),
            SimStep("train", (SimAttempt(T0 + timedelta(minutes=3), 120),), gpus=1),
        ),
    )


async def test_crds_are_discovered_only_when_installed(sim: SimKubeServer, api: ApiClient) -> None:
    names = {g.name for g in (await ApisApi(api).get_api_versions()).groups}
    assert "argoproj.io" not in names and "serving.kserve.io" not in names
    sim.crds = ("argo", "kserve")
    groups = {g.name: g for g in (await ApisApi(api).get_api_versions()).groups}
    assert groups["argoproj.io"].preferred_version.version == "v1alpha1"
    assert groups["serving.kserve.io"].preferred_version.version == "v1beta1"
    with pytest.raises(ValueError):
        SimKubeServer(crds=("volcano",))


async def test_workflows_list_and_watch_like_any_resource(sim: SimKubeServer, api: ApiClient) -> None:
    sim.crds = ("argo",)
    wf = workflow()
    changes = argo_changes(wf)
    apply_all(sim, changes[:1])
    custom = CustomObjectsApi(api)
    listed = await custom.list_namespaced_custom_object("argoproj.io", "v1alpha1", "ml", "workflows")
    assert [(w["kind"], w["apiVersion"], w["metadata"]["name"]) for w in listed["items"]] == [
        ("Workflow", "argoproj.io/v1alpha1", "pipe-x7k2p")
    ]
    version = listed["metadata"]["resourceVersion"]
    apply_all(sim, changes[1:])
    seen: list[tuple[str, str | None]] = []
    stream = watch.Watch()
    async with stream:
        async for event in stream.stream(
            custom.list_namespaced_custom_object,
            "argoproj.io",
            "v1alpha1",
            "ml",
            "workflows",
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ):
            if event["type"] == "BOOKMARK":
                break
            seen.append((event["type"], event["raw_object"]["status"].get("phase")))
    workflow_updates = [c for c in changes[1:] if c.rt is ARGO_WORKFLOWS]
    assert len(seen) == len(workflow_updates)
    assert seen[-1] == ("MODIFIED", "Succeeded")
    # The step pods are ordinary pods, owned by the Workflow.
    pods = (await CoreV1Api(api).list_namespaced_pod("ml")).items
    assert sorted(p.metadata.labels["workflows.argoproj.io/workflow"] for p in pods) == ["pipe-x7k2p"] * 2
    assert {p.metadata.owner_references[0].uid for p in pods} == {wf.uid}
    assert len(sim.store.objects(PODS)) == 2


async def test_an_inference_service_watch_from_a_compacted_version_is_410(
    sim: SimKubeServer, api: ApiClient
) -> None:
    sim.crds = ("kserve",)
    isvc = SimInferenceService(name="m", namespace="ml", created=T0)
    apply_all(sim, serving_changes(isvc))
    custom = CustomObjectsApi(api)
    listed = await custom.list_cluster_custom_object("serving.kserve.io", "v1beta1", "inferenceservices")
    [item] = listed["items"]
    assert item["apiVersion"] == "serving.kserve.io/v1beta1" and item["status"]["url"]
    sim.compact()
    sim.update(INFERENCE_SERVICES, item)
    stream = watch.Watch()
    with pytest.raises(ApiException) as caught:
        async with stream:
            async for _ in stream.stream(
                custom.list_cluster_custom_object,
                "serving.kserve.io",
                "v1beta1",
                "inferenceservices",
                resource_version="1",
                timeout_seconds=5,
            ):
                pass
    assert caught.value.status == 410
