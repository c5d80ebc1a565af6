"""Distributed training on the simulated cluster: PyTorchJob, MPIJob, JobSet and RayJob runs.

A training run is described once (`SimTrainingRun`: its kind, its replica roles with GPUs and a
`Behaviour` per pod, when it starts, how long it trains, how it ends, its restarts, how long its
pods linger after the end) and `plan_training` turns it into what the real controllers write, in
time order, as the `Change`s of sim.pipelines: the top object and its status as the operator
updates it, the child objects it creates (the launcher batch Job of an MPIJob, a JobSet's child
Jobs, a RayJob's RayCluster and submitter Job) and every pod, with the controllers' names, labels,
annotations and `controller: true` ownerReferences (uids match). What each controller does is taken
from tests/fixtures/training (each file's header names the controller source) and FACTS:

- PyTorchJob (Training Operator v1): pods `<job>-master-0`, `<job>-worker-<i>` owned by the job;
  conditions Created, Running, Restarting, Succeeded/Failed (reasons `PyTorchJob<Type>`, adding
  Succeeded/Failed flips Running to False, Restarting and Running replace each other); a restart
  (`restartPolicy: ExitCode`, exit code >= 128) deletes the pod and recreates it under the SAME
  name with a new uid; a failed job (a Worker exits 1) sets no completionTime and its other pods
  keep running, holding their GPUs (`cleanPodPolicy: None`, the default).
- MPIJob (mpi-operator v2beta1): worker pods `<job>-worker-<i>` owned by the MPIJob run sshd and
  never end by themselves; the launcher is a batch Job `<job>-launcher` owned by the MPIJob whose
  pods (generated names) carry the batch Job labels and `job-role: launcher`; a retry is the
  launcher Job's next pod (condition Restarting); the end is the launcher Job's.
- JobSet: child Jobs `<jobset>-<replicatedJob>-<i>` owned by the JobSet, their pods owned by the
  Job; the jobset keys as labels AND annotations on Jobs and pods; `terminalState`, conditions
  Completed/Failed; a restart (`failurePolicy.maxRestarts`) deletes ALL child Jobs and pods and
  recreates the Jobs under the SAME names with new uids and `restart-attempt` bumped (their pods
  get new generated names, as the Job controller names them), `status.restarts` bumped.
- RayJob (KubeRay): a RayCluster `<rayjob>-<5 random>` owned by the RayJob (its labels and
  annotations copied, plus `ray.io/originated-from-*`), head and worker pods owned by the
  RayCluster (Ray pods never end by themselves), a submitter batch Job named like the RayJob;
  `jobDeploymentStatus`/`jobStatus`; a retry (`backoffLimit`) deletes the RayCluster and creates
  a NEW one (new name); with `shutdownAfterJobFinishes` the RayCluster is deleted at the end.

Not verified against the sources (ours, marked so in the code): the message of JobSet's
RestartingJobSet condition and its reason when a restarted JobSet completes; the RayJob submitter
Job's labels beyond `ray.io/originated-from-*`. Names that the controllers draw at random (pod and
RayCluster suffixes) and every uid are derived from the run's uid, so a plan is reproducible.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, Unpack

from inno_notify.sim.behaviour import GIB, Behaviour
from inno_notify.sim.kube_store import (
    JOBS,
    JOBSETS,
    MPI_JOBS,
    PODS,
    PYTORCH_JOBS,
    RAY_CLUSTERS,
    RAY_JOBS,
    JsonObj,
    ResourceType,
)
from inno_notify.sim.objects import (
    controller_ref,
    job_failed,
    job_started,
    job_succeeded,
    kube_object,
    pod_running,
    pod_terminated,
    ts,
    with_owner,
)
from inno_notify.sim.pipelines import SCHEDULE_SECONDS, START_SECONDS, Change

PYTORCHJOB = "PyTorchJob"
MPIJOB = "MPIJob"
JOBSET = "JobSet"
RAYJOB = "RayJob"
# The top object's resource of each kind.
TOP_TYPES: dict[str, ResourceType] = {
    PYTORCHJOB: PYTORCH_JOBS,
    MPIJOB: MPI_JOBS,
    JOBSET: JOBSETS,
    RAYJOB: RAY_JOBS,
}
# Exit code of a pod killed by a signal (SIGTERM: preemption, a node drained): >= 128, so the
# PyTorchJob ExitCode policy restarts it.
RESTART_EXIT_CODE = 143
_DEFAULT_START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
_IMAGE = "registry.example.com/research/train:2026.11"
# k8s.io/apimachinery/pkg/util/rand: the letters generated names are made of.
_NAME_LETTERS = "bcdfghjklmnpqrstvwxz2456789"
_TO = "training.kubeflow.org/"
_JS = "jobset.sigs.k8s.io/"


# --- what a run is --------------------------------------------------------------------------------


def busy_behaviour(gpus: int, util_percent: float = 78.0, memory_gib: float = 52.0) -> Behaviour:
    """A replica that trains: every GPU busy around `util_percent`, framebuffer up to `memory_gib`."""
    return Behaviour((util_percent,) * gpus, (memory_gib,) * gpus, 48 * GIB, 6.0)


def idle_behaviour(gpus: int) -> Behaviour:
    """A replica whose GPUs idle (utilization 0-2 %) while it holds them: a CUDA context, no work."""
    return Behaviour((1.0,) * gpus, (0.4,) * gpus, 6 * GIB, 0.5)


@dataclass(frozen=True, slots=True)
class SimRole:
    """One replica type of a run: `replicas` pods (JobSet: child Jobs of `parallelism` pods each)
    with `gpus` GPUs each (`gpu_resource`, e.g. HAMi's `nvidia.com/vgpu`).

    Roles by kind: PyTorchJob `Master`, `Worker`; MPIJob `Launcher` (optional: 1 pod, no GPU when
    left out), `Worker`; JobSet: one replicatedJob per role, named after it; RayJob `head`
    (optional: 1 pod, no GPU when left out) and one worker group per other role, named after it.
    `behaviours[i]` is how pod i of the role runs (cycled; empty: busy on every GPU)."""

    name: str
    replicas: int = 1
    gpus: int = 1
    behaviours: tuple[Behaviour, ...] = ()
    gpu_resource: str = "nvidia.com/gpu"
    parallelism: int = 1
    cpu: str = "8"
    memory: str = "64Gi"
    image: str = _IMAGE

    @property
    def pods(self) -> int:
        return self.replicas * self.parallelism

    def behaviour(self, index: int) -> Behaviour | None:
        """How pod `index` of this role runs on its GPUs; None for a pod without GPUs."""
        if not self.gpus:
            return None
        if self.behaviours:
            return self.behaviours[index % len(self.behaviours)]
        return busy_behaviour(self.gpus)


# The roles a run has when its roles leave them out (and the factories' own): an MPIJob's launcher
# and a RayJob's head, neither with a GPU.
_MPI_LAUNCHER = SimRole("Launcher", 1, 0, cpu="1", memory="2Gi")
_RAY_HEAD = SimRole("head", 1, 0, cpu="1", memory="8G", image="rayproject/ray:2.46.0")


@dataclass(frozen=True, slots=True)
class SimTrainingRun:
    """A distributed training run of `kind` (PyTorchJob, MPIJob, JobSet, RayJob).

    `start`: the top object's creation; pods are created a second later and run 5 s after that.
    `seconds`: how long the last attempt trains, from its pods running to the end.
    `outcome`: `succeeded` or `failed` (after the restarts). `restarts`: attempts that failed and
    were restarted before the last one (PyTorchJob: the last Worker exits 143 and is recreated under
    its name; MPIJob: the launcher Job's pod fails and the Job starts another; JobSet: a pod fails,
    its Job fails, `failurePolicy.maxRestarts` restarts every child Job; RayJob: the Ray job fails,
    `backoffLimit` retries on a new RayCluster); each failing attempt runs `restart_after_seconds`.
    `linger_seconds`: how long what is left stays after the end; then the top object is deleted
    (`ttlSecondsAfterFinished`) and the garbage collector deletes its children; None: nothing is
    deleted. RayJob: the RayCluster's `ttlSecondsAfterFinished` instead (0 when None), honoured
    when `shutdown_after_job_finishes`. `clean_pod_policy` (PyTorchJob, MPIJob `runPolicy`):
    `None` (the default: pods stay after the end, running ones keep their GPUs), `Running`,
    `All`. `owner` goes in the top object's `inno-notify/owner` annotation, `annotations` and
    `labels` on the top object too (a RayJob's are copied onto its RayCluster)."""

    kind: str
    name: str
    namespace: str
    roles: tuple[SimRole, ...]
    start: datetime = _DEFAULT_START
    seconds: float = 1800.0
    outcome: str = "succeeded"
    restarts: int = 0
    restart_after_seconds: float = 600.0
    linger_seconds: float | None = None
    clean_pod_policy: str = "None"
    shutdown_after_job_finishes: bool = True
    owner: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    node: str = "gpu-node-01"

    def __post_init__(self) -> None:
        if self.kind not in TOP_TYPES:
            raise ValueError(f"unknown training kind {self.kind!r}, known: {sorted(TOP_TYPES)}")
        if self.outcome not in ("succeeded", "failed"):
            raise ValueError(f"outcome must be succeeded or failed, not {self.outcome!r}")
        if self.clean_pod_policy not in ("None", "Running", "All"):
            raise ValueError(f"cleanPodPolicy must be None, Running or All, not {self.clean_pod_policy!r}")
        if self.restarts < 0 or not self.roles:
            raise ValueError("a run needs roles and restarts >= 0")

    @property
    def top_type(self) -> ResourceType:
        return TOP_TYPES[self.kind]


@dataclass(frozen=True, slots=True)
class SimPod:
    """One pod a run's controllers created, as it lived: for the metrics and for a test's sums."""

    name: str
    uid: str
    role: str
    index: int  # within its role
    attempt: int  # 0 first; a restart's pods have the next attempt
    gpus: int
    gpu_resource: str
    node: str
    created: datetime
    running: datetime  # its container started
    ended: datetime | None  # its container exited (None: it ran until deleted, or runs on)
    exit_code: int | None
    deleted: datetime | None
    behaviour: Behaviour | None

    @property
    def held_until(self) -> datetime | None:
        """Until when the pod held its GPUs: its end, else its deletion (None: still holding)."""
        return self.ended if self.ended is not None else self.deleted


@dataclass(frozen=True, slots=True)
class TrainingPlan:
    """What the controllers write for a run (`changes`, oldest first), the pods they made, and
    when the run ended (the top object's terminal status write)."""

    run: SimTrainingRun
    changes: tuple[Change, ...]
    pods: tuple[SimPod, ...]
    ended_at: datetime

    @property
    def last_change(self) -> datetime:
        return self.changes[-1].at


# --- the typical runs -----------------------------------------------------------------------------


class RunOptions(TypedDict, total=False):
    """What a run of any kind takes besides its roles: the `SimTrainingRun` fields of the same
    names (left out: their defaults; no `uid`: a random one)."""

    start: datetime
    seconds: float
    outcome: str
    restarts: int
    linger_seconds: float | None
    owner: str | None
    uid: str


class KubeflowRunOptions(RunOptions, total=False):
    """A PyTorchJob's or MPIJob's: `runPolicy.cleanPodPolicy` too."""

    clean_pod_policy: str


class RayRunOptions(RunOptions, total=False):
    """A RayJob's: `shutdownAfterJobFinishes` too."""

    shutdown_after_job_finishes: bool


def _behaviours(gpus: int, pods: int, idle: int, what: str = "idle") -> tuple[Behaviour, ...]:
    """`pods` pods of `gpus` GPUs, the last `idle` of them idle, the others busy."""
    if not 0 <= idle <= pods:
        raise ValueError(f"{what} must be between 0 and {pods}")
    return (busy_behaviour(gpus),) * (pods - idle) + (idle_behaviour(gpus),) * idle


def _workers(gpus: int, replicas: int, idle: int, resource: str, name: str = "Worker") -> SimRole:
    return SimRole(name, replicas, gpus, _behaviours(gpus, replicas, idle), resource)


def pytorchjob_run(
    name: str = "pytorch-dist",
    namespace: str = "ml-team",
    *,
    master: bool = True,
    workers: int = 3,
    gpus: int = 4,
    idle_workers: int = 0,
    gpu_resource: str = "nvidia.com/gpu",
    **options: Unpack[KubeflowRunOptions],
) -> SimTrainingRun:
    """A PyTorchJob of one Master (unless `master=False`) and `workers` Workers, `gpus` GPUs
    (`gpu_resource`) each; the last `idle_workers` Workers hold their GPUs idle, the others are
    busy. `restarts`: that many times the last Worker exits 143 and is recreated under its name.
    `outcome="failed"`: Worker 0 (the Master without Workers) exits 1; the other pods keep running
    until `linger_seconds` after the end (or for ever when None, with `clean_pod_policy` None)."""
    roles = ((SimRole("Master", 1, gpus, (busy_behaviour(gpus),), gpu_resource),) if master else ()) + (
        (_workers(gpus, workers, idle_workers, gpu_resource),) if workers else ()
    )
    return SimTrainingRun(PYTORCHJOB, name, namespace, roles, **options)


def mpijob_run(
    name: str = "mpi-bench",
    namespace: str = "ml-team",
    *,
    workers: int = 2,
    gpus: int = 2,
    idle_workers: int = 0,
    gpu_resource: str = "nvidia.com/gpu",
    **options: Unpack[KubeflowRunOptions],
) -> SimTrainingRun:
    """An MPIJob (v2beta1): a launcher Job without GPUs and `workers` sshd workers of `gpus` GPUs.
    `restarts`: that many launcher pods fail (exit 1) before the last one. With `clean_pod_policy`
    None (the default) the workers keep running, holding their GPUs, after the end until
    `linger_seconds` later (for ever when None)."""
    roles = (_MPI_LAUNCHER, _workers(gpus, workers, idle_workers, gpu_resource))
    return SimTrainingRun(MPIJOB, name, namespace, roles, **options)


def jobset_run(
    name: str = "resnet-gpu",
    namespace: str = "ml-team",
    *,
    replicated_job: str = "workers",
    jobs: int = 1,
    pods_per_job: int = 4,
    gpus: int = 1,
    idle_pods: int = 0,
    gpu_resource: str = "nvidia.com/gpu",
    **options: Unpack[RunOptions],
) -> SimTrainingRun:
    """A JobSet with one replicatedJob `replicated_job` of `jobs` child Jobs, each of
    `pods_per_job` pods (Indexed) with `gpus` GPUs; the last `idle_pods` pods idle.
    `restarts`: `failurePolicy.maxRestarts` restarts, each after pod 0 of the first Job failed;
    `outcome="failed"` then fails it once more (ReachedMaxRestarts, or FailedJobs without restarts)."""
    behaviours = _behaviours(gpus, jobs * pods_per_job, idle_pods, "idle_pods")
    role = SimRole(replicated_job, jobs, gpus, behaviours, gpu_resource, parallelism=pods_per_job)
    return SimTrainingRun(JOBSET, name, namespace, (role,), **options)


def rayjob_run(
    name: str = "ray-train",
    namespace: str = "ml-team",
    *,
    group: str = "gpu-group",
    workers: int = 4,
    gpus: int = 1,
    idle_workers: int = 0,
    gpu_resource: str = "nvidia.com/gpu",
    **options: Unpack[RayRunOptions],
) -> SimTrainingRun:
    """A RayJob: a head without GPUs and one worker group `group` of `workers` pods with `gpus`
    GPUs. `restarts`: `backoffLimit` retries, each on a new RayCluster after the Ray job failed.
    The RayCluster (and its pods, which never end by themselves) is deleted `linger_seconds` (0 when
    None) after the end when `shutdown_after_job_finishes`, else it runs on."""
    roles = (_RAY_HEAD, _workers(gpus, workers, idle_workers, gpu_resource, name=group))
    return SimTrainingRun(RAYJOB, name, namespace, roles, **options)


# --- the plan -------------------------------------------------------------------------------------


def plan_training(run: SimTrainingRun) -> TrainingPlan:
    """Every write of the run's controllers, the pods they made, and when the run ended."""
    builder = _Builder(run)
    {PYTORCHJOB: _pytorchjob, MPIJOB: _mpijob, JOBSET: _jobset, RAYJOB: _rayjob}[run.kind](builder)
    changes = tuple(sorted(builder.changes, key=lambda c: c.at))
    assert builder.ended_at is not None
    return TrainingPlan(run, changes, tuple(builder.pods()), builder.ended_at)


def training_changes(run: SimTrainingRun) -> list[Change]:
    """The run's changes in time order, for `apply_all(server, ...)` or a player."""
    return list(plan_training(run).changes)


def training_pods(run: SimTrainingRun) -> list[SimPod]:
    """Every pod the run's controllers created (restarted ones included), in creation order."""
    return list(plan_training(run).pods)


def training_behaviours(runs: Iterable[SimTrainingRun]) -> dict[str, Behaviour]:
    """How every GPU pod of the runs really ran, by pod uid (for sim.metrics.SimMetrics `pods`)."""
    return {p.uid: p.behaviour for run in runs for p in training_pods(run) if p.behaviour is not None}


def pod_spans(runs: Iterable[SimTrainingRun]) -> dict[str, tuple[str, datetime, datetime | None]]:
    """Where and when every GPU pod of the runs held its GPUs: uid -> (node, from, until or None),
    for the live check of sim.metrics.SimMetrics (`spans`)."""
    return {
        p.uid: (p.node, p.running, p.held_until)
        for run in runs
        for p in training_pods(run)
        if p.behaviour is not None
    }


# --- shared builders ------------------------------------------------------------------------------


def _seconds(at: datetime, seconds: float) -> datetime:
    return at + timedelta(seconds=seconds)


@dataclass(slots=True)
class _PodRecord:
    obj: JsonObj
    sim: SimPod


class _Builder:
    """Collects a run's changes and pods; derives uids and random-looking names from the run's uid."""

    def __init__(self, run: SimTrainingRun) -> None:
        self.run = run
        self.changes: list[Change] = []
        self._pods: dict[str, _PodRecord] = {}  # by uid, in creation order
        self.ended_at: datetime | None = None

    def uid(self, *parts: object) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join([self.run.uid, *map(str, parts)])))

    def suffix(self, *parts: object) -> str:
        digest = hashlib.sha256("/".join([self.run.uid, "name", *map(str, parts)]).encode()).digest()
        return "".join(_NAME_LETTERS[b % len(_NAME_LETTERS)] for b in digest[:5])

    def emit(self, at: datetime, rt: ResourceType, op: str, obj: JsonObj) -> None:
        self.changes.append(Change(at, rt, op, copy.deepcopy(obj)))

    def top(self, spec: JsonObj, status: JsonObj | None = None) -> JsonObj:
        run = self.run
        top = kube_object(
            run.top_type,
            run.name,
            run.namespace,
            run.uid,
            run.start,
            generation=1,
            labels=dict(run.labels),
            annotations=with_owner(run.annotations, run.owner),
        )
        return top | {"spec": spec, "status": status if status is not None else {}}

    def child(
        self, rt: ResourceType, name: str, uid: str, created: datetime, owner: JsonObj, **meta: Any
    ) -> JsonObj:
        return kube_object(
            rt,
            name,
            self.run.namespace,
            uid,
            created,
            generation=1,
            **meta,
            ownerReferences=[controller_ref(owner)],
        )

    def pod(
        self,
        *,
        name: str,
        role: SimRole,
        index: int,
        attempt: int,
        created: datetime,
        owner: JsonObj,
        labels: Mapping[str, str],
        annotations: Mapping[str, str] | None = None,
        container: JsonObj,
        restart_policy: str,
        extra_meta: Mapping[str, Any] | None = None,
        extra_spec: Mapping[str, Any] | None = None,
    ) -> str:
        """Creates a pod (Pending at `created`, running START_SECONDS later) and returns its uid."""
        uid = self.uid("pod", name, attempt)
        meta: JsonObj = {"labels": dict(labels), **(extra_meta or {})}
        if annotations:
            meta["annotations"] = dict(annotations)
        obj = self.child(PODS, name, uid, created, owner, **meta)
        del obj["metadata"]["generation"]
        obj["spec"] = {"restartPolicy": restart_policy, "containers": [container], **(extra_spec or {})}
        obj["status"] = {"phase": "Pending", "qosClass": "Burstable"}
        scheduled = _seconds(created, SCHEDULE_SECONDS)
        running = _seconds(created, START_SECONDS)
        self.emit(created, PODS, "create", obj)
        obj = pod_running(obj, self.run.node, scheduled, running)
        self.emit(scheduled, PODS, "update", obj)
        sim = SimPod(
            name=name,
            uid=uid,
            role=role.name,
            index=index,
            attempt=attempt,
            gpus=role.gpus,
            gpu_resource=role.gpu_resource,
            node=self.run.node,
            created=created,
            running=running,
            ended=None,
            exit_code=None,
            deleted=None,
            behaviour=role.behaviour(index),
        )
        self._pods[uid] = _PodRecord(obj, sim)
        return uid

    def end_pod(self, uid: str, at: datetime, exit_code: int) -> None:
        record = self._pods[uid]
        if record.sim.ended is not None or record.sim.deleted is not None:
            return
        record.obj = pod_terminated(record.obj, at, exit_code)
        self.emit(at, PODS, "update", record.obj)
        record.sim = replace(record.sim, ended=at, exit_code=exit_code)

    def delete_pod(self, uid: str, at: datetime) -> None:
        record = self._pods[uid]
        if record.sim.deleted is not None:
            return
        self.emit(at, PODS, "delete", record.obj)
        record.sim = replace(record.sim, deleted=at)

    def live(self, uids: Iterable[str]) -> list[str]:
        """The pods of `uids` not deleted yet."""
        return [u for u in uids if self._pods[u].sim.deleted is None]

    def running(self, uids: Iterable[str]) -> list[str]:
        """The pods of `uids` whose containers still run."""
        return [u for u in self.live(uids) if self._pods[u].sim.ended is None]

    def pods(self) -> list[SimPod]:
        return [r.sim for r in self._pods.values()]

    def all_uids(self) -> list[str]:
        return list(self._pods)


def _resources(role: SimRole, *, requests: bool) -> JsonObj:
    """A container's resources: GPU and memory limits (the API server copies limits to empty
    requests on pods, so pods carry both; templates in the top objects only the limits)."""
    limits: JsonObj = {"cpu": role.cpu, "memory": role.memory}
    if role.gpus:
        limits[role.gpu_resource] = str(role.gpus)
    return {"limits": limits, "requests": dict(limits)} if requests else {"limits": limits}


def _container(name: str, role: SimRole, command: list[str], *, requests: bool, **extra: Any) -> JsonObj:
    return {
        "name": name,
        "image": role.image,
        "command": command,
        "resources": _resources(role, requests=requests),
        **extra,
    }


def _condition(type_: str, reason: str, message: str, at: datetime, status: str = "True") -> JsonObj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": ts(at),
        "lastUpdateTime": ts(at),
    }


def _kubeflow_condition(status: JsonObj, condition: JsonObj) -> None:
    """Training Operator's setCondition/filterOutCondition (mpi-operator has the same): Running and
    Restarting replace each other, Succeeded/Failed flip Running to False, a type appears once."""
    kind = condition["type"]
    kept = []
    for old in status.get("conditions", []):
        if old["type"] == kind or {old["type"], kind} == {"Running", "Restarting"}:
            continue
        if kind in ("Succeeded", "Failed") and old["type"] == "Running":
            old = {**old, "status": "False"}
        kept.append(old)
    status["conditions"] = [*kept, condition]


# What the Training Operator (PyTorchJob) and mpi-operator (MPIJob) write in each condition; the
# reason is the kind and the type ("PyTorchJobRunning") unless `_kubeflow_set` is given another.
_KUBEFLOW_MESSAGES: dict[str, dict[str, str]] = {
    PYTORCHJOB: {
        "Created": "PyTorchJob {name} is created.",
        "Running": "PyTorchJob {name} is running.",
        "Restarting": "PyTorchJob {name} is restarting because 1 {role} replica(s) failed.",
        "Succeeded": "PyTorchJob {name} is successfully completed.",
        "Failed": 'job "{name}" is failing because "{role}" replica(s) failed.',
    },
    MPIJOB: {
        "Created": "MPIJob {namespace}/{name} is created.",
        "Running": "MPIJob {namespace}/{name} is running.",
        "Restarting": "MPIJob {namespace}/{name} is restarting.",
        "Succeeded": "MPIJob {namespace}/{name} successfully completed.",
        # The launcher Job's condition message, as mpi-operator copies it.
        "Failed": "Job has reached the specified backoff limit: ",
    },
}


def _kubeflow_set(
    b: _Builder, status: JsonObj, type_: str, at: datetime, *, reason: str | None = None, role: str = ""
) -> None:
    """Condition `type_` as the run's operator sets it; `role`: the replica type that failed."""
    run = b.run
    message = _KUBEFLOW_MESSAGES[run.kind][type_].format(name=run.name, namespace=run.namespace, role=role)
    _kubeflow_condition(status, _condition(type_, reason or f"{run.kind}{type_}", message, at))


def _kubeflow_start(b: _Builder, job: JsonObj) -> tuple[JsonObj, datetime]:
    """The operator's first writes: the job created, then its status (startTime, Created). Returns
    that status, which the caller goes on updating, and when the operator creates the pods."""
    run = b.run
    b.emit(run.start, run.top_type, "create", job)
    status: JsonObj = {"startTime": ts(run.start)}
    _kubeflow_set(b, status, "Created", run.start)
    job["status"] = status
    created = _seconds(run.start, 1)
    b.emit(created, run.top_type, "update", job)
    return status, created


def _ttl(run: SimTrainingRun) -> JsonObj:
    return {} if run.linger_seconds is None else {"ttlSecondsAfterFinished": int(run.linger_seconds)}


def _linger(b: _Builder, top: JsonObj, end: datetime, children: list[tuple[ResourceType, JsonObj]]) -> None:
    """After the run's TTL the top object is deleted; the garbage collector then deletes its
    children (background propagation), then their pods."""
    if b.run.linger_seconds is None:
        return
    gone = _seconds(end, b.run.linger_seconds)
    b.emit(gone, b.run.top_type, "delete", top)
    for rt, child in children:
        b.emit(_seconds(gone, 1), rt, "delete", child)
    for uid in b.live(b.all_uids()):
        b.delete_pod(uid, _seconds(gone, 2))


def _clean_pods(b: _Builder, uids: list[str], at: datetime) -> None:
    """cleanPodPolicy at the end: Running deletes the pods still running, All every pod."""
    policy = b.run.clean_pod_policy
    for uid in b.running(uids) if policy == "Running" else b.live(uids) if policy == "All" else []:
        b.delete_pod(uid, at)


def _role(run: SimTrainingRun, name: str, default: SimRole | None = None) -> SimRole:
    for role in run.roles:
        if role.name.lower() == name.lower():
            return role
    if default is None:
        raise ValueError(f"a {run.kind} needs a {name} role")
    return default


# --- PyTorchJob -----------------------------------------------------------------------------------


def _pytorch_labels(job: str, role: str, index: int, master_role: bool) -> dict[str, str]:
    labels = {
        f"{_TO}job-name": job,
        f"{_TO}operator-name": "pytorchjob-controller",
        f"{_TO}replica-type": role.lower(),
        f"{_TO}replica-index": str(index),
    }
    if master_role:
        labels[f"{_TO}job-role"] = "master"
    return labels


def _selector(job: str, role: str) -> str:
    return f"{_TO}job-name={job},{_TO}operator-name=pytorchjob-controller,{_TO}replica-type={role.lower()}"


def _pytorchjob(b: _Builder) -> None:
    run = b.run
    roles = run.roles
    for role in roles:
        if role.name not in ("Master", "Worker"):
            raise ValueError(f"PyTorchJob roles are Master and Worker, not {role.name!r}")
    exit_code_policy = run.restarts > 0 or run.outcome == "failed"
    policy = "ExitCode" if exit_code_policy else "OnFailure"
    command = ["torchrun", "train.py"]
    spec = {
        "pytorchReplicaSpecs": {
            role.name: {
                "replicas": role.replicas,
                "restartPolicy": policy,
                "template": {"spec": {"containers": [_container("pytorch", role, command, requests=False)]}},
            }
            for role in roles
        },
        "runPolicy": {"cleanPodPolicy": run.clean_pod_policy, "suspend": False, **_ttl(run)},
    }
    job = b.top(spec)
    name = run.name
    status, created = _kubeflow_start(b, job)

    has_master = any(r.name == "Master" for r in roles)
    world = sum(r.replicas for r in roles)
    master_addr = f"{name}-master-0" if has_master else f"{name}-worker-0"
    # (role, index) -> uid of the pod now standing for that replica
    current: dict[tuple[str, int], str] = {}

    def make_pod(role: SimRole, index: int, attempt: int, at: datetime) -> None:
        pod_name = f"{name}-{role.name.lower()}-{index}"
        is_master_role = role.name == "Master" or (not has_master and index == 0)
        rank = index if role.name == "Master" or not has_master else index + 1
        env = [
            {"name": "MASTER_ADDR", "value": master_addr},
            {"name": "MASTER_PORT", "value": "23456"},
            {"name": "WORLD_SIZE", "value": str(world)},
            {"name": "RANK", "value": str(rank)},
            {"name": "PET_NPROC_PER_NODE", "value": "auto"},
            {"name": "PET_NNODES", "value": str(world)},
        ]
        container = _container(
            "pytorch",
            role,
            command,
            requests=True,
            env=env,
            ports=[{"containerPort": 23456, "name": "pytorchjob-port", "protocol": "TCP"}],
        )
        current[(role.name, index)] = b.pod(
            name=pod_name,
            role=role,
            index=index,
            attempt=attempt,
            created=at,
            owner=job,
            labels=_pytorch_labels(name, role.name, index, is_master_role),
            container=container,
            # ExitCode becomes Never on the pod: the operator, not the kubelet, restarts it.
            restart_policy="Never" if exit_code_policy else "OnFailure",
        )

    for role in roles:
        for index in range(role.replicas):
            make_pod(role, index, 0, created)

    def replica_statuses(**counts: dict[str, int]) -> JsonObj:
        return {
            role.name: {
                "selector": _selector(name, role.name),
                **counts.get(role.name, {"active": role.replicas}),
            }
            for role in roles
        }

    running_at = _seconds(created, START_SECONDS + 1)
    status["replicaStatuses"] = replica_statuses()
    _kubeflow_set(b, status, "Running", running_at)
    b.emit(running_at, PYTORCH_JOBS, "update", job)

    restarted = (
        ("Worker", _role(run, "Worker").replicas - 1)
        if any(r.name == "Worker" for r in roles)
        else ("Master", 0)
    )
    restarted_role = _role(run, restarted[0])
    for attempt in range(1, run.restarts + 1):
        fails = _seconds(running_at, run.restart_after_seconds)
        b.end_pod(current[restarted], fails, RESTART_EXIT_CODE)
        noticed = _seconds(fails, 1)
        _kubeflow_set(b, status, "Restarting", noticed, role=restarted[0])
        b.emit(noticed, PYTORCH_JOBS, "update", job)
        b.delete_pod(current[restarted], noticed)
        make_pod(restarted_role, restarted[1], attempt, _seconds(noticed, 1))
        running_at = _seconds(noticed, 1 + START_SECONDS + 1)
        _kubeflow_set(b, status, "Running", running_at)
        b.emit(running_at, PYTORCH_JOBS, "update", job)

    end = _seconds(running_at, run.seconds)
    finished = _seconds(end, 1)
    if run.outcome == "succeeded":
        for uid in current.values():
            b.end_pod(uid, end, 0)
        status["replicaStatuses"] = replica_statuses(**{r.name: {"succeeded": r.replicas} for r in roles})
        status["completionTime"] = ts(finished)
        _kubeflow_set(b, status, "Succeeded", finished)
    else:
        failing = ("Worker", 0) if ("Worker", 0) in current else ("Master", 0)
        b.end_pod(current[failing], end, 1)
        # The replica statuses freeze as they were; no completionTime on the ExitCode path.
        counts = {failing[0]: {"failed": 1}}
        worker = _role(run, "Worker") if failing[0] == "Worker" else None
        if worker is not None and worker.replicas > 1:
            counts["Worker"] = {"active": worker.replicas - 1, "failed": 1}
        status["replicaStatuses"] = replica_statuses(**counts)
        _kubeflow_set(b, status, "Failed", finished, role=failing[0])
    b.emit(finished, PYTORCH_JOBS, "update", job)
    b.ended_at = finished
    _clean_pods(b, list(current.values()), _seconds(finished, 1))
    _linger(b, job, finished, [])


# --- MPIJob ---------------------------------------------------------------------------------------


def _mpi_labels(job: str, role: str, index: int | None) -> dict[str, str]:
    labels = {
        f"{_TO}job-name": job,
        f"{_TO}job-role": role,
        f"{_TO}operator-name": "mpi-operator",
    }
    if index is not None:
        labels[f"{_TO}replica-index"] = str(index)
    return labels


def _batch_labels(job: JsonObj) -> dict[str, str]:
    """What the Job controller puts on its pods (and the API server on its template)."""
    uid, name = job["metadata"]["uid"], job["metadata"]["name"]
    return {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }


def _batch_job(
    b: _Builder,
    name: str,
    uid: str,
    created: datetime,
    owner: JsonObj,
    labels: Mapping[str, str],
    template_labels: Mapping[str, str],
    pod_spec: JsonObj,
    *,
    backoff_limit: int,
    parallelism: int = 1,
    indexed: bool = False,
    annotations: Mapping[str, str] | None = None,
) -> JsonObj:
    meta: JsonObj = {"labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    job = b.child(JOBS, name, uid, created, owner, **meta)
    template_meta: JsonObj = {"labels": {**_batch_labels(job), **template_labels}}
    if annotations:
        template_meta["annotations"] = dict(annotations)
    job["spec"] = {
        "backoffLimit": backoff_limit,
        "completionMode": "Indexed" if indexed else "NonIndexed",
        "completions": parallelism,
        "parallelism": parallelism,
        "manualSelector": False,
        "podReplacementPolicy": "Failed" if not indexed else "TerminatingOrFailed",
        "suspend": False,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
        "template": {"metadata": template_meta, "spec": pod_spec},
    }
    job["status"] = {}
    return job


def _mpijob(b: _Builder) -> None:
    run = b.run
    launcher_role = _role(run, "Launcher", _MPI_LAUNCHER)
    worker_role = _role(run, "Worker")
    if {r.name.lower() for r in run.roles} - {"launcher", "worker"}:
        raise ValueError("MPIJob roles are Launcher and Worker")
    name = run.name
    launcher_policy = "Never" if run.restarts else "OnFailure"
    launcher_command = [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        str(worker_role.pods * max(1, worker_role.gpus)),
        "python",
        "train.py",
    ]
    spec = {
        "slotsPerWorker": max(1, worker_role.gpus),
        "runPolicy": {
            "cleanPodPolicy": run.clean_pod_policy,
            "backoffLimit": run.restarts,
            "suspend": False,
            **_ttl(run),
        },
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "restartPolicy": launcher_policy,
                "template": {
                    "spec": {
                        "containers": [
                            _container("launcher", launcher_role, launcher_command, requests=False)
                        ]
                    }
                },
            },
            "Worker": {
                "replicas": worker_role.replicas,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [
                            _container("worker", worker_role, ["/usr/sbin/sshd", "-De"], requests=False)
                        ]
                    }
                },
            },
        },
    }
    mpijob = b.top(spec)
    status, created = _kubeflow_start(b, mpijob)

    workers = []
    for index in range(worker_role.replicas):
        pod_name = f"{name}-worker-{index}"
        container = _container(
            "worker",
            worker_role,
            ["/usr/sbin/sshd", "-De"],
            requests=True,
            env=[{"name": "K_MPI_JOB_ROLE", "value": "worker"}],
        )
        workers.append(
            b.pod(
                name=pod_name,
                role=worker_role,
                index=index,
                attempt=0,
                created=created,
                owner=mpijob,
                labels=_mpi_labels(name, "worker", index),
                container=container,
                restart_policy="Never",
                extra_spec={"hostname": pod_name, "subdomain": name},
            )
        )

    launcher_env = [
        {"name": "K_MPI_JOB_ROLE", "value": "launcher"},
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
        {"name": "NVIDIA_VISIBLE_DEVICES"},
        {"name": "NVIDIA_DRIVER_CAPABILITIES"},
    ]
    launcher_container = _container(
        "launcher", launcher_role, launcher_command, requests=True, env=launcher_env
    )
    launcher_labels = _mpi_labels(name, "launcher", None)
    launcher = _batch_job(
        b,
        f"{name}-launcher",
        b.uid("job", "launcher"),
        created,
        mpijob,
        {"app": name},
        launcher_labels,
        {
            "restartPolicy": launcher_policy,
            "containers": [launcher_container],
            "hostname": f"{name}-launcher",
            "subdomain": name,
        },
        backoff_limit=run.restarts,
    )
    b.emit(created, JOBS, "create", launcher)
    launcher = job_started(launcher, created)
    b.emit(_seconds(created, 0.5), JOBS, "update", launcher)

    def launcher_pod(attempt: int, at: datetime) -> str:
        suffix = b.suffix("launcher", attempt)
        return b.pod(
            name=f"{name}-launcher-{suffix}",
            role=launcher_role,
            index=0,
            attempt=attempt,
            created=at,
            owner=launcher,
            labels={**_batch_labels(launcher), **launcher_labels},
            container=launcher_container,
            restart_policy=launcher_policy,
            extra_meta={
                "generateName": f"{name}-launcher-",
                "finalizers": ["batch.kubernetes.io/job-tracking"],
            },
            extra_spec={"hostname": f"{name}-launcher", "subdomain": name},
        )

    current = launcher_pod(0, _seconds(created, 1))
    running_at = _seconds(created, 1 + START_SECONDS + 1)
    status["replicaStatuses"] = {"Launcher": {"active": 1}, "Worker": {"active": worker_role.replicas}}
    _kubeflow_set(b, status, "Running", running_at)
    b.emit(running_at, MPI_JOBS, "update", mpijob)

    for attempt in range(1, run.restarts + 1):
        fails = _seconds(running_at, run.restart_after_seconds)
        b.end_pod(current, fails, 1)
        noticed = _seconds(fails, 1)
        launcher["status"] = {**launcher["status"], "active": 0, "failed": attempt}
        b.emit(noticed, JOBS, "update", launcher)
        status["replicaStatuses"] = {
            "Launcher": {"failed": attempt},
            "Worker": {"active": worker_role.replicas},
        }
        _kubeflow_set(b, status, "Restarting", noticed)
        b.emit(noticed, MPI_JOBS, "update", mpijob)
        # The Job controller's backoff before the next pod: 10 s.
        retry = _seconds(noticed, 10)
        current = launcher_pod(attempt, retry)
        launcher["status"] = {**launcher["status"], "active": 1}
        b.emit(_seconds(retry, 0.5), JOBS, "update", launcher)
        running_at = _seconds(retry, START_SECONDS)

    end = _seconds(running_at, run.seconds)
    finished = _seconds(end, 1)
    if run.outcome == "succeeded":
        b.end_pod(current, end, 0)
        launcher = job_succeeded(launcher, finished)
        status["replicaStatuses"] = {"Launcher": {"succeeded": 1}}
        _kubeflow_set(b, status, "Succeeded", finished)
    else:
        b.end_pod(current, end, 1)
        launcher = job_failed(launcher, finished, "BackoffLimitExceeded", failed=run.restarts + 1)
        status["replicaStatuses"] = {"Launcher": {"failed": run.restarts + 1}}
        # The launcher Job's reason + "/" + its last pod's status.reason (empty for a plain exit).
        _kubeflow_set(b, status, "Failed", finished, reason="BackoffLimitExceeded/")
    status["completionTime"] = ts(finished)
    # With cleanPodPolicy None the sshd workers stay, running, with their GPUs.
    status["replicaStatuses"]["Worker"] = (
        {} if run.clean_pod_policy != "None" else {"active": worker_role.replicas}
    )
    b.emit(finished, JOBS, "update", launcher)
    b.emit(finished, MPI_JOBS, "update", mpijob)
    b.ended_at = finished
    _clean_pods(b, workers, _seconds(finished, 1))
    _linger(b, mpijob, finished, [(JOBS, launcher)])


# --- JobSet ---------------------------------------------------------------------------------------


def _jobset_keys(
    run: SimTrainingRun, role: SimRole, job_name: str, index: int, global_index: int, total: int, attempt: int
) -> dict[str, str]:
    """labelAndAnnotateObject: the same keys as labels and as annotations, on Jobs and pods."""
    return {
        f"{_JS}global-replicas": str(total),
        f"{_JS}group-name": "default",
        f"{_JS}group-replicas": str(total),
        f"{_JS}job-global-index": str(global_index),
        f"{_JS}job-group-index": str(global_index),
        f"{_JS}job-index": str(index),
        f"{_JS}job-key": hashlib.sha1(f"{run.namespace}/{job_name}".encode()).hexdigest(),
        f"{_JS}jobset-name": run.name,
        f"{_JS}jobset-uid": run.uid,
        f"{_JS}replicatedjob-name": role.name,
        f"{_JS}replicatedjob-replicas": str(role.replicas),
        f"{_JS}restart-attempt": str(attempt),
    }


def _jobset(b: _Builder) -> None:
    run = b.run
    name = run.name
    pod_policy = "Never" if run.restarts or run.outcome == "failed" else "OnFailure"
    command = ["torchrun", "--master_addr=$MASTER_ADDR", "train.py"]

    def pod_spec(role: SimRole, requests: bool) -> JsonObj:
        return {
            "restartPolicy": pod_policy,
            "containers": [_container("pytorch", role, command, requests=requests)],
        }

    spec: JsonObj = {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "replicatedJobs": [
            {
                "groupName": "default",
                "name": role.name,
                "replicas": role.replicas,
                "template": {
                    "spec": {
                        "backoffLimit": 0,
                        "completionMode": "Indexed",
                        "completions": role.parallelism,
                        "parallelism": role.parallelism,
                        "template": {"spec": pod_spec(role, False)},
                    }
                },
            }
            for role in run.roles
        ],
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        "successPolicy": {"operator": "All"},
        "suspend": False,
        **_ttl(run),
    }
    if run.restarts:
        spec["failurePolicy"] = {"maxRestarts": run.restarts}
    jobset = b.top(spec, {"restarts": 0})
    b.emit(run.start, JOBSETS, "create", jobset)
    status = jobset["status"]
    total = sum(role.replicas for role in run.roles)

    def jobs_status(**by_state: int) -> list[JsonObj]:
        base = {"active": 0, "failed": 0, "ready": 0, "succeeded": 0, "suspended": 0}
        return [
            {"name": role.name, **base, **{k: v * role.replicas for k, v in by_state.items()}}
            for role in run.roles
        ]

    # attempt -> [(job object, [pod uids])]
    def start_attempt(attempt: int, at: datetime) -> list[tuple[JsonObj, list[str]]]:
        made: list[tuple[JsonObj, list[str]]] = []
        global_index = 0
        for role in run.roles:
            for index in range(role.replicas):
                job_name = f"{name}-{role.name}-{index}"
                keys = _jobset_keys(run, role, job_name, index, global_index, total, attempt)
                job = _batch_job(
                    b,
                    job_name,
                    b.uid("job", job_name, attempt),
                    at,
                    jobset,
                    keys,
                    keys,
                    {**pod_spec(role, False), "subdomain": name},
                    backoff_limit=0,
                    parallelism=role.parallelism,
                    indexed=True,
                    annotations=keys,
                )
                b.emit(at, JOBS, "create", job)
                job = job_started(job, _seconds(at, 0.5))
                job["status"]["active"] = role.parallelism
                b.emit(_seconds(at, 0.5), JOBS, "update", job)
                uids = []
                for k in range(role.parallelism):
                    container = _container(
                        "pytorch",
                        role,
                        command,
                        requests=True,
                        env=[{"name": "MASTER_ADDR", "value": f"{name}-{run.roles[0].name}-0-0.{name}"}],
                    )
                    uids.append(
                        b.pod(
                            name=f"{job_name}-{k}-{b.suffix('pod', job_name, k, attempt)}",
                            role=role,
                            index=index * role.parallelism + k,
                            attempt=attempt,
                            created=_seconds(at, 1),
                            owner=job,
                            labels={
                                **_batch_labels(job),
                                "batch.kubernetes.io/job-completion-index": str(k),
                                **keys,
                            },
                            annotations={"batch.kubernetes.io/job-completion-index": str(k), **keys},
                            container=container,
                            restart_policy=pod_policy,
                            extra_meta={"generateName": f"{job_name}-{k}-"},
                            extra_spec={"hostname": f"{job_name}-{k}", "subdomain": name},
                        )
                    )
                made.append((job, uids))
                global_index += 1
        return made

    def fail_first(jobs: list[tuple[JsonObj, list[str]]], at: datetime) -> tuple[datetime, str]:
        """Pod 0 of the first Job exits 1; its Job fails (backoffLimit 0) and its other pods go."""
        job, uids = jobs[0]
        b.end_pod(uids[0], at, 1)
        noticed = _seconds(at, 1)
        for uid in b.live(uids[1:]):
            b.delete_pod(uid, noticed)
        jobs[0] = (job_failed(job, noticed, "BackoffLimitExceeded"), uids)
        b.emit(noticed, JOBS, "update", jobs[0][0])
        return _seconds(noticed, 1), job["metadata"]["name"]

    at = _seconds(run.start, 1)
    jobs = start_attempt(0, at)
    running_at = _seconds(at, 1 + START_SECONDS + 1)
    status["replicatedJobsStatus"] = jobs_status(active=1, ready=1)
    b.emit(running_at, JOBSETS, "update", jobset)
    for attempt in range(1, run.restarts + 1):
        restart_at, failed_job = fail_first(jobs, _seconds(running_at, run.restart_after_seconds))
        status["restarts"] = attempt
        status["restartsCountTowardsMax"] = attempt
        # Condition type and reason from the fixture's header; the message is ours.
        restarting = {
            "type": "RestartingJobSet",
            "status": "True",
            "reason": "DefaultFailurePolicy",
            "message": f"jobset restarting (first failed job: {failed_job})",
            "lastTransitionTime": ts(restart_at),
        }
        status["conditions"] = [
            c for c in status.get("conditions", []) if c["type"] != "RestartingJobSet"
        ] + [restarting]
        b.emit(restart_at, JOBSETS, "update", jobset)
        # Every child Job of the old attempt goes (foreground: pods first), then comes back.
        for job, uids in jobs:
            for uid in b.live(uids):
                b.delete_pod(uid, restart_at)
            b.emit(_seconds(restart_at, 1), JOBS, "delete", job)
        at = _seconds(restart_at, 2)
        jobs = start_attempt(attempt, at)
        running_at = _seconds(at, 1 + START_SECONDS + 1)

    end = _seconds(running_at, run.seconds)
    if run.outcome == "succeeded":
        for job, uids in jobs:
            for uid in uids:
                b.end_pod(uid, end, 0)
            b.emit(_seconds(end, 1), JOBS, "update", job_succeeded(job, _seconds(end, 1)))
        finished = _seconds(end, 2)
        condition = {
            "type": "Completed",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": ts(finished),
        }
        restarting_end = ("AllJobsCompleted", "jobset completed successfully")  # ours: not verified
        status.update({"terminalState": "Completed", "replicatedJobsStatus": jobs_status(succeeded=1)})
    else:
        finished, failed_job = fail_first(jobs, end)
        if run.restarts:
            reason = "ReachedMaxRestarts"
            message = f"jobset failed due to reaching max number of restarts (first failed job: {failed_job})"
        else:
            reason = "FailedJobs"
            message = f"jobset failed due to one or more job failures (first failed job: {failed_job})"
        condition = {
            "type": "Failed",
            "status": "True",
            "reason": reason,
            "message": message,
            "lastTransitionTime": ts(finished),
        }
        restarting_end = ("JobSetFailed", "jobset failed")
        replicated = jobs_status(active=1)
        replicated[0] = {**replicated[0], "active": max(0, replicated[0]["active"] - 1), "failed": 1}
        status.update({"terminalState": "Failed", "replicatedJobsStatus": replicated})
    conditions = []
    for old in status.get("conditions", []):
        if old["type"] == "RestartingJobSet":
            # updateCondition keeps lastTransitionTime when only reason/message change... and status
            old = {
                **old,
                "status": "False",
                "reason": restarting_end[0],
                "message": restarting_end[1],
                "lastTransitionTime": ts(finished),
            }
        conditions.append(old)
    status["conditions"] = [*conditions, condition]
    b.emit(finished, JOBSETS, "update", jobset)
    b.ended_at = finished
    if run.outcome == "failed":
        # Once finished, the child Jobs still active are deleted (foreground: pods first).
        for job, uids in jobs[1:]:
            for uid in b.live(uids):
                b.delete_pod(uid, _seconds(finished, 1))
            b.emit(_seconds(finished, 2), JOBS, "delete", job)
    _linger(
        b, jobset, finished, [(JOBS, job) for job, _ in (jobs if run.outcome == "succeeded" else jobs[:1])]
    )


# --- RayJob ---------------------------------------------------------------------------------------


def _ray_pod_labels(cluster: str, node_type: str, group: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/created-by": "kuberay-operator",
        "app.kubernetes.io/name": "kuberay",
        "ray.io/cluster": cluster,
        "ray.io/group": group,
        "ray.io/identifier": f"{cluster}-{node_type}",
        "ray.io/is-ray-node": "yes",
        "ray.io/node-type": node_type,
    }


def _rayjob(b: _Builder) -> None:
    run = b.run
    name, ns = run.name, run.namespace
    head = _role(run, "head", _RAY_HEAD)
    groups = [r for r in run.roles if r.name.lower() != "head"]
    entrypoint = "python train.py"

    def template(role: SimRole, container: str, requests: bool) -> JsonObj:
        return {
            "spec": {
                "containers": [_container(container, role, ["/bin/bash", "-c", "--"], requests=requests)]
            }
        }

    cluster_spec = {
        "headGroupSpec": {
            "rayStartParams": {"dashboard-host": "0.0.0.0"},
            "template": template(head, "ray-head", False),
        },
        "rayVersion": "2.46.0",
        "workerGroupSpecs": [
            {
                "groupName": g.name,
                "replicas": g.replicas,
                "minReplicas": g.replicas,
                "maxReplicas": g.replicas,
                "rayStartParams": {"dashboard-host": "0.0.0.0"},
                "template": template(g, "ray-worker", False),
            }
            for g in groups
        ],
    }
    ttl = 0 if run.linger_seconds is None else int(run.linger_seconds)
    spec = {
        "backoffLimit": run.restarts,
        "entrypoint": entrypoint,
        "rayClusterSpec": cluster_spec,
        "shutdownAfterJobFinishes": run.shutdown_after_job_finishes,
        "ttlSecondsAfterFinished": ttl,
        "submissionMode": "K8sJobMode",
    }
    rayjob = b.top(spec)
    rayjob["metadata"]["finalizers"] = ["ray.io/rayjob-finalizer"]
    b.emit(run.start, RAY_JOBS, "create", rayjob)
    status: JsonObj = {}
    rayjob["status"] = status
    desired_gpu = sum(g.replicas * g.gpus for g in groups)

    def cluster_status(cluster: str) -> JsonObj:
        replicas = sum(g.replicas for g in groups)
        return {
            "state": "ready",
            "availableWorkerReplicas": replicas,
            "readyWorkerReplicas": replicas,
            "desiredWorkerReplicas": replicas,
            "minWorkerReplicas": replicas,
            "maxWorkerReplicas": replicas,
            "desiredGPU": str(desired_gpu),
            "desiredTPU": "0",
            "head": {"serviceName": f"{cluster}-head-svc"},
            "observedGeneration": 1,
        }

    submitter_labels = {"ray.io/originated-from-cr-name": name, "ray.io/originated-from-crd": "RayJob"}
    submitter_role = SimRole("submitter", 1, 0, cpu="500m", memory="200Mi", image=head.image)

    def attempt_run(attempt: int, at: datetime) -> tuple[JsonObj, list[str], JsonObj, str, datetime]:
        """A RayCluster with its pods and a submitter Job; returns them and when the Ray job runs."""
        cluster = f"{name}-{b.suffix('raycluster', attempt)}"
        status.update(
            {
                "jobDeploymentStatus": "Initializing",
                "rayClusterName": cluster,
                "jobId": f"{name}-{b.suffix('jobid', attempt)}",
                "dashboardURL": f"{cluster}-head-svc.{ns}.svc.cluster.local:8265",
                "startTime": ts(run.start),
                "failed": attempt,
                "succeeded": 0,
                "observedGeneration": 1,
            }
        )
        for gone in ("jobStatus", "reason", "message", "endTime", "rayJobInfo", "rayClusterStatus"):
            status.pop(gone, None)
        b.emit(at, RAY_JOBS, "update", rayjob)
        labels = {
            **run.labels,
            "ray.io/job-submission-mode": "K8sJobMode",
            "ray.io/originated-from-cr-name": name,
            "ray.io/originated-from-crd": "RayJob",
        }
        raycluster = b.child(
            RAY_CLUSTERS,
            cluster,
            b.uid("raycluster", attempt),
            at,
            rayjob,
            labels=labels,
            annotations=dict(rayjob["metadata"]["annotations"]),
        )
        raycluster["spec"] = copy.deepcopy(cluster_spec)
        raycluster["status"] = {}
        b.emit(at, RAY_CLUSTERS, "create", raycluster)
        pods_at = _seconds(at, 1)
        uids = [
            b.pod(
                name=f"{cluster}-head-{b.suffix('head', attempt)}",
                role=head,
                index=0,
                attempt=attempt,
                created=pods_at,
                owner=raycluster,
                labels=_ray_pod_labels(cluster, "head", "headgroup"),
                annotations={"ray.io/ft-enabled": "false"},
                container=_container("ray-head", head, ["/bin/bash", "-c", "--"], requests=True),
                restart_policy="Always",
                extra_meta={"generateName": f"{cluster}-head-"},
            )
        ]
        for g in groups:
            for index in range(g.replicas):
                uids.append(
                    b.pod(
                        name=f"{cluster}-{g.name}-worker-{b.suffix('worker', g.name, index, attempt)}",
                        role=g,
                        index=index,
                        attempt=attempt,
                        created=pods_at,
                        owner=raycluster,
                        labels=_ray_pod_labels(cluster, "worker", g.name),
                        annotations={"ray.io/ft-enabled": "false"},
                        container=_container("ray-worker", g, ["/bin/bash", "-c", "--"], requests=True),
                        restart_policy="Always",
                        extra_meta={"generateName": f"{cluster}-{g.name}-worker-"},
                    )
                )
        ready = _seconds(pods_at, START_SECONDS + 1)
        raycluster["status"] = cluster_status(cluster)
        b.emit(ready, RAY_CLUSTERS, "update", raycluster)
        status.update(
            {
                "jobDeploymentStatus": "Running",
                "jobStatus": "PENDING",
                "rayClusterStatus": cluster_status(cluster),
            }
        )
        b.emit(ready, RAY_JOBS, "update", rayjob)
        submitter_container = _container(
            "ray-job-submitter",
            submitter_role,
            [
                "ray",
                "job",
                "submit",
                "--address",
                f"http://{cluster}-head-svc.{ns}.svc.cluster.local:8265",
                "--",
                entrypoint,
            ],
            requests=True,
        )
        submitter = _batch_job(
            b,
            name,
            b.uid("submitter", attempt),
            ready,
            rayjob,
            submitter_labels,
            submitter_labels,
            {"restartPolicy": "Never", "containers": [submitter_container]},
            backoff_limit=2,
        )
        b.emit(ready, JOBS, "create", submitter)
        submitter = job_started(submitter, _seconds(ready, 0.5))
        b.emit(_seconds(ready, 0.5), JOBS, "update", submitter)
        uids.append(
            b.pod(
                name=f"{name}-{b.suffix('submitter', attempt)}",
                role=submitter_role,
                index=0,
                attempt=attempt,
                created=_seconds(ready, 1),
                owner=submitter,
                labels={**_batch_labels(submitter), **submitter_labels},
                container=submitter_container,
                restart_policy="Never",
                extra_meta={"generateName": f"{name}-", "finalizers": ["batch.kubernetes.io/job-tracking"]},
            )
        )
        job_running = _seconds(ready, 1 + START_SECONDS + 1)
        status.update({"jobStatus": "RUNNING", "rayJobInfo": {"startTime": ts(job_running)}})
        b.emit(job_running, RAY_JOBS, "update", rayjob)
        return raycluster, uids, submitter, cluster, job_running

    def shut_down(raycluster: JsonObj, uids: list[str], at: datetime) -> None:
        b.emit(at, RAY_CLUSTERS, "delete", raycluster)
        for uid in b.live(uids[:-1]):  # the Ray pods; the submitter's pod stays with its Job
            b.delete_pod(uid, _seconds(at, 1))

    raycluster, uids, submitter, _, job_running = attempt_run(0, _seconds(run.start, 1))
    failed_message = (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n"
        "torch.OutOfMemoryError: CUDA out of memory.\n"
    )
    for attempt in range(1, run.restarts + 1):
        fails = _seconds(job_running, run.restart_after_seconds)
        b.end_pod(uids[-1], _seconds(fails, 1), 1)
        noticed = _seconds(fails, 2)
        b.emit(noticed, JOBS, "update", job_failed(submitter, noticed, "BackoffLimitExceeded"))
        status.update(
            {
                "jobStatus": "FAILED",
                "jobDeploymentStatus": "Retrying",
                "failed": attempt,
                "reason": "AppFailed",
                "message": failed_message,
                "rayJobInfo": {**status["rayJobInfo"], "endTime": ts(fails)},
            }
        )
        b.emit(noticed, RAY_JOBS, "update", rayjob)
        # Retrying: the RayCluster and the submitter Job go, then a new attempt on a new RayCluster.
        shut_down(raycluster, uids, _seconds(noticed, 1))
        b.emit(_seconds(noticed, 1), JOBS, "delete", submitter)
        b.delete_pod(uids[-1], _seconds(noticed, 2))
        status["jobDeploymentStatus"] = "New"
        b.emit(_seconds(noticed, 2), RAY_JOBS, "update", rayjob)
        raycluster, uids, submitter, _, job_running = attempt_run(attempt, _seconds(noticed, 3))

    end = _seconds(job_running, run.seconds)
    finished = _seconds(end, 2)
    succeeded = run.outcome == "succeeded"
    b.end_pod(uids[-1], _seconds(end, 1), 0 if succeeded else 1)
    final_job = (
        job_succeeded(submitter, finished)
        if succeeded
        else job_failed(submitter, finished, "BackoffLimitExceeded")
    )
    b.emit(finished, JOBS, "update", final_job)
    status.update(
        {
            "jobStatus": "SUCCEEDED" if succeeded else "FAILED",
            "jobDeploymentStatus": "Complete" if succeeded else "Failed",
            "endTime": ts(finished),
            "succeeded": 1 if succeeded else 0,
            "failed": run.restarts + (0 if succeeded else 1),
            "message": "Job finished successfully." if succeeded else failed_message,
            "rayJobInfo": {**status["rayJobInfo"], "endTime": ts(end)},
        }
    )
    if succeeded:
        status.pop("reason", None)
    else:
        status["reason"] = "AppFailed"
    b.emit(finished, RAY_JOBS, "update", rayjob)
    b.ended_at = finished
    if run.shutdown_after_job_finishes:
        shut_down(raycluster, uids, _seconds(finished, ttl))
