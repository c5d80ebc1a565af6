"""GET /api/v1/budgets: the budgets as service.budgets reports them, as JSON and CSV."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.db import Store
from inno_notify.api import keys
from inno_notify.domain.budgets import Budget, BudgetReport, Period
from inno_notify.domain.costs import Rates
from inno_notify.domain.model import Usage
from inno_notify.service.budgets import Budgets
from tests import stored
from tests.adapters.db.records import job

from .conftest import serve_api
from .support import Api

NOW = datetime(2026, 12, 16, 12, tzinfo=UTC)
RATES = Rates(currency="EUR", gpu_hour={"*H100*": 2.5})
BUDGETS = (
    Budget("face", Period.MONTH, amount=500.0),
    Budget("face", Period.WEEK, gpu_hours=40.0),
    Budget("speech", Period.MONTH, gpu_hours=10.0),
)


async def test_budgets_as_json_and_csv(store: Store) -> None:
    for uid, team, hours, model in (("f1", "face", 20.0, "NVIDIA H100"), ("f2", "face", 4.0, "Tesla T4")):
        finished = NOW - timedelta(hours=2)
        await stored.upsert_jobs(
            store, [job(uid, team=team, started_at=finished - timedelta(hours=1), finished_at=finished)]
        )
        await stored.save_usage(
            store, "default", uid, Usage(gpu_model=model, gpu_minutes=hours * 60, idle_gpu_minutes=0.0)
        )
    provider = Budgets(store, BUDGETS, RATES, "UTC", lambda: NOW).reports
    async with serve_api(store, budgets=provider, clock=lambda: NOW) as api:
        status, body = await api.get("/api/v1/budgets", "viewer", params={"team": "face"})
        assert status == 200
        money, week = sorted(body["items"], key=lambda b: b["period"])
        # 20 H100-hours at 2.5; the T4 has no price, so it counts in GPU-hours but not in money.
        assert (money["unit"], money["spent"], money["currency"], money["budget"]) == (
            "amount",
            50.0,
            "EUR",
            500.0,
        )
        assert money["start"] == "2026-12-01T00:00:00Z" and money["end"] == "2027-01-01T00:00:00Z"
        assert money["by_model"] == [
            {"gpu_model": "NVIDIA H100", "gpu_hours": 20.0, "cost": 50.0},
            {"gpu_model": "Tesla T4", "gpu_hours": 4.0, "cost": None},
        ]
        assert (week["unit"], week["spent"], week["share"]) == ("gpu_hours", 24.0, pytest.approx(0.6))
        assert week["start"] == "2026-12-14T00:00:00Z"

        status, body = await api.get("/api/v1/budgets", "viewer", params={"period": "month"})
        assert {(b["team"], b["period"]) for b in body["items"]} == {("face", "month"), ("speech", "month")}
        # speech has spent nothing: 0 GPU-hours counted, no models.
        speech = next(b for b in body["items"] if b["team"] == "speech")
        assert (speech["spent"], speech["by_model"]) == (0.0, [])

        status, (header, *rows), headers = await api.csv(
            "/api/v1/budgets", params={"team": "face", "period": "month"}
        )
        assert status == 200 and headers["Content-Type"] == "text/csv; charset=utf-8"
        assert header[:3] == ["team", "period", "gpu_model"] and header[-3:] == [
            "model",
            "model_gpu_hours",
            "model_cost",
        ]
        assert [r[-3:] for r in rows] == [["NVIDIA H100", "20.0", "50.0"], ["Tesla T4", "4.0", ""]]

        status, body = await api.get("/api/v1/budgets", "viewer", params={"period": "year"})
        assert (status, body["error"]["code"]) == (400, "invalid_parameter")


async def test_without_budgets_the_list_is_empty(api: Api) -> None:
    status, body = await api.get("/api/v1/budgets", "viewer")
    assert status == 200 and body["items"] == []


async def test_budgets_are_cached_like_a_digest(store: Store) -> None:
    provider = Budgets(store, BUDGETS, RATES, "UTC", lambda: NOW).reports
    async with serve_api(store, budgets=provider, clock=lambda: NOW) as api:
        _, first = await api.get("/api/v1/budgets", "viewer", params={"team": "speech"})
        finished = NOW - timedelta(hours=2)
        await stored.upsert_jobs(
            store, [job("s1", team="speech", started_at=finished - timedelta(hours=1), finished_at=finished)]
        )
        await stored.save_usage(store, "default", "s1", Usage(gpu_model="NVIDIA H100", gpu_minutes=120.0))
        api.monotonic[0] += 59
        _, cached = await api.get("/api/v1/budgets", "viewer", params={"team": "speech"})
        assert cached == first and cached["items"][0]["spent"] == 0.0
        # Past max-stale, callers wait for a fresh computation.
        api.monotonic[0] += 300
        _, fresh = await api.get("/api/v1/budgets", "viewer", params={"team": "speech"})
        assert fresh["items"][0]["spent"] == 2.0


async def test_every_budget_comes_from_one_computation_warmed_at_start(store: Store) -> None:
    budgets = Budgets(store, BUDGETS, RATES, "UTC", lambda: NOW)
    calls: list[None] = []

    async def counted() -> list[BudgetReport]:
        calls.append(None)
        return await budgets.reports()

    async with serve_api(store, budgets=counted, warm_reports=True) as api:
        await api.app[keys.REPORTS_WARMUP]
        assert len(calls) == 1
        answers = {}
        for team in ("face", "speech", "nlp"):
            status, body = await api.get("/api/v1/budgets", "viewer", params={"team": team})
            assert status == 200
            answers[team] = {(b["team"], b["period"]) for b in body["items"]}
        _, monthly = await api.get("/api/v1/budgets", "viewer", params={"period": "month"})
    # Each request took its own from the one warm report.
    assert answers == {
        "face": {("face", "month"), ("face", "week")},
        "speech": {("speech", "month")},
        "nlp": set(),
    }
    assert {(b["team"], b["period"]) for b in monthly["items"]} == {("face", "month"), ("speech", "month")}
    assert len(calls) == 1
