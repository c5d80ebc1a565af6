"""Domain records for the storage tests, with every field set to something other than its default
so that a field the codec forgets shows up as a failed round trip."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

from inno_notify.domain.model import (
    Channel,
    ContainerRecord,
    DirectoryUser,
    GpuUsage,
    JobRecord,
    JobStatus,
    KueueInfo,
    Link,
    MissingFigure,
    MissingReason,
    Notification,
    NotificationKind,
    NotifyMode,
    PodRecord,
    PodUsage,
    RecipientAddress,
    Recommendation,
    RecommendationKind,
    Requested,
    Severity,
    Team,
    TerminatedState,
    Unit,
    Usage,
    WorkloadKind,
)
from inno_notify.domain.workflows import (
    AttemptRecord,
    Creator,
    StepRecord,
    WorkflowKind,
    WorkflowPod,
    WorkflowRecord,
)

T0 = datetime(2026, 11, 30, 10, 0, 0, 123456, tzinfo=UTC)
# A non-UTC zone on input: the store must give back the same instant, in UTC.
PLUS3 = timezone(timedelta(hours=3))


def job(uid: str = "job-1", **changes: object) -> JobRecord:
    base = JobRecord(
        cluster="default",
        uid=uid,
        namespace="face-research",
        name=f"train-{uid}",
        kind=WorkloadKind.JOB,
        status=JobStatus.FAILED,
        reason="BackoffLimitExceeded",
        owner="alice@example.com",
        team="face",
        notify=NotifyMode.FAILURE,
        channels=("slack", "email"),
        group_key="sweep-7",
        family="train-resnet",
        created_at=T0,
        started_at=T0 + timedelta(minutes=2),
        finished_at=(T0 + timedelta(hours=1)).astimezone(PLUS3),
        first_scheduled_at=T0 + timedelta(minutes=1),
        exit_code=137,
        exit_reason="OOMKilled",
        requested=Requested(
            gpus=4.0,
            cpu_cores=16.0,
            memory_bytes=274877906944,
            cpu_limit_cores=32.5,
            memory_limit_bytes=300000000000,
            extended={"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 0.5},
            parallelism=2,
            completions=6,
        ),
        kueue=KueueInfo(
            local_queue="lq",
            cluster_queue="cq",
            workload_name="job-train-abc",
            quota_reserved_at=T0 + timedelta(seconds=5),
            admitted_at=T0 + timedelta(seconds=6),
            evictions=1,
            preemptions=2,
            last_eviction_reason="Preempted",
        ),
        labels={"app": "resnet", "kueue.x-k8s.io/queue-name": "lq", "note": "ünïcødé <b>&"},
        event_counts={"FailedScheduling": 3, "Evicted": 1},
        resource_version="12345",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def pod(uid: str = "pod-1", job_uid: str | None = "job-1", **changes: object) -> PodRecord:
    terminated = TerminatedState(
        exit_code=137,
        reason="OOMKilled",
        signal=9,
        message="killed",
        started_at=T0 + timedelta(minutes=2),
        finished_at=T0 + timedelta(minutes=50),
    )
    base = PodRecord(
        cluster="default",
        uid=uid,
        namespace="face-research",
        name=f"train-{uid}",
        job_uid=job_uid,
        phase="Failed",
        created_at=T0,
        node="gpu-node-3",
        reason="Evicted",
        scheduled_at=T0 + timedelta(minutes=1),
        started_at=T0 + timedelta(minutes=2),
        finished_at=T0 + timedelta(minutes=50),
        deleted_at=T0 + timedelta(minutes=55),
        gpu_equivalents=4.0,
        containers=(
            ContainerRecord(name="init", init=True, requests={"cpu": 0.1}),
            ContainerRecord(name="proxy", init=True, sidecar=True, limits={"memory": 1e8}),
            ContainerRecord(
                name="main",
                requests={"cpu": 8, "memory": 6.4e10},
                limits={"nvidia.com/gpu": 4},
                started_at=T0 + timedelta(minutes=2),
                terminated=terminated,
                last_terminated=TerminatedState(exit_code=1, reason="Error"),
                restart_count=1,
            ),
        ),
        completion_index=3,
        resource_version="999",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def usage() -> Usage:
    return Usage(
        gpu_minutes=240.0,
        used_gpu_minutes=110.5,
        gpus_idle=2,
        idle_gpu_minutes=120.0,
        gpu_util_mean_percent=46.04,
        gpu_memory_peak_bytes=12884901888,
        memory_peak_bytes=32212254720,
        cpu_cores_mean=2.25,
        cpu_cores_p95=3.2,
        gpus=(
            GpuUsage(
                pod_uid="pod-1",
                pod_name="train-pod-1",
                gpu="0",
                uuid="GPU-abc",
                model="NVIDIA H100 80GB HBM3",
                mig_profile=None,
                held_minutes=60.0,
                util_mean_percent=92.5,
                util_max_percent=100.0,
                fb_used_peak_bytes=12884901888,
                fb_total_bytes=85899345920,
                shared=False,
                samples=240,
            ),
            GpuUsage(pod_uid="pod-1", pod_name="train-pod-1", gpu="1", mig_profile="1g.10gb", shared=True),
        ),
        pods=(PodUsage(pod_uid="pod-1", pod_name="train-pod-1", memory_peak_bytes=32212254720, samples=240),),
        missing=(
            MissingFigure(figure="cpu_throttled_seconds", reason=MissingReason.NO_SAMPLES, detail="none"),
        ),
        collected_at=T0 + timedelta(hours=1, minutes=2),
    )


def recommendations() -> tuple[Recommendation, ...]:
    return (
        Recommendation(
            kind=RecommendationKind.GPU_COUNT,
            severity=Severity.WARNING,
            current=4,
            suggested=2,
            unit=Unit.GPUS,
            message="2 of 4 GPUs stayed idle: request 2.",
            waste_gpu_minutes=120.0,
            field_path='resources.limits["nvidia.com/gpu"]',
            evidence={"samples": 240, "span": "1h", "util": 0.5},
        ),
        Recommendation(
            kind=RecommendationKind.GPU_MEMORY,
            severity=Severity.INFO,
            current=None,
            suggested="1g.10gb",
            unit=Unit.MIG_PROFILE,
            message="fits a MIG slice",
            waste_gib_hours=3.5,
            waste_core_hours=1.25,
        ),
    )


def notification(key: str = "n-1", due: datetime = T0, **changes: object) -> Notification:
    base = Notification(
        dedup_key=key,
        kind=NotificationKind.JOB_SUMMARY,
        channel=Channel.SLACK,
        recipient="alice@example.com",
        due_at=due,
        created_at=due - timedelta(seconds=30),
        cluster="default",
        job_uid="job-1",
        group_key="sweep-7",
        address=RecipientAddress(name="Alice", telegram_chat_id=-1001234567890, slack_user_id="U0123"),
        payload={"jobs": ["job-1"], "n": 1, "nested": {"x": 1.5, "ok": True, "none": None}},
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def user(email: str = "alice@example.com", **changes: object) -> DirectoryUser:
    base = DirectoryUser(
        email=email,
        name="Alice",
        slack_user_id="U0123",
        telegram_chat_id=-1001234567890,
        channels=("slack", "email"),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def team(name: str = "face", **changes: object) -> Team:
    base = Team(
        name=name,
        namespaces=("face-research", "face-infer"),
        leads=("lead@example.com",),
        digest_channels=("email", "slack"),
        slack_channel="#face-gpu",
        notify_unowned=True,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def workflow(uid: str = "wf-1", **changes: object) -> WorkflowRecord:
    retried = StepRecord(
        name="train",
        phase="Failed",
        template="train-tpl",
        attempts=(
            AttemptRecord(
                "wf-1-111", "Error", T0, T0 + timedelta(minutes=5), 1, "OOMKilled", "wf-1-train-111"
            ),
            AttemptRecord("wf-1-222", "Failed", T0 + timedelta(minutes=6), T0 + timedelta(minutes=9), 137),
        ),
        attempts_dropped=3,
    )
    base = WorkflowRecord(
        cluster="default",
        uid=uid,
        kind=WorkflowKind.ARGO,
        namespace="face-research",
        name=f"pipeline-{uid}",
        status=JobStatus.FAILED,
        run_id="run-7",
        reason="child failed",
        owner="alice@example.com",
        team="face",
        notify=NotifyMode.FAILURE,
        channels=("slack", "email"),
        created_at=T0,
        started_at=T0 + timedelta(minutes=1),
        finished_at=(T0 + timedelta(minutes=10)).astimezone(PLUS3),
        steps=(StepRecord("prepare", "Succeeded"), retried),
        steps_dropped=2,
        links=(Link("Logs", "https://logs.example.com/wf?a=1&b=2"),),
        resource_version="4711",
        creator=Creator("sub-1", "alice@example.com", "alice"),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def workflow_pod(uid: str = "wf-pod-1", **changes: object) -> WorkflowPod:
    base = WorkflowPod(
        cluster="default",
        uid=uid,
        namespace="face-research",
        name=f"pipeline-wf-1-train-{uid}",
        kind=WorkflowKind.AIRFLOW,
        workflow_uid="wf-1",
        workflow_name="pipeline-wf-1",
        step_key="train.3",
        step="train",
        attempt=2,
        run_id="run-7",
        phase="Failed",
        created_at=T0,
        started_at=T0 + timedelta(minutes=1),
        finished_at=T0 + timedelta(minutes=9),
        deleted_at=T0 + timedelta(minutes=11),
        exit_code=137,
        exit_reason="OOMKilled",
        gpus=2.5,
        owner="alice@example.com",
        team="face",
        notify=NotifyMode.NEVER,
        channels=("email",),
        links=(Link("Run", "https://wandb.example.com/r"),),
    )
    return replace(base, **changes)  # type: ignore[arg-type]
