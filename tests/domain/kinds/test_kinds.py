"""Each workload kind of the registry on what its operator really writes (tests/fixtures/training)
and on what a hostile user could write instead."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from inno_notify.domain.kinds import KINDS, Link, kind_spec, owner_kinds
from inno_notify.domain.model import JobRecord, JobStatus, KindName, WorkloadKind
from inno_notify.domain.parsing import ParseConfig, ParseError, parse_pod
from inno_notify.domain.parsing.fields import SetAside
from inno_notify.settings import WorkloadKindsSettings

TRAINING = Path(__file__).resolve().parents[2] / "fixtures" / "training"
EVERY_KIND = owner_kinds(KINDS)
CFG = ParseConfig(owner_kinds=EVERY_KIND, gpu_resources={"nvidia.com/gpu": 1.0, "nvidia.com/vgpu": 1.0})


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((TRAINING / name).read_text())
    return loaded


def parse(obj: dict[str, Any], cfg: ParseConfig = CFG) -> JobRecord | Link | None:
    spec = kind_spec(obj["kind"])
    assert spec is not None, obj["kind"]
    notes: list[SetAside] = []
    return spec.parse(obj, cfg, notes)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


# fixture, kind, status, reason, finished_at, attempts, [(role, replicas, gpus per pod)], requested gpus
RUNS = [
    (
        "pytorchjob-succeeded.yaml",
        WorkloadKind.PYTORCH_JOB,
        JobStatus.SUCCEEDED,
        "PyTorchJobSucceeded",
        "2024-06-21T05:00:37Z",
        1,
        [("Master", 1, 1.0), ("Worker", 1, 1.0)],
        1.0,
    ),
    (
        "pytorchjob-failed.yaml",
        WorkloadKind.PYTORCH_JOB,
        JobStatus.FAILED,
        "PyTorchJobFailed",
        "2025-03-10T09:14:41Z",
        1,
        None,
        None,
    ),
    (
        "mpijob-succeeded.yaml",
        WorkloadKind.MPI_JOB,
        JobStatus.SUCCEEDED,
        "MPIJobSucceeded",
        "2019-07-09T22:17:06Z",
        1,
        [("Launcher", 1, 0.0), ("Worker", 1, 2.0)],
        2.0,
    ),
    (
        "mpijob-failed.yaml",
        WorkloadKind.MPI_JOB,
        JobStatus.FAILED,
        "BackoffLimitExceeded/",
        "2025-04-02T06:16:41Z",
        3,
        None,
        None,
    ),
    (
        "jobset-succeeded.yaml",
        WorkloadKind.JOB_SET,
        JobStatus.SUCCEEDED,
        "AllJobsCompleted",
        "2025-03-12T10:47:13Z",
        1,
        [("workers", 4, 1.0)],
        1.0,
    ),
    (
        "jobset-failed.yaml",
        WorkloadKind.JOB_SET,
        JobStatus.FAILED,
        "ReachedMaxRestarts",
        "2025-03-13T08:31:07Z",
        4,
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("fixture", "kind", "status", "reason", "finished", "attempts", "roles", "gpus"), RUNS
)
def test_a_run_from_its_operators_object(
    fixture: str,
    kind: WorkloadKind,
    status: JobStatus,
    reason: str,
    finished: str,
    attempts: int,
    roles: list[tuple[str, int, float]] | None,
    gpus: float | None,
) -> None:
    obj = load(fixture)
    record = parse(obj)
    assert isinstance(record, JobRecord)
    assert (record.kind, record.status, record.reason) == (kind, status, reason)
    assert record.uid == obj["metadata"]["uid"]
    assert record.finished_at == at(finished)
    assert record.attempts == attempts
    if roles is not None:
        assert [(r.role, r.replicas, r.requested.gpus) for r in record.replicas] == roles
        assert record.requested.parallelism == sum(r[1] for r in roles)
    if gpus is not None:
        assert record.requested.gpus == gpus


RAYJOB: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayJob",
    "metadata": {
        "name": "rayjob-sample",
        "namespace": "ml-team",
        "uid": "0b1c2d3e-0000-4000-8000-000000000001",
        "creationTimestamp": "2025-05-01T10:00:00Z",
        "annotations": {"inno-notify/owner": "alice@example.com"},
    },
    "spec": {
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": {
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head"}]}}},
            "workerGroupSpecs": [
                {
                    "groupName": "gpu-group",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "ray-worker", "resources": {"limits": {"nvidia.com/gpu": 4}}}
                            ]
                        }
                    },
                }
            ],
        },
    },
    "status": {
        "jobDeploymentStatus": "Complete",
        "jobStatus": "SUCCEEDED",
        "rayClusterName": "rayjob-sample-x7k2p",
        "startTime": "2025-05-01T10:00:05Z",
        "endTime": "2025-05-01T11:00:00Z",
        "succeeded": 1,
        "failed": 1,
    },
}


@pytest.mark.parametrize(
    ("deployment", "job_status", "expected"),
    [
        ("Complete", "SUCCEEDED", JobStatus.SUCCEEDED),
        ("Complete", "FAILED", JobStatus.FAILED),
        ("Failed", "FAILED", JobStatus.FAILED),
        ("ValidationFailed", None, JobStatus.FAILED),
        ("Running", "RUNNING", JobStatus.RUNNING),
        ("Suspended", None, JobStatus.SUSPENDED),
        ("Initializing", None, JobStatus.RUNNING),
        (None, None, JobStatus.PENDING),
    ],
)
def test_a_rayjob_ends_with_its_deployment_status(
    deployment: str | None, job_status: str | None, expected: JobStatus
) -> None:
    obj = copy.deepcopy(RAYJOB)
    obj["status"]["jobDeploymentStatus"] = deployment
    obj["status"]["jobStatus"] = job_status
    record = parse(obj)
    assert isinstance(record, JobRecord)
    assert record.status is expected
    if expected.is_terminal:
        assert record.finished_at == at("2025-05-01T11:00:00Z")
    else:
        assert record.finished_at is None


def test_a_rayjob_has_its_head_and_worker_groups_and_retries_as_attempts() -> None:
    record = parse(RAYJOB)
    assert isinstance(record, JobRecord)
    assert [(r.role, r.replicas, r.requested.gpus) for r in record.replicas] == [
        ("head", 1, 0.0),
        ("gpu-group", 2, 4.0),
    ]
    assert record.owner == "alice@example.com"
    assert record.attempts == 2
    assert record.requested.gpus == 4.0


def test_objects_between_a_run_and_its_pods_are_links() -> None:
    child = load("jobset-child-job.yaml")
    link = parse(child)
    assert link == Link(child["metadata"]["uid"], load("jobset-succeeded.yaml")["metadata"]["uid"])
    cluster: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "rayjob-sample-x7k2p",
            "namespace": "ml-team",
            "uid": "0b1c2d3e-0000-4000-8000-000000000002",
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayJob",
                    "name": "rayjob-sample",
                    "controller": True,
                    "uid": RAYJOB["metadata"]["uid"],
                }
            ],
        },
    }
    assert parse(cluster) == Link(cluster["metadata"]["uid"], RAYJOB["metadata"]["uid"])
    standing = copy.deepcopy(cluster)
    del standing["metadata"]["ownerReferences"]
    assert parse(standing) is None  # a RayCluster nobody controls is not a run


def test_a_child_job_is_a_run_of_its_own_where_its_controller_is_not_watched() -> None:
    child = load("jobset-child-job.yaml")
    record = parse(child, ParseConfig())
    assert isinstance(record, JobRecord)
    assert record.kind is WorkloadKind.JOB


# fixture, the owner's uid (from the fixture of the run), role
PODS = [
    ("pytorchjob-pod.yaml", "4cfb59e8-e06d-44bf-9936-3a483f4e1729", "Master"),
    ("pytorchjob-pod-worker-hami-vgpu-daocloud.yaml", "e5a8b05d-1f03-4717-8e1c-4ec928014b7b", "Worker"),
    ("mpijob-pod.yaml", None, "Worker"),
    ("mpijob-launcher-pod.yaml", None, "Launcher"),
    ("jobset-pod.yaml", "7e1efbb2-5bd6-4820-b515-e125b73e044b", "workers"),
]


@pytest.mark.parametrize(("fixture", "owner_uid", "role"), PODS)
def test_a_pod_names_its_controller_and_role(fixture: str, owner_uid: str | None, role: str) -> None:
    obj = load(fixture)
    pod = parse_pod(obj, CFG)
    controller = next(ref for ref in obj["metadata"]["ownerReferences"] if ref.get("controller"))
    assert pod.job_uid == (owner_uid or controller["uid"])
    assert pod.role == role
    assert pod.gpu_equivalents > 0 or role == "Launcher"


def test_a_training_pod_is_nobodys_while_its_kind_is_not_watched() -> None:
    pod = parse_pod(load("pytorchjob-pod.yaml"), ParseConfig())
    assert pod.job_uid is None


def test_a_controller_of_another_group_with_a_known_kind_name_is_not_ours() -> None:
    obj = load("pytorchjob-pod.yaml")
    obj["metadata"]["ownerReferences"][0]["apiVersion"] = "example.com/v1"
    assert parse_pod(obj, CFG).job_uid is None


HOSTILE = [
    ("replica specs not an object", lambda o: o["spec"].__setitem__("pytorchReplicaSpecs", ["Master"])),
    (
        "replicas a string",
        lambda o: o["spec"]["pytorchReplicaSpecs"]["Worker"].__setitem__("replicas", "many"),
    ),
    ("conditions not a list", lambda o: o["status"].__setitem__("conditions", {"type": "Succeeded"})),
    ("uid missing", lambda o: o["metadata"].pop("uid")),
    (
        "a huge replica count",
        lambda o: o["spec"]["pytorchReplicaSpecs"]["Worker"].__setitem__("replicas", 10**30),
    ),
]


@pytest.mark.parametrize(("what", "spoil"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_run_is_refused_with_a_parse_error(what: str, spoil: Any) -> None:
    obj = load("pytorchjob-succeeded.yaml")
    spoil(obj)
    with pytest.raises(ParseError):
        parse(obj)


def test_role_names_and_replica_roles_are_storable() -> None:
    obj = load("pytorchjob-succeeded.yaml")
    specs = obj["spec"]["pytorchReplicaSpecs"]
    specs["Wor\x00ker" + "x" * 5000] = specs.pop("Worker")
    record = parse(obj)
    assert isinstance(record, JobRecord)
    roles = [r.role for r in record.replicas]
    assert all("\x00" not in role and len(role.encode()) <= 256 for role in roles)


def test_every_registered_kind_has_a_setting_and_an_api() -> None:
    for spec in KINDS:
        assert spec.group and spec.versions and spec.plural
        assert spec.setting in {"Job", "PyTorchJob", "MPIJob", "JobSet", "RayJob"}


def test_the_settings_name_every_registered_kind() -> None:
    fields = set(WorkloadKindsSettings.model_fields)
    assert {spec.setting for spec in KINDS} <= fields
    assert fields - {spec.setting for spec in KINDS} == {"Pod", "Workflow"}


def test_every_stored_kind_is_found_by_its_api_name() -> None:
    for kind in WorkloadKind:
        assert kind.value in KindName(kind.api_name).stored
