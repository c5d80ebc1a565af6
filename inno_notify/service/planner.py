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
from collections.abc import Callable, Collection
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
        self._logged: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._logged_limit = max(1, logged_once_limit)

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

    def _first_time(self, key: tuple[str, str, str]) -> bool:
        """True the first time `key` is seen since it last fell out of the bounded set."""
        if key in self._logged:
            self._logged.move_to_end(key)
            return False
        self._logged[key] = None
        if len(self._logged) > self._logged_limit:
            self._logged.popitem(last=False)
        return True
