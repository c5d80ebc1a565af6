"""Giving the memory a relist or an ended term freed back to the operating system.

A relist, a new leadership term or a burst of events parses thousands of objects at once and
frees them soon after. glibc's allocator keeps the freed pages for reuse instead of returning
them, so the process's resident memory stays at the burst's peak, and after a few bursts at
different points of the heap it creeps up though the objects are gone (`bench/soak.py` measures
it; docs/scale.md has the figures). `serve` therefore calls `malloc_trim(0)` periodically. On a C
library without it (musl, macOS) this does nothing.

Not all of it is freed by reference counting: an ended leadership term's objects (its tasks and
closures, the directory its planner loaded, its watchers' state) and every logged exception with
its frames form reference cycles, which only the cyclic collector frees, and `serve` runs that
rarely (gc_tuning: parsed JSON makes no cycles). So a term's end collects at once
(`collect_garbage`), and the periodic hand-back collects every `COLLECT_EVERY` trims, before it
trims: otherwise each ended term's graph stayed until a full collection many minutes later.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# Often enough that a burst's pages go back within seconds; a trim of a heap of a few hundred MiB
# takes milliseconds.
TRIM_EVERY_SECONDS = 10.0
# A full collection walks every object the process holds (tens of milliseconds for a few hundred
# thousand): once a minute is little CPU, and cyclic garbage does not wait long.
COLLECT_EVERY = 6

Trim = Callable[[], bool]
Collect = Callable[[], int]


def collect_garbage(why: str, collect: Collect = gc.collect) -> int:
    """A full collection of the cyclic garbage, now (logged with `why`); the objects it found
    unreachable."""
    began = time.perf_counter()
    found = collect()
    log.debug(
        "%s: %d unreachable object(s) collected in %.0f ms", why, found, 1000 * (time.perf_counter() - began)
    )
    return found


def malloc_trim() -> Trim | None:
    """glibc's `malloc_trim(0)` (True when it released memory), or None where the C library has
    none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return lambda: bool(function(0))


async def return_freed_memory(
    stop: asyncio.Event,
    trim: Trim | None,
    every: float = TRIM_EVERY_SECONDS,
    *,
    collect: Collect = gc.collect,
    collect_every: int = COLLECT_EVERY,
) -> None:
    """Until `stop` is set, hands freed memory back every `every` seconds (nothing to hand back
    without `trim`), after a full collection every `collect_every` periods."""
    if trim is None:
        log.debug("no malloc_trim in this C library: freed memory stays with the allocator")
    periods = 0
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
        if stop.is_set():
            return
        periods += 1
        if periods % max(1, collect_every) == 0:
            collect_garbage("periodic collection", collect)
        if trim is not None:
            trim()
