"""A team digest priced and budgeted (issue 34), on Postgres and SQLite: the store sums the week per
person and GPU model in its one statement, the domain prices each model, and the team's budget
comes from service.budgets — the very report GET /api/v1/budgets answers; a team without a budget
costs no budget query."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.db import Store
from inno_notify.domain.budgets import Budget, Period, SpendCell
from inno_notify.domain.costs import Rates
from inno_notify.domain.model import JobRecord, Requested, Team, Usage
from inno_notify.service.budgets import Budgets
from inno_notify.service.digest_accounting import NO_ACCOUNTING, DigestAccounting
from tests import stored

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
RATES = Rates(currency="EUR", gpu_hour={"*H100*": 3.0, "*A100*": 2.0})
# Week 2026-W48 is 23-29 November; "now" is Wednesday 2 December, a fifteenth of the month gone.
WEEK = "2026-W48"
NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)

# uid: (team, owner, finished, model, held, idle) in GPU-minutes
JOBS = {
    "a1": ("face", "alice@example.com", datetime(2026, 11, 24, 10, tzinfo=UTC), H100, 600.0, 120.0),
    "a2": ("face", "alice@example.com", datetime(2026, 11, 25, 10, tzinfo=UTC), A100, 300.0, 180.0),
    "b1": ("face", "bob@example.com", datetime(2026, 11, 26, 10, tzinfo=UTC), H100, 120.0, 60.0),
    "s1": ("speech", "sam@example.com", datetime(2026, 11, 26, 10, tzinfo=UTC), A100, 60.0, 0.0),
    # This month (December): what the budget counts, not the week's digest.
    "a3": ("face", "alice@example.com", datetime(2026, 12, 1, 10, tzinfo=UTC), H100, 1200.0, 0.0),
}


async def fill(store: Store) -> None:
    await store.directory.replace_teams(
        [Team("face", ("face-research",), ("lead@example.com",)), Team("speech", ("speech-lab",))]
    )
    await stored.upsert_jobs(
        store,
        [
            JobRecord(
                cluster="default",
                uid=uid,
                namespace=f"{team}-research",
                name=uid,
                owner=owner,
                team=team,
                started_at=at - timedelta(hours=1),
                finished_at=at,
                requested=Requested(gpus=1.0),
            )
            for uid, (team, owner, at, *_) in JOBS.items()
        ],
    )
    for uid, (*_, model, held, idle) in JOBS.items():
        usage = Usage(gpu_minutes=held, used_gpu_minutes=held - idle, idle_gpu_minutes=idle, gpu_model=model)
        await stored.save_usage(store, "default", uid, usage)


def accounting(store: Store) -> DigestAccounting:
    budget = Budget("face", Period.MONTH, gpu_hours=100.0)
    return DigestAccounting(RATES, Budgets(store, [budget], RATES, "UTC", lambda: NOW))


async def test_the_week_priced_per_model_and_the_budget_of_the_month(store: Store) -> None:
    await fill(store)
    mine = accounting(store)
    digest = await mine.team_digest(store, "face", WEEK, "UTC")
    # H100: 720 min = 12 h × 3 = 36 EUR (idle 3 h: 9); A100: 5 h × 2 = 10 EUR (idle 3 h: 6).
    assert [(m.gpu_model, m.gpu_hours, m.cost, m.idle_cost) for m in digest.by_model] == [
        (H100, 12.0, 36.0, 9.0),
        (A100, 5.0, 10.0, 6.0),
    ]
    assert (digest.cost, digest.idle_cost, digest.currency) == (
        46.0,
        15.0,
        "EUR",
    )
    # alice: 2 h H100 idle × 3 + 3 h A100 idle × 2 = 12; bob: 1 h × 3 = 3.
    assert [(p.owner, p.idle_gpu_hours, p.idle_cost) for p in digest.top_idle_cost] == [
        ("alice@example.com", 5.0, 12.0),
        ("bob@example.com", 1.0, 3.0),
    ]
    # A person's models summed: alice held 15 h over two jobs.
    assert [(p.owner, p.jobs, p.gpu_hours) for p in digest.people] == [
        ("alice@example.com", 2, 15.0),
        ("bob@example.com", 1, 2.0),
    ]
    # The budget is December's as service.budgets reports it: 20 GPU-hours of 100.
    [report] = digest.budgets
    assert report == (await mine.budgets.reports(team="face"))[0]  # type: ignore[union-attr]
    assert (report.status.spent, report.status.budget.allowance) == (20.0, 100.0)
    assert report.status.start == datetime(2026, 12, 1, tzinfo=UTC)

    text = DigestRenderer().text(digest)
    assert "GPU cost: 46.00 EUR for 17 GPU-h, of which 15.00 EUR idle" in text
    assert "Budget December 2026: [████░░░░░░░░░░░░░░░░]" in text and "20 GPU-h of 100 GPU-h (20 %)" in text


async def test_no_budget_query_for_a_team_without_one_and_no_costs_without_rates(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    await fill(store)
    passes: list[frozenset[str]] = []
    spend_cells = store.usage.spend_cells

    async def counted(teams: Collection[str], *args: Any, **kwargs: Any) -> list[SpendCell]:
        passes.append(frozenset(teams))
        return await spend_cells(teams, *args, **kwargs)

    monkeypatch.setattr(store.usage, "spend_cells", counted)
    speech = await accounting(store).team_digest(store, "speech", WEEK, "UTC")
    assert speech.budgets == () and [m.cost for m in speech.by_model] == [2.0]
    assert passes == []
    face = await accounting(store).team_digest(store, "face", WEEK, "UTC")
    assert len(face.budgets) == 1 and passes == [frozenset({"face"})]

    plain = await NO_ACCOUNTING.team_digest(store, "face", WEEK, "UTC")
    assert (plain.currency, plain.cost, plain.by_model, plain.budgets) == (None, None, (), ())
    assert "GPU cost" not in DigestRenderer().text(plain)
