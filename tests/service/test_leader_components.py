"""Every leader-only component ends when its replica's leadership is over (its store's fence
refuses), so that the elector sees the loss, instead of logging a failed round every poll or,
for ingestion, setting the objects of the refused batch aside as if they were at fault."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta

import pytest

from inno_notify.adapters.db import JobFilter, Store
from inno_notify.adapters.db.leases import LeaseFence, LostLeadership
from inno_notify.domain.model import Notification, Team
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.rightsizing import RightsizingPolicy
from inno_notify.service.digest import DigestScheduler
from inno_notify.service.dispatcher import Dispatcher
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.usage import CollectorOptions, UsageCollector
from inno_notify.sim.objects import JobSpec, job_object
from tests import stored

from .support import T0, FakeClock, renderer


@pytest.fixture
async def deposed(database_url: str) -> AsyncIterator[Store]:
    """The store of a replica that does not lead (its fence is not armed)."""
    store = Store.from_url(database_url, LeaseFence("default", "deposed"))
    try:
        yield store
    finally:
        await store.close()


async def _no_plan(*_: object) -> list[Notification]:
    return []


def dispatch(store: Store, clock: FakeClock) -> Callable[[asyncio.Event], Awaitable[None]]:
    return Dispatcher(store, {}, renderer(), clock=clock, sleep=clock.sleep).run


def usage(store: Store, clock: FakeClock) -> Callable[[asyncio.Event], Awaitable[None]]:
    collector = UsageCollector(
        store,
        None,  # type: ignore[arg-type]  # no source: the fenced store refuses before one is asked
        RightsizingPolicy(),
        _no_plan,
        CollectorOptions(),
        clock,
    )
    return collector.run


def digest(store: Store, clock: FakeClock) -> Callable[[asyncio.Event], Awaitable[None]]:
    lead = Team("face", leads=("lead@example.com",), digest_channels=("email",))
    scheduler = DigestScheduler(
        store,
        schedule="0 8 * * MON",
        timezone="UTC",
        channels={"email"},
        clock=clock,
        sleep=clock.sleep,
        teams=[lead],
    )
    return scheduler.run


def ingest(store: Store, clock: FakeClock) -> Callable[[asyncio.Event], Awaitable[None]]:
    ingestor = Ingestor(
        store, ParseConfig(cluster="default"), IngestOptions(), clock, T0 - timedelta(hours=1)
    )

    async def run(stop: asyncio.Event) -> None:
        await ingestor.on_event("Job", "ADDED", job_object(JobSpec(name="j", namespace="ns"), T0))
        await ingestor.run()

    return run


@pytest.mark.parametrize("component", [dispatch, usage, digest, ingest])
async def test_a_leader_component_ends_with_its_leadership(
    deposed: Store, component: Callable[[Store, FakeClock], Callable[[asyncio.Event], Awaitable[None]]]
) -> None:
    run = component(deposed, FakeClock(T0))
    with pytest.raises(LostLeadership):
        await asyncio.wait_for(run(asyncio.Event()), 10)
    # Nothing written, and nothing set aside as if the objects were at fault.
    assert (await deposed.jobs.job_page(JobFilter())).rows == []
    assert await stored.rejected_objects(deposed) == []
