"""The leader lease and the fence, on both databases (the row locks of the takeover on Postgres)."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from inno_notify.adapters.db.leases import LeaseFence, LeaseRepository, LostLeadership
from inno_notify.adapters.db.repository import Store
from tests.db_support import closing, connect
from tests.waiting import eventually

NAME = "default"


async def acquired(leases: LeaseRepository, holder: str, within: float = 10.0) -> int:
    """Tries until `holder` gets the lease; its term."""
    async with asyncio.timeout(within):
        while (lease := await leases.acquire(NAME, holder, 30)) is None:  # noqa: ASYNC110 (polls the database)
            await asyncio.sleep(0.02)
    return lease.term


async def a_leads(leases: LeaseRepository, *, armed: bool = True) -> tuple[int, LeaseFence]:
    """`a` acquires the lease: its term, and its fence (armed with that term unless told not to)."""
    lease = await leases.acquire(NAME, "a", 30)
    assert lease is not None
    fence = LeaseFence(NAME, "a")
    if armed:
        fence.arm(lease.term)
    return lease.term, fence


async def test_one_holder_at_a_time_and_each_acquisition_a_new_term(leases: LeaseRepository) -> None:
    first = await leases.acquire(NAME, "a", 30)
    assert first is not None and first.holder == "a"
    assert first.acquired_at <= first.renewed_at < first.expires_at
    assert await leases.acquire(NAME, "b", 30) is None  # held by a
    assert await leases.renew(NAME, "a", first.term, 30)
    assert not await leases.renew(NAME, "b", first.term, 30)
    assert not await leases.renew(NAME, "a", first.term + 1, 30)

    assert await leases.release(NAME, "a", first.term)
    second = await leases.acquire(NAME, "b", 30)
    assert second is not None and second.term > first.term
    assert not await leases.renew(NAME, "a", first.term, 30)  # a's term is over for good
    assert not await leases.release(NAME, "a", first.term)

    # The holder of a lease that names it (it lost it and campaigns again) gets a new term.
    again = await leases.acquire(NAME, "b", 30)
    assert again is not None and again.term > second.term
    assert not await leases.renew(NAME, "b", second.term, 30)


async def test_an_expired_lease_can_be_taken_and_no_longer_renewed(leases: LeaseRepository) -> None:
    short = await leases.acquire(NAME, "a", 0.2)
    assert short is not None
    term = await acquired(leases, "b")  # once the 0.2 s have passed by the database's clock
    assert term > short.term
    assert not await leases.renew(NAME, "a", short.term, 30)
    held = await leases.get(NAME)
    assert held is not None and (held.holder, held.term) == ("b", term)


async def test_every_lease_name_has_its_own_holder_and_terms_differ(leases: LeaseRepository) -> None:
    one = await leases.acquire("cluster-1", "a", 30)
    two = await leases.acquire("cluster-2", "b", 30)
    assert one is not None and two is not None
    assert one.term != two.term


async def test_the_fence_admits_only_the_holder_in_its_term(store: Store, leases: LeaseRepository) -> None:
    term, fence = await a_leads(leases, armed=False)
    async with store.engine.begin() as conn:
        with pytest.raises(LostLeadership, match="does not lead"):
            await fence.check(conn)  # not armed: refused before any query
    fence.arm(term)
    async with store.engine.begin() as conn:
        assert await fence.check(conn) == term
    assert await leases.release(NAME, "a", term)
    async with store.engine.begin() as conn:
        with pytest.raises(LostLeadership, match="is over"):
            await fence.check(conn)  # released: expired now, though nobody took it yet
    assert await leases.acquire(NAME, "b", 30) is not None
    async with store.engine.begin() as conn:
        with pytest.raises(LostLeadership, match="is over"):
            await fence.check(conn)


async def _waiting_on_a_lock(url: str) -> None:
    """Returns once some backend of the database waits for a lock."""
    conn = await connect(url)

    async def locked() -> bool:
        return bool(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        )

    try:
        await eventually(locked, within=10, what="a backend waiting for a lock")
    finally:
        await conn.close()


@pytest.mark.parametrize("db_dialect", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_takeover_waits_for_the_fenced_write_in_flight_but_a_renewal_does_not(
    database_url: str, store: Store, leases: LeaseRepository
) -> None:
    """A fenced transaction holds its lease row FOR KEY SHARE: the leader's renewal (a plain UPDATE)
    goes through, a takeover (FOR UPDATE) waits until it commits, and a fenced transaction that
    starts after the takeover fails: a write of the old term lands before the new term or never."""
    term, fence = await a_leads(leases)
    async with store.engine.connect() as conn:
        transaction = await conn.begin()
        await fence.check(conn)
        await conn.execute(sa.text("CREATE TEMP TABLE written (term bigint)"))
        assert await leases.renew(NAME, "a", term, 30)  # not blocked by the fence
        assert await leases.release(NAME, "a", term)  # nor is a release
        takeover = asyncio.create_task(leases.acquire(NAME, "b", 30))
        await _waiting_on_a_lock(database_url)
        assert not takeover.done()
        await transaction.commit()
    taken = await asyncio.wait_for(takeover, 10)
    assert taken is not None and taken.holder == "b"
    async with store.engine.begin() as conn:
        with pytest.raises(LostLeadership):
            await fence.check(conn)


@pytest.mark.parametrize("db_dialect", [pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_leader_frozen_inside_a_fenced_write_does_not_block_the_takeover_for_long(
    database_url: str, leases: LeaseRepository
) -> None:
    """A leader frozen (SIGSTOP, a VM pause) inside a fenced transaction sends nothing more, so its
    lock on the lease row would hold a takeover back until it thawed; the server ends a session
    idle in a transaction for longer than the store's bound (the service's: a lease), and the
    takeover goes through (found by bench/soak.py)."""
    term, fence = await a_leads(leases)
    async with (
        closing(Store.from_url(database_url, idle_in_transaction_seconds=1.0)) as store,
        store.engine.connect() as conn,
    ):
        await conn.begin()
        await fence.check(conn)  # then "frozen": no further statement
        assert await leases.release(NAME, "a", term)
        taken = await asyncio.wait_for(leases.acquire(NAME, "b", 30), 10)
        assert taken is not None and taken.holder == "b"
        with pytest.raises(DBAPIError):  # thawed: its session was ended meanwhile
            await conn.execute(sa.text("SELECT 1"))


@pytest.mark.parametrize(
    ("armed", "until", "extended", "now", "holds"),
    [
        (False, None, None, 0.0, False),  # never led
        (True, None, None, 1e9, True),  # a tool's lease: certain until disarmed
        (True, 10.0, None, 9.9, True),
        (True, 10.0, None, 10.0, False),  # the renew deadline is over (a freeze, a stall)
        (True, 10.0, 22.0, 15.0, True),  # a renewal moved it on
        (True, 10.0, 22.0, 22.5, False),
    ],
)
def test_the_fence_holds_by_the_process_clock_until_its_certain_end(
    armed: bool, until: float | None, extended: float | None, now: float, holds: bool
) -> None:
    fence = LeaseFence(NAME, "a", monotonic=lambda: now)
    if armed:
        fence.arm(7, until)
    if extended is not None:
        fence.extend(extended)
    assert fence.holds() is holds
    fence.disarm()
    assert not fence.holds()
