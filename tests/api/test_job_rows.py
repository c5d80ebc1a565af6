"""The job resource built straight from the store's rows agrees with the domain records it stands for.

The list and single-job endpoints no longer build JobRecord/Usage/Recommendation objects (issue 8:
that cost most of a page's CPU); these tests hold the row path to the records' own definitions:
every job of the population, through both endpoints, on both databases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from inno_notify.adapters.db import Store, create_engine
from inno_notify.api.app import create_api_store, create_app
from inno_notify.domain.model import JobRecord
from tests import stored

from .data import RECOMMENDATIONS, USAGE, populate
from .support import NOW, SETTINGS, TOKENS, Api


def expected_usage(uid: str) -> dict[str, Any] | None:
    figures = USAGE.get(uid)
    if figures is None:
        return None
    return {
        "gpu_minutes": figures.gpu_minutes,
        "used_gpu_minutes": figures.used_gpu_minutes,
        "gpus_idle": figures.gpus_idle,
        "gpu_util_mean_percent": figures.gpu_util_mean_percent,
        "gpu_memory_peak_bytes": figures.gpu_memory_peak_bytes,
        "memory_peak_bytes": figures.memory_peak_bytes,
        "cpu_cores_p95": figures.cpu_cores_p95,
        "missing": [{"figure": m.figure, "reason": m.reason.value} for m in figures.missing],
    }


def check_job(resource: dict[str, Any], record: JobRecord) -> None:
    assert (resource["uid"], resource["cluster"], resource["namespace"], resource["name"]) == (
        record.uid,
        record.cluster,
        record.namespace,
        record.name,
    )
    assert (resource["owner"], resource["team"], resource["status"], resource["reason"]) == (
        record.owner,
        record.team,
        record.status.value,
        record.reason,
    )
    assert (resource["exit_code"], resource["exit_reason"]) == (record.exit_code, record.exit_reason)
    for name in ("created_at", "started_at", "finished_at"):
        value = getattr(record, name)
        assert resource[name] == (None if value is None else value.isoformat().replace("+00:00", "Z"))
    assert resource["queue_seconds"] == record.queue_seconds
    assert resource["runtime_seconds"] == record.runtime_seconds
    assert resource["requested"] == {
        "gpus": record.requested.gpus,
        "cpu_cores": record.requested.cpu_cores,
        "memory_bytes": record.requested.memory_bytes,
    }
    assert resource["usage"] == expected_usage(record.uid)
    assert (resource["kind"], resource["parent"], resource["attempts"]) == (
        record.kind.api_name,
        record.parent_uid,
        record.attempts,
    )
    measured = {r.role: r for r in USAGE[record.uid].replicas} if record.uid in USAGE else {}
    assert resource["replicas"] == [
        {
            "role": spec.role,
            "pods": measured[spec.role].pods if spec.role in measured else spec.replicas,
            "gpus_requested": spec.requested.gpus,
            "usage": None
            if spec.role not in measured
            else {
                "gpu_minutes": measured[spec.role].gpu_minutes,
                "used_gpu_minutes": measured[spec.role].used_gpu_minutes,
                "gpus_idle": measured[spec.role].gpus_idle,
                "idle_gpu_minutes": measured[spec.role].idle_gpu_minutes,
                "memory_peak_bytes": measured[spec.role].memory_peak_bytes,
            },
        }
        for spec in record.replicas
    ]
    recs = RECOMMENDATIONS.get(record.uid, [])
    assert [
        (
            r["kind"],
            r["severity"],
            r["current"],
            r["suggested"],
            r["unit"],
            r["waste_gpu_minutes"],
            r["message"],
        )
        for r in resource["recommendations"]
    ] == [
        (r.kind.value, r.severity.value, r.current, r.suggested, r.unit.value, r.waste_gpu_minutes, r.message)
        for r in recs
    ]


async def test_list_items_agree_with_the_records(api: Api, store: Store) -> None:
    records = {r.uid: r for r in await populate(store)}
    status, body = await api.get("/api/v1/jobs", params={"limit": "500"})
    assert status == 200 and len(body["items"]) == len(records)
    for item in body["items"]:
        check_job(item, records[item["uid"]])


@pytest.mark.parametrize("uid", ["a", "b", "c", "d", "e", "r"])
async def test_single_job_agrees_with_its_record(api: Api, store: Store, uid: str) -> None:
    record = next(r for r in await populate(store) if r.uid == uid)
    status, body = await api.get(f"/api/v1/jobs/{record.namespace}/{record.name}", params={"uid": uid})
    assert status == 200
    check_job(body, record)


async def test_full_pages_match_recommendations_to_their_own_jobs(api: Api, store: Store) -> None:
    """Cursor pages of the largest size over 1,200 jobs, one in seven with advice."""
    records = await populate(store)
    template = records[0]
    many = [
        JobRecord(
            cluster="default",
            uid=f"bulk-{i:04d}",
            namespace="bulk",
            name=f"bulk-{i:04d}",
            created_at=template.created_at,
            finished_at=template.finished_at,
            team="bulk",
        )
        for i in range(1200)
    ]
    await stored.upsert_jobs(store, many)
    for i in range(0, 1200, 7):
        await stored.save_recommendations(store, "default", f"bulk-{i:04d}", RECOMMENDATIONS["b"])
    seen: list[str] = []
    cursor: str | None = None
    while True:
        query = {"team": "bulk", "limit": "500"} | ({} if cursor is None else {"cursor": cursor})
        status, body = await api.get("/api/v1/jobs", params=query)
        assert status == 200
        for item in body["items"]:
            has_advice = int(item["uid"].removeprefix("bulk-")) % 7 == 0
            assert [r["message"] for r in item["recommendations"]] == (["b: idle"] if has_advice else [])
        seen += [item["uid"] for item in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted((j.uid for j in many), reverse=True)


async def test_the_api_store_works_on_both_databases(database_url: str) -> None:
    store = create_api_store(database_url)
    try:
        await store.ping()
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("make_store", "expected"),
    [(create_api_store, [200, 500, 200]), (lambda url: Store(create_engine(url)), [200, 200, 200])],
    ids=["api store: no ping", "service store: pinged"],
)
async def test_a_connection_killed_under_the_api_fails_one_request(
    database_url: str, db_dialect: str, store: Store, make_store: Callable[[str], Store], expected: list[int]
) -> None:
    """The API's store does not ping its pool: a dead pooled connection is found by the request
    that draws it; that one fails and the connection leaves the pool, so the next request gets a
    fresh one. The service's store (pinged on checkout) hides the same kill from every request."""
    if db_dialect != "postgres":
        pytest.skip("SQLite has no server to restart")
    await populate(store)
    app = create_app(make_store(database_url), SETTINGS, clock=lambda: NOW, close_store=True)
    client = TestClient(TestServer(app))
    await client.start_server()
    headers = {"Authorization": f"Bearer {TOKENS['viewer']}"}
    try:
        statuses = []

        async def get() -> None:
            async with client.get("/api/v1/jobs", headers=headers) as response:
                statuses.append(response.status)

        await get()
        async with store.engine.connect() as conn:  # the test's own pool, not the API's
            await conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        await get()
        await get()
        assert statuses == expected
    finally:
        await client.close()
