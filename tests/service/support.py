"""Helpers for the dispatcher tests: an injected clock whose sleep advances it, job seeding, a dispatcher
that sends at once, and a team's weekly digest planned."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store
from inno_notify.domain.model import DirectoryUser, JobRecord, JobStatus, Notification, Requested, Team
from inno_notify.domain.routing import Directory, plan_summary
from inno_notify.service.digest import DigestScheduler
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.ratelimit import UNLIMITED
from tests import stored

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
# The Monday 08:00 UTC a weekly digest of ISO week 2026-W48 fires at.
DIGEST_MONDAY = datetime(2026, 11, 30, 8, tzinfo=UTC)
ALL_CHANNELS = frozenset({"telegram", "slack", "email"})


@functools.cache
def renderer() -> Renderer:
    """The default Renderer, built once and shared by the dispatchers of every test, as the service
    shares the one it builds at startup: building one compiles every template (~0.1 s)."""
    return Renderer()


@dataclass
class FakeClock:
    """`clock()` reads it; `await clock.sleep(s)` moves it forward by s at once and records s."""

    now: datetime = T0
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def finished_job(uid: str, owner: str | None = "alice@example.com", **changes: object) -> JobRecord:
    job = JobRecord(
        cluster="default",
        uid=uid,
        namespace="face-research",
        name=f"train-{uid}",
        status=JobStatus.SUCCEEDED,
        owner=owner,
        team="face",
        created_at=T0 - timedelta(hours=2),
        started_at=T0 - timedelta(hours=1),
        finished_at=T0 - timedelta(minutes=1),
    )
    return replace(job, **changes)  # type: ignore[arg-type]


def week_job(uid: str, owner: str | None = "alice@example.com", **changes: object) -> JobRecord:
    """A 2-GPU job of ISO week 2026-W48 for the digest tests: created Tuesday 24 November 09:00 UTC,
    scheduled a minute later, running 09:02-11:00."""
    day = datetime(2026, 11, 24, tzinfo=UTC)
    return finished_job(
        uid,
        owner,
        created_at=day + timedelta(hours=9),
        first_scheduled_at=day + timedelta(hours=9, minutes=1),
        started_at=day + timedelta(hours=9, minutes=2),
        finished_at=day + timedelta(hours=11),
        requested=Requested(gpus=2),
        **changes,
    )


async def finish(
    store: Store,
    jobs: Sequence[JobRecord],
    users: Mapping[str, DirectoryUser],
    now: datetime,
    *,
    group_wait_seconds: float = 30.0,
    teams: Mapping[str, Team] | None = None,
    enabled: frozenset[str] = ALL_CHANNELS,
) -> list[Notification]:
    """Stores the jobs and routes their summaries into the outbox, as the summarizer does."""
    await stored.upsert_jobs(store, jobs)
    planned: list[Notification] = []
    for job in jobs:
        rows = plan_summary(
            job, Directory(dict(users), dict(teams or {})), enabled, now, group_wait_seconds
        ).notifications
        await stored.summarize(store, job.cluster, job.uid, rows)
        planned.extend(rows)
    return planned


async def all_rows(store: Store) -> list[Notification]:
    rows: list[Notification] = []
    cursor: str | None = None
    while True:
        page, cursor = await store.outbox.list_notifications(limit=500, cursor=cursor)
        rows.extend(page)
        if cursor is None:
            return sorted(rows, key=lambda n: n.id or 0)


def dispatcher(store: Store, senders: Mapping[str, Sender], clock: FakeClock) -> Dispatcher:
    """A dispatcher on `clock` that sends at once: no group wait, no rate limits, no jitter."""
    return Dispatcher(
        store,
        dict(senders),
        renderer(),
        DispatchOptions(group_wait_seconds=0.0, limits=UNLIMITED, rand=lambda: 0.5),
        clock=clock,
        sleep=clock.sleep,
    )


async def plan_digest(
    store: Store, team: Team, lead: DirectoryUser, channels: frozenset[str], clock: FakeClock
) -> None:
    """The team and its lead in the directory, and their digest of 2026-W48 planned into the outbox."""
    await store.directory.replace_teams([team])
    await store.directory.upsert_user(lead)
    planner = DigestScheduler(store, schedule="0 8 * * MON", timezone="UTC", channels=channels, clock=clock)
    assert await planner.run_once(DIGEST_MONDAY) == 1
