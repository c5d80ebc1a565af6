"""Workflows end to end, on both databases: Argo Workflows and Airflow DAG runs played on the simulated
API server, watched through kubernetes-asyncio, ingested, measured, summarized and sent.

A 4-step Argo workflow (a GPU training step, a CPU step that failed once and was retried) gives
exactly one summary with each step's own figures, and its GPU step no summary of its own; an
Airflow DAG run of 3 KubernetesPodOperator tasks gives one summary once it went quiet; replays and
restarts send nothing again.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.repository import SummaryState, WorkflowState
from inno_notify.domain.messages import decode_workflow
from inno_notify.domain.model import DeliveryStatus, JobStatus, Notification, NotificationKind
from inno_notify.domain.parsing.airflow import make_safe_label_value
from inno_notify.domain.workflows import WorkflowKind, airflow_run_uid
from inno_notify.sim.kube_store import PODS
from inno_notify.sim.pipelines import (
    SimArgoWorkflow,
    SimAttempt,
    SimDagRun,
    SimStep,
    airflow_changes,
    argo_changes,
)
from inno_notify.sim.workload import Behaviour
from tests import stored

from .workflow_support import T0, StepMeter, harness

BEHAVIOUR = Behaviour((50.0, 50.0), (20.0, 20.0), 24 * 2**30, 3.0)


def attempt(start: float, minutes: float, exit_code: int = 0) -> SimAttempt:
    return SimAttempt(T0 + timedelta(minutes=start), minutes * 60, exit_code)


def training_pipeline() -> SimArgoWorkflow:
    return SimArgoWorkflow(
        name="train-pipeline-x7k2p",
        namespace="face-research",
        created=T0,
        owner="alice@example.com",
        steps=(
            SimStep("prepare-data", (attempt(0.5, 5),), cpu="4"),
            SimStep("train", (attempt(6, 40, 0),), gpus=2, behaviour=BEHAVIOUR, memory="64Gi"),
            SimStep("evaluate", (attempt(47, 3, 2), attempt(50.5, 4))),
            SimStep("publish", (attempt(55, 2),)),
        ),
    )


async def test_an_argo_workflow_gives_one_summary_with_each_steps_figures(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    wf = training_pipeline()
    train = wf.steps[1].attempts[0]
    meter = StepMeter({train.pod_uid: (50.0, 50.0)})
    async with harness(store, database_url, tmp_path, meter) as h:
        h.apply(argo_changes(wf))

        async def ended() -> bool:
            return await store.workflows.workflow_state("test", wf.uid) is WorkflowState.AWAITING

        await h.until(ended)
        # The GPU step is a one-pod workload of its own, measured, a step of the workflow (no summary
        # of its own); it is the workflow owner's (the pod names none): usage and digests say so.
        step_job = await stored.get_job(store, "test", train.pod_uid)
        assert step_job is not None and step_job.requested.gpus == 2
        assert (step_job.parent_uid, step_job.owner) == (wf.uid, "alice@example.com")
        # Before the workflow is due, its step is measured and summarized: nothing is sent for it.
        await h.rounds(wf.end + timedelta(seconds=30))
        assert await stored.summary_state(store, "test", train.pod_uid) is SummaryState.SUMMARIZED
        assert await store.workflows.workflow_state("test", wf.uid) is WorkflowState.AWAITING
        assert await h.outbox() == []
        await h.rounds(wf.end + timedelta(seconds=61))
        assert await store.workflows.workflow_state("test", wf.uid) is WorkflowState.SUMMARIZED
        rows = await h.outbox()
        assert [(r.kind, r.recipient, r.status) for r in rows] == [
            (NotificationKind.WORKFLOW_SUMMARY, "alice@example.com", DeliveryStatus.SENT)
        ]
        summary = decode_workflow(rows[0].payload)
        assert (summary.kind, summary.name, summary.status) == (
            WorkflowKind.ARGO,
            wf.name,
            JobStatus.SUCCEEDED,
        )
        figures = {s.name: s for s in summary.steps}
        assert list(figures) == ["prepare-data", "train", "evaluate", "publish"]
        assert [(s.phase, s.attempts, s.exit_code, s.gpus) for s in summary.steps] == [
            ("Succeeded", 1, 0, 0.0),
            ("Succeeded", 1, 0, 2.0),
            ("Succeeded", 2, 0, 0.0),
            ("Succeeded", 1, 0, 0.0),
        ]
        assert [s.duration_seconds for s in summary.steps] == [300, 2400, 450, 120]
        # 2 GPUs held from scheduling (2 s after the pod's start) to the end: 2 × 39 min 58 s; used at 50 %.
        held = 2 * (40 * 60 - 2) / 60
        assert figures["train"].gpu_minutes is not None and abs(figures["train"].gpu_minutes - held) < 1e-6
        assert figures["train"].used_gpu_minutes is not None
        assert abs(figures["train"].used_gpu_minutes - held / 2) < 1e-6
        usage = await store.usage.get_usage("test", train.pod_uid)
        assert usage is not None and usage.gpu_minutes == figures["train"].gpu_minutes
        assert (summary.gpu_minutes, summary.used_gpu_minutes) == (
            figures["train"].gpu_minutes,
            figures["train"].used_gpu_minutes,
        )
        assert all(s.gpu_minutes is None for name, s in figures.items() if name != "train")
        [(email, mail)] = h.sender.mails()
        assert email == "alice@example.com"
        assert mail.subject == f"[inno-notify] Argo workflow face-research/{wf.name} succeeded"
        assert "evaluate: Succeeded (2 attempts), 8 min, no GPU, exit 0" in mail.text
        assert "train: Succeeded, 40 min, 2 GPUs, 40 / 80 GPU-min, exit 0" in mail.text

        # Rounds again, and the same history replayed: nothing new.
        await h.rounds(wf.end + timedelta(hours=1))
        h.sim.compact()
        h.sim.drop_watches()
        await h.rounds(wf.end + timedelta(hours=2))
        assert len(await h.outbox()) == 1 and len(h.sender.sent) == 1


async def test_a_failed_workflow_and_a_restart_send_once(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    wf = SimArgoWorkflow(
        name="etl-q8w2z",
        namespace="face-research",
        created=T0,
        owner="alice@example.com",
        annotations={"inno-notify/notify": "failure"},
        steps=(
            SimStep("extract", (attempt(1, 2),)),
            SimStep("load", (attempt(4, 1, 1),)),
            SimStep("never", (attempt(6, 1),)),
        ),
    )
    async with harness(store, database_url, tmp_path, StepMeter({})) as h:
        h.apply(argo_changes(wf))

        async def ended() -> bool:
            return await store.workflows.workflow_state("test", wf.uid) is WorkflowState.AWAITING

        await h.until(ended)
        await h.rounds(wf.end + timedelta(minutes=2))
    [row] = await harness_outbox(store)
    summary = decode_workflow(row.payload)
    assert (summary.status, summary.reason) == (JobStatus.FAILED, "child failed")
    assert [(s.name, s.phase, s.exit_code) for s in summary.steps] == [
        ("extract", "Succeeded", 0),
        ("load", "Failed", 1),
    ]
    # A restart: a new pipeline relists the same cluster state and plans nothing new.
    async with harness(
        store, database_url, tmp_path, StepMeter({}), now=wf.end + timedelta(hours=1)
    ) as again:
        again.apply(argo_changes(wf))

        async def seen() -> bool:
            return bool(again.pipeline.workflows and again.pipeline.workflows.recorder.stats.events)

        await again.until(seen)
        await again.rounds(wf.end + timedelta(hours=1))
        assert again.sender.sent == []
    assert len(await harness_outbox(store)) == 1


async def harness_outbox(store: Store) -> list[Notification]:
    rows, _ = await store.outbox.list_notifications(limit=500)
    return rows


def nightly_run(owner: str | None = "dana@example.com") -> SimDagRun:
    return SimDagRun(
        dag_id="nightly_embeddings",
        run_id="scheduled__2026-11-30T09:00:00+00:00",
        namespace="airflow",
        owner=owner,
        tasks=(
            SimStep("extract_corpus", (attempt(0, 10),)),
            SimStep("embed_corpus", (attempt(11, 30, 137), attempt(42, 30)), gpus=1, behaviour=BEHAVIOUR),
            SimStep("load_index", (attempt(73, 5),)),
        ),
    )


async def test_an_airflow_dag_run_of_three_kpo_tasks_gives_one_summary_once_quiet(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    run = nightly_run()
    embed = run.tasks[1]
    meter = StepMeter({a.pod_uid: (70.0,) for a in embed.attempts})
    run_uid = airflow_run_uid("airflow", "nightly_embeddings", make_safe_label_value(run.run_id))
    async with harness(store, database_url, tmp_path, meter) as h:
        h.apply(airflow_changes(run))

        async def all_pods_gone() -> bool:
            return not h.sim.store.objects(PODS)

        await h.until(all_pods_gone)
        [(record, pods)] = await store.workflows.quiet_airflow_runs(run.end, 10)
        assert record.kind is WorkflowKind.AIRFLOW and record.status is JobStatus.RUNNING
        assert len(pods) == 4 and record.uid == run_uid
        # Not quiet long enough: nothing closes, nothing is sent.
        await h.rounds(run.end + timedelta(seconds=299))
        assert await h.outbox() == []
        await h.rounds(run.end + timedelta(seconds=301))
        rows = await h.outbox()
        assert [(r.kind, r.recipient, r.status) for r in rows] == [
            (NotificationKind.WORKFLOW_SUMMARY, "dana@example.com", DeliveryStatus.SENT)
        ]
        summary = decode_workflow(rows[0].payload)
        assert (summary.kind, summary.name, summary.run_id, summary.status) == (
            WorkflowKind.AIRFLOW,
            "nightly_embeddings",
            "scheduled__2026-11-30T09:00:00+00:00",
            JobStatus.SUCCEEDED,
        )
        assert [(s.name, s.phase, s.attempts, s.gpus) for s in summary.steps] == [
            ("extract_corpus", "Succeeded", 1, 0.0),
            ("embed_corpus", "Succeeded", 2, 1.0),
            ("load_index", "Succeeded", 1, 0.0),
        ]
        embed_figures = summary.steps[1]
        held = sum((a.seconds - 2) / 60 for a in embed.attempts)
        assert embed_figures.gpu_minutes is not None and abs(embed_figures.gpu_minutes - held) < 1e-6
        assert (
            embed_figures.used_gpu_minutes is not None
            and abs(embed_figures.used_gpu_minutes - 0.7 * held) < 1e-6
        )
        for a in embed.attempts:  # each try measured on its own, neither summarized on its own
            assert await stored.summary_state(store, "test", a.pod_uid) is SummaryState.SUMMARIZED
        await h.rounds(run.end + timedelta(hours=3))
        assert len(await h.outbox()) == 1 and len(h.sender.sent) == 1
