"""The one backoff schedule: exponential, capped, with proportional jitter.

Used by the dispatcher's retries (Alertmanager's schedule: 0.5 s × 1.5 up to 60 s, drawn from
[½, 1½] of the nominal delay) and by the Kubernetes watchers' reconnects (0.5 s doubling to 30 s,
drawn from [½, 1] of the nominal delay, so that replicas reconnecting at once spread out and none
waits longer than the cap). The random source is passed in, so the schedule is pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Backoff:
    """Attempt n (1-based) waits initial × factor^(n-1), capped at `maximum`, times a factor drawn
    uniformly from [low, high]; the result is capped at `maximum` again."""

    initial: float = 0.5
    factor: float = 1.5
    maximum: float = 60.0
    low: float = 0.5
    high: float = 1.5

    def __post_init__(self) -> None:
        if not (self.initial > 0 and self.factor >= 1 and self.maximum >= self.initial):
            raise ValueError("backoff needs initial > 0, factor >= 1, maximum >= initial")
        if not 0 <= self.low <= self.high:
            raise ValueError("backoff needs 0 <= low <= high")

    def ceiling(self, attempt: int) -> float:
        """The nominal (un-jittered) delay of the `attempt`-th try (1-based), capped."""
        try:
            nominal = self.initial * self.factor ** max(0, attempt - 1)
        except OverflowError:  # a long outage: far past the cap
            return self.maximum
        return min(self.maximum, nominal)

    def delay(self, attempt: int, rand: Callable[[], float]) -> float:
        """Seconds to wait after the `attempt`-th failed try (1-based); `rand` gives [0, 1)."""
        spread = self.low + (self.high - self.low) * rand()
        return min(self.maximum, self.ceiling(attempt) * spread)


@dataclass(slots=True)
class Streak:
    """The failures in a row of one loop (a watch, a discovery): each asks the next delay, a success
    resets the count."""

    backoff: Backoff
    rand: Callable[[], float]
    failures: int = field(default=0)

    def next_delay(self) -> float:
        self.failures += 1
        return self.backoff.delay(self.failures, self.rand)

    def reset(self) -> None:
        self.failures = 0
