"""GET /api/v1/recommendations: open advice only, largest waste first, filtered and paginated."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from inno_notify.adapters.db import Store
from tests import stored

from .data import populate
from .support import Api


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # (job, message): b's 45 wasted GPU-minutes, a's 30, then a's 5 GiB-hours, then d's nothing.
        ({}, [("b", "b: idle"), ("a", "a: gpus"), ("a", "advice"), ("d", "d: cpu")]),
        ({"team": "face"}, [("b", "b: idle"), ("a", "a: gpus"), ("a", "advice")]),
        ({"owner": "carol@example.com"}, [("d", "d: cpu")]),
        ({"since": "2026-11-30T12:00:00.123456Z"}, [("b", "b: idle"), ("d", "d: cpu")]),
        ({"team": "face", "owner": "bob@example.com"}, [("b", "b: idle")]),
        ({"team": "nobody"}, []),
    ],
)
async def test_filters_and_order(
    api: Api, store: Store, query: dict[str, str], expected: list[tuple[str, str]]
) -> None:
    await populate(store)
    status, body = await api.get("/api/v1/recommendations", "viewer", params=query)
    assert status == 200
    assert [(r["job"]["uid"], r["message"]) for r in body["items"]] == expected


async def test_a_newer_run_of_the_family_closes_the_advice(api: Api, store: Store) -> None:
    records = await populate(store)
    a = records[0]
    assert a.finished_at is not None
    rerun = replace(a, uid="a2", finished_at=a.finished_at + timedelta(days=1))
    other_namespace = replace(
        a, uid="a3", namespace="elsewhere", finished_at=a.finished_at + timedelta(days=2)
    )
    await stored.upsert_jobs(store, [rerun, other_namespace])
    status, body = await api.get("/api/v1/recommendations")
    assert status == 200
    assert [r["job"]["uid"] for r in body["items"]] == ["b", "d"]


async def test_item_shape(api: Api, store: Store) -> None:
    await populate(store)
    _, body = await api.get("/api/v1/recommendations", params={"owner": "bob@example.com"})
    (item,) = body["items"]
    assert item["job"] == {
        "cluster": "default",
        "uid": "b",
        "namespace": "face-research",
        "name": "train-b",
        "owner": "bob@example.com",
        "team": "face",
        "finished_at": "2026-11-30T12:00:00.123456Z",
    }
    assert (item["kind"], item["waste_gpu_minutes"], item["waste_gib_hours"]) == ("idle_gpu", 45.0, 0.0)


async def test_pages_walk_everything_once(api: Api, store: Store) -> None:
    await populate(store)
    seen: list[str] = []
    query = {"limit": "1"}
    while True:
        status, body = await api.get("/api/v1/recommendations", params=query)
        assert status == 200 and len(body["items"]) <= 1
        seen += [r["message"] for r in body["items"]]
        if body["next_cursor"] is None:
            break
        query = {"limit": "1", "cursor": body["next_cursor"]}
    assert seen == ["b: idle", "a: gpus", "advice", "d: cpu"]


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"until": "2026-11-30T12:00:00Z"}, "invalid_parameter"),  # recommendations take no until
        ({"since": "2026-11-30"}, "invalid_parameter"),
        ({"limit": "1000"}, "invalid_parameter"),
        ({"cursor": "WyJ4IiwieSIsMV0"}, "invalid_cursor"),  # ["x","y",1]: not numbers
        ({"team": ""}, "invalid_parameter"),
    ],
)
async def test_bad_parameters_are_400(api: Api, query: dict[str, str], code: str) -> None:
    status, body = await api.get("/api/v1/recommendations", params=query)
    assert (status, body["error"]["code"]) == (400, code)
