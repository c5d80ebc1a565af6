"""Capped, jittered exponential backoff for reconnecting to the API server.

When the API server restarts, every watcher of every replica reconnects at once; jitter spreads
them out, the cap bounds how stale we get once it is back. The random source is injected so
tests can check the exact bounds.
"""

from __future__ import annotations

import random


class Backoff:
    """Delays base × factor^n, capped, each drawn uniformly from [½ delay, delay]."""

    __slots__ = ("_rng", "attempts", "base", "cap", "factor")

    def __init__(
        self, base: float = 0.5, factor: float = 2.0, cap: float = 30.0, rng: random.Random | None = None
    ) -> None:
        if base <= 0 or factor < 1 or cap < base:
            raise ValueError("need base > 0, factor >= 1, cap >= base")
        self.base = base
        self.factor = factor
        self.cap = cap
        self.attempts = 0
        self._rng = rng or random.Random()

    def ceiling(self, attempt: int) -> float:
        """The largest delay attempt number `attempt` (0-based) may draw."""
        return min(self.cap, self.base * self.factor ** min(attempt, 64))

    def next_delay(self) -> float:
        ceiling = self.ceiling(self.attempts)
        self.attempts += 1
        return self._rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempts = 0
