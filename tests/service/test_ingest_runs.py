"""Multi-pod runs through the one ingestion pipeline, on SQLite and Postgres: a run is one record
whatever order its objects arrive in, its pods are its own through the objects between (a JobSet's
child Job, an MPIJob's launcher, a RayJob's RayCluster), restarts are attempts, and a hostile run is
set aside alone."""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from inno_notify.adapters.db.repository import Store
from inno_notify.domain.kinds import KINDS, owner_kinds
from inno_notify.domain.model import JobStatus, WorkloadKind
from inno_notify.domain.parsing import ParseConfig
from inno_notify.service.ingest import IngestOptions, Ingestor
from tests import stored

TRAINING = Path(__file__).resolve().parents[1] / "fixtures" / "training"
CFG = ParseConfig(cluster="test")
Event = tuple[str, str, dict[str, Any]]


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((TRAINING / name).read_text())
    return loaded


def ingestor(store: Store, now: datetime, *, watched: bool = True) -> Ingestor:
    ing = Ingestor(
        store, CFG, IngestOptions(catch_up_seconds=10**9, metrics_delay_seconds=60), lambda: now, now
    )
    if watched:
        ing.watch_kinds(owner_kinds(KINDS))
    return ing


def jobset_events() -> list[Event]:
    return [
        ("JobSet", "ADDED", load("jobset-succeeded.yaml")),
        ("Job", "ADDED", load("jobset-child-job.yaml")),
        ("Pod", "ADDED", load("jobset-pod.yaml")),
    ]


JOBSET_UID = "aa04fb6c-eb49-4cfa-b8ae-d89c7dcb6728"
CHILD_JOB_UID = "7e1efbb2-5bd6-4820-b515-e125b73e044b"
NOW = datetime(2025, 3, 12, 11, 0, tzinfo=UTC)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))), ids=str)
async def test_a_jobset_is_one_run_in_whatever_order_its_objects_arrive(
    store: Store, order: tuple[int, ...]
) -> None:
    events = jobset_events()
    ing = ingestor(store, NOW)
    for index in order:  # one batch each: the link may come after the pod it leads from
        await ing.apply([events[index]])

    runs = await stored.all_jobs(store)
    assert [(r.uid, r.kind) for r in runs] == [(JOBSET_UID, WorkloadKind.JOB_SET)]
    pods = await stored.pods_of(store, "test", JOBSET_UID)
    assert [(p.name, p.role) for p in pods] == [("resnet-gpu-workers-0-0-x2k9p", "workers")]
    assert await stored.pods_of(store, "test", CHILD_JOB_UID) == []
    run = runs[0]
    assert run.status is JobStatus.SUCCEEDED
    assert run.started_at is not None  # a JobSet records no start: its pods' start is the run's
    assert ing.stats.terminal_marked == 1


async def test_a_jobset_in_one_batch_is_one_run(store: Store) -> None:
    ing = ingestor(store, NOW)
    await ing.apply(list(reversed(jobset_events())))
    assert [r.uid for r in await stored.all_jobs(store)] == [JOBSET_UID]
    assert len(await stored.pods_of(store, "test", JOBSET_UID)) == 1


async def test_where_jobsets_are_not_watched_the_child_job_is_the_run(store: Store) -> None:
    ing = ingestor(store, NOW, watched=False)
    await ing.apply([e for e in jobset_events() if e[0] != "JobSet"])
    assert [(r.uid, r.kind) for r in await stored.all_jobs(store)] == [(CHILD_JOB_UID, WorkloadKind.JOB)]


def mpijob_events() -> list[Event]:
    run = load("mpijob-succeeded.yaml")
    launcher_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "tensorflow-benchmarks-launcher",
            "namespace": "default",
            "uid": "6c7f4aae-fe88-4660-a4a8-97fec2a0c52d",
            "creationTimestamp": "2019-07-09T22:15:52Z",
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v2beta1",
                    "kind": "MPIJob",
                    "name": "tensorflow-benchmarks",
                    "uid": run["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"template": {"spec": {"containers": [{"name": "launcher"}]}}},
        "status": {"succeeded": 1},
    }
    return [
        ("Pod", "ADDED", load("mpijob-launcher-pod.yaml")),
        ("Pod", "ADDED", load("mpijob-pod.yaml")),
        ("MPIJob", "ADDED", run),
        ("Job", "ADDED", launcher_job),
    ]


async def test_an_mpijob_has_its_launcher_and_workers(store: Store) -> None:
    events = mpijob_events()
    ing = ingestor(store, datetime(2019, 7, 9, 23, tzinfo=UTC))
    for event in events:
        await ing.apply([event])
    run_uid = events[2][2]["metadata"]["uid"]
    assert [(r.uid, r.kind) for r in await stored.all_jobs(store)] == [(run_uid, WorkloadKind.MPI_JOB)]
    pods = await stored.pods_of(store, "test", run_uid)
    assert sorted(p.role or "" for p in pods) == ["Launcher", "Worker"]
    assert sum(p.gpu_equivalents for p in pods) == 2.0


def pytorch_pod(
    role: str, index: int, uid: str, run: dict[str, Any], start: datetime, *, phase: str
) -> dict[str, Any]:
    pod = load("pytorchjob-pod.yaml")
    meta = pod["metadata"]
    meta["name"] = f"{run['metadata']['name']}-{role}-{index}"
    meta["uid"] = uid
    meta["namespace"] = run["metadata"]["namespace"]
    meta["labels"]["training.kubeflow.org/replica-type"] = role
    meta["labels"]["training.kubeflow.org/replica-index"] = str(index)
    meta["labels"]["training.kubeflow.org/job-name"] = run["metadata"]["name"]
    meta["ownerReferences"][0]["uid"] = run["metadata"]["uid"]
    meta["ownerReferences"][0]["name"] = run["metadata"]["name"]
    meta["creationTimestamp"] = start.isoformat().replace("+00:00", "Z")
    pod["status"]["phase"] = phase
    return pod


async def test_a_pytorchjob_restart_is_an_attempt_of_the_same_run(store: Store) -> None:
    run = load("pytorchjob-succeeded.yaml")
    t0 = datetime(2024, 6, 21, 4, 51, tzinfo=UTC)
    first = pytorch_pod("worker", 0, "uid-worker-first", run, t0, phase="Failed")
    # ExitCode restart: the operator deletes the worker and creates it again under the same name.
    again = pytorch_pod("worker", 0, "uid-worker-again", run, t0 + timedelta(minutes=2), phase="Succeeded")
    master = pytorch_pod("master", 0, "uid-master", run, t0, phase="Succeeded")
    ing = ingestor(store, datetime(2024, 6, 21, 6, tzinfo=UTC))
    await ing.apply([("PyTorchJob", "ADDED", run), ("Pod", "ADDED", master), ("Pod", "ADDED", first)])
    await ing.apply([("Pod", "DELETED", first), ("Pod", "ADDED", again)])

    runs = await stored.all_jobs(store)
    assert len(runs) == 1
    assert runs[0].attempts == 2
    pods = await stored.pods_of(store, "test", run["metadata"]["uid"])
    assert {p.uid for p in pods} == {"uid-worker-first", "uid-worker-again", "uid-master"}
    assert {p.role for p in pods} == {"Master", "Worker"}


RAYJOB_UID = "0b1c2d3e-0000-4000-8000-000000000001"


def rayjob_events() -> list[Event]:
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "rayjob-sample",
            "namespace": "ml-team",
            "uid": RAYJOB_UID,
            "creationTimestamp": "2025-05-01T10:00:00Z",
            "annotations": {"inno-notify/owner": "alice@example.com"},
        },
        "spec": {
            "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h"}]}}}}
        },
        "status": {
            "jobDeploymentStatus": "Complete",
            "jobStatus": "SUCCEEDED",
            "startTime": "2025-05-01T10:00:05Z",
            "endTime": "2025-05-01T11:00:00Z",
        },
    }
    raycluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "rayjob-sample-x7k2p",
            "namespace": "ml-team",
            "uid": "rc-uid",
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayJob",
                    "name": "rayjob-sample",
                    "uid": RAYJOB_UID,
                    "controller": True,
                }
            ],
        },
    }

    def ray_pod(name: str, uid: str, node_type: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ml-team",
                "uid": uid,
                "creationTimestamp": "2025-05-01T10:00:10Z",
                "labels": {
                    "ray.io/cluster": "rayjob-sample-x7k2p",
                    "ray.io/node-type": node_type,
                    "ray.io/group": "headgroup" if node_type == "head" else "gpu-group",
                },
                "ownerReferences": [
                    {
                        "apiVersion": "ray.io/v1",
                        "kind": "RayCluster",
                        "name": "rayjob-sample-x7k2p",
                        "uid": "rc-uid",
                        "controller": True,
                    }
                ],
            },
            "spec": {"containers": [{"name": "ray", "resources": {"limits": {"nvidia.com/gpu": 4}}}]},
            "status": {"phase": "Running"},
        }

    return [
        ("Pod", "ADDED", ray_pod("rayjob-sample-x7k2p-head", "p-head", "head")),
        ("Pod", "ADDED", ray_pod("rayjob-sample-x7k2p-gpu-group-worker-a", "p-w1", "worker")),
        ("RayCluster", "ADDED", raycluster),
        ("RayJob", "ADDED", rayjob),
    ]


async def test_a_rayjob_owns_its_raycluster_pods(store: Store) -> None:
    ing = ingestor(store, datetime(2025, 5, 1, 12, tzinfo=UTC))
    for event in rayjob_events():
        await ing.apply([event])
    runs = await stored.all_jobs(store)
    assert [(r.uid, r.owner, r.status) for r in runs] == [
        (RAYJOB_UID, "alice@example.com", JobStatus.SUCCEEDED)
    ]
    pods = await stored.pods_of(store, "test", RAYJOB_UID)
    assert sorted(p.role or "" for p in pods) == ["gpu-group", "head"]


async def test_a_hostile_run_is_set_aside_and_the_others_are_recorded(store: Store) -> None:
    hostile = load("pytorchjob-succeeded.yaml")
    hostile["metadata"]["uid"] = "hostile-uid"
    hostile["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "∞"
    ing = ingestor(store, NOW)
    await ing.apply([("PyTorchJob", "ADDED", hostile), *jobset_events()])
    assert [r.uid for r in await stored.all_jobs(store)] == [JOBSET_UID]
    assert ing.stats.parse_errors == 1
    rejected = await stored.rejected_objects(store)
    assert [(r.kind, r.uid, r.reason) for r in rejected] == [("PyTorchJob", "hostile-uid", "wrong_type")]


async def test_a_relist_closes_out_a_run_deleted_while_away(store: Store) -> None:
    running = load("pytorchjob-succeeded.yaml")
    running = copy.deepcopy(running)
    running["status"]["conditions"] = [c for c in running["status"]["conditions"] if c["type"] == "Created"]
    ing = ingestor(store, NOW)
    await ing.apply([("PyTorchJob", "ADDED", running)])
    await ing.apply([("relist", "PyTorchJob", frozenset())])
    [run] = await stored.all_jobs(store)
    assert run.status is JobStatus.DELETED


async def test_kueue_gives_a_training_run_its_admission_and_preemptions(store: Store) -> None:
    """Kueue's Workload for a PyTorchJob (`pytorchjob-<name>-<hash>`, controlled by it): the run
    gets its queue, admission and preemption, whichever arrives first."""
    run = load("pytorchjob-succeeded.yaml")
    uid = run["metadata"]["uid"]
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "pytorchjob-pytorch-simple-1584c",
            "namespace": "kubeflow",
            "uid": "wl-pt-1",
            "labels": {"kueue.x-k8s.io/job-uid": uid},
            "ownerReferences": [
                {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytorch-simple",
                 "uid": uid, "controller": True}
            ],
        },
        "spec": {"queueName": "team-ml"},
        "status": {
            "admission": {"clusterQueue": "gpu-cq", "podSetAssignments": []},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "lastTransitionTime": "2024-06-21T04:50:00Z", "message": ""},
                {"type": "Admitted", "status": "True", "reason": "Admitted",
                 "lastTransitionTime": "2024-06-21T04:51:00Z", "message": ""},
                {"type": "Preempted", "status": "False", "reason": "InClusterQueue",
                 "lastTransitionTime": "2024-06-21T04:45:00Z", "message": "Previously: preempted"},
            ],
            "schedulingStats": {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]},
        },
    }  # fmt: skip
    ing = ingestor(store, datetime(2024, 6, 21, 6, tzinfo=UTC))
    await ing.apply([("Workload", "ADDED", workload)])
    await ing.apply([("PyTorchJob", "ADDED", run)])
    [record] = await stored.all_jobs(store)
    assert record.uid == uid and record.kueue is not None
    assert (record.kueue.local_queue, record.kueue.cluster_queue) == ("team-ml", "gpu-cq")
    assert record.kueue.admitted_at == datetime(2024, 6, 21, 4, 51, tzinfo=UTC)
    assert record.kueue.preemptions == 1
    assert record.created_at is not None
    assert (
        record.queue_seconds == (datetime(2024, 6, 21, 4, 51, tzinfo=UTC) - record.created_at).total_seconds()
    )
