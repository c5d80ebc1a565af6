"""Giving the memory a relist freed back to the operating system.

A relist, a new leadership term or a burst of events parses thousands of objects at once and
frees them soon after. glibc's allocator keeps the freed pages for reuse instead of returning
them, so the process's resident memory stays at the burst's peak, and after a few bursts at
different points of the heap it creeps up, while Python's live heap does not (`bench/soak.py`
measures it; docs/scale.md has the figures). `serve` therefore calls `malloc_trim(0)` periodically.
On a C library without it (musl, macOS) this does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# Often enough that a burst's pages go back within seconds; a trim of a heap of a few hundred MiB
# takes milliseconds.
TRIM_EVERY_SECONDS = 10.0

Trim = Callable[[], bool]


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
    stop: asyncio.Event, trim: Trim | None, every: float = TRIM_EVERY_SECONDS
) -> None:
    """Until `stop` is set, hands freed memory back every `every` seconds (nothing without `trim`)."""
    if trim is None:
        log.debug("no malloc_trim in this C library: freed memory stays with the allocator")
        await stop.wait()
        return
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
        trim()
