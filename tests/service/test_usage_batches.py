"""A usage round batched (issue 32): its statements do not grow with its jobs, and runs of one
family summarized in the same round see each other as if each had been stored at once."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from inno_notify.adapters.db.repository import Store
from inno_notify.domain.model import Notification, RecommendationKind
from inno_notify.domain.rightsizing import RightsizingPolicy
from inno_notify.service.planner import DirectoryPlanner
from inno_notify.service.usage import CollectorOptions, UsageCollector
from tests.service.test_ingest import Clock
from tests.service.test_usage import GIB, T0, FakeSource, _family_run, ingest


class Statements:
    """Counts the statements the store's engine sends while it is on."""

    def __init__(self, store: Store) -> None:
        self.count = 0
        self._engine = store.engine.sync_engine
        sa.event.listen(self._engine, "before_cursor_execute", self._seen)

    def _seen(self, *_args: object) -> None:
        self.count += 1

    def close(self) -> None:
        sa.event.remove(self._engine, "before_cursor_execute", self._seen)


async def _round_statements(store: Store, names: list[str], now: timedelta) -> tuple[int, int]:
    """(jobs settled, statements sent) of one round over freshly ingested jobs."""
    await ingest(store, names)
    at = T0 + now
    planner = DirectoryPlanner(store, frozenset({"email"}), 60.0, Clock(at))
    await planner.directory()  # the directory read once before, as a running service has it
    coll = UsageCollector(
        store, FakeSource([50.0, 0.0], GIB), RightsizingPolicy(), planner, CollectorOptions(), Clock(at)
    )
    counter = Statements(store)
    try:
        settled = await coll.run_once(at)
    finally:
        counter.close()
    return settled, counter.count


async def test_a_rounds_statements_do_not_grow_with_its_jobs(store: Store) -> None:
    few = await _round_statements(store, [f"few-{i}" for i in range(2)], timedelta(hours=1, minutes=5))
    many = await _round_statements(store, [f"many-{i}" for i in range(12)], timedelta(hours=3))
    assert (few[0], many[0]) == (2, 12)
    assert many[1] == few[1] <= 20


@pytest.mark.parametrize("rounds", [1, 2])
async def test_runs_of_a_family_in_one_round_learn_from_each_other(store: Store, rounds: int) -> None:
    """The second run asks for the 2 GPUs the first run's advice will give: judged the same whether
    the first is summarized in an earlier round or in the same one."""
    source = FakeSource(util_by_gpu=[80.0, 75.0, 0.0, 0.0], memory_peak=6 * GIB)
    first = await _family_run(store, "train-resnet-7f9c2", 4, T0)
    if rounds == 2:
        early = T0 + timedelta(hours=1, minutes=5)
        coll = UsageCollector(store, source, RightsizingPolicy(), _no_plan, CollectorOptions(), Clock(early))
        assert await coll.run_once(early) == 1
    second = await _family_run(store, "train-resnet-x8k2p", 2, T0 + timedelta(hours=2))
    later = T0 + timedelta(hours=3, minutes=5)
    coll = UsageCollector(store, source, RightsizingPolicy(), _no_plan, CollectorOptions(), Clock(later))
    assert await coll.run_once(later) == 3 - rounds

    adoption = await store.adoption.get("test", second)
    assert adoption is not None and adoption.previous_uid == first
    gpu_check = next(c for c in adoption.checks if c.kind is RecommendationKind.GPU_COUNT)
    assert (gpu_check.current, gpu_check.suggested, gpu_check.new, gpu_check.outcome.value) == (
        4,
        2,
        2.0,
        "followed",
    )


async def _no_plan(*_args: object) -> list[Notification]:
    return []
