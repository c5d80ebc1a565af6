"""Reconnect backoff: 0.5 s doubling to a 30 s cap, each delay jittered within [½, 1] of its ceiling."""

from __future__ import annotations

import random

import pytest

from inno_notify.adapters.kube.backoff import Backoff


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 16.0), (6, 30.0), (7, 30.0), (500, 30.0)],
)
def test_ceiling_doubles_up_to_the_cap(attempt: int, ceiling: float) -> None:
    assert Backoff().ceiling(attempt) == ceiling


def test_delays_are_jittered_within_half_to_full_ceiling_and_reset() -> None:
    backoff = Backoff(rng=random.Random(11))
    delays = [backoff.next_delay() for _ in range(12)]
    for attempt, delay in enumerate(delays):
        assert backoff.ceiling(attempt) / 2 <= delay <= backoff.ceiling(attempt)
    # Jitter: the capped delays are not all the same number.
    assert len({round(d, 6) for d in delays[6:]}) > 1
    backoff.reset()
    assert backoff.next_delay() <= 0.5


@pytest.mark.parametrize(("base", "factor", "cap"), [(0, 2, 30), (1, 0.5, 30), (2, 2, 1)])
def test_nonsense_settings_are_refused(base: float, factor: float, cap: float) -> None:
    with pytest.raises(ValueError):
        Backoff(base, factor, cap)
