"""GET /api/v1/trends: weekly series per team and per cluster, figures computed by hand, JSON and CSV."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.kueue_queues import ClusterQueueQuota, LocalQueueRef
from inno_notify.domain.model import Requested, Team, Usage
from tests import stored
from tests.adapters.db.records import job

from .support import Api

# Weeks 2026-W46..W48 (UTC): W47 starts Mon 16 Nov, W48 Mon 23 Nov.
W47 = datetime(2026, 11, 18, 12, tzinfo=UTC)
W48 = datetime(2026, 11, 25, 12, tzinfo=UTC)


async def populate(store: Store) -> None:
    await store.directory.replace_teams(
        [Team(name="face", namespaces=("face-research",), leads=("lead@example.com",))]
    )
    rows = [
        # uid, team, finished, gpus, usage (held, used, idle) or None
        ("f47", "face", W47, 2.0, (240.0, 240.0, 0.0)),
        ("f48", "face", W48, 1.0, (120.0, 60.0, 30.0)),
        ("f48-unmeasured", "face", W48 + timedelta(hours=1), 1.0, None),
        ("s48", "speech", W48, 1.0, (60.0, 30.0, 0.0)),
        ("cpu48", "face", W48, 0.0, (0.0, 0.0, 0.0)),  # no GPU: not counted
    ]
    await stored.upsert_jobs(
        store,
        [
            job(uid, team=team, namespace=f"{team}-research", finished_at=at, requested=Requested(gpus=gpus))
            for uid, team, at, gpus, _ in rows
        ],
    )
    for uid, _, _, _, figures in rows:
        if figures is not None:
            held, used, idle = figures
            await stored.save_usage(
                store, "default", uid, Usage(gpu_minutes=held, used_gpu_minutes=used, idle_gpu_minutes=idle)
            )
    now = W48
    await store.queues.replace_cluster_queues("default", [ClusterQueueQuota("cq-face", 2.0)], now)
    await store.queues.replace_local_queues("default", [LocalQueueRef("face-research", "lq", "cq-face")], now)


def week(
    name: str, jobs: int, held: float | None, used: float | None, idle: float | None, **rest: object
) -> dict[str, object]:
    return {
        "week": name,
        "jobs": jobs,
        "gpu_hours": held,
        "used_gpu_hours": used,
        "idle_gpu_hours": idle,
        **rest,
    }


def picked(points: list[dict[str, object]]) -> list[dict[str, object]]:
    keys = (
        "week",
        "jobs",
        "gpu_hours",
        "used_gpu_hours",
        "idle_gpu_hours",
        "efficiency",
        "jobs_unmeasured",
        "quota_share",
    )
    return [{k: round(v, 9) if isinstance(v := p[k], float) else v for k in keys} for p in points]


FACE = [
    week("2026-W46", 0, 0.0, 0.0, 0.0, efficiency=None, jobs_unmeasured=0, quota_share=0.0),
    week("2026-W47", 1, 4.0, 4.0, 0.0, efficiency=1.0, jobs_unmeasured=0, quota_share=4.0 / (2 * 168)),
    week("2026-W48", 2, 2.0, 1.0, 0.5, efficiency=0.5, jobs_unmeasured=1, quota_share=2.0 / (2 * 168)),
]
SPEECH = [
    week("2026-W46", 0, 0.0, 0.0, 0.0, efficiency=None, jobs_unmeasured=0, quota_share=None),
    week("2026-W47", 0, 0.0, 0.0, 0.0, efficiency=None, jobs_unmeasured=0, quota_share=None),
    week("2026-W48", 1, 1.0, 0.5, 0.0, efficiency=0.5, jobs_unmeasured=0, quota_share=None),
]
CLUSTER = [
    week("2026-W46", 0, 0.0, 0.0, 0.0, efficiency=None, jobs_unmeasured=0, quota_share=0.0),
    week("2026-W47", 1, 4.0, 4.0, 0.0, efficiency=1.0, jobs_unmeasured=0, quota_share=4.0 / (2 * 168)),
    week("2026-W48", 3, 3.0, 1.5, 0.5, efficiency=0.5, jobs_unmeasured=1, quota_share=3.0 / (2 * 168)),
]


async def test_per_team(api: Api, store: Store) -> None:
    await populate(store)
    status, body = await api.get("/api/v1/trends", "viewer", params={"week": "2026-W48", "weeks": "3"})
    assert status == 200, body
    assert (body["group_by"], body["timezone"], body["weeks"]) == (
        "team",
        "UTC",
        ["2026-W46", "2026-W47", "2026-W48"],
    )
    assert [(s["group"], s["quota_gpus"]) for s in body["series"]] == [("face", 2.0), ("speech", None)]
    assert picked(body["series"][0]["weeks"]) == picked(FACE)
    assert picked(body["series"][1]["weeks"]) == picked(SPEECH)
    assert body["series"][0]["weeks"][2]["start"].startswith("2026-11-23T00:00:00")


async def test_one_team_and_per_cluster(api: Api, store: Store) -> None:
    await populate(store)
    status, body = await api.get(
        "/api/v1/trends", params={"week": "2026-W48", "weeks": "3", "team": "speech"}
    )
    assert status == 200, body
    assert [s["group"] for s in body["series"]] == ["speech"]
    status, body = await api.get(
        "/api/v1/trends", params={"group_by": "cluster", "week": "2026-W48", "weeks": "3"}
    )
    assert status == 200, body
    assert [(s["group"], s["quota_gpus"]) for s in body["series"]] == [("default", 2.0)]
    assert picked(body["series"][0]["weeks"]) == picked(CLUSTER)


async def test_a_team_without_jobs_has_an_empty_series(api: Api, store: Store) -> None:
    await populate(store)
    status, body = await api.get(
        "/api/v1/trends", params={"week": "2026-W48", "weeks": "2", "team": "nobody"}
    )
    assert status == 200, body
    assert [(s["group"], [w["jobs"] for w in s["weeks"]]) for s in body["series"]] == [("nobody", [0, 0])]


async def test_the_default_is_twelve_weeks_up_to_the_last_complete_one(api: Api, store: Store) -> None:
    status, body = await api.get("/api/v1/trends")
    assert status == 200, body
    assert len(body["weeks"]) == 12 and body["series"] == []


async def test_csv(api: Api, store: Store) -> None:
    await populate(store)
    status, (header, *table), headers = await api.csv(
        "/api/v1/trends", params={"week": "2026-W48", "weeks": "3"}
    )
    assert status == 200
    assert headers["Content-Type"].startswith("text/csv")
    rows = [dict(zip(header, row, strict=True)) for row in table]
    assert [(r["team"], r["week"], r["jobs"], r["gpu_hours"], r["efficiency"]) for r in rows] == [
        ("face", "2026-W46", "0", "0.0", ""),
        ("face", "2026-W47", "1", "4.0", "1.0"),
        ("face", "2026-W48", "2", "2.0", "0.5"),
        ("speech", "2026-W46", "0", "0.0", ""),
        ("speech", "2026-W47", "0", "0.0", ""),
        ("speech", "2026-W48", "1", "1.0", "0.5"),
    ]
    assert rows[0]["quota_gpus"] == "2.0" and rows[3]["quota_gpus"] == ""


@pytest.mark.parametrize(
    "query",
    [
        {"weeks": "0"},
        {"weeks": "105"},
        {"weeks": "x"},
        {"week": "2026-W54"},
        {"week": "0001-W01", "weeks": "2"},
        {"group_by": "owner"},
        {"group_by": "cluster", "team": "face"},
        {"team": "a\x00b"},
    ],
)
async def test_bad_parameters_are_400(api: Api, query: dict[str, str]) -> None:
    status, body = await api.get("/api/v1/trends", params=query)
    assert (status, body["error"]["code"]) == (400, "invalid_parameter"), body


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"group_by": "team"},
        {"group_by": "team", "team": "face"},
        {"group_by": "team", "cluster": "default"},
        {"group_by": "cluster"},
        {"group_by": "cluster", "cluster": "default"},
        {"weeks": "1"},
        {"weeks": "1", "team": "face"},
        {"weeks": "1", "group_by": "cluster", "cluster": "default"},
        {"weeks": "104"},
    ],
)
@pytest.mark.parametrize("full", [False, True], ids=["empty-directory", "full"])
async def test_every_query_answers_with_an_empty_or_a_full_directory(
    api: Api, store: Store, query: dict[str, str], full: bool
) -> None:
    """A quick start has no teams and no users: each grouping answers, in both formats, and so does
    a one-week trend (it was a 500 on both databases: a CASE over the weeks with no WHEN)."""
    if full:
        await populate(store)
    for accept in ("application/json", "text/csv"):
        status, _, _ = await api.call(
            "GET", "/api/v1/trends", "viewer", params=query, headers={"Accept": accept}
        )
        assert status == 200, (query, accept)
