"""The report cache's freshness and bounds, with the clock and the computations in the test's hands.

Nothing here counts the event loop's turns: a test waits for the fake source to say a computation
started (`started`), or for the cache to say none is running (`inflight`), before it looks.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from inno_notify.api.cache import CacheBusy, ResultCache
from tests.waiting import eventually

WALL = datetime(2026, 12, 1, tzinfo=UTC)


class Source:
    """Counts its computations; with a `gate`, each waits for it to open; `started` is set by each."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate: asyncio.Event | None = None
        self.started = asyncio.Event()

    async def compute(self) -> int:
        self.calls += 1
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        return self.calls


async def must_not_run() -> int:
    raise AssertionError("a computation started where the running one should have been shared")


async def idle(cache: ResultCache) -> None:
    """Until no computation runs (each has stored its result and been cleared)."""
    await eventually(lambda: cache.inflight == 0)


async def test_fresh_then_stale_while_revalidating_then_expired() -> None:
    now = [0.0]
    cache = ResultCache(lambda: now[0], lambda: WALL, fresh_seconds=30, max_stale_seconds=300)
    source = Source()
    assert (await cache.get("k", source.compute)).value == 1
    now[0] = 29.9
    assert (await cache.get("k", source.compute)).value == 1 and source.calls == 1

    now[0] = 31
    source.gate = asyncio.Event()
    source.started.clear()
    stale = await cache.get("k", source.compute)
    assert stale.value == 1  # served at once while one refresh runs
    assert (await cache.get("k", must_not_run)).value == 1  # the second caller shares that refresh
    await source.started.wait()
    assert (source.calls, cache.inflight) == (2, 1)
    source.gate.set()
    await idle(cache)
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
    await source.started.wait()
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
    await idle(cache)  # the refresh ran and failed
    assert calls == [0.0, 40.0]
    assert (await cache.get("k", flaky)).value == 1  # still the old value; a new refresh starts
    await idle(cache)
    assert calls == [0.0, 40.0, 40.0]
    assert (await cache.get("k", flaky)).value == 3
    await cache.close()


async def test_computations_in_flight_are_bounded() -> None:
    """Keys come from clients (any window, any team): past `max_inflight` computations a miss is
    refused at once, a stale entry is served without a refresh, and a key already computing is
    shared; once computations end, new ones start again."""
    now = [0.0]
    cache = ResultCache(lambda: now[0], lambda: WALL, fresh_seconds=30, max_stale_seconds=300, max_inflight=2)
    source = Source()
    assert (await cache.get("stale", source.compute)).value == 1
    now[0] = 40
    source.gate = asyncio.Event()
    busy = [asyncio.create_task(cache.get(key, source.compute)) for key in ("a", "b")]
    await eventually(lambda: source.calls == 3)
    assert cache.inflight == 2

    with pytest.raises(CacheBusy):
        await cache.get("c", source.compute)
    assert (await cache.get("stale", must_not_run)).value == 1  # served stale, no refresh started
    # "a" is computing: a caller joins it (no CacheBusy, no computation of its own). The gate opens
    # only once the test has handed control back, which it does after joining.
    asyncio.get_running_loop().call_soon(source.gate.set)
    joined = await cache.get("a", must_not_run)
    first, second = [await task for task in busy]
    assert joined is first and second is not first
    await idle(cache)
    assert (await cache.get("c", source.compute)).value == 4
    await cache.close()


async def test_results_kept_are_bounded_least_recently_used_first() -> None:
    cache = ResultCache(lambda: 0.0, lambda: WALL, max_keys=3)
    source = Source()
    for key in ("a", "b", "c"):
        await cache.get(key, source.compute)
    await cache.get("a", source.compute)  # a hit makes "a" the most recently used
    await cache.get("d", source.compute)  # evicts "b"
    assert len(cache) == 3 and source.calls == 4
    assert (await cache.get("a", source.compute)).value == 1
    assert (await cache.get("b", source.compute)).value == 5  # recomputed
    await cache.close()


async def test_without_freshness_nothing_is_kept_and_concurrent_calls_share() -> None:
    cache = ResultCache(lambda: 0.0, lambda: WALL, fresh_seconds=0)
    source = Source()
    source.gate = asyncio.Event()
    waiting = [asyncio.create_task(cache.get("k", source.compute)) for _ in range(3)]
    await source.started.wait()
    source.gate.set()
    assert {(await task).value for task in waiting} == {1}
    assert len(cache) == 0
    assert (await cache.get("k", source.compute)).value == 2
    await cache.close()
