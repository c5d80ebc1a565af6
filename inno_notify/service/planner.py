"""Plans a finished job's notifications from the directory held in the store.

The routing rules are pure (domain.routing); this keeps the directory they need at hand — users and
teams read from the store, refreshed every `refresh_seconds` so edits made through the API take
effect without a restart — and logs each skipped channel once instead of once per job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from inno_notify.adapters.db.repository import Store
from inno_notify.domain.model import DirectoryUser, JobRecord, Notification, Team
from inno_notify.domain.routing import plan_summary

log = logging.getLogger(__name__)


class DirectoryPlanner:
    def __init__(
        self,
        store: Store,
        enabled_channels: frozenset[str],
        group_wait_seconds: float,
        clock: Callable[[], datetime],
        refresh_seconds: float = 30.0,
    ) -> None:
        self.store = store
        self.enabled_channels = enabled_channels
        self.group_wait_seconds = group_wait_seconds
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self._users: dict[str, DirectoryUser] = {}
        self._teams: dict[str, Team] = {}
        self._loaded_at: datetime | None = None
        self._logged: set[tuple[str, str, str]] = set()

    async def _directory(self) -> tuple[dict[str, DirectoryUser], dict[str, Team]]:
        now = self.clock()
        if self._loaded_at is None or (now - self._loaded_at).total_seconds() >= self.refresh_seconds:
            self._users = {u.email.lower(): u for u in await self.store.list_users()}
            self._teams = {t.name: t for t in await self.store.list_teams()}
            self._loaded_at = now
        return self._users, self._teams

    async def __call__(self, job: JobRecord, now: datetime) -> list[Notification]:
        users, teams = await self._directory()
        plan = plan_summary(job, users, teams, self.enabled_channels, now, self.group_wait_seconds)
        for skipped in plan.skipped:
            key = (skipped.recipient, skipped.channel, skipped.reason)
            if key not in self._logged:
                self._logged.add(key)
                log.info("no %s summary for %s: %s", skipped.channel, skipped.recipient, skipped.reason)
        if plan.silent_reason:
            log.debug("job %s/%s gets no summary: %s", job.namespace, job.name, plan.silent_reason)
        return list(plan.notifications)
