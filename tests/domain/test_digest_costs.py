"""The digest's costs (issue 34): GPU-hours priced per model, the top idle cost by person, people
summed over their models, and the budgets handed in; hand-computed figures."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
import pytest

from inno_notify.domain.budgets import Budget, BudgetReport, BudgetStatus, ModelSpend, Period
from inno_notify.domain.costs import Rates
from inno_notify.domain.digest import (
    NO_MODEL,
    NO_OWNER,
    Digest,
    DigestRows,
    PersonRow,
    TeamTotals,
    build_digest,
    digest_to_dict,
    gpu_rates,
)

H100, A100, A10 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA A10"
RATES = Rates(currency="EUR", gpu_hour={"*H100*": 2.5, "*A100*": 1.5}, cpu_core_hour=0.04)
TOTALS = TeamTotals(jobs=6, gpu_minutes=1500.0, used_gpu_minutes=900.0, idle_gpu_minutes=600.0)


def row(
    owner: str | None, model: str | None, held: float, idle: float | None, used: float | None = None
) -> PersonRow:
    return PersonRow(owner, 1, held, used, idle, None, model)


# alice: H100 600 min held (120 idle), A100 300 min (180 idle); bob: H100 120 min (60 idle),
# A10 (no rate) 480 min (240 idle).
PEOPLE = (
    row("alice", H100, 600.0, 120.0, 480.0),
    row("alice", A100, 300.0, 180.0, 120.0),
    row("bob", H100, 120.0, 60.0, 60.0),
    row("bob", A10, 480.0, 240.0, 240.0),
)


def digest(
    people: tuple[PersonRow, ...] = PEOPLE,
    rates: Rates | None = RATES,
    budgets: Sequence[BudgetReport] = (),
) -> Digest:
    return build_digest("ml", "2026-W48", "UTC", DigestRows(TOTALS, people), rates=rates, budgets=budgets)


def test_cost_by_gpu_model_prices_each_model_at_its_rate() -> None:
    d = digest()
    assert d.currency == "EUR"
    lines = {m.gpu_model: (m.jobs, m.gpu_hours, m.cost, m.idle_cost) for m in d.by_model}
    # H100: 720 min = 12 h × 2.5 = 30, idle 180 min = 3 h × 2.5 = 7.5; A100: 5 h × 1.5 = 7.5, idle
    # 3 h × 1.5 = 4.5; A10: no rate, no cost (None, never 0).
    assert lines == {
        H100: (2, 12.0, 30.0, 7.5),
        A100: (1, 5.0, 7.5, 4.5),
        A10: (1, 8.0, None, None),
    }
    # Most expensive first, the unpriced model last.
    assert [m.gpu_model for m in d.by_model] == [H100, A100, A10]
    # The priced models' sums; the A10's hours are named in a note, not priced at 0.
    assert (d.cost, d.idle_cost) == (37.5, 12.0)
    assert any(m.figure == "cost" and A10 in m.reason for m in d.missing)


def test_top_idle_cost_by_person_sums_each_persons_models() -> None:
    d = digest()
    # alice: 2 h idle H100 × 2.5 + 3 h idle A100 × 1.5 = 5 + 4.5 = 9.5 over 5 idle hours;
    # bob: 1 h idle H100 × 2.5 = 2.5 (his 4 idle A10 hours have no price and are left out).
    assert [(p.owner, p.idle_gpu_hours, p.idle_cost) for p in d.top_idle_cost] == [
        ("alice", 5.0, 9.5),
        ("bob", 1.0, 2.5),
    ]


def test_people_are_summed_over_their_models() -> None:
    d = digest()
    people = {p.owner: (p.jobs, p.gpu_hours, p.idle_gpu_hours, p.efficiency) for p in d.people}
    # alice: 900 min held, 600 used, 300 idle; bob: 600 held, 300 used, 300 idle.
    assert people == {
        "alice": (2, 15.0, 5.0, 600 / 900),
        "bob": (2, 10.0, 5.0, 300 / 600),
    }
    assert [p.owner for p in d.people] == ["alice", "bob"]


def test_a_model_row_with_unknown_use_does_not_lower_the_persons_efficiency() -> None:
    # As the store sums them: the H100 row has its use measured (basis 600), the MIG row none.
    rows = (
        PersonRow("carol", 1, 600.0, 300.0, 0.0, 600.0, H100),
        PersonRow("carol", 1, 60.0, None, None, None, None),
    )
    (carol,) = digest(rows).people
    assert (carol.gpu_hours, carol.efficiency) == (11.0, 0.5)


@pytest.mark.parametrize(
    ("rates", "currency"),
    [
        (None, None),
        (Rates(), None),
        # CPU prices alone: the digest prices GPU-hours, so no GPU cost to show.
        (Rates(currency="EUR", cpu_core_hour=0.04), None),
        (Rates(currency="USD", gpu_hour={"*": 1.0}), "USD"),
    ],
)
def test_without_gpu_prices_there_are_no_costs(rates: Rates | None, currency: str | None) -> None:
    d = digest(rates=rates)
    assert d.currency == currency
    if currency is None:
        assert (d.cost, d.idle_cost, d.by_model, d.top_idle_cost) == (None, None, (), ())
        assert gpu_rates(rates) is None
    else:
        # A catch-all prices every model, the unmeasured one too: 40 h × 1.0.
        assert d.cost == 25.0


def test_an_unmeasured_model_matches_only_a_catch_all() -> None:
    rows = (row("dan", None, 120.0, 60.0),)
    assert digest(rows).by_model[0].gpu_model == NO_MODEL
    assert digest(rows).by_model[0].cost is None
    priced = digest(rows, rates=Rates(currency="EUR", gpu_hour={"*H100*": 2.5, "*": 1.0}))
    assert priced.by_model[0].cost == 2.0
    assert digest((row(None, H100, 60.0, 60.0),)).top_idle_cost[0].owner == NO_OWNER


def test_nobody_idle_makes_no_top_idle_line() -> None:
    d = digest((row("erin", H100, 60.0, 0.0),))
    assert d.top_idle_cost == () and d.idle_cost == 0.0 and d.cost == 2.5


def test_budgets_and_costs_in_the_json() -> None:
    budget = Budget(team="ml", period=Period.MONTH, amount=1000.0, gpu_model="*H100*")
    status = BudgetStatus(
        budget, datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC), 620.0, 1180.0, "EUR"
    )
    report = BudgetReport(status, (ModelSpend(H100, 248.0, 620.0),))
    d = digest(budgets=[report])
    assert d.budgets == (report,)
    data = orjson.loads(orjson.dumps(digest_to_dict(d)))
    assert data["costs"]["currency"] == "EUR" and data["costs"]["gpu_cost"] == 37.5
    assert [m["gpu_model"] for m in data["costs"]["by_model"]] == [H100, A100, A10]
    assert data["costs"]["by_model"][2]["cost"] is None
    assert data["costs"]["top_idle_cost"][0] == {"owner": "alice", "idle_gpu_hours": 5.0, "idle_cost": 9.5}
    [b] = data["budgets"]
    assert (b["unit"], b["budget"], b["spent"], b["share"], b["forecast"]) == (
        "amount",
        1000.0,
        620.0,
        0.62,
        1180.0,
    )
    assert b["start"] == "2026-11-01T00:00:00+00:00" and b["by_model"][0]["cost"] == 620.0


def test_unmeasured_rows_make_no_model_line() -> None:
    rows = (row("fay", H100, 60.0, 0.0), PersonRow("fay", 2, None, None, None, None, None))
    d = digest(rows)
    assert [m.gpu_model for m in d.by_model] == [H100] and not any(m.figure == "cost" for m in d.missing)
    assert d.people[0].jobs == 3
