"""A short-lived cache for the usage aggregation, refreshed in the background.

The usage report sums every finished job in the window; over millions of jobs that is hundreds of
milliseconds of database time per request, while the answer changes only as jobs finish. So a
result is served from memory for `fresh_seconds`; after that it is still served (with its
`computed_at`, so clients see how old it is) while one background task recomputes it, up to
`max_stale_seconds`, beyond which callers wait for a fresh one. Concurrent misses of one key share
one computation. Time comes from the `clock` passed in, so tests control it.
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


@dataclass(frozen=True, slots=True)
class Cached:
    value: Any
    computed_at: datetime  # wall-clock time, for the response
    computed_mono: float  # clock() time, for ageing


class UsageCache:
    def __init__(
        self,
        clock: Callable[[], float],
        wall_clock: Callable[[], datetime],
        fresh_seconds: float = 30.0,
        max_stale_seconds: float = 300.0,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._fresh = fresh_seconds
        self._max_stale = max_stale_seconds
        self._entries: OrderedDict[Hashable, Cached] = OrderedDict()
        self._inflight: dict[Hashable, asyncio.Task[Cached]] = {}

    async def get(self, key: Hashable, compute: Callable[[], Awaitable[Any]]) -> Cached:
        entry = self._entries.get(key)
        if entry is not None:
            age = self._clock() - entry.computed_mono
            if age < self._fresh:
                return entry
            if age < self._max_stale:
                self._refresh(key, compute)
                return entry
        if self._fresh <= 0:
            return await self._compute(key, compute)
        # shield: one caller going away must not cancel the computation the others wait for.
        return await asyncio.shield(self._refresh(key, compute))

    def _refresh(self, key: Hashable, compute: Callable[[], Awaitable[Any]]) -> asyncio.Task[Cached]:
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._compute(key, compute))
            self._inflight[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
        return task

    def _finished(self, key: Hashable, task: asyncio.Task[Cached]) -> None:
        self._inflight.pop(key, None)
        # A background refresh has no caller to raise to: log its failure (and mark it retrieved).
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("usage refresh failed: %s", exc)

    async def _compute(self, key: Hashable, compute: Callable[[], Awaitable[Any]]) -> Cached:
        started = self._clock()
        value = await compute()
        entry = Cached(value, self._wall_clock(), started)
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > MAX_KEYS:
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
