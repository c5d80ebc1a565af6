"""A team's month budget played on the simulated cluster through the whole service (watch → ingest →
usage → the leader's budget check → delivery), on SQLite and Postgres, each stretch of the story
its own run of the service over the same database, so that every stretch begins with a restart.

The face team spent most of November early: 64 GPU-hours on 2 November, 8 more on the 28th
(by mid-November 64 of its 72, 8/9). Its lead then sets a budget of 75 GPU-hours a month.
- 1 December: 64 GPU-hours again, 85 % of the budget: the 80 % alert. Three days of a month are
  too few for a forecast.
- 14 December, after a restart: the check that runs as the service starts finds 64 spent and a
  forecast of 72 (November's shape: 64 / (8/9)), within the budget; nothing is sent again.
  8 more GPU-hours (72, 96 %) put the forecast at 81, past the budget: the forecast alert.
Exactly one alert each, to the lead alone, on the lead's channel (e-mail).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from inno_notify.adapters.db.repository import Store
from inno_notify.domain.budgets import Budget, BudgetStatus, Period
from inno_notify.domain.costs import Rates
from inno_notify.domain.messages import decode_pipeline
from inno_notify.domain.model import DeliveryStatus, NotificationKind
from inno_notify.service.budgets import Budgets
from inno_notify.sim.objects import JobSpec
from inno_notify.sim.workload import GIB, PEOPLE, TEAMS, Behaviour, SimJob, Workload
from tests.scenario import play
from tests.service.support import FakeClock

pytestmark = pytest.mark.slow

ALICE, BOB = PEOPLE[0], PEOPLE[1]
FACE = next(t for t in TEAMS if t.name == "face")
BUDGET: dict[str, Any] = {"team": "face", "period": "month", "gpu_hours": 75.0}


def job(name: str, gpus: int, hours: float, submit: datetime, node: int) -> SimJob:
    person = ALICE if node % 2 else BOB
    return SimJob(
        spec=JobSpec(
            name=name, namespace=FACE.namespace, owner=person.email, gpus=gpus, memory="64Gi", cpu="8"
        ),
        person=person,
        submit_at=submit,
        queue_seconds=30.0,
        run_seconds=hours * 3600.0,
        outcome="succeeded",
        behaviour=Behaviour(
            gpu_util_percent=(70.0,) * gpus, gpu_memory_gib=(20.0,) * gpus, memory_peak_bytes=40 * GIB,
            cpu_cores=5.0,
        ),
        node=f"gpu-node-{node:02d}",
    )  # fmt: skip


def heavy_day(day: datetime, label: str) -> Workload:
    """Eight runs of 8 GPUs for an hour: 64 GPU-hours."""
    return Workload(start=day, jobs=tuple(job(f"{label}-{i}", 8, 1.0, day, i) for i in range(1, 9)))


def light_day(day: datetime, label: str) -> Workload:
    """One run of 8 GPUs for an hour: 8 GPU-hours."""
    return Workload(start=day, jobs=(job(f"{label}-1", 8, 1.0, day, 1),))


async def budget_alerts(store: Store) -> list[tuple[str, str, str, DeliveryStatus]]:
    rows, _ = await store.outbox.list_notifications(limit=500)
    alerts = []
    for row in rows:
        if row.kind is NotificationKind.PIPELINE_EVENT:
            key = decode_pipeline(row.payload).key
            if key.startswith("budget:"):
                alerts.append((key, row.recipient, row.channel.value, row.status))
    return sorted(alerts)


async def status_at(store: Store, now: datetime) -> BudgetStatus:
    """The budget as the service reports it at `now`."""
    budget = Budget(BUDGET["team"], Period.MONTH, gpu_hours=BUDGET["gpu_hours"])
    (report,) = await Budgets(store, (budget,), Rates(), "UTC", FakeClock(now)).reports()
    return report.status


def day(month: int, number: int) -> datetime:
    return datetime(2026, month, number, 8, tzinfo=UTC)


async def test_a_team_crossing_80_then_its_forecast_gets_one_alert_each_to_its_lead(
    tmp_path: Path, empty_database_url: str
) -> None:
    url = empty_database_url
    # November, before the budget was set.
    await play(heavy_day(day(11, 2), "nov-early"), tmp_path / "nov-2", database_url=url, budgets=[])
    await play(light_day(day(11, 28), "nov-late"), tmp_path / "nov-28", database_url=url, budgets=[])

    await play(heavy_day(day(12, 1), "dec-early"), tmp_path / "dec-1", database_url=url, budgets=[BUDGET])
    store = Store.from_url(url)
    try:
        spent_80 = ("budget:face/month:2026-12-01:spent_80", FACE.lead, "email", DeliveryStatus.SENT)
        assert await budget_alerts(store) == [spent_80]
        mid_month = day(12, 14)
        # What the service finds as it starts on the 14th: within the budget, forecast included.
        before = await status_at(store, mid_month)
        assert before.spent == pytest.approx(64.0, rel=0.01)
        assert before.forecast == pytest.approx(72.0, rel=0.01)

        await play(light_day(mid_month, "dec-mid"), tmp_path / "dec-14", database_url=url, budgets=[BUDGET])
        forecast = ("budget:face/month:2026-12-01:forecast", FACE.lead, "email", DeliveryStatus.SENT)
        assert await budget_alerts(store) == [forecast, spent_80]
        after = await status_at(store, mid_month + timedelta(hours=2))
        assert after.spent == pytest.approx(72.0, rel=0.01)
        assert after.forecast == pytest.approx(81.0, rel=0.01)
    finally:
        await store.close()
