"""Per-channel send limits: so many messages a second per recipient and overall, so many at once.

Providers throttle us when we go faster than they allow (Telegram: about 1 message a second per
chat and 30 overall; Slack: about 1 a second per channel), and a throttled send costs a 429 and a
wait. Staying under the limits is cheaper. Each limit hands out evenly spaced time slots: a send
reserves the first slot free for both its recipient and the channel, then sleeps until it. The
reservation is made without awaiting, so concurrent senders never take the same slot. Time and
sleep are injected, so tests check the spacing without waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

# Stale per-recipient entries are dropped once this many are tracked (a slot in the past limits nothing).
_PRUNE_AT = 10_000


@dataclass(frozen=True, slots=True)
class ChannelLimits:
    """None: no limit of that kind."""

    per_recipient_per_second: float | None = None
    overall_per_second: float | None = None
    max_concurrency: int | None = None


# Below the providers' own limits (FACTS.md): Telegram ~1/s per chat and ~30/s overall, Slack
# chat.postMessage ~1/s per channel; SMTP servers dislike many parallel sessions from one client.
DEFAULT_LIMITS: Mapping[str, ChannelLimits] = {
    "telegram": ChannelLimits(per_recipient_per_second=1.0, overall_per_second=25.0),
    "slack": ChannelLimits(per_recipient_per_second=1.0),
    "email": ChannelLimits(max_concurrency=4),
    # Mattermost's own limiter (when on) allows 10 requests/s per client by default; a first DM
    # to a person is up to four requests (user, bot, direct channel, post).
    "mattermost": ChannelLimits(per_recipient_per_second=1.0, overall_per_second=2.5),
    # One receiver of everything, not a provider with published limits: a few posts at a time.
    "webhook": ChannelLimits(max_concurrency=4),
}
UNLIMITED: Mapping[str, ChannelLimits] = {}


class _Spacing:
    """The next free slot of each key at a fixed rate."""

    def __init__(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        self.interval = 1.0 / rate
        self.next_free: dict[str, float] = {}

    def free_at(self, key: str, now: float) -> float:
        return max(now, self.next_free.get(key, now))

    def take(self, key: str, slot: float, now: float) -> None:
        if len(self.next_free) >= _PRUNE_AT:
            self.next_free = {k: t for k, t in self.next_free.items() if t > now}
        self.next_free[key] = slot + self.interval


class _ChannelLimiter:
    def __init__(self, limits: ChannelLimits) -> None:
        self.per_recipient = (
            _Spacing(limits.per_recipient_per_second) if limits.per_recipient_per_second else None
        )
        self.overall = _Spacing(limits.overall_per_second) if limits.overall_per_second else None
        self.concurrency = asyncio.Semaphore(limits.max_concurrency) if limits.max_concurrency else None

    def reserve(self, recipient: str, now: float) -> float:
        """Takes the first slot free for the recipient and overall; returns its time."""
        slot = now
        if self.per_recipient is not None:
            slot = max(slot, self.per_recipient.free_at(recipient, now))
        if self.overall is not None:
            slot = max(slot, self.overall.free_at("", now))
        if self.per_recipient is not None:
            self.per_recipient.take(recipient, slot, now)
        if self.overall is not None:
            self.overall.take("", slot, now)
        return slot


class RateLimiter:
    """Limits per channel name; channels without limits pass straight through."""

    def __init__(
        self,
        limits: Mapping[str, ChannelLimits],
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self._channels = {name: _ChannelLimiter(lim) for name, lim in limits.items()}
        self._clock = clock
        self._sleep = sleep

    @asynccontextmanager
    async def slot(self, channel: str, recipient: str) -> AsyncIterator[None]:
        """Waits for a free slot of `recipient` on `channel`, and holds a concurrency seat meanwhile."""
        limiter = self._channels.get(channel)
        if limiter is None:
            yield
            return
        if limiter.concurrency is None:
            await self._wait(limiter, recipient)
            yield
            return
        async with limiter.concurrency:
            await self._wait(limiter, recipient)
            yield

    async def _wait(self, limiter: _ChannelLimiter, recipient: str) -> None:
        now = self._clock()
        delay = limiter.reserve(recipient, now) - now
        if delay > 0:
            await self._sleep(delay)
