"""The simulated training operators: the CRDs are discovered, listed and watched like on a real API
server (kubernetes-asyncio), and every kind's objects have the shapes of tests/fixtures/training —
label keys, controller ownerReferences with matching uids, condition types and reasons — through
success, failure and a restart (recreated pods: same names where the controller keeps them, new uids)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiClient, ApisApi, BatchV1Api, CoreV1Api, CustomObjectsApi

from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.live_meter import LiveTarget
from inno_notify.sim.kube_api import SimKubeServer, version_priority
from inno_notify.sim.kube_store import JOBS, PODS, RAY_CLUSTERS, TRAINING_CRDS, ResourceType
from inno_notify.sim.metrics import SimMetrics
from inno_notify.sim.objects import OWNER_ANNOTATION
from inno_notify.sim.pipelines import Change, apply_all
from inno_notify.sim.training import (
    JOBSET,
    MPIJOB,
    PYTORCHJOB,
    RAYJOB,
    SimRole,
    SimTrainingRun,
    jobset_run,
    mpijob_run,
    plan_training,
    pod_spans,
    pytorchjob_run,
    rayjob_run,
    training_behaviours,
    training_changes,
)
from inno_notify.sim.workload import Workload, generate

FIXTURES = Path(__file__).parent.parent / "fixtures" / "training"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
JsonObj = dict[str, Any]


def fixture(name: str) -> list[JsonObj]:
    return [d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d]


def last_states(changes: Iterable[Change]) -> dict[str, tuple[ResourceType, JsonObj]]:
    """Each object's last written state, deleted ones included, by uid."""
    found: dict[str, tuple[ResourceType, JsonObj]] = {}
    for change in changes:
        found[change.obj["metadata"]["uid"]] = (change.rt, change.obj)
    return found


def of_kind(changes: Iterable[Change], kind: str) -> list[JsonObj]:
    return [obj for _, obj in last_states(changes).values() if obj["kind"] == kind]


def owner_ref(obj: JsonObj) -> JsonObj:
    (ref,) = obj["metadata"]["ownerReferences"]
    return dict(ref)


def assert_owned_like(obj: JsonObj, owner: JsonObj, sample: JsonObj) -> None:
    """A controller ownerReference to `owner` with the fields the fixture's reference has."""
    ref, expected = owner_ref(obj), owner_ref(sample)
    assert set(ref) == set(expected)
    assert (ref["apiVersion"], ref["kind"], ref["controller"]) == (
        expected["apiVersion"],
        expected["kind"],
        True,
    )
    assert (ref["name"], ref["uid"]) == (owner["metadata"]["name"], owner["metadata"]["uid"])


def conditions(obj: JsonObj) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in obj["status"].get("conditions", [])]


def keys(obj: JsonObj, field: str = "labels") -> set[str]:
    return set(obj["metadata"].get(field) or {})


def top(changes: list[Change], kind: str) -> JsonObj:
    (obj,) = of_kind(changes, kind)
    return obj


def pods_by_role(changes: list[Change], label: str) -> dict[str, list[JsonObj]]:
    found: dict[str, list[JsonObj]] = {}
    for pod in of_kind(changes, "Pod"):
        found.setdefault(pod["metadata"]["labels"].get(label, ""), []).append(pod)
    return found


# --- discovery, list and watch -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("versions", "ordered"),
    [
        (["v2beta1", "v1"], ["v1", "v2beta1"]),
        (["v1beta1", "v1beta2"], ["v1beta2", "v1beta1"]),
        (["v1alpha1", "v1beta1", "v2", "v1"], ["v2", "v1", "v1beta1", "v1alpha1"]),
        (["v2alpha1", "v1alpha2", "v1alpha1"], ["v2alpha1", "v1alpha2", "v1alpha1"]),
        (["foo", "v1"], ["v1", "foo"]),
    ],
)
def test_versions_are_ordered_like_the_api_server(versions: list[str], ordered: list[str]) -> None:
    assert sorted(versions, key=version_priority) == ordered


async def test_training_groups_are_discovered_like_a_real_api_server(
    sim: SimKubeServer, api: ApiClient
) -> None:
    names = {g.name for g in (await ApisApi(api).get_api_versions()).groups}
    assert not names & {"kubeflow.org", "jobset.x-k8s.io", "ray.io"}
    sim.crds = TRAINING_CRDS
    groups = {g.name: g for g in (await ApisApi(api).get_api_versions()).groups}
    # Training Operator (v1) and mpi-operator (v2beta1) share kubeflow.org: v1 is preferred.
    assert [v.version for v in groups["kubeflow.org"].versions] == ["v1", "v2beta1"]
    assert groups["kubeflow.org"].preferred_version.version == "v1"
    assert groups["jobset.x-k8s.io"].preferred_version.group_version == "jobset.x-k8s.io/v1alpha2"
    assert groups["ray.io"].preferred_version.group_version == "ray.io/v1"
    custom = CustomObjectsApi(api)
    served = {
        (gv, r.name, r.kind, r.namespaced)
        for gv in ("kubeflow.org/v1", "kubeflow.org/v2beta1", "jobset.x-k8s.io/v1alpha2", "ray.io/v1")
        for r in (await custom.get_api_resources(*gv.split("/"))).resources
    }
    assert served == {
        ("kubeflow.org/v1", "pytorchjobs", "PyTorchJob", True),
        ("kubeflow.org/v2beta1", "mpijobs", "MPIJob", True),
        ("jobset.x-k8s.io/v1alpha2", "jobsets", "JobSet", True),
        ("ray.io/v1", "rayjobs", "RayJob", True),
        ("ray.io/v1", "rayclusters", "RayCluster", True),
    }
    async with aiohttp.ClientSession() as http, http.get(f"{sim.url}/apis/kubeflow.org") as response:
        group = await response.json()
    assert (group["kind"], group["preferredVersion"]["groupVersion"]) == ("APIGroup", "kubeflow.org/v1")
    sim.crds = ("kuberay",)
    names = {g.name for g in (await ApisApi(api).get_api_versions()).groups}
    assert "ray.io" in names and "kubeflow.org" not in names


RUNS = {
    PYTORCHJOB: lambda **kw: pytorchjob_run(start=T0, **kw),
    MPIJOB: lambda **kw: mpijob_run(start=T0, **kw),
    JOBSET: lambda **kw: jobset_run(start=T0, **kw),
    RAYJOB: lambda **kw: rayjob_run(start=T0, **kw),
}
PLURALS = {PYTORCHJOB: "pytorchjobs", MPIJOB: "mpijobs", JOBSET: "jobsets", RAYJOB: "rayjobs"}


def terminal(kind: str, obj: JsonObj) -> str | None:
    status = obj.get("status") or {}
    if kind == JOBSET:
        return status.get("terminalState")
    if kind == RAYJOB:
        state = status.get("jobDeploymentStatus")
        return state if state in ("Complete", "Failed") else None
    done = [c["type"] for c in status.get("conditions", []) if c["type"] in ("Succeeded", "Failed")]
    return done[0] if done else None


@pytest.mark.parametrize("kind", [PYTORCHJOB, MPIJOB, JOBSET, RAYJOB])
async def test_each_kind_lists_and_watches_through_kubernetes_asyncio(
    sim: SimKubeServer, api: ApiClient, kind: str
) -> None:
    sim.crds = TRAINING_CRDS
    run = RUNS[kind](owner="alice@example.com", restarts=1)
    changes = training_changes(run)
    apply_all(sim, changes[:1])
    custom = CustomObjectsApi(api)
    group, version = run.top_type.group, run.top_type.version
    listed = await custom.list_namespaced_custom_object(group, version, run.namespace, PLURALS[kind])
    [item] = listed["items"]
    assert (item["kind"], item["apiVersion"], item["metadata"]["uid"]) == (
        kind,
        run.top_type.api_version,
        run.uid,
    )
    assert item["metadata"]["annotations"][OWNER_ANNOTATION] == "alice@example.com"
    apply_all(sim, changes[1:])
    seen: list[str | None] = []
    stream = watch.Watch()
    async with stream:
        async for event in stream.stream(
            custom.list_namespaced_custom_object,
            group,
            version,
            run.namespace,
            PLURALS[kind],
            resource_version=listed["metadata"]["resourceVersion"],
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ):
            if event["type"] == "BOOKMARK":
                break
            assert event["type"] == "MODIFIED"
            seen.append(terminal(kind, event["raw_object"]))
    writes = [c for c in changes if c.rt == run.top_type and c.op == "update"]
    assert len(seen) == len(writes) and seen[-1] in ("Succeeded", "Completed", "Complete")
    # Every pod the run left is served, and each names its controller.
    pods = (await CoreV1Api(api).list_namespaced_pod(run.namespace)).items
    live = {uid for uid, (rt, _) in last_states(changes).items() if rt == PODS} - {
        c.obj["metadata"]["uid"] for c in changes if c.rt == PODS and c.op == "delete"
    }
    assert {p.metadata.uid for p in pods} == live
    assert all(len([r for r in p.metadata.owner_references if r.controller]) == 1 for p in pods)
    if kind == RAYJOB:
        # shutdownAfterJobFinishes: the RayCluster is gone; the submitter Job stays.
        listed = await custom.list_namespaced_custom_object("ray.io", "v1", run.namespace, "rayclusters")
        assert listed["items"] == []
    if kind in (MPIJOB, JOBSET, RAYJOB):
        jobs = (await BatchV1Api(api).list_namespaced_job(run.namespace)).items
        assert jobs and all(j.metadata.owner_references[0].uid == run.uid for j in jobs)


# --- shapes, per kind and lifecycle -------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_pytorchjob_objects_match_the_fixtures(outcome: str) -> None:
    run = pytorchjob_run("ddp", start=T0, workers=2, gpus=2, outcome=outcome)
    changes = training_changes(run)
    job = top(changes, PYTORCHJOB)
    [sample] = fixture(f"pytorchjob-{outcome}.yaml")
    [sample_pod] = fixture("pytorchjob-pod.yaml")
    assert set(job["spec"]) >= {"pytorchReplicaSpecs", "runPolicy"}
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    assert conditions(job) == conditions(sample)
    assert set(job["status"]) == set(sample["status"])  # a failed one has no completionTime either
    assert set(job["status"]["replicaStatuses"]) == {"Master", "Worker"}
    assert job["status"]["replicaStatuses"]["Worker"]["selector"] == (
        "training.kubeflow.org/job-name=ddp,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )
    by_name = {p["metadata"]["name"]: p for p in of_kind(changes, "Pod")}
    assert set(by_name) == {"ddp-master-0", "ddp-worker-0", "ddp-worker-1"}
    master = by_name["ddp-master-0"]
    assert keys(master) == keys(sample_pod)
    assert master["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert keys(by_name["ddp-worker-1"]) == keys(sample_pod) - {"training.kubeflow.org/job-role"}
    assert by_name["ddp-worker-1"]["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "worker"
    for pod in by_name.values():
        assert_owned_like(pod, job, sample_pod)
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    phases = {name: pod["status"]["phase"] for name, pod in by_name.items()}
    if outcome == "succeeded":
        assert set(phases.values()) == {"Succeeded"}
    else:
        # Worker 0 failed; with cleanPodPolicy None the Master and Worker 1 keep running (and their GPUs).
        assert phases == {"ddp-master-0": "Running", "ddp-worker-0": "Failed", "ddp-worker-1": "Running"}
        assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"


def test_a_worker_only_pytorchjob_gives_worker_0_the_master_role() -> None:
    changes = training_changes(pytorchjob_run("solo", start=T0, master=False, workers=2))
    roles = {
        p["metadata"]["name"]: p["metadata"]["labels"].get("training.kubeflow.org/job-role")
        for p in of_kind(changes, "Pod")
    }
    assert roles == {"solo-worker-0": "master", "solo-worker-1": None}


def test_pytorchjob_restart_recreates_the_pod_under_its_name_with_a_new_uid() -> None:
    run = pytorchjob_run("ddp", start=T0, workers=3, gpus=4, restarts=1)
    plan = plan_training(run)
    restarted = [p for p in plan.pods if p.name == "ddp-worker-2"]
    assert [(p.attempt, p.exit_code) for p in restarted] == [(0, 143), (1, 0)]
    assert restarted[0].uid != restarted[1].uid
    assert restarted[0].deleted is not None and restarted[0].deleted < restarted[1].created
    assert len({p.uid for p in plan.pods}) == 5
    # Restarting replaced Running, then Running replaced Restarting; the end flips Running to False.
    updates = [c.obj for c in plan.changes if c.rt.kind == PYTORCHJOB and c.op == "update"]
    assert [[t for t, _, _ in conditions(u)] for u in updates] == [
        ["Created"],
        ["Created", "Running"],
        ["Created", "Restarting"],
        ["Created", "Running"],
        ["Created", "Running", "Succeeded"],
    ]
    assert conditions(updates[2])[-1] == ("Restarting", "True", "PyTorchJobRestarting")
    assert updates[-1]["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"


async def test_a_restarted_pod_is_served_again_under_its_name(sim: SimKubeServer, api: ApiClient) -> None:
    sim.crds = TRAINING_CRDS
    run = pytorchjob_run("ddp", start=T0, workers=3, restarts=1)
    apply_all(sim, training_changes(run))
    pod = await CoreV1Api(api).read_namespaced_pod("ddp-worker-2", run.namespace)
    assert pod.metadata.uid == [p.uid for p in plan_training(run).pods if p.name == "ddp-worker-2"][-1]


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_mpijob_objects_match_the_fixtures(outcome: str) -> None:
    run = mpijob_run("bench", start=T0, workers=2, gpus=2, outcome=outcome)
    changes = training_changes(run)
    mpijob = top(changes, MPIJOB)
    [sample] = fixture(f"mpijob-{outcome}.yaml")
    [worker_sample] = fixture("mpijob-pod.yaml")
    [launcher_sample] = fixture("mpijob-launcher-pod.yaml")
    assert [(t, s) for t, s, _ in conditions(mpijob)] == [(t, s) for t, s, _ in conditions(sample)]
    assert [r for _, _, r in conditions(mpijob)] == [r for _, _, r in conditions(sample)]
    assert set(mpijob["status"]) == set(sample["status"])
    assert set(mpijob["spec"]) >= {"mpiReplicaSpecs", "runPolicy", "slotsPerWorker"}
    [launcher_job] = of_kind(changes, "Job")
    assert launcher_job["metadata"]["name"] == "bench-launcher"
    assert launcher_job["metadata"]["labels"] == {"app": "bench"}
    assert_owned_like(launcher_job, mpijob, {"metadata": {"ownerReferences": [owner_ref(worker_sample)]}})
    roles = pods_by_role(changes, "training.kubeflow.org/job-role")
    assert sorted(p["metadata"]["name"] for p in roles["worker"]) == ["bench-worker-0", "bench-worker-1"]
    for pod in roles["worker"]:
        assert keys(pod) == keys(worker_sample)
        assert_owned_like(pod, mpijob, worker_sample)
        # sshd never ends: with cleanPodPolicy None the workers keep running and holding GPUs.
        assert pod["status"]["phase"] == "Running"
        assert pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2"
    launchers = roles["launcher"]
    assert len(launchers) == run.restarts + 1 and len({p["metadata"]["name"] for p in launchers}) == len(
        launchers
    )
    for pod in launchers:
        assert keys(pod) == keys(launcher_sample)
        assert_owned_like(pod, launcher_job, launcher_sample)
        assert pod["metadata"]["name"].startswith("bench-launcher-")
        assert "nvidia.com/gpu" not in pod["spec"]["containers"][0]["resources"]["limits"]
    if outcome == "failed":
        assert launcher_job["status"]["failed"] == 1
        assert [c["type"] for c in launcher_job["status"]["conditions"]] == ["FailureTarget", "Failed"]


def test_mpijob_launcher_retry_says_restarting_and_cleanpodpolicy_running_deletes_the_workers() -> None:
    run = mpijob_run("bench", start=T0, restarts=1, clean_pod_policy="Running")
    plan = plan_training(run)
    updates = [c.obj for c in plan.changes if c.rt.kind == MPIJOB and c.op == "update"]
    assert ("Restarting", "True", "MPIJobRestarting") in conditions(updates[-2])
    assert conditions(updates[-1])[-1] == ("Succeeded", "True", "MPIJobSucceeded")
    assert updates[-1]["status"]["replicaStatuses"]["Worker"] == {}
    launchers = [p for p in plan.pods if p.role == "Launcher"]
    assert [(p.attempt, p.exit_code) for p in launchers] == [(0, 1), (1, 0)]
    workers = [p for p in plan.pods if p.role == "Worker"]
    assert all(p.ended is None and p.deleted == plan.ended_at + timedelta(seconds=1) for p in workers)


@pytest.mark.parametrize(("outcome", "restarts"), [("succeeded", 0), ("failed", 3)])
def test_jobset_objects_match_the_fixtures(outcome: str, restarts: int) -> None:
    run = jobset_run("resnet", start=T0, jobs=2, pods_per_job=2, outcome=outcome, restarts=restarts)
    changes = training_changes(run)
    jobset = top(changes, JOBSET)
    [sample] = fixture(f"jobset-{outcome}.yaml")
    [job_sample] = fixture("jobset-child-job.yaml")
    [pod_sample] = fixture("jobset-pod.yaml")
    assert conditions(jobset) == conditions(sample)
    assert set(jobset["status"]) == set(sample["status"])
    assert (jobset["status"]["terminalState"], jobset["status"]["restarts"]) == (
        sample["status"]["terminalState"],
        sample["status"]["restarts"],
    )
    assert set(jobset["status"]["replicatedJobsStatus"][0]) == set(
        sample["status"]["replicatedJobsStatus"][0]
    )
    jobs = of_kind(changes, "Job")
    assert {j["metadata"]["name"] for j in jobs} == {"resnet-workers-0", "resnet-workers-1"}
    assert len(jobs) == 2 * (restarts + 1)  # the same two names, once per attempt, new uids
    for job in jobs:
        assert keys(job) == keys(job_sample) and keys(job, "annotations") == keys(job_sample, "annotations")
        assert keys(job["spec"]["template"]) == keys(job_sample["spec"]["template"])
        assert_owned_like(job, jobset, job_sample)
    by_uid = {j["metadata"]["uid"]: j for j in jobs}
    pods = of_kind(changes, "Pod")
    assert len(pods) == 4 * (restarts + 1)
    for pod in pods:
        job = by_uid[owner_ref(pod)["uid"]]
        assert keys(pod) == keys(pod_sample) and keys(pod, "annotations") == keys(pod_sample, "annotations")
        assert_owned_like(pod, job, pod_sample)
        attempt = job["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"]
        assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == attempt
        assert pod["metadata"]["name"].startswith(pod["metadata"]["generateName"])
        assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"] == run.uid


def test_jobset_restart_recreates_every_child_job_under_its_name_with_new_uids() -> None:
    run = jobset_run("resnet", start=T0, jobs=2, pods_per_job=2, restarts=1)
    changes = training_changes(run)
    created = [c.obj["metadata"] for c in changes if c.rt == JOBS and c.op == "create"]
    assert [(m["name"], m["labels"]["jobset.sigs.k8s.io/restart-attempt"]) for m in created] == [
        ("resnet-workers-0", "0"),
        ("resnet-workers-1", "0"),
        ("resnet-workers-0", "1"),
        ("resnet-workers-1", "1"),
    ]
    assert len({m["uid"] for m in created}) == 4
    # Every old Job and pod is deleted before the new ones come.
    deleted = [c for c in changes if c.op == "delete"]
    first_new = next(
        c.at
        for c in changes
        if c.rt == JOBS
        and c.op == "create"
        and c.obj["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"
    )
    assert len([c for c in deleted if c.rt == JOBS]) == 2 and all(c.at < first_new for c in deleted)
    assert len([c for c in deleted if c.rt == PODS]) == 4
    final = top(changes, JOBSET)
    assert (final["status"]["restarts"], final["status"]["restartsCountTowardsMax"]) == (1, 1)
    assert final["spec"]["failurePolicy"] == {"maxRestarts": 1}
    assert [(t, s) for t, s, _ in conditions(final)] == [("RestartingJobSet", "False"), ("Completed", "True")]
    pods = plan_training(run).pods
    assert {p.attempt for p in pods} == {0, 1} and len({p.uid for p in pods}) == 8


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_rayjob_objects_match_the_fixtures(outcome: str) -> None:
    run = rayjob_run("classifier", start=T0, workers=4, outcome=outcome, owner="chen@example.com")
    changes = training_changes(run)
    rayjob = top(changes, RAYJOB)
    [sample] = fixture(f"rayjob-{outcome}.yaml")
    [cluster_sample] = fixture("rayjob-raycluster.yaml")
    [worker_sample] = fixture("rayjob-pod.yaml")
    [head_sample] = fixture("raycluster-head-pod-kuberay-4356.yaml")
    status, expected = rayjob["status"], sample["status"]
    assert set(status) <= set(expected) and set(expected) - set(status) <= {"rayClusterStatus"}
    for field in ("jobDeploymentStatus", "jobStatus", "succeeded", "failed"):
        assert status[field] == expected[field], field
    assert status.get("reason") == expected.get("reason")
    assert rayjob["metadata"]["finalizers"] == sample["metadata"]["finalizers"]
    [cluster] = of_kind(changes, "RayCluster")
    assert cluster["metadata"]["name"] == status["rayClusterName"]
    assert (
        cluster["metadata"]["name"].startswith("classifier-")
        and len(cluster["metadata"]["name"]) == len("classifier-") + 5
    )
    assert keys(cluster) == keys(cluster_sample)
    # The RayJob's annotations are copied: the owner is on the RayCluster too.
    assert cluster["metadata"]["annotations"][OWNER_ANNOTATION] == "chen@example.com"
    assert_owned_like(cluster, rayjob, cluster_sample)
    nodes = pods_by_role(changes, "ray.io/node-type")
    [head] = nodes["head"]
    assert keys(head) == keys(head_sample) and keys(head, "annotations") == keys(head_sample, "annotations")
    assert_owned_like(head, cluster, head_sample)
    assert len(nodes["worker"]) == 4
    for pod in nodes["worker"]:
        assert keys(pod) == keys(worker_sample)
        assert_owned_like(pod, cluster, worker_sample)
        assert pod["metadata"]["name"].startswith(f"{cluster['metadata']['name']}-gpu-group-worker-")
        # Ray pods never end by themselves: they were running when the RayCluster went.
        assert pod["status"]["phase"] == "Running"
    [submitter] = of_kind(changes, "Job")
    assert submitter["metadata"]["name"] == "classifier"
    assert owner_ref(submitter)["uid"] == run.uid
    [submitter_pod] = nodes[""]
    assert submitter_pod["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert owner_ref(submitter_pod)["uid"] == submitter["metadata"]["uid"]
    deletes = [c for c in changes if c.op == "delete"]
    assert deletes[0].rt == RAY_CLUSTERS and {c.obj["metadata"]["uid"] for c in deletes[1:]} == {
        p["metadata"]["uid"] for p in (head, *nodes["worker"])
    }


def test_rayjob_retry_runs_on_a_new_raycluster() -> None:
    run = rayjob_run("classifier", start=T0, workers=2, restarts=1)
    changes = training_changes(run)
    clusters = of_kind(changes, "RayCluster")
    assert len(clusters) == 2 and len({c["metadata"]["name"] for c in clusters}) == 2
    assert all(owner_ref(c)["uid"] == run.uid for c in clusters)
    states = [
        c.obj["status"].get("jobDeploymentStatus")
        for c in changes
        if c.rt.kind == RAYJOB and c.op == "update"
    ]
    assert "Retrying" in states and states[-1] == "Complete"
    final = top(changes, RAYJOB)
    assert (final["status"]["failed"], final["status"]["succeeded"]) == (1, 1)
    assert final["status"]["rayClusterName"] == clusters[-1]["metadata"]["name"]
    submitters = of_kind(changes, "Job")
    assert [j["metadata"]["name"] for j in submitters] == ["classifier", "classifier"]
    assert submitters[0]["metadata"]["uid"] != submitters[1]["metadata"]["uid"]


def test_gpus_can_be_hamis_vgpu() -> None:
    run = pytorchjob_run("shared", start=T0, master=False, workers=1, gpus=1, gpu_resource="nvidia.com/vgpu")
    [pod] = of_kind(training_changes(run), "Pod")
    [sample] = fixture("pytorchjob-pod-worker-hami-vgpu-daocloud.yaml")
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["limits"]["nvidia.com/vgpu"] == resources["requests"]["nvidia.com/vgpu"] == "1"
    assert "nvidia.com/vgpu" in sample["spec"]["containers"][0]["resources"]["limits"]
    assert "nvidia.com/gpu" not in resources["limits"]
    assert plan_training(run).pods[0].gpu_resource == "nvidia.com/vgpu"


def test_linger_keeps_running_pods_and_their_gpus_until_the_run_is_deleted() -> None:
    run = pytorchjob_run("ddp", start=T0, workers=1, gpus=4, outcome="failed", linger_seconds=2400)
    plan = plan_training(run)
    master = next(p for p in plan.pods if p.role == "Master")
    assert master.ended is None and master.held_until == plan.ended_at + timedelta(seconds=2402)
    deleted = [c for c in plan.changes if c.op == "delete"]
    assert deleted[0].rt.kind == PYTORCHJOB and {c.rt for c in deleted[1:]} == {PODS}
    assert plan.changes[0].obj["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 2400


def test_runs_are_checked_and_reproducible() -> None:
    with pytest.raises(ValueError):
        SimTrainingRun("TFJob", "x", "ns", (SimRole("Worker"),))
    with pytest.raises(ValueError):
        pytorchjob_run(outcome="maybe")
    with pytest.raises(ValueError):
        plan_training(SimTrainingRun(MPIJOB, "x", "ns", (SimRole("Chief"),)))
    run = jobset_run(start=T0, restarts=1)
    first, second = plan_training(run), plan_training(run)
    assert [(p.name, p.uid) for p in first.pods] == [(p.name, p.uid) for p in second.pods]


# --- metrics and the generator -----------------------------------------------------------------------------


async def test_training_pods_get_traces_like_other_pods_idle_workers_included() -> None:
    run = pytorchjob_run("ddp", start=T0, workers=3, gpus=4, idle_workers=2)
    pods = plan_training(run).pods
    metrics = SimMetrics([], pods=training_behaviours([run]))
    windows = [
        PodWindow(run.namespace, p.name, p.uid, p.running, p.held_until or p.running, job_uid=run.uid)
        for p in pods
    ]
    measured = await metrics.measure_pods(windows)
    means = {p.name: max(g.util_mean_percent or 0 for g in measured[p.uid].gpus) for p in pods}
    assert all(len(measured[p.uid].gpus) == 4 for p in pods)
    assert means["ddp-worker-1"] <= 2 and means["ddp-worker-2"] <= 2
    assert means["ddp-master-0"] > 50 and means["ddp-worker-0"] > 50


def test_the_generator_adds_the_demo_pytorchjob_only_when_asked_and_changes_nothing_else() -> None:
    plain = generate(10, T0)
    with_training = generate(10, T0, training=True)
    assert plain.training == ()

    # (uids are drawn afresh on each call: compare what was drawn from the seed)
    def drawn(w: Workload) -> list[object]:
        return [
            [(j.spec.name, j.submit_at, j.run_seconds, j.outcome, j.behaviour) for j in w.jobs],
            [(wf.name, wf.end) for wf in w.workflows],
            [(r.run_id, r.end) for r in w.dag_runs],
            [(s.pod_uid, s.start, s.node) for s in w.workspaces],
        ]

    assert drawn(plain) == drawn(with_training)
    [run] = with_training.training
    assert (run.kind, run.outcome, run.owner) == (PYTORCHJOB, "succeeded", "emil@example.com")
    assert [(r.name, r.replicas, r.gpus) for r in run.roles] == [("Master", 1, 4), ("Worker", 3, 4)]
    idle = [p.name for p in plan_training(run).pods if p.behaviour and max(p.behaviour.gpu_util_percent) <= 2]
    assert len(idle) == 2
    assert set(with_training.pod_behaviours()) >= {p.uid for p in plan_training(run).pods}
    assert any(c.rt.kind == PYTORCHJOB for c in with_training.pipeline_changes())
    assert generate(10, T0, training=True).training == with_training.training


def test_mpijob_failing_after_its_retries_fails_like_its_launcher_job() -> None:
    run = mpijob_run("bench", start=T0, restarts=2, outcome="failed")
    changes = training_changes(run)
    mpijob = top(changes, MPIJOB)
    assert conditions(mpijob)[-1] == ("Failed", "True", "BackoffLimitExceeded/")
    assert mpijob["status"]["replicaStatuses"]["Launcher"] == {"failed": 3}
    [launcher_job] = of_kind(changes, "Job")
    assert (launcher_job["spec"]["backoffLimit"], launcher_job["status"]["failed"]) == (2, 3)
    launchers = [p for p in plan_training(run).pods if p.role == "Launcher"]
    assert [p.exit_code for p in launchers] == [1, 1, 1] and len({p.name for p in launchers}) == 3


async def test_the_live_check_sees_a_training_pods_idle_gpus() -> None:
    run = pytorchjob_run("ddp", start=T0, workers=2, gpus=2, idle_workers=1)
    pods = {p.name: p for p in plan_training(run).pods}
    metrics = SimMetrics([], pods=training_behaviours([run]), spans=pod_spans([run]))
    now = T0 + timedelta(minutes=20)
    targets = [LiveTarget(run.namespace, p.name, p.uid, p.running) for p in pods.values()]
    seen = await metrics.observe(targets, now, 600, 5.0)
    assert set(seen) == {p.uid for p in pods.values()}

    def peaks(pod: str) -> list[float]:
        values = [g.util_max_percent for g in seen[pods[pod].uid]]
        measured = [v for v in values if v is not None]
        assert measured and len(measured) == len(values), values  # every GPU of the pod measured
        return measured

    assert max(peaks("ddp-worker-1")) < 5
    assert min(peaks("ddp-worker-0")) > 5
