"""A short-lived, bounded cache for the API's costly reports (usage, digests), refreshed in the background.

The usage report sums every finished job in the window, and a digest aggregates a team's fortnight
and renders a page with a chart: hundreds of milliseconds of database and CPU time per request,
while the answer changes only as jobs finish. So a result is served from memory for
`fresh_seconds`; after that it is still served (with its `computed_at`, so clients see how old it
is) while one background task recomputes it, up to `max_stale_seconds`, beyond which callers wait
for a fresh one. Concurrent misses of one key share one computation. Time comes from the `clock`
passed in, so tests control it.

Keys come from what clients send (a usage window, a team and week), so both maps are bounded: at
most `max_keys` results are kept (least recently used go first), and at most `max_inflight`
computations run at once. A miss beyond that raises CacheBusy (the API answers 503) rather than
starting another database aggregation; a stale entry whose refresh cannot start is served as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

log = logging.getLogger("inno_notify.api")

MAX_KEYS = 256
MAX_INFLIGHT = 8


class CacheBusy(Exception):
    """Too many computations are in flight to start one more."""


@dataclass(frozen=True, slots=True)
class Cached:
    value: Any
    computed_at: datetime  # wall-clock time, for the response
    computed_mono: float  # clock() time, for ageing


class ResultCache:
    def __init__(
        self,
        clock: Callable[[], float],
        wall_clock: Callable[[], datetime],
        fresh_seconds: float = 30.0,
        max_stale_seconds: float = 300.0,
        *,
        max_keys: int = MAX_KEYS,
        max_inflight: int = MAX_INFLIGHT,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._fresh = fresh_seconds
        self._max_stale = max_stale_seconds
        self._max_keys = max_keys
        self._max_inflight = max_inflight
        self._entries: OrderedDict[Hashable, Cached] = OrderedDict()
        self._inflight: dict[Hashable, asyncio.Task[Cached]] = {}

    @property
    def inflight(self) -> int:
        """Computations running now."""
        return len(self._inflight)

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: Hashable, compute: Callable[[], Awaitable[Any]]) -> Cached:
        """The result for `key`, fresh or stale-while-refreshing; raises CacheBusy when it would
        have to start a computation and `max_inflight` of them are running."""
        entry = self._entries.get(key) if self._fresh > 0 else None
        if entry is not None:
            self._entries.move_to_end(key)
            age = self._clock() - entry.computed_mono
            if age < self._fresh:
                return entry
            if age < self._max_stale:
                with contextlib.suppress(CacheBusy):  # the stale entry will do until one can start
                    self._start(key, compute)
                return entry
        # shield: one caller going away must not cancel the computation the others wait for.
        return await asyncio.shield(self._start(key, compute))

    def _start(self, key: Hashable, compute: Callable[[], Awaitable[Any]]) -> asyncio.Task[Cached]:
        task = self._inflight.get(key)
        if task is None:
            if len(self._inflight) >= self._max_inflight:
                raise CacheBusy(f"{len(self._inflight)} computations in flight")
            task = asyncio.create_task(self._compute(key, compute))
            self._inflight[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return task

    def _finished(self, key: Hashable, task: asyncio.Task[Cached]) -> None:
        self._inflight.pop(key, None)
        # A background refresh has no caller to raise to: log its failure (and mark it retrieved).
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("refresh of a cached report failed: %s", exc)

    async def _compute(self, key: Hashable, compute: Callable[[], Awaitable[Any]]) -> Cached:
        started = self._clock()
        value = await compute()
        entry = Cached(value, self._wall_clock(), started)
        if self._fresh > 0:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_keys:
                self._entries.popitem(last=False)
        return entry

    async def close(self) -> None:
        """Cancels background refreshes (app shutdown)."""
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
