"""The leader's loops: a round every so often until `stop`, and the pause between rounds.

A pause ends early when `stop` is set (a shutdown waits for no timer) or when the loop's `wake`
is (work arrived). A failed round is logged with its traceback and tried again after the loop's
retry interval, except LostLeadership, which ends the loop: the leader work ends with it
(service.leadership). The sleep is injected so that tests pass time in instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from inno_notify.adapters.db.leases import LostLeadership

Sleep = Callable[[float], Awaitable[None]]


async def pause(
    seconds: float, stop: asyncio.Event, sleep: Sleep = asyncio.sleep, wake: asyncio.Event | None = None
) -> None:
    """Returns after `seconds` (by `sleep`) or as soon as `stop` is set, whichever comes first; with
    `wake`, also as soon as it is set after this call began (an earlier setting is cleared)."""
    waiters = [asyncio.ensure_future(sleep(seconds)), asyncio.ensure_future(stop.wait())]
    if wake is not None:
        wake.clear()
        waiters.append(asyncio.ensure_future(wake.wait()))
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waiters:
            task.cancel()


async def rounds(
    round_: Callable[[], Awaitable[float]],
    stop: asyncio.Event,
    *,
    log: logging.Logger,
    what: str,
    retry_seconds: float,
    sleep: Sleep = asyncio.sleep,
    failed: Callable[[Exception], None] | None = None,
    after: Callable[[], Awaitable[object]] | None = None,
    wake: asyncio.Event | None = None,
) -> None:
    """Runs `round_` until `stop` is set, pausing for the seconds each round returns (0: none).

    A round that raises is logged (`what` failed) in the loop's own `log`, told to `failed` (the
    loop's own count of failures) and followed by a pause of `retry_seconds`: whatever it left is
    the next round's to find. `after` runs after every round, failed or not.
    """
    while not stop.is_set():
        try:
            wait = await round_()
        except LostLeadership:
            raise  # the leader work ends with it (service.leadership)
        except Exception as exc:
            log.exception("%s failed; trying again in %.1f s", what, retry_seconds)
            if failed is not None:
                failed(exc)
            wait = retry_seconds
        if after is not None:
            await after()
        if wait > 0:
            await pause(wait, stop, sleep, wake)
