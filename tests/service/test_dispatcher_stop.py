"""The dispatcher when its leader work is told to stop (SIGTERM hand-over, or leadership lost):
sends in flight finish and are recorded, sends not started are given back for the next leader at
once. And when its process was frozen past its leadership: it sends nothing more."""

from __future__ import annotations

import asyncio

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.leases import LeaseFence, LeaseRepository

from .support import T0, FakeClock, all_rows
from .test_dispatcher_faults import PEOPLE, ScriptedSender, dispatcher, seed


async def test_a_stop_mid_round_finishes_the_sends_in_flight_and_gives_the_rest_back(store: Store) -> None:
    await seed(store)
    clock = FakeClock(T0)
    started = asyncio.Event()
    release = asyncio.Event()
    in_flight = 2

    async def hold(number: int) -> None:
        if number == in_flight - 1:
            started.set()
        await release.wait()

    sender = ScriptedSender(lambda number: hold(number) if number < in_flight else None)
    worker = dispatcher(store, {"telegram": sender}, clock, concurrency=in_flight)
    stop = asyncio.Event()
    round_ = asyncio.create_task(worker.run_once(clock(), stop))
    await asyncio.wait_for(started.wait(), 10)
    stop.set()
    release.set()
    assert await asyncio.wait_for(round_, 10) == in_flight
    assert len(sender.calls) == in_flight, "a send started after the stop"

    rows = await all_rows(store)
    sent = [r for r in rows if r.status.value == "sent"]
    back = [r for r in rows if r.status.value == "pending"]
    assert len(sent) == in_flight and len(back) == PEOPLE - in_flight
    # Due now, not counted as tried, and claimed by the next claimer at once (no lease to wait for).
    assert {(r.attempts, r.next_attempt_at) for r in back} == {(0, T0)}
    assert (await store.outbox.claim(T0, PEOPLE, 300)).rows == PEOPLE - in_flight


async def test_a_replica_frozen_past_its_leadership_sends_nothing_more_when_it_runs_again(
    database_url: str,
) -> None:
    """SIGSTOP in the middle of a round: when the process runs again its monotonic clock is past
    the instant its leadership was certain until, though its elector has not noticed yet and the
    lease row may even still name it. The send in flight at the freeze is the only one made."""
    monotonic = [0.0]
    fence = LeaseFence("default", "frozen", monotonic=lambda: monotonic[0])
    leases = LeaseRepository.from_url(database_url)
    store = Store.from_url(database_url, fence)
    try:
        lease = await leases.acquire("default", "frozen", 60)
        assert lease is not None
        fence.arm(lease.term, until=10.0)
        await seed(store)

        def freeze(number: int) -> None:
            if number == 0:
                monotonic[0] = 25.0  # frozen for 25 s while this send was in flight

        clock = FakeClock(T0)
        sender = ScriptedSender(freeze)
        worker = dispatcher(store, {"telegram": sender}, clock, concurrency=1)
        assert await worker.run_once(clock(), asyncio.Event()) == 1
        assert len(sender.calls) == 1, "a send started after the leadership's certain end"
        statuses = sorted(r.status.value for r in await all_rows(store))
        assert statuses == ["pending"] * (PEOPLE - 1) + ["sent"]
    finally:
        await store.close()
        await leases.close()
