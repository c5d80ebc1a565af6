"""What this replica accepted lately per token: a cheap first answer to a token over its limit.

The store decides every event (adapters.db.pipeline_events counts a token's events of the last
minute over all replicas, under a lock). A token flooding the API would make each refused post
cost a routing (two directory reads) and a locked write transaction first; this replica's own
accepted events are a subset of what the store counts, so once they alone reach the limit the
store would refuse too, and the post is refused here without touching the database. Bounded: one
entry per configured token name, at most `limit` times each.
"""

from __future__ import annotations

import math
from collections import deque
from datetime import datetime, timedelta


class RecentAccepts:
    def __init__(self) -> None:
        self._accepted: dict[str, deque[datetime]] = {}

    def wait(self, name: str, now: datetime, limit: int, window: timedelta) -> int | None:
        """Whole seconds until `name` may be accepted again, when this replica alone has accepted
        `limit` of its events within `window` before `now`; else None."""
        times = self._accepted.get(name)
        if not times:
            return None
        while times and times[0] <= now - window:
            times.popleft()
        if len(times) < limit:
            return None
        return max(1, math.ceil((times[0] + window - now).total_seconds()))

    def add(self, name: str, at: datetime, limit: int) -> None:
        times = self._accepted.setdefault(name, deque(maxlen=limit))
        times.append(at)
