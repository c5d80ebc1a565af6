"""Scenario on the simulated cluster: a Kueue ClusterQueue with a GPU nominal quota, a team whose
namespace's LocalQueue points at it, and two Kueue-managed GPU jobs a week apart, one of them
preempted once before it ran. The watch (Jobs, Pods, Workloads, ClusterQueues, LocalQueues, over
real HTTP with kubernetes-asyncio) feeds the ingestor and the queue tracker; the usage the collector
would measure from Prometheus is written as the collector writes it (store.save_usage). Then the
digest and the API show the team's share of its quota, the weekly trend, the preemption and the
queue wait up to Kueue's admission."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inno_notify.adapters.channels.views import SummaryView
from inno_notify.adapters.db import Store
from inno_notify.adapters.kube import ClusterWatcher, WatchOptions, load_api_client
from inno_notify.domain.model import JobStatus, Team, Usage
from inno_notify.domain.parsing import ParseConfig
from inno_notify.service.digest_pages import digest_provider
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.kueue_queues import QueueTracker
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import CLUSTER_QUEUES, JOBS, KUEUE_TYPES, LOCAL_QUEUES, PODS
from inno_notify.sim.objects import (
    JobSpec,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
    ts,
)
from tests import stored
from tests.api.conftest import serve_api
from tests.waiting import eventually

FIXTURES = Path(__file__).parents[1] / "fixtures" / "kueue"
NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Job "early" finishes in 2026-W47, job "late" in 2026-W48 (UTC weeks).
EARLY = datetime(2026, 11, 17, 8, tzinfo=UTC)
LATE = datetime(2026, 11, 24, 8, tzinfo=UTC)


def fixture(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation", "finalizers", "annotations"):
        obj.get("metadata", {}).pop(key, None)
    return obj


def workload(job: dict[str, Any], admitted_at: datetime, preempted: int = 0) -> dict[str, Any]:
    """The Workload Kueue keeps for `job`: admitted at `admitted_at` into cq-all-resources, after
    `preempted` preemptions (schedulingStats, as Kueue 0.13+ counts them)."""
    meta = job["metadata"]
    status: dict[str, Any] = {
        "admission": {"clusterQueue": "cq-all-resources", "podSetAssignments": []},
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "lastTransitionTime": ts(admitted_at),
            },
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "lastTransitionTime": ts(admitted_at),
            },
        ],
    }
    if preempted:
        status["schedulingStats"] = {
            "evictions": [{"reason": "Preempted", "underlyingCause": "InClusterQueue", "count": preempted}]
        }
    return {
        "metadata": {
            "name": f"job-{meta['name']}-1a2b3",
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"queueName": "lq-face", "podSets": []},
        "status": status,
    }


def run_job(server: SimKubeServer, name: str, created: datetime, hours: float, *, preempted: int = 0) -> str:
    """A 2-GPU job through Kueue: created, admitted 20 minutes later, its pod scheduled a minute
    after admission, running `hours`, succeeded."""
    spec = JobSpec(
        name=name,
        namespace="face-research",
        owner="alice@example.com",
        gpus=2,
        labels={QUEUE_LABEL: "lq-face"},
    )
    job = job_object(spec, created)
    admitted = created + timedelta(minutes=20)
    scheduled, end = admitted + timedelta(minutes=1), admitted + timedelta(minutes=1, hours=hours)
    server.create(KUEUE_TYPES["v1beta2"], workload(job, admitted, preempted))
    pod = pod_object(job, "x1", scheduled)
    server.create(JOBS, job_started(job, scheduled))
    server.create(PODS, pod_terminated(pod_running(pod, "gpu-node-1", scheduled, scheduled), end))
    server.update(JOBS, job_succeeded(job_started(job, scheduled), end))
    return spec.uid


@pytest.fixture
async def cluster(tmp_path: Path, store: Store) -> AsyncIterator[SimKubeServer]:
    server = SimKubeServer(kueue_versions=("v1beta2",), bookmark_interval=0.2)
    await server.start()
    api = await load_api_client(server.kubeconfig(tmp_path / "kubeconfig"))
    ingestor = Ingestor(
        store,
        ParseConfig(cluster="default", namespace_teams={"face-research": "face"}),
        IngestOptions(catch_up_seconds=0),
        lambda: NOW,
        NOW,
    )
    ingestor.taps.append(QueueTracker(store, "default", {"nvidia.com/gpu": 1.0}, lambda: NOW))
    options = WatchOptions(inactivity_timeout=2.0, backoff_base=0.01, backoff_cap=0.05)
    watcher = ClusterWatcher(api, ingestor.on_event, ingestor.on_relist, kueue=True, options=options)
    tasks = [asyncio.create_task(watcher.run()), asyncio.create_task(ingestor.run())]
    try:
        await asyncio.wait_for(watcher.wait_ready(), 10)
        yield server
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await api.close()
        await server.stop()


async def test_quota_share_trend_and_preemption_reach_the_digest_and_the_api(
    cluster: SimKubeServer, store: Store
) -> None:
    server = cluster
    await store.directory.replace_teams([Team("face", ("face-research",), ("lead@example.com",))])
    # The ClusterQueue of the real capture: nvidia.com/gpu 8 (gpu-a40) + 4 (gpu-a100) = 12 GPUs.
    server.create(CLUSTER_QUEUES["v1beta2"], fixture("clusterqueue-gpu-flavors-v0.5.2.json"))
    local = copy.deepcopy(fixture("localqueue-v0.5.2.json"))
    local["metadata"].update(namespace="face-research", name="lq-face")
    server.create(LOCAL_QUEUES["v1beta2"], local)
    early = run_job(server, "train-early", EARLY, 4.0)
    late = run_job(server, "train-late", LATE, 3.0, preempted=1)

    async def ready() -> bool:
        jobs = await stored.get_jobs(store, "default", [early, late])
        done = [
            j for j in jobs.values() if j.status is JobStatus.SUCCEEDED and j.kueue and j.kueue.admitted_at
        ]
        return len(done) == 2 and await store.queues.team_quota("face") == 12.0

    await eventually(ready, what="both jobs finished and admitted, and the team's quota known")
    # What the usage collector writes once Prometheus answered: 2 GPUs held over the run, half used.
    for uid, hours in ((early, 4.0), (late, 3.0)):
        held = 2 * hours * 60
        await stored.save_usage(
            store,
            "default",
            uid,
            Usage(gpu_minutes=held, used_gpu_minutes=held / 2, idle_gpu_minutes=held / 4),
        )

    job = (await stored.get_jobs(store, "default", [late]))[late]
    assert job.kueue is not None and (job.kueue.preemptions, job.kueue.cluster_queue) == (
        1,
        "cq-all-resources",
    )
    assert job.queue_seconds == 20 * 60  # created → admitted, not → the pod's scheduling
    assert SummaryView.from_records(job, None).evictions == "preempted 1× by Kueue (last: Preempted)"

    digest = await store.digest.team_digest("face", "2026-W48", "UTC")
    assert (digest.quota_gpus, digest.gpu_hours) == (12.0, 6.0)
    assert digest.quota_share == pytest.approx(6.0 / (12.0 * 168))
    assert [p.gpu_hours for p in digest.trend[-3:]] == [0.0, 8.0, 6.0]
    assert digest.queue_p50_seconds == 20 * 60

    async with serve_api(store, digest_provider(store, "UTC", lambda: NOW)) as api:
        status, body = await api.get("/api/v1/digests/face", params={"week": "2026-W48"})
        assert status == 200, body
        assert body["quota"]["gpus"] == 12.0 and body["quota"]["share"] == pytest.approx(6.0 / (12 * 168))
        assert [w["gpu_hours"] for w in body["trend"][-2:]] == [8.0, 6.0]
        status, text, _ = await api.call(
            "GET", "/api/v1/digests/face", params={"week": "2026-W48"}, headers={"Accept": "text/html"}
        )
        assert status == 200 and "of 12 GPUs" in text and "Trend (12 weeks)" in text

        status, body = await api.get("/api/v1/trends", params={"week": "2026-W48", "weeks": "2"})
        assert status == 200, body
        [face] = body["series"]
        assert face["quota_gpus"] == 12.0
        assert [(w["week"], w["gpu_hours"], w["efficiency"]) for w in face["weeks"]] == [
            ("2026-W47", 8.0, 0.5),
            ("2026-W48", 6.0, 0.5),
        ]

        status, body = await api.get("/api/v1/jobs/face-research/train-late")
        assert status == 200, body
        assert body["queue_seconds"] == 1200.0
        assert {
            k: body["kueue"][k] for k in ("cluster_queue", "local_queue", "preemptions", "evictions")
        } == {
            "cluster_queue": "cq-all-resources",
            "local_queue": "lq-face",
            "preemptions": 1,
            "evictions": 1,
        }
