"""What this replica knows of the event limits already: a cheap first answer to a post over one.

The store decides every event (adapters.db.pipeline_events counts a token's events of the last
minute and a recipient's of the last hour over all replicas, under a lock). A flood over a limit
would make each refused post cost a directory check and a locked write transaction first, so a
replica refuses, without the database, what the store would refuse too:
- a token whose events accepted by this replica alone reach its limit within the window (they are
  a subset of what the store counts);
- a token or recipient the store itself refused, until the instant that refusal named (the oldest
  counted event leaving the window): events are never taken back, so until then the store's count
  can only be as high or higher.
Never the other way: what this replica lets through, the store still decides.

Bounded: one entry of accepted times per configured token name (at most `limit` times each), and
at most `HELD_LIMIT` held subjects (a recipient is whatever address a poster names, so the oldest
is forgotten first; forgetting one costs only a trip to the store).
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict, deque
from datetime import datetime, timedelta

from inno_notify.adapters.db.pipeline_events import EventLimited

HELD_LIMIT = 4096


class RecentAccepts:
    def __init__(self, held_limit: int = HELD_LIMIT) -> None:
        self._accepted: dict[str, deque[datetime]] = {}
        self._held: OrderedDict[tuple[str, str], EventLimited] = OrderedDict()
        self._held_limit = max(1, held_limit)

    def oldest(self, name: str, now: datetime, limit: int, window: timedelta) -> datetime | None:
        """When this replica alone has accepted `limit` of `name`'s events within `window` before
        `now`: the oldest of them (`name` may be accepted again once it leaves the window); else None."""
        times = self._accepted.get(name)
        if not times:
            return None
        while times and times[0] <= now - window:
            times.popleft()
        if len(times) < limit:
            return None
        return times[0]

    def add(self, name: str, at: datetime, limit: int) -> None:
        times = self._accepted.setdefault(name, deque(maxlen=limit))
        times.append(at)

    def hold(self, refused: EventLimited) -> None:
        """Remembers a refusal of the store until the instant it named."""
        key = (refused.limit, refused.subject)
        self._held[key] = refused
        self._held.move_to_end(key)
        while len(self._held) > self._held_limit:
            self._held.popitem(last=False)

    def held(self, limit: str, subject: str, now: datetime) -> EventLimited | None:
        """The store's refusal of `subject` under `limit` ("token" or "recipient") while it still
        holds at `now`, its Retry-After counted from `now`; else None."""
        key = (limit, subject)
        refused = self._held.get(key)
        if refused is None:
            return None
        if refused.until <= now:
            del self._held[key]
            return None
        retry = max(1, math.ceil((refused.until - now).total_seconds()))
        return dataclasses.replace(refused, retry_after=retry)
