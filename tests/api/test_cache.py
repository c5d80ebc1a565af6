"""The report cache's freshness and bounds, with the clock and the computations in the test's hands."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from inno_notify.api.cache import ResultCache

WALL = datetime(2026, 12, 1, tzinfo=UTC)


class Source:
    def __init__(self) -> None:
        self.calls = 0
        self.gate: asyncio.Event | None = None

    async def compute(self) -> int:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        return self.calls


async def test_fresh_then_stale_while_revalidating_then_expired() -> None:
    now = [0.0]
    cache = ResultCache(lambda: now[0], lambda: WALL, fresh_seconds=30, max_stale_seconds=300)
    source = Source()
    assert (await cache.get("k", source.compute)).value == 1
    now[0] = 29.9
    assert (await cache.get("k", source.compute)).value == 1 and source.calls == 1

    now[0] = 31
    source.gate = asyncio.Event()
    stale = await cache.get("k", source.compute)
    assert stale.value == 1  # served at once while one refresh runs
    await cache.get("k", source.compute)
    await asyncio.sleep(0)
    assert source.calls == 2  # one refresh for both callers
    source.gate.set()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert (await cache.get("k", source.compute)).value == 2

    now[0] = 31 + 301
    source.gate = None
    assert (await cache.get("k", source.compute)).value == 3
    await cache.close()


async def test_concurrent_misses_share_one_computation() -> None:
    cache = ResultCache(lambda: 0.0, lambda: WALL)
    source = Source()
    source.gate = asyncio.Event()
    waiting = [asyncio.create_task(cache.get("k", source.compute)) for _ in range(5)]
    await asyncio.sleep(0)
    source.gate.set()
    results = await asyncio.gather(*waiting)
    assert {r.value for r in results} == {1} and source.calls == 1
    await cache.close()


async def test_a_failed_refresh_keeps_the_stale_value_and_is_retried() -> None:
    now = [0.0]
    cache = ResultCache(lambda: now[0], lambda: WALL, fresh_seconds=30, max_stale_seconds=300)
    calls = []

    async def flaky() -> int:
        calls.append(now[0])
        if len(calls) == 2:
            raise ConnectionError("database went away")
        return len(calls)

    assert (await cache.get("k", flaky)).value == 1
    now[0] = 40
    assert (await cache.get("k", flaky)).value == 1
    for _ in range(3):  # the refresh runs, fails, and its done-callback clears it
        await asyncio.sleep(0)
    assert (await cache.get("k", flaky)).value == 1  # still the old value; a new refresh starts
    for _ in range(3):
        await asyncio.sleep(0)
    assert calls == [0.0, 40.0, 40.0]
    assert (await cache.get("k", flaky)).value == 3
    await cache.close()
