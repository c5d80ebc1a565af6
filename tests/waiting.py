"""Waiting in tests: for a condition that no event announces, with a deadline that fails loudly.

Wait on an event where the code under test sets one; where the state changes without telling anyone
(a server's connection count, rows in a database, a counter bumped by another process's request),
poll it here. A test never sleeps a fixed time and then asserts: a sleep that is long enough on an
idle machine is too short on a loaded one, and a sleep before "nothing happened" proves nothing.
To assert that nothing happened, drive the component to a known point first (it has processed all
it was given, a later marker arrived, its round counter moved), then check.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

# How often a condition is polled: short next to every deadline, long enough to leave the loop idle.
POLL_SECONDS = 0.01


async def eventually(
    condition: Callable[[], bool | Awaitable[bool]],
    *,
    within: float = 10.0,
    what: str | None = None,
    poll: float = POLL_SECONDS,
) -> None:
    """Returns as soon as `condition()` (plain or async) is true; fails the test after `within` s.

    The failure names what was waited for (`what`, or the condition's source line) and for how long.
    `poll` is shorter where the test must act between two quick steps of the code under test.
    """
    deadline = time.monotonic() + within
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {within:g} s: {what or _describe(condition)}")
        await asyncio.sleep(poll)


def _describe(condition: Callable[..., object]) -> str:
    try:
        return inspect.getsource(condition).strip()
    except (OSError, TypeError):
        return repr(condition)
