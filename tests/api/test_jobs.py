"""GET /api/v1/jobs and /api/v1/jobs/{namespace}/{name} through the real app, on both databases."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.accounting import compute_usage
from inno_notify.domain.costs import Rates
from inno_notify.domain.model import ContainerRecord, GpuUsage, JobRecord, PodRecord, TerminatedState
from inno_notify.domain.parsing.storable import NAME_MAX_BYTES, TRUNCATION_MARK, label_name
from tests import stored
from tests.adapters.db.records import T0

from .conftest import serve_api
from .data import EVIDENCE, GIB, GPU_MODEL, populate
from .support import Api

JOB_FIELDS = {
    "cost",
    "uid",
    "cluster",
    "namespace",
    "name",
    "owner",
    "team",
    "status",
    "reason",
    "exit_code",
    "exit_reason",
    "created_at",
    "started_at",
    "finished_at",
    "queue_seconds",
    "runtime_seconds",
    "requested",
    "usage",
    "recommendations",
    # Beyond CONTRACT.md §5's minimum (issue 17): what Kueue said about the job, or null.
    "kueue",
    # Every workload kind (issue 28): what it is, its parent run, its attempts and replica roles.
    "kind",
    "parent",
    "attempts",
    "replicas",
    # The model of the GPUs it ran on (issue 34), null with its reason in usage.missing.
    "gpu_model",
}
USAGE_FIELDS = {
    "gpu_minutes",
    "used_gpu_minutes",
    "gpus_idle",
    "gpu_util_mean_percent",
    "gpu_memory_peak_bytes",
    "memory_peak_bytes",
    "cpu_cores_p95",
    "missing",
}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, ["r", "e", "d", "c", "b", "a"]),
        ({"team": "face"}, ["c", "b", "a"]),
        ({"owner": "alice@example.com"}, ["c", "a"]),
        ({"namespace": "speech"}, ["r", "e", "d"]),
        ({"status": "failed"}, ["b"]),
        ({"status": "running"}, ["r"]),
        ({"kind": "PyTorchJob"}, ["d"]),
        ({"kind": "Job"}, ["r", "e", "c", "b", "a"]),
        ({"kind": "RayJob"}, []),
        ({"kind": "PyTorchJob", "team": "speech"}, ["d"]),
        ({"since": "2026-11-30T13:00:00.123456Z"}, ["r", "e", "d", "c"]),
        ({"until": "2026-11-30T13:00:00.123456Z"}, ["b", "a"]),
        # An offset other than Z names the same instant.
        (
            {"since": "2026-11-30T15:00:00.123456+03:00", "until": "2026-11-30T15:00:00.123456+01:00"},
            ["c", "b"],
        ),
        ({"team": "face", "owner": "alice@example.com", "namespace": "face-infer"}, ["c"]),
        ({"team": "nobody"}, []),
    ],
)
async def test_filters(api: Api, store: Store, query: dict[str, str], expected: list[str]) -> None:
    await populate(store)
    status, body = await api.get("/api/v1/jobs", "viewer", params=query)
    assert status == 200
    assert [j["uid"] for j in body["items"]] == expected
    assert body["next_cursor"] is None


async def test_pages_walk_every_job_once_in_order(api: Api, store: Store) -> None:
    await populate(store)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = {"limit": "4"} if cursor is None else {"limit": "4", "cursor": cursor}
        status, body = await api.get("/api/v1/jobs", params=query)
        assert status == 200
        seen += [j["uid"] for j in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert (seen, pages) == (["r", "e", "d", "c", "b", "a"], 2)


async def test_job_resource_has_the_contract_fields(api: Api, store: Store) -> None:
    await populate(store)
    status, body = await api.get("/api/v1/jobs", params={"team": "face", "owner": "alice@example.com"})
    assert status == 200
    c, a = body["items"]
    assert set(a) == JOB_FIELDS and set(a["usage"]) == USAGE_FIELDS
    assert a["created_at"] == "2026-11-30T09:00:00.123456Z"
    assert a["finished_at"] == "2026-11-30T11:00:00.123456Z"
    assert (a["queue_seconds"], a["runtime_seconds"]) == (3480.0, 3600.0)
    assert a["requested"] == {"gpus": 2.0, "cpu_cores": 8.0, "memory_bytes": 16 * GIB}
    assert (a["usage"]["gpu_minutes"], a["usage"]["used_gpu_minutes"]) == (120.0, 60.0)
    assert a["usage"]["missing"] == []
    assert [r["message"] for r in a["recommendations"]] == ["a: gpus", "advice"]
    assert a["recommendations"][0] == {
        "kind": "gpu_count",
        "severity": "warning",
        "current": 4,
        "suggested": 2,
        "unit": "gpus",
        "waste_gpu_minutes": 30.0,
        "message": "a: gpus",
        # The figures and the window the advice was computed from (issue 16).
        "evidence": EVIDENCE,
    }
    # Unmeasured figures are null with their reason, never 0.
    assert c["usage"]["gpu_minutes"] is None
    assert c["usage"]["missing"] == [
        {"figure": "gpu_minutes", "reason": "prometheus_unavailable"},
        {"figure": "gpu_model", "reason": "prometheus_unavailable"},
    ]
    assert (a["gpu_model"], c["gpu_model"]) == (GPU_MODEL, None)
    # No accounting.rates: no cost (null, not 0).
    assert a["cost"] is None and c["cost"] is None
    assert c["recommendations"] == []


async def test_running_job_has_no_usage_yet(api: Api, store: Store) -> None:
    await populate(store)
    status, body = await api.get("/api/v1/jobs/speech/train-r")
    assert status == 200
    assert (body["status"], body["usage"], body["finished_at"], body["runtime_seconds"]) == (
        "running",
        None,
        None,
        None,
    )


async def test_get_by_name_is_the_newest_and_uid_picks_an_older_one(api: Api, store: Store) -> None:
    records = await populate(store)
    older = replace(
        records[0], uid="a-old", created_at=T0 - timedelta(days=3), finished_at=T0 - timedelta(days=2)
    )
    await stored.upsert_jobs(store, [older])
    status, body = await api.get("/api/v1/jobs/face-research/train-a")
    assert (status, body["uid"]) == (200, "a")
    status, body = await api.get("/api/v1/jobs/face-research/train-a", params={"uid": "a-old"})
    assert (status, body["uid"], body["usage"]) == (200, "a-old", None)


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/api/v1/jobs/face-research/no-such-job", {}),
        ("/api/v1/jobs/elsewhere/train-a", {}),
        ("/api/v1/jobs/face-research/train-a", {"uid": "b"}),
    ],
)
async def test_unknown_job_is_404(api: Api, store: Store, path: str, query: dict[str, str]) -> None:
    await populate(store)
    status, body = await api.get(path, "viewer", params=query)
    assert (status, body["error"]["code"]) == (404, "job_not_found")


@pytest.mark.parametrize(
    ("query", "code", "mentions"),
    [
        ({"limit": "0"}, "invalid_parameter", "limit"),
        ({"limit": "501"}, "invalid_parameter", "limit"),
        ({"limit": "ten"}, "invalid_parameter", "limit"),
        ({"limit": "-1"}, "invalid_parameter", "limit"),
        ({"status": "done"}, "invalid_parameter", "status"),
        ({"since": "2026-11-30"}, "invalid_parameter", "RFC 3339"),
        ({"since": "2026-11-30T10:00:00"}, "invalid_parameter", "offset"),
        ({"until": "yesterday"}, "invalid_parameter", "until"),
        ({"since": "2026-13-30T10:00:00Z"}, "invalid_parameter", "since"),
        ({"since": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:00:00Z"}, "invalid_parameter", "earlier"),
        ({"team": ""}, "invalid_parameter", "empty"),
        ({"owner": "a" * 254}, "invalid_parameter", "longer"),
        ({"namespace": "a\x00b"}, "invalid_parameter", "NUL"),
        ({"teem": "face"}, "invalid_parameter", "unknown query parameter 'teem'"),
        ({"cursor": "not a cursor"}, "invalid_cursor", "cursor"),
        ({"cursor": "bm90LWpzb24"}, "invalid_cursor", "cursor"),
        ({"cursor": "WzEsMiwzXQ"}, "invalid_cursor", "cursor"),  # [1,2,3]: wrong types
    ],
)
async def test_bad_filters_are_400_with_a_clear_message(
    api: Api, query: dict[str, str], code: str, mentions: str
) -> None:
    status, body = await api.get("/api/v1/jobs", params=query)
    assert (status, body["error"]["code"]) == (400, code)
    assert mentions in body["error"]["message"]


async def test_repeated_parameter_is_400(api: Api) -> None:
    status, body = await api.get("/api/v1/jobs?team=a&team=b")
    assert status == 400 and "more than once" in body["error"]["message"]


def _gpu_pod(uid: str, job: JobRecord, gpus: int) -> PodRecord:
    assert job.started_at is not None and job.finished_at is not None
    ended = TerminatedState(exit_code=0, finished_at=job.finished_at)
    return PodRecord(
        cluster=job.cluster,
        uid=uid,
        namespace=job.namespace,
        name=f"{job.name}-{uid}",
        job_uid=job.uid,
        phase="Succeeded",
        created_at=job.started_at,
        scheduled_at=job.started_at,
        gpu_equivalents=float(gpus),
        containers=(ContainerRecord(name="main", terminated=ended),),
    )


# NUL, control characters and 10 KB where dcgm-exporter's modelName should be, as the adapter
# reads it (tests/adapters/prometheus/test_hostile_values.py): one capped line.
HOSTILE_MODEL = label_name("NVIDIA\x00 A100\x01\x1b[31m\n" + "X" * 10_000)


async def test_gpu_model_on_mixed_and_hostile_gpus(api: Api, store: Store) -> None:
    """The model of most GPU-minutes is the job's, a capped line stored on both dialects, in both
    endpoints."""
    records = await populate(store)
    job = next(r for r in records if r.uid == "b")
    pods = [_gpu_pod("p3", job, 3), _gpu_pod("p1", job, 1)]
    rows = [
        *(
            GpuUsage("p3", "p3", f"n/{i}", f"GPU-{i}", HOSTILE_MODEL, util_mean_percent=50.0)
            for i in range(3)
        ),
        GpuUsage("p1", "p1", "n/3", "GPU-3", "NVIDIA H100 80GB HBM3", util_mean_percent=50.0),
    ]
    assert job.finished_at is not None
    usage = compute_usage(job, pods, rows, [], idle_util_percent=5.0, now=job.finished_at)
    await stored.save_usage(store, "default", "b", usage)
    status, one = await api.get("/api/v1/jobs/face-research/train-b")
    assert status == 200
    model = one["gpu_model"]
    assert model.startswith("NVIDIA A100 [31m XXX") and model.endswith(TRUNCATION_MARK)
    assert len(model.encode()) == NAME_MAX_BYTES and "gpu_model" not in {
        m["figure"] for m in one["usage"]["missing"]
    }
    status, page = await api.get("/api/v1/jobs", params={"team": "face", "owner": "bob@example.com"})
    assert status == 200 and [j["gpu_model"] for j in page["items"]] == [model]


async def test_a_job_costs_its_gpu_hours_at_its_models_price_plus_its_requests_over_its_runtime(
    store: Store,
) -> None:
    await populate(store)
    rates = Rates(currency="EUR", gpu_hour={"*A100*": 1.6}, cpu_core_hour=0.02, memory_gib_hour=0.005)
    async with serve_api(store, rates=rates) as api:
        status, body = await api.get("/api/v1/jobs", params={"team": "face", "owner": "alice@example.com"})
        assert status == 200
        c, a = body["items"]
        # a: 120 GPU-minutes of an A100 at 1.6/h = 3.2; 2 pods × 8 cores × 1 h × 0.02 = 0.32;
        # 2 pods × 16 GiB × 1 h × 0.005 = 0.16. Its 30 idle GPU-minutes: 0.8.
        assert a["cost"]["amount"] == pytest.approx(3.68)
        assert a["cost"]["idle"] == pytest.approx(0.8)
        assert a["cost"]["currency"] == "EUR"
        # c: GPU-minutes not measured, so its cost is unknown, not the CPU part alone.
        assert c["cost"] == {"amount": None, "idle": None, "currency": "EUR"}
        status, one = await api.get(f"/api/v1/jobs/{a['namespace']}/{a['name']}")
        assert status == 200 and one["cost"] == a["cost"]
