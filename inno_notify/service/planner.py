"""Plans a finished job's notifications from the directory held in the store.

The routing rules are pure (domain.routing); this keeps the directory they need at hand (read
through the store's directory version, adapters.db.directory_cache: a link, relink, mute, stop or
an edit through the API applies to the very next message planned, issue 29) and logs each skipped
channel once instead of once per job.

What it logs comes partly from annotations anyone can write (an owner of any length, with any
characters): values are logged with repr, cut to a few hundred characters, and the set of what
was already logged keeps only the most recent `LOGGED_ONCE_LIMIT` entries, so a stream of
distinct owners cannot grow it without bound (an entry that fell out is logged again).
"""

from __future__ import annotations

import logging
import reprlib
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable
from datetime import datetime
from functools import partial

from inno_notify.adapters.db.directory_cache import CachedDirectory
from inno_notify.adapters.db.repository import Store
from inno_notify.domain.model import JobRecord, Notification
from inno_notify.domain.routing import Directory, plan_summary

log = logging.getLogger(__name__)

LOGGED_ONCE_LIMIT = 4096
_SHOWN = reprlib.Repr()
_SHOWN.maxstring = 200
_SHOWN.maxother = 200


def shown(value: object) -> str:
    """A value for a log line: its repr (quotes, escapes for control characters), cut short."""
    return _SHOWN.repr(value)


class FirstTimes:
    """What was already logged, the `limit` most recently seen keys only: keys come from what
    cluster users write, so a stream of distinct ones must not grow it without bound (a key that
    fell out counts as new again)."""

    def __init__(self, limit: int) -> None:
        self._seen: OrderedDict[Hashable, None] = OrderedDict()
        self._limit = limit

    def __call__(self, key: Hashable) -> bool:
        """True the first time `key` is seen since it last fell out."""
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > self._limit:
            self._seen.popitem(last=False)
        return True


class DirectoryPlanner:
    def __init__(
        self,
        store: Store,
        enabled_channels: frozenset[str],
        group_wait_seconds: float,
        clock: Callable[[], datetime],
        *,
        allowed_email_domains: Collection[str] = (),
        logged_once_limit: int = LOGGED_ONCE_LIMIT,
    ) -> None:
        self.store = store
        self.enabled_channels = enabled_channels
        self.group_wait_seconds = group_wait_seconds
        self.clock = clock
        self.allowed_email_domains = tuple(allowed_email_domains)
        self._directory = CachedDirectory(store.directory)
        self._first_time = FirstTimes(max(1, logged_once_limit))

    @property
    def loads(self) -> int:
        """Whole reads of the directory (tests read it)."""
        return self._directory.loads

    async def directory(self) -> Directory:
        """The users (by lower-case e-mail), teams (by name) and who turned e-mail off, as they
        stand in the store now."""
        return await self._directory.current()

    async def __call__(self, job: JobRecord, now: datetime) -> list[Notification]:
        if job.parent_uid is not None:
            return []  # no directory read for a step: _plan says why
        return self._plan(await self._directory.current(), job, now)

    async def for_round(self) -> Callable[[JobRecord, datetime], list[Notification]]:
        """Plans the summaries of a whole usage round against the directory as it stands now: one
        read of its version for the round instead of one per job (issue 32); an edit that commits
        meanwhile applies from the next round."""
        return partial(self._plan, await self._directory.current())

    def _plan(self, directory: Directory, job: JobRecord, now: datetime) -> list[Notification]:
        if job.parent_uid is not None:
            return []  # a step of a workload (a workflow's GPU step): its figures are in that summary
        plan = plan_summary(
            job, directory, self.enabled_channels, now, self.group_wait_seconds, self.allowed_email_domains
        )
        for skipped in plan.skipped:
            if self._first_time((skipped.recipient, skipped.channel, skipped.reason)):
                log.info(
                    "no %s summary for %s: %s",
                    shown(skipped.channel),
                    shown(skipped.recipient),
                    skipped.reason,
                )
        if plan.silent_reason:
            log.debug("job %s gets no summary: %s", shown(f"{job.namespace}/{job.name}"), plan.silent_reason)
        return list(plan.notifications)
