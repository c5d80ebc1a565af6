"""Pipelines as one thing: an Argo Workflow or an Airflow DAG run, its steps, and the summary it gets.

A pipeline runs its work as bare pods, one per step attempt. The GPU ones are recorded like any
GPU workload (a one-pod job, measured by the usage collector), but their owner wants one message
for the pipeline, not one per step: those steps' own summaries are folded into the workflow's
(`folded_kind`), which lists every step (name, phase, duration, GPUs held, GPU-minutes used and
held, exit code), the totals, and the advice the GPU steps got.

- Argo: the Workflow object says it all (`status.nodes`, parsed by domain.parsing.argo); its pods
  only tell which pod ran which node (the `workflows.argoproj.io/node-id` annotation), so that a
  step's GPU figures can be found.
- Airflow: there is no object for a DAG run. KubernetesPodOperator pods of one
  (namespace, dag_id, run_id) are the run (`airflow_run`), and it is finished once none of them ran
  for `workflows.airflow_quiet_seconds` (`airflow_quiet_since`).

Pure: records in, records out; time is passed in.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from inno_notify.domain.model import JobRecord, JobStatus, Link, NotifyMode, Recommendation, Usage

__all__ = [
    "ARGO_WORKFLOW_LABEL",
    "ATTEMPTS_KEPT_EACH_END",
    "STEPS_KEPT",
    "AttemptRecord",
    "Creator",
    "StepFigures",
    "StepRecord",
    "WorkflowKind",
    "WorkflowPod",
    "WorkflowRecord",
    "WorkflowSummary",
    "airflow_quiet_since",
    "airflow_run",
    "airflow_run_uid",
    "folded_kind",
    "summarize_workflow",
]

ARGO_WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
AIRFLOW_KPO_LABEL = "kubernetes_pod_operator"
# Steps a workflow record keeps (a sweep of thousands of pods still fits one row); the summary
# says how many more there were.
STEPS_KEPT = 2000
# Attempts a step keeps at each end (the first and the last ones): a retry strategy without a
# limit can leave tens of thousands under one Retry node; the step counts the ones in between.
ATTEMPTS_KEPT_EACH_END = 5
# Advice shown per GPU step, and steps whose advice is shown.
ADVICE_PER_STEP = 2
ADVICE_STEPS = 5

# Phases of a step (Argo node phases; an Airflow pod's phase, or Deleted for one deleted unfinished).
SUCCEEDED, FAILED, ERROR, DELETED = "Succeeded", "Failed", "Error", "Deleted"
_FAILED_PHASES = frozenset({FAILED, ERROR, DELETED})
_ENDED_PHASES = frozenset({SUCCEEDED, FAILED, ERROR, DELETED, "Skipped", "Omitted"})


class WorkflowKind(enum.StrEnum):
    ARGO = "argo"
    AIRFLOW = "airflow"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One try of a step: one pod (Argo: a `Pod` node; Airflow: one try_number)."""

    key: str  # Argo node ID; Airflow "<pod uid>"
    phase: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    message: str | None = None
    pod_name: str | None = None


@dataclass(frozen=True, slots=True)
class StepRecord:
    """A step of a workflow and its tries, oldest first (a retried step has several)."""

    name: str
    phase: str
    template: str | None = None
    attempts: tuple[AttemptRecord, ...] = ()
    # Attempts between the first and the last ATTEMPTS_KEPT_EACH_END, counted but not kept.
    attempts_dropped: int = 0

    @property
    def tries(self) -> int:
        """How many attempts the step made, kept or not."""
        return len(self.attempts) + self.attempts_dropped

    @property
    def started_at(self) -> datetime | None:
        starts = [a.started_at for a in self.attempts if a.started_at is not None]
        return min(starts) if starts else None

    @property
    def finished_at(self) -> datetime | None:
        ends = [a.finished_at for a in self.attempts if a.finished_at is not None]
        return max(ends) if ends else None

    @property
    def last(self) -> AttemptRecord | None:
        return self.attempts[-1] if self.attempts else None


@dataclass(frozen=True, slots=True)
class Creator:
    """Who submitted an Argo workflow through the Argo Server, as its creator labels say (each value
    reduced by Argo to label characters; see domain.parsing.argo.creator_matches)."""

    subject: str | None = None
    email: str | None = None
    preferred_username: str | None = None


@dataclass(frozen=True, slots=True)
class WorkflowRecord:
    """An Argo Workflow or an Airflow DAG run, keyed by (cluster, uid).

    An Airflow run has no object of its own: its uid is derived from (namespace, dag_id, run_id)
    by `airflow_run_uid`, its `run_id` is the pods' run_id label (hashed by Airflow when the raw
    run id is not a valid label value; see domain.parsing.airflow).
    """

    cluster: str
    uid: str
    kind: WorkflowKind
    namespace: str
    name: str
    status: JobStatus = JobStatus.PENDING
    run_id: str | None = None
    reason: str | None = None
    owner: str | None = None
    team: str | None = None
    notify: NotifyMode = NotifyMode.ALWAYS
    channels: tuple[str, ...] | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    steps: tuple[StepRecord, ...] = ()
    # Steps beyond STEPS_KEPT, counted but not kept.
    steps_dropped: int = 0
    links: tuple[Link, ...] = ()
    resource_version: str | None = None
    creator: Creator | None = None

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return max(0.0, (self.finished_at - self.started_at).total_seconds())


@dataclass(frozen=True, slots=True)
class WorkflowPod:
    """A pod of a workflow step: which workflow and step it ran, and how it went.

    For Argo only `workflow_uid` (the owner reference) and `step_key` (the node ID) matter: the
    Workflow itself holds the rest. For Airflow the pods are all there is, so every field counts:
    `step` is the task (with its map index), `attempt` the try_number.
    """

    cluster: str
    uid: str
    namespace: str
    name: str
    kind: WorkflowKind
    workflow_uid: str
    workflow_name: str
    step_key: str
    step: str
    attempt: int = 1
    run_id: str | None = None
    phase: str = "Pending"
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    deleted_at: datetime | None = None
    exit_code: int | None = None
    exit_reason: str | None = None
    gpus: float = 0.0
    owner: str | None = None
    team: str | None = None
    notify: NotifyMode = NotifyMode.ALWAYS
    channels: tuple[str, ...] | None = None
    links: tuple[Link, ...] = field(default_factory=tuple)

    @property
    def ended_at(self) -> datetime | None:
        """When the pod stopped running: its last container's end, else its deletion."""
        if self.phase in (SUCCEEDED, FAILED):
            return self.finished_at or self.deleted_at or self.started_at or self.created_at
        return self.deleted_at


def folded_kind(job: JobRecord) -> WorkflowKind | None:
    """The kind of pipeline a one-pod workload is a step of (its summary is the workflow's), or None."""
    if job.labels.get(ARGO_WORKFLOW_LABEL):
        return WorkflowKind.ARGO
    if job.labels.get(AIRFLOW_KPO_LABEL) == "True" and all(
        job.labels.get(k) for k in ("dag_id", "task_id", "run_id")
    ):
        return WorkflowKind.AIRFLOW
    return None


def airflow_run_uid(namespace: str, dag_id: str, run_id: str) -> str:
    """The key of an Airflow DAG run: stable across restarts, short enough for any key column."""
    digest = hashlib.sha256("\x00".join((namespace, dag_id, run_id)).encode("utf-8", "replace"))
    return f"airflow-{digest.hexdigest()[:40]}"


def airflow_quiet_since(pods: Iterable[WorkflowPod]) -> datetime | None:
    """When the run's last pod stopped, if none runs (or waits to) any more; None while one does."""
    ends: list[datetime] = []
    for pod in pods:
        ended = pod.ended_at
        if ended is None:
            return None
        ends.append(ended)
    return max(ends) if ends else None


def _pod_phase(pod: WorkflowPod) -> str:
    if pod.phase not in (SUCCEEDED, FAILED) and pod.deleted_at is not None:
        return DELETED
    return pod.phase


def airflow_run(cluster: str, pods: Sequence[WorkflowPod], *, finished: bool) -> WorkflowRecord:
    """The run its pods make up (all of one run_uid). With `finished`, the run is over: it failed
    when any task's last try did not succeed."""
    ordered = sorted(pods, key=lambda p: (p.created_at is None, p.created_at or datetime.max, p.name))
    first = ordered[0]
    tasks: dict[str, list[WorkflowPod]] = {}
    for pod in ordered:
        tasks.setdefault(pod.step, []).append(pod)
    steps = []
    for name, tries in tasks.items():
        tries.sort(key=lambda p: (p.attempt, p.created_at is None, p.created_at or datetime.max, p.name))
        attempts = tuple(
            AttemptRecord(
                key=p.uid,
                phase=_pod_phase(p),
                started_at=p.started_at,
                finished_at=p.ended_at,
                exit_code=p.exit_code,
                message=p.exit_reason,
                pod_name=p.name,
            )
            for p in tries
        )
        steps.append(StepRecord(name=name, phase=attempts[-1].phase, attempts=attempts))
    steps.sort(key=_step_order)
    owned = next((p for p in ordered if p.owner is not None), first)
    starts = [s for s in (p.started_at or p.created_at for p in ordered) if s is not None]
    status = JobStatus.RUNNING if any(p.started_at for p in ordered) else JobStatus.PENDING
    finished_at = None
    if finished:
        failed = any(step.phase != SUCCEEDED for step in steps)
        status = JobStatus.FAILED if failed else JobStatus.SUCCEEDED
        finished_at = airflow_quiet_since(ordered)
    links = tuple(dict.fromkeys(link for p in ordered for link in p.links))
    return WorkflowRecord(
        cluster=cluster,
        uid=first.workflow_uid,
        kind=WorkflowKind.AIRFLOW,
        namespace=first.namespace,
        name=first.workflow_name,
        status=status,
        run_id=first.run_id,
        owner=owned.owner,
        team=owned.team or first.team,
        notify=owned.notify,
        channels=owned.channels,
        created_at=min((p.created_at for p in ordered if p.created_at), default=None),
        started_at=min(starts) if starts else None,
        finished_at=finished_at,
        steps=tuple(steps[:STEPS_KEPT]),
        steps_dropped=max(0, len(steps) - STEPS_KEPT),
        links=links,
    )


def _step_order(step: StepRecord) -> tuple[bool, datetime, str]:
    started = step.started_at
    return (started is None, started or datetime.max, step.name)


# --- the summary --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepFigures:
    """One step as the summary shows it. GPU figures are None where not measured, with `missing`
    saying why; a step that held no GPU has `gpus` 0 and no GPU figures at all."""

    name: str
    phase: str
    attempts: int = 1
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    message: str | None = None
    gpus: float = 0.0
    gpu_minutes: float | None = None
    used_gpu_minutes: float | None = None
    missing: str | None = None
    advice: tuple[str, ...] = ()
    # Of `attempts`, those the record did not keep (StepRecord.attempts_dropped).
    attempts_dropped: int = 0

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return max(0.0, (self.finished_at - self.started_at).total_seconds())

    @property
    def failed(self) -> bool:
        return self.phase in _FAILED_PHASES


@dataclass(frozen=True, slots=True)
class WorkflowSummary:
    """What a workflow summary says: the workflow, its steps, totals over the GPU steps."""

    cluster: str
    uid: str
    kind: WorkflowKind
    namespace: str
    name: str
    status: JobStatus
    run_id: str | None = None
    reason: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    steps: tuple[StepFigures, ...] = ()
    more_steps: int = 0
    gpu_minutes: float | None = None
    used_gpu_minutes: float | None = None
    # GPU steps without figures (not measured): the totals leave them out and say so.
    unmeasured_gpu_steps: int = 0
    links: tuple[Link, ...] = ()

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return max(0.0, (self.finished_at - self.started_at).total_seconds())


# (the step's pod record, its usage, its recommendations) by pod uid, for the pods that held GPUs.
StepUsage = Mapping[str, tuple[JobRecord, Usage | None, Sequence[Recommendation]]]


def _figures(step: StepRecord, pods: Mapping[str, WorkflowPod], measured: StepUsage) -> StepFigures:
    """The step's figures from its attempts' pods: GPU-minutes add up over the attempts."""
    gpus = 0.0
    held: list[float] = []
    used: list[float] = []
    missing: str | None = None
    advice: tuple[str, ...] = ()
    gpu_attempts = 0
    for attempt in step.attempts:
        pod = pods.get(attempt.key)
        if pod is None or pod.gpus <= 0:
            continue
        gpu_attempts += 1
        gpus = max(gpus, pod.gpus)
        found = measured.get(pod.uid)
        usage = found[1] if found is not None else None
        if usage is None or usage.gpu_minutes is None:
            missing = missing or _missing_reason(usage, "gpu_minutes")
            continue
        held.append(usage.gpu_minutes)
        if usage.used_gpu_minutes is None:
            missing = missing or _missing_reason(usage, "used_gpu_minutes")
        else:
            used.append(usage.used_gpu_minutes)
        if found is not None and found[2]:
            ranked = sorted(found[2], key=lambda r: r.waste_gpu_minutes, reverse=True)
            advice = tuple(r.message for r in ranked[:ADVICE_PER_STEP])
    if step.attempts_dropped and gpu_attempts:
        # The attempts not kept may have held GPUs too: a sum over the kept ones would understate.
        missing = f"{step.attempts_dropped} attempts not kept"
        held = []
    complete = gpu_attempts > 0 and len(held) == gpu_attempts
    last = step.last
    return StepFigures(
        name=step.name,
        phase=step.phase,
        attempts=step.tries,
        attempts_dropped=step.attempts_dropped,
        started_at=step.started_at,
        finished_at=step.finished_at,
        exit_code=last.exit_code if last else None,
        message=last.message if last and step.phase in _FAILED_PHASES else None,
        gpus=gpus,
        gpu_minutes=sum(held) if complete else None,
        used_gpu_minutes=sum(used) if complete and len(used) == gpu_attempts else None,
        missing=missing if gpu_attempts and missing else None,
        advice=advice,
    )


def _missing_reason(usage: Usage | None, figure: str) -> str:
    if usage is None:
        return "not measured"
    reason = usage.reason_for(figure)
    return reason.value if reason is not None else "not measured"


def summarize_workflow(
    workflow: WorkflowRecord,
    pods: Iterable[WorkflowPod],
    measured: StepUsage,
    *,
    steps_shown: int = 30,
) -> WorkflowSummary:
    """The workflow's summary. `pods` are the workflow's pods as tracked (keyed to the attempts by
    node ID for Argo, by pod uid for Airflow); `measured` the GPU ones' records and figures.

    The steps shown are the first `steps_shown` in start order, failed steps and GPU steps first
    when there are more; the totals count every step.
    """
    by_key: dict[str, WorkflowPod] = {}
    for pod in pods:
        by_key[pod.step_key if workflow.kind is WorkflowKind.ARGO else pod.uid] = pod
    figures = [_figures(step, by_key, measured) for step in workflow.steps]
    gpu_steps = [f for f in figures if f.gpus > 0]
    measured_steps = [f for f in gpu_steps if f.gpu_minutes is not None]
    held = sum(f.gpu_minutes or 0.0 for f in measured_steps) if measured_steps else None
    used_known = [f.used_gpu_minutes for f in measured_steps if f.used_gpu_minutes is not None]
    used = sum(used_known) if measured_steps and len(used_known) == len(measured_steps) else None
    shown = figures
    if len(figures) > steps_shown:
        keep = sorted(range(len(figures)), key=lambda i: (not figures[i].failed, figures[i].gpus <= 0, i))
        chosen = set(keep[:steps_shown])
        shown = [f for i, f in enumerate(figures) if i in chosen]
    advised = 0
    trimmed: list[StepFigures] = []
    for step in shown:
        if step.advice and advised >= ADVICE_STEPS:
            step = _without_advice(step)
        elif step.advice:
            advised += 1
        trimmed.append(step)
    return WorkflowSummary(
        cluster=workflow.cluster,
        uid=workflow.uid,
        kind=workflow.kind,
        namespace=workflow.namespace,
        name=workflow.name,
        status=workflow.status,
        run_id=workflow.run_id,
        reason=workflow.reason,
        started_at=workflow.started_at,
        finished_at=workflow.finished_at,
        steps=tuple(trimmed),
        more_steps=len(figures) - len(trimmed) + workflow.steps_dropped,
        gpu_minutes=held,
        used_gpu_minutes=used,
        unmeasured_gpu_steps=len(gpu_steps) - len(measured_steps),
        links=workflow.links,
    )


def _without_advice(step: StepFigures) -> StepFigures:
    return replace(step, advice=())
