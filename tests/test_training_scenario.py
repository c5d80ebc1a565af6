"""Distributed training runs of every kind played on the simulated cluster through the whole service
(watch → ingest → usage from simulated DCGM/cAdvisor traces → advice → summary), on SQLite and
Postgres: one record and one summary per run, every pod the run's and its owner's, the figures the
sum over its pods, restarts as attempts, GPUs kept after the end said."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inno_notify.adapters.db.repository import Store
from inno_notify.domain.model import NotificationKind, WorkloadKind
from inno_notify.sim.training import (
    SimTrainingRun,
    jobset_run,
    mpijob_run,
    plan_training,
    pytorchjob_run,
    rayjob_run,
)
from inno_notify.sim.workload import PEOPLE, Workload
from tests import stored
from tests.api.conftest import serve_api
from tests.scenario import play

pytestmark = pytest.mark.slow

START = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
ALICE = PEOPLE[0]
NS = "face-research"
SCHEDULE_SECONDS = 2.0  # the sim schedules a pod this long after creating it


def runs() -> tuple[SimTrainingRun, ...]:
    at = START + timedelta(minutes=5)
    return (
        # 1 Master + 3 Workers on 4 GPUs each, two Workers idle, one restart of a Worker.
        pytorchjob_run(
            "ddp-resnet", NS, start=at, workers=3, gpus=4, idle_workers=2, restarts=1, owner=ALICE.email
        ),
        # cleanPodPolicy None: the MPI workers (sshd) keep their GPUs until the run is deleted an
        # hour after it ended.
        mpijob_run(
            "mpi-linger", NS, start=at, workers=2, gpus=2, clean_pod_policy="None", linger_seconds=3600,
            owner=ALICE.email,
        ),
        # A failing launcher retried once; workers deleted at the end (cleanPodPolicy Running).
        mpijob_run(
            "mpi-bench", NS, start=at, workers=2, gpus=2, outcome="failed", restarts=1,
            clean_pod_policy="Running", owner=ALICE.email,
        ),
        # A JobSet restarted once by its failurePolicy: every child Job and pod again.
        jobset_run(
            "jobset-train", NS, start=at, jobs=2, pods_per_job=2, gpus=1, restarts=1, owner=ALICE.email
        ),
        # A RayJob whose cluster goes when the job ends; one worker pod kept past the end is not
        # modelled here (Ray deletes the cluster at once).
        rayjob_run("ray-tune", NS, start=at, workers=2, gpus=2, owner=ALICE.email),
    )  # fmt: skip


KINDS = {
    "ddp-resnet": WorkloadKind.PYTORCH_JOB,
    "mpi-linger": WorkloadKind.MPI_JOB,
    "mpi-bench": WorkloadKind.MPI_JOB,
    "jobset-train": WorkloadKind.JOB_SET,
    "ray-tune": WorkloadKind.RAY_JOB,
}


def expected_gpu_minutes(run: SimTrainingRun, measured_at: datetime) -> float:
    """CONTRACT §4 over the pods the controllers made: GPUs × scheduling to end (or deletion), a
    pod still holding its GPUs when the run was measured counted until then."""
    total = 0.0
    for pod in plan_training(run).pods:
        scheduled = pod.created + timedelta(seconds=SCHEDULE_SECONDS)
        until = min(pod.held_until or measured_at, measured_at)
        total += pod.gpus * max(0.0, (until - scheduled).total_seconds()) / 60
    return total


async def test_every_training_kind_is_one_run_with_one_summary(
    tmp_path: Path, empty_database_url: str
) -> None:
    workload = Workload(start=START, jobs=(), training=runs())
    result = await play(workload, tmp_path, database_url=empty_database_url)
    store = Store.from_url(result.database_url)
    try:
        records = await stored.all_jobs(store)
        by_name = {r.name: r for r in records}
        # One record per run, of its kind, owned; no pod of a run is a workload of its own.
        assert {name: r.kind for name, r in by_name.items()} == KINDS
        assert all(r.owner == ALICE.email and r.team == "face" for r in records)
        sent, _ = await store.outbox.list_notifications(limit=500)
        summaries = [n for n in sent if n.kind is NotificationKind.JOB_SUMMARY]
        assert sorted(n.job_uid or "" for n in summaries) == sorted(r.uid for r in records)

        for run in workload.training:
            record = by_name[run.name]
            pods = await stored.pods_of(store, "demo", record.uid)
            planned = plan_training(run).pods
            # Every pod the controllers made is the run's, restarts' pods included.
            missing = [(p.name, p.attempt) for p in planned if p.uid not in {s.uid for s in pods}]
            assert {p.uid for p in pods} == {p.uid for p in planned}, (run.name, missing)
            usage = await stored.get_usage(store, "demo", record.uid)
            assert usage is not None and usage.gpu_minutes is not None
            assert usage.collected_at is not None
            expected = expected_gpu_minutes(run, usage.collected_at)
            assert usage.gpu_minutes == pytest.approx(expected, rel=0.01), run.name
            assert sum(r.gpu_minutes or 0 for r in usage.replicas) == pytest.approx(usage.gpu_minutes)
        assert by_name["ddp-resnet"].attempts == 2
        assert by_name["jobset-train"].attempts == 2
        assert by_name["mpi-bench"].attempts == 2
        # The lingering pods' GPU time after the end is counted and said.
        linger = await stored.get_usage(store, "demo", by_name["mpi-linger"].uid)
        assert linger is not None and linger.held_after_end is not None
        assert (linger.held_after_end.pods, linger.held_after_end.gpus) == (2, 4.0)
        assert await stored.get_usage(store, "demo", by_name["ddp-resnet"].uid) is not None
        # The idle Workers are named in the advice, role by role.
        advice = await stored.recommendations_of(store, "demo", by_name["ddp-resnet"].uid)
        assert any(r.message.startswith("Worker × ") for r in advice), [r.message for r in advice]

        async with serve_api(store) as api:
            status, body = await api.get("/api/v1/usage", "viewer", params={"group_by": "owner"})
        assert status == 200
        assert [g["group"] for g in body["groups"]] == [ALICE.email]
    finally:
        await store.close()
