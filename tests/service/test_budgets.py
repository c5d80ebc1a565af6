"""Budgets over stored jobs (Postgres and SQLite): spend per period and GPU model, the forecast from
last month's shape, and the leads' alerts — one each, to the leads only, never twice.

November spent 90 of its 100 GPU-hours in its first days, so by mid-December the forecast expects
90 % of a month's spend to be in: 82 GPU-hours on 14 December cross 80 % with a forecast of 91;
9 more on 16 December put the forecast at 101, past the budget.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.budgets import Budget, Period
from inno_notify.domain.costs import Rates
from inno_notify.domain.messages import decode_pipeline
from inno_notify.domain.model import DirectoryUser, NotificationKind, Team, Usage
from inno_notify.service.budgets import Budgets
from inno_notify.service.planner import DirectoryPlanner
from tests import stored
from tests.adapters.db.records import job

from .support import ALL_CHANNELS, FakeClock

H100 = "NVIDIA H100 80GB HBM3"
A10 = "NVIDIA A10"
LEAD = DirectoryUser("lead@example.com", "Lena", slack_user_id="U0LEAD", channels=("slack",))
FACE = Team("face", ("face-research",), leads=("lead@example.com",), slack_channel="#face-gpu")
RATES = Rates(currency="EUR", gpu_hour={"*H100*": 2.5, "*A10*": 0.5})


def at(day: int, month: int = 12) -> datetime:
    return datetime(2026, month, day, 12, tzinfo=UTC)


async def finished(store: Store, uid: str, when: datetime, gpu_hours: float, model: str = H100) -> None:
    await stored.upsert_jobs(
        store, [job(uid, team="face", started_at=when - timedelta(hours=1), finished_at=when)]
    )
    await stored.save_usage(
        store, "default", uid, Usage(gpu_model=model, gpu_minutes=gpu_hours * 60.0, idle_gpu_minutes=0.0)
    )


@pytest.fixture
async def scene(store: Store) -> Store:
    await store.directory.upsert_user(LEAD)
    await store.directory.replace_teams([FACE])
    await finished(store, "nov-early", at(3, 11), 90.0)
    await finished(store, "nov-late", at(28, 11), 10.0)
    await finished(store, "dec-1", at(2), 50.0)
    await finished(store, "dec-2", at(13), 32.0)
    return store


def budgets(store: Store, clock: FakeClock, *entries: Budget) -> Budgets:
    return Budgets(store, entries or (Budget("face", Period.MONTH, gpu_hours=100.0),), RATES, "UTC", clock)


async def alerts(store: Store) -> list[tuple[str, str, str, str]]:
    rows, _ = await store.outbox.list_notifications(limit=100)
    return sorted(
        (n.recipient, n.channel.value, decode_pipeline(n.payload).key, n.kind.value)
        for n in rows
        if n.kind is NotificationKind.PIPELINE_EVENT
    )


async def test_a_team_crossing_80_then_its_forecast_100_gets_one_alert_each_to_its_lead(scene: Store) -> None:
    clock = FakeClock(at(14))
    planner = DirectoryPlanner(scene, ALL_CHANNELS, 30.0, clock)
    watch = budgets(scene, clock)

    (report,) = await watch.reports()
    assert report.status.spent == pytest.approx(82.0)
    assert report.status.forecast == pytest.approx(82.0 / 0.9)
    assert await watch.alert(planner) == 1
    assert await alerts(scene) == [
        ("lead@example.com", "slack", "budget:face/month:2026-12-01:spent_80", "pipeline_event")
    ]

    clock.now = at(16)
    await finished(scene, "dec-3", at(15), 9.0)
    assert await watch.alert(planner) == 1
    # A restart: new objects over the same store send nothing again, however often they check.
    restarted = budgets(scene, clock)
    again = DirectoryPlanner(scene, ALL_CHANNELS, 30.0, clock)
    assert await restarted.alert(again) == 0
    assert await restarted.alert(again) == 0
    assert await alerts(scene) == [
        ("lead@example.com", "slack", "budget:face/month:2026-12-01:forecast", "pipeline_event"),
        ("lead@example.com", "slack", "budget:face/month:2026-12-01:spent_80", "pipeline_event"),
    ]
    rows, _ = await scene.outbox.list_notifications(limit=100)
    forecast = next(decode_pipeline(n.payload) for n in rows if "forecast" in n.dedup_key)
    assert forecast.title == "Budget: face is on course to pass its budget for December 2026"
    assert forecast.text == (
        "Spent so far: 91 GPU-hours of 100 GPU-hours (91 %).\n"
        "Forecast for the period's end (31 Dec): 101.1 GPU-hours."
    )


async def test_money_and_model_budgets_count_their_models_at_their_prices(scene: Store) -> None:
    clock = FakeClock(at(14))
    await finished(scene, "dec-a10", at(10), 40.0, A10)
    watch = budgets(
        scene,
        clock,
        Budget("face", Period.MONTH, amount=500.0),
        Budget("face", Period.MONTH, gpu_hours=50.0, gpu_model="*A10*"),
    )
    money, a10 = await watch.reports()
    # 82 H100-hours × 2.5 + 40 A10-hours × 0.5 = 225 EUR; the A10 budget counts the A10 alone.
    assert money.status.spent == pytest.approx(225.0) and money.status.currency == "EUR"
    assert [m.gpu_model for m in money.by_model] == [A10, H100]
    assert [m.gpu_hours for m in money.by_model] == pytest.approx([40.0, 82.0])
    assert [m.cost for m in money.by_model] == pytest.approx([20.0, 205.0])
    assert a10.status.spent == pytest.approx(40.0) and a10.status.currency is None
    assert [m.gpu_model for m in a10.by_model] == [A10]
    # 40 of 50 A10-hours: 80 %; and with no A10 spend last month, the rate so far (40 in 13.5 of
    # 31 days) forecasts 92. The money budget (225 of 500, forecast 250) is quiet.
    assert a10.status.forecast == pytest.approx(40.0 / (13.5 / 31))
    assert await watch.alert(DirectoryPlanner(scene, ALL_CHANNELS, 30.0, clock)) == 2
    assert [key for _, _, key, _ in await alerts(scene)] == [
        "budget:face/month/*A10*:2026-12-01:forecast",
        "budget:face/month/*A10*:2026-12-01:spent_80",
    ]


async def test_a_weekly_budget_counts_its_week(scene: Store) -> None:
    # 14 December 2026 is a Monday: the week began at its midnight, after dec-2 (the 13th).
    clock = FakeClock(at(16))
    await finished(scene, "dec-week", at(15), 7.0)
    (week,) = await budgets(scene, clock, Budget("face", Period.WEEK, gpu_hours=10.0)).reports()
    assert week.status.start == datetime(2026, 12, 14, tzinfo=UTC)
    assert week.status.spent == pytest.approx(7.0)
