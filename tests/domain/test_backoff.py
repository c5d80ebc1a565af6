"""The one backoff schedule, in the two shapes the service uses: the dispatcher's retries and the
Kubernetes watchers' reconnects."""

from __future__ import annotations

import random

import pytest

from inno_notify.domain.backoff import Backoff, Streak

# Alertmanager's schedule: 0.5 s × 1.5^(n-1), capped at 60 s; rand 0.5 is the no-jitter midpoint.
DISPATCH_CASES = [
    (1, 0.5, 0.5),
    (2, 0.5, 0.75),
    (3, 0.5, 1.125),
    (10, 0.5, 0.5 * 1.5**9),
    (12, 0.5, 0.5 * 1.5**11),
    (13, 0.5, 60.0),
    (50, 0.5, 60.0),
    (1, 0.0, 0.25),
    (1, 0.999999, 0.5 * 1.499999),
    (4, 0.0, 0.5 * 1.5**3 * 0.5),
    (20, 0.0, 30.0),
    (20, 0.999999, 60.0),
    # A very long outage: the exponent would overflow a float; the cap holds.
    (10_000, 0.5, 60.0),
]


@pytest.mark.parametrize(("attempt", "rand", "expected"), DISPATCH_CASES)
def test_dispatcher_schedule(attempt: int, rand: float, expected: float) -> None:
    assert Backoff().delay(attempt, lambda: rand) == pytest.approx(expected)


# The watchers' reconnects: 0.5 s doubling to a 30 s cap, each delay within [½, 1] of its ceiling.
RECONNECT = Backoff(0.5, 2.0, 30.0, low=0.5, high=1.0)


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (6, 16.0), (7, 30.0), (8, 30.0), (501, 30.0)],
)
def test_reconnect_ceiling_doubles_up_to_the_cap(attempt: int, ceiling: float) -> None:
    assert RECONNECT.ceiling(attempt) == ceiling


def test_a_streak_is_jittered_within_half_to_full_ceiling_and_resets() -> None:
    streak = Streak(RECONNECT, random.Random(11).random)
    delays = [streak.next_delay() for _ in range(12)]
    for attempt, delay in enumerate(delays, 1):
        assert RECONNECT.ceiling(attempt) / 2 <= delay <= RECONNECT.ceiling(attempt)
    # Jitter: the capped delays are not all the same number.
    assert len({round(d, 6) for d in delays[6:]}) > 1
    assert streak.failures == 12
    streak.reset()
    assert streak.next_delay() <= 0.5


@pytest.mark.parametrize(
    ("initial", "factor", "maximum", "low", "high"),
    [(0, 2, 30, 0.5, 1), (1, 0.5, 30, 0.5, 1), (2, 2, 1, 0.5, 1), (1, 2, 30, -0.1, 1), (1, 2, 30, 1, 0.5)],
)
def test_nonsense_schedules_are_refused(
    initial: float, factor: float, maximum: float, low: float, high: float
) -> None:
    with pytest.raises(ValueError):
        Backoff(initial, factor, maximum, low, high)
