"""Pipelines as one thing: which pods are folded steps, how an Airflow run is put together from its
pods and when it is quiet, and the figures a workflow summary shows per step and in total."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.model import (
    JobRecord,
    JobStatus,
    MissingFigure,
    MissingReason,
    Recommendation,
    RecommendationKind,
    Severity,
    Unit,
    Usage,
)
from inno_notify.domain.workflows import (
    AttemptRecord,
    StepRecord,
    StepUsage,
    WorkflowKind,
    WorkflowPod,
    WorkflowRecord,
    airflow_quiet_since,
    airflow_run,
    airflow_run_uid,
    folded_kind,
    summarize_workflow,
)

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
RUN = airflow_run_uid("airflow", "nightly_embeddings", "scheduled__2026-11-30T0000000000-3e9f1a2b7")


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.mark.parametrize(
    ("labels", "kind"),
    [
        ({"workflows.argoproj.io/workflow": "hpo-x9k2m"}, WorkflowKind.ARGO),
        (
            {"kubernetes_pod_operator": "True", "dag_id": "d", "task_id": "t", "run_id": "r"},
            WorkflowKind.AIRFLOW,
        ),
        ({"kubernetes_pod_operator": "True", "dag_id": "d", "task_id": "t"}, None),
        ({"dag_id": "d", "task_id": "t", "run_id": "r"}, None),
        ({"app": "web"}, None),
    ],
)
def test_which_pods_are_folded_into_a_workflow(labels: dict[str, str], kind: WorkflowKind | None) -> None:
    job = JobRecord(cluster="c", uid="u", namespace="ns", name="p", labels=labels)
    assert folded_kind(job) is kind


def task(uid: str, step: str, phase: str, start: float, end: float | None, **changes: object) -> WorkflowPod:
    pod = WorkflowPod(
        cluster="c",
        uid=uid,
        namespace="airflow",
        name=f"{step}-{uid}",
        kind=WorkflowKind.AIRFLOW,
        workflow_uid=RUN,
        workflow_name="nightly_embeddings",
        step_key=step,
        step=step,
        run_id="scheduled__2026-11-30T0000000000-3e9f1a2b7",
        phase=phase,
        created_at=at(start),
        started_at=at(start),
        finished_at=at(end) if end is not None else None,
    )
    return replace(pod, **changes)  # type: ignore[arg-type]


def test_a_run_is_quiet_once_no_pod_runs() -> None:
    pods = [task("a", "extract", "Succeeded", 0, 5), task("b", "embed", "Running", 6, None)]
    assert airflow_quiet_since(pods) is None
    pods[1] = replace(pods[1], phase="Succeeded", finished_at=at(40))
    assert airflow_quiet_since(pods) == at(40)
    # A pod deleted before its containers ended has stopped too.
    deleted = task("c", "load", "Running", 41, None, deleted_at=at(45))
    assert airflow_quiet_since([*pods, deleted]) == at(45)
    assert airflow_quiet_since([*pods, task("d", "load", "Pending", 46, None, started_at=None)]) is None


def test_an_airflow_run_from_its_pods() -> None:
    pods = [
        task("a", "extract", "Succeeded", 0, 5, owner="carol@example.com", team="nlp"),
        task("b1", "embed", "Failed", 6, 20, attempt=1, exit_code=137, exit_reason="OOMKilled", gpus=1.0),
        task("b2", "embed", "Succeeded", 21, 50, attempt=2, exit_code=0, gpus=1.0),
        task("c", "load", "Succeeded", 51, 55),
    ]
    running = airflow_run("c", pods, finished=False)
    assert (running.status, running.finished_at, running.owner, running.team) == (
        JobStatus.RUNNING,
        None,
        "carol@example.com",
        "nlp",
    )
    run = airflow_run("c", list(reversed(pods)), finished=True)
    assert (run.uid, run.kind, run.name, run.status) == (
        RUN,
        WorkflowKind.AIRFLOW,
        "nightly_embeddings",
        JobStatus.SUCCEEDED,
    )
    assert (run.started_at, run.finished_at) == (at(0), at(55))
    assert [(s.name, s.phase, [a.phase for a in s.attempts]) for s in run.steps] == [
        ("extract", "Succeeded", ["Succeeded"]),
        ("embed", "Succeeded", ["Failed", "Succeeded"]),
        ("load", "Succeeded", ["Succeeded"]),
    ]
    failed = airflow_run("c", [*pods[:3], replace(pods[3], phase="Failed", exit_code=1)], finished=True)
    assert failed.status is JobStatus.FAILED


def _usage(held: float | None, used: float | None) -> Usage:
    missing = (
        () if held is not None else (MissingFigure("gpu_minutes", MissingReason.PROMETHEUS_UNAVAILABLE),)
    )
    return Usage(gpu_minutes=held, used_gpu_minutes=used, missing=missing)


ADVICE = Recommendation(
    kind=RecommendationKind.GPU_COUNT,
    severity=Severity.WARNING,
    current=2,
    suggested=1,
    unit=Unit.GPUS,
    message="1 of 2 GPUs stayed idle: request 1.",
    waste_gpu_minutes=45.0,
)


def _argo_workflow() -> tuple[WorkflowRecord, list[WorkflowPod]]:
    """prepare (CPU) → train (2 GPUs) → evaluate (CPU, failed once, retried) → publish (CPU)."""

    def step(name: str, *attempts: tuple[str, str, float, float, int]) -> StepRecord:
        records = tuple(
            AttemptRecord(key, phase, at(start), at(end), code, "Error (exit code 2)" if code else None)
            for key, phase, start, end, code in attempts
        )
        return StepRecord(name, records[-1].phase, name, records)

    workflow = WorkflowRecord(
        cluster="c",
        uid="wf-uid",
        kind=WorkflowKind.ARGO,
        namespace="face-research",
        name="train-pipeline-x7k2p",
        status=JobStatus.SUCCEEDED,
        started_at=at(0),
        finished_at=at(60),
        steps=(
            step("prepare", ("n-prepare", "Succeeded", 0, 5, 0)),
            step("train", ("n-train", "Succeeded", 6, 46, 0)),
            step("evaluate", ("n-eval-0", "Failed", 47, 50, 2), ("n-eval-1", "Succeeded", 51, 55, 0)),
            step("publish", ("n-publish", "Succeeded", 56, 59, 0)),
        ),
    )

    def pod(key: str, gpus: float = 0.0) -> WorkflowPod:
        return WorkflowPod(
            cluster="c",
            uid=f"pod-{key}",
            namespace="face-research",
            name=key,
            kind=WorkflowKind.ARGO,
            workflow_uid="wf-uid",
            workflow_name="train-pipeline-x7k2p",
            step_key=key,
            step=key,
            gpus=gpus,
        )

    pods = [pod("n-prepare"), pod("n-train", 2.0), pod("n-eval-0"), pod("n-eval-1"), pod("n-publish")]
    return workflow, pods


def _record(uid: str) -> JobRecord:
    return JobRecord(cluster="c", uid=uid, namespace="face-research", name=uid)


def test_the_summary_has_every_step_with_its_own_figures() -> None:
    workflow, pods = _argo_workflow()
    measured = {"pod-n-train": (_record("pod-n-train"), _usage(80.0, 35.5), [ADVICE])}
    summary = summarize_workflow(workflow, pods, measured)
    assert (summary.status, summary.duration_seconds, summary.more_steps) == (JobStatus.SUCCEEDED, 3600, 0)
    rows = [(s.name, s.phase, s.attempts, s.duration_seconds, s.exit_code, s.gpus) for s in summary.steps]
    assert rows == [
        ("prepare", "Succeeded", 1, 300, 0, 0.0),
        ("train", "Succeeded", 1, 2400, 0, 2.0),
        ("evaluate", "Succeeded", 2, 480, 0, 0.0),
        ("publish", "Succeeded", 1, 180, 0, 0.0),
    ]
    train = summary.steps[1]
    assert (train.gpu_minutes, train.used_gpu_minutes, train.missing, train.advice) == (
        80.0,
        35.5,
        None,
        ("1 of 2 GPUs stayed idle: request 1.",),
    )
    assert summary.steps[0].gpu_minutes is None and summary.steps[0].missing is None
    assert (summary.gpu_minutes, summary.used_gpu_minutes, summary.unmeasured_gpu_steps) == (80.0, 35.5, 0)


def test_a_gpu_step_not_measured_is_named_not_counted_as_zero() -> None:
    workflow, pods = _argo_workflow()
    summary = summarize_workflow(workflow, pods, {})
    train = summary.steps[1]
    assert (train.gpu_minutes, train.used_gpu_minutes, train.missing) == (None, None, "not measured")
    assert (summary.gpu_minutes, summary.used_gpu_minutes, summary.unmeasured_gpu_steps) == (None, None, 1)
    measured: StepUsage = {"pod-n-train": (_record("pod-n-train"), _usage(None, None), [])}
    assert summarize_workflow(workflow, pods, measured).steps[1].missing == "prometheus_unavailable"


def test_gpu_minutes_add_up_over_a_steps_attempts() -> None:
    workflow, pods = _argo_workflow()
    pods = [replace(p, gpus=1.0) if p.step_key.startswith("n-eval") else p for p in pods]
    measured: dict[str, tuple[JobRecord, Usage | None, list[Recommendation]]] = {
        "pod-n-train": (_record("pod-n-train"), _usage(80.0, 35.5), []),
        "pod-n-eval-0": (_record("pod-n-eval-0"), _usage(3.0, 2.0), []),
        "pod-n-eval-1": (_record("pod-n-eval-1"), _usage(4.0, 3.5), []),
    }
    evaluate = summarize_workflow(workflow, pods, measured).steps[2]
    assert (evaluate.gpu_minutes, evaluate.used_gpu_minutes, evaluate.attempts) == (7.0, 5.5, 2)
    # One attempt unmeasured: the step's figure is unknown, not the other attempt's alone.
    del measured["pod-n-eval-0"]
    assert summarize_workflow(workflow, pods, measured).steps[2].gpu_minutes is None


def test_many_steps_show_failed_and_gpu_steps_first_and_count_the_rest() -> None:
    workflow, pods = _argo_workflow()
    many = tuple(
        StepRecord(
            f"shard-{i}", "Succeeded", "shard", (AttemptRecord(f"s{i}", "Succeeded", at(i), at(i + 1)),)
        )
        for i in range(40)
    )
    failed = StepRecord("broken", "Failed", "x", (AttemptRecord("bad", "Failed", at(90), at(91), 1),))
    workflow = replace(workflow, steps=(*workflow.steps, *many, failed), steps_dropped=7)
    summary = summarize_workflow(workflow, pods, {}, steps_shown=10)
    names = [s.name for s in summary.steps]
    assert len(names) == 10 and "broken" in names and "train" in names
    assert summary.more_steps == 45 - 10 + 7
