"""SIGTERM and SIGINT from the first line of `serve` on, so that a stop during start-up is graceful.

Kubernetes sends SIGTERM whenever it likes: during a rollout, to a pod that is still migrating its
database or waiting for the Kubernetes API. A handler installed only once the event loop runs
leaves the process to the default action before that (killed: exit 143), and a stop that merely
sets an event the start-up does not look at waits for the start-up to finish, which may be never.
So `serve` installs `StopSignal` before it reads its settings or imports the service (a plain
signal handler that notes the request), hands it to the event loop once one runs (the loop's own
handler from then on, with a request already noted carried over), and runs its start-up as work
that the stop cancels (runtime.serve): a stop at any moment ends `serve` with exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignal:
    """SIGTERM/SIGINT noted from `install()` on; `event()` is the running loop's stop event."""

    def __init__(self) -> None:
        self.requested = False
        self._event: asyncio.Event | None = None

    def install(self) -> None:
        """Notes SIGTERM/SIGINT from now on (before any event loop runs)."""
        for sig in SIGNALS:
            signal.signal(sig, self._noted)

    def _noted(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def event(self) -> asyncio.Event:
        """The stop event of the running loop, set by SIGTERM/SIGINT from now on, and set at once
        if one came before."""
        if self._event is None:
            self._event = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(sig, self._event.set)
            if self.requested:
                self._event.set()
        return self._event
