"""Waiting between rounds without delaying a shutdown: a loop's pause ends early when `stop` is set.

The sleep is injected so that tests pass time in instead of waiting for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Sleep = Callable[[float], Awaitable[None]]


async def pause(seconds: float, stop: asyncio.Event, sleep: Sleep = asyncio.sleep) -> None:
    """Returns after `seconds` (by `sleep`) or as soon as `stop` is set, whichever comes first."""
    sleeper = asyncio.ensure_future(sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, stopper):
            task.cancel()
