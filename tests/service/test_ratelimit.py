"""Send limits per channel: slots per recipient and overall, concurrency seats; time is injected."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from inno_notify.service.ratelimit import DEFAULT_LIMITS, ChannelLimits, RateLimiter


@dataclass
class Clock:
    now: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


async def send_times(limiter: RateLimiter, clock: Clock, sends: list[tuple[str, str]]) -> list[float]:
    """Sends one after another; returns when each went, relative to the start."""
    start = clock.now
    times = []
    for channel, recipient in sends:
        async with limiter.slot(channel, recipient):
            times.append(round(clock.now - start, 6))
    return times


CASES = [
    # (case, limits, sends, expected send times)
    ("no limits", {}, [("telegram", "1")] * 3, [0, 0, 0]),
    ("one chat: one a second", DEFAULT_LIMITS, [("telegram", "1")] * 3, [0, 1, 2]),
    (
        "many chats: 25 a second overall",
        DEFAULT_LIMITS,
        [("telegram", str(i)) for i in range(4)],
        [0, 0.04, 0.08, 0.12],
    ),
    (
        "both limits: the later slot wins",
        {"telegram": ChannelLimits(per_recipient_per_second=1.0, overall_per_second=2.0)},
        [("telegram", "a"), ("telegram", "b"), ("telegram", "a"), ("telegram", "c")],
        [0, 0.5, 1.0, 1.5],
    ),
    (
        "slack: per channel only",
        DEFAULT_LIMITS,
        [("slack", "U1"), ("slack", "U2"), ("slack", "U1")],
        [0, 0, 1],
    ),
    (
        "channels are independent",
        DEFAULT_LIMITS,
        [("telegram", "1"), ("slack", "1"), ("email", "1")],
        [0, 0, 0],
    ),
]


@pytest.mark.parametrize(("limits", "sends", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_slots(
    limits: dict[str, ChannelLimits], sends: list[tuple[str, str]], expected: list[float]
) -> None:
    clock = Clock()
    limiter = RateLimiter(limits, clock, clock.sleep)
    assert await send_times(limiter, clock, sends) == pytest.approx(expected)


async def test_an_idle_recipient_is_not_held_back() -> None:
    clock = Clock()
    limiter = RateLimiter(DEFAULT_LIMITS, clock, clock.sleep)
    await send_times(limiter, clock, [("telegram", "1")])
    clock.now += 5
    assert await send_times(limiter, clock, [("telegram", "1")]) == [0]
    assert clock.slept == []


async def test_concurrent_senders_reserve_distinct_slots() -> None:
    # A clock that never moves and a sleep that only records: each concurrent sender must have
    # reserved its own slot before awaiting, or two would get the same wait.
    clock = Clock()
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(round(seconds, 6))

    limiter = RateLimiter(DEFAULT_LIMITS, clock, record)

    async def one() -> None:
        async with limiter.slot("telegram", "chat"):
            pass

    await asyncio.gather(*(one() for _ in range(4)))
    assert sorted(waits) == [1.0, 2.0, 3.0]


async def test_max_concurrency_holds_seats() -> None:
    clock = Clock()
    limiter = RateLimiter({"email": ChannelLimits(max_concurrency=2)}, clock, clock.sleep)
    inside = 0
    peak = 0
    arrived = 0
    all_arrived = asyncio.Event()
    release = asyncio.Event()

    async def one() -> None:
        nonlocal inside, peak, arrived
        arrived += 1
        if arrived == 5:
            all_arrived.set()
        # Nothing to wait for on the way in (no rate, a clock that never moves): from here a sender
        # is either inside or held at the door before it next yields.
        async with limiter.slot("email", "a@example.com"):
            inside += 1
            peak = max(peak, inside)
            await release.wait()
            inside -= 1

    tasks = [asyncio.create_task(one()) for _ in range(5)]
    await asyncio.wait_for(all_arrived.wait(), 5)
    assert inside == 2
    release.set()
    await asyncio.gather(*tasks)
    assert peak == 2


def test_rates_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        RateLimiter({"x": ChannelLimits(per_recipient_per_second=-1.0)}, Clock(), Clock().sleep)
