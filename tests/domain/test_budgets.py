"""Budget periods, forecasts and the alerts they call for, on hand-computed figures."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from inno_notify.domain.budgets import (
    AlertKind,
    Budget,
    BudgetStatus,
    EarlierPeriod,
    Period,
    due_alerts,
    elapsed_share,
    forecast,
    period_bounds,
)

BERLIN = ZoneInfo("Europe/Berlin")
UTC_ZONE = ZoneInfo("UTC")


@pytest.mark.parametrize(
    ("period", "at", "zone", "back", "start", "end"),
    [
        (
            "month",
            datetime(2026, 12, 3, 17, tzinfo=UTC),
            UTC,
            0,
            datetime(2026, 12, 1, tzinfo=UTC),
            datetime(2027, 1, 1, tzinfo=UTC),
        ),
        (
            "month",
            datetime(2026, 12, 3, tzinfo=UTC),
            UTC,
            1,
            datetime(2026, 11, 1, tzinfo=UTC),
            datetime(2026, 12, 1, tzinfo=UTC),
        ),
        (
            "month",
            datetime(2026, 1, 15, tzinfo=UTC),
            UTC,
            2,
            datetime(2025, 11, 1, tzinfo=UTC),
            datetime(2025, 12, 1, tzinfo=UTC),
        ),
        # 23:30 UTC on 30 Nov is already December in Berlin.
        (
            "month",
            datetime(2026, 11, 30, 23, 30, tzinfo=UTC),
            BERLIN,
            0,
            datetime(2026, 12, 1, tzinfo=BERLIN),
            datetime(2027, 1, 1, tzinfo=BERLIN),
        ),
        # 3 Dec 2026 is a Thursday: the week began on Monday 30 Nov.
        (
            "week",
            datetime(2026, 12, 3, 17, tzinfo=UTC),
            UTC,
            0,
            datetime(2026, 11, 30, tzinfo=UTC),
            datetime(2026, 12, 7, tzinfo=UTC),
        ),
        (
            "week",
            datetime(2026, 12, 3, 17, tzinfo=UTC),
            UTC,
            1,
            datetime(2026, 11, 23, tzinfo=UTC),
            datetime(2026, 11, 30, tzinfo=UTC),
        ),
    ],
)
def test_period_bounds(
    period: Period, at: datetime, zone: ZoneInfo, back: int, start: datetime, end: datetime
) -> None:
    assert period_bounds(period, at, zone, back) == (start, end)


def test_elapsed_share() -> None:
    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)
    assert elapsed_share(start, end, datetime(2026, 11, 16, tzinfo=UTC)) == 0.5
    assert elapsed_share(start, end, datetime(2026, 10, 1, tzinfo=UTC)) == 0.0
    assert elapsed_share(start, end, datetime(2027, 1, 1, tzinfo=UTC)) == 1.0


@pytest.mark.parametrize(
    ("spent", "elapsed", "earlier", "want"),
    [
        (100.0, 0.05, (), None),  # too early to say
        (100.0, 0.5, (), 200.0),  # carried on at its rate
        (100.0, 0.25, (), 400.0),
        # Earlier months had spent 20 % and 30 % by this point: mean share 25 % → 400.
        (100.0, 0.5, (EarlierPeriod(20.0, 100.0), EarlierPeriod(60.0, 200.0)), 400.0),
        # An earlier period that spent nothing says nothing about the shape.
        (100.0, 0.5, (EarlierPeriod(0.0, 0.0),), 200.0),
        # Earlier periods that had spent everything by now: never below what is spent already.
        (100.0, 0.5, (EarlierPeriod(50.0, 50.0),), 100.0),
        (250.0, 1.0, (), 250.0),  # the period is over
    ],
)
def test_forecast(
    spent: float, elapsed: float, earlier: tuple[EarlierPeriod, ...], want: float | None
) -> None:
    assert forecast(spent, elapsed, earlier) == want


def _status(spent: float | None, forecast_: float | None, gpu_hours: float = 1000.0) -> BudgetStatus:
    return BudgetStatus(
        Budget("face", Period.MONTH, gpu_hours=gpu_hours),
        datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
        spent,
        forecast_,
        None,
    )


@pytest.mark.parametrize(
    ("spent", "forecast_", "want"),
    [
        (500.0, 900.0, []),
        (500.0, 1000.0, []),  # reaching the budget exactly is not exceeding it
        (500.0, 1000.5, [AlertKind.FORECAST]),
        (799.9, None, []),
        (800.0, None, [AlertKind.SPENT_80]),
        (800.0, 1200.0, [AlertKind.SPENT_80, AlertKind.FORECAST]),
        (1000.0, 1000.0, [AlertKind.SPENT_80, AlertKind.SPENT_100]),
        (None, None, []),  # spend that could not be priced alerts nobody
    ],
)
def test_due_alerts(spent: float | None, forecast_: float | None, want: list[AlertKind]) -> None:
    assert [a.kind for a in due_alerts([_status(spent, forecast_)])] == want


def test_an_alert_key_names_team_budget_period_and_kind_so_a_period_sends_each_once() -> None:
    (alert,) = due_alerts([_status(850.0, None)])
    assert alert.key == "budget:face/month:2026-12-01:spent_80"
    model = BudgetStatus(
        Budget("face", Period.WEEK, amount=10.0, gpu_model="*H100*"),
        datetime(2026, 11, 30, tzinfo=UTC),
        datetime(2026, 12, 7, tzinfo=UTC),
        9.0,
        None,
        "EUR",
    )
    assert [a.key for a in due_alerts([model])] == ["budget:face/week/*H100*:2026-11-30:spent_80"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"team": "face"}, "exactly one"),
        ({"team": "face", "gpu_hours": 1.0, "amount": 1.0}, "exactly one"),
        ({"team": "face", "gpu_hours": 0.0}, "gpu_hours"),
        ({"team": "face", "amount": -5.0}, "amount"),
        ({"team": "face", "amount": float("inf")}, "amount"),
        ({"team": " ", "amount": 1.0}, "team"),
    ],
)
def test_bad_budgets_are_refused(given: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Budget(**given)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("glob", "model", "counts"),
    [
        (None, "Tesla T4", True),
        ("*H100*", "NVIDIA H100 80GB HBM3", True),
        ("*h100*", "NVIDIA H100", True),
        ("*H100*", "Tesla T4", False),
        ("*H100*", None, False),
    ],
)
def test_a_model_budget_counts_only_its_models(glob: str | None, model: str | None, counts: bool) -> None:
    assert Budget("face", gpu_hours=1.0, gpu_model=glob).counts(model) is counts
