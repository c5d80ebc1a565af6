"""The elector on a real database with short timings: one leader at a time, hand-over on stop,
stepping down in time when renewals fail, after being fenced out, and releasing on a crash."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db.leases import Lease, LeaseFence, LeaseRepository, LostLeadership
from inno_notify.service.leadership import Elector, Timings, replica_identity
from inno_notify.telemetry import Telemetry
from tests.waiting import eventually

NAME = "default"
FAST = Timings(
    lease_seconds=1.2, renew_deadline_seconds=0.8, retry_period_seconds=0.1, shutdown_grace_seconds=2.0
)


class CutLeases:
    """Our own lease repository, whose renewals fail once `cut` is set (a replica cut off from the
    database); it records when the last renewal that succeeded started."""

    def __init__(self, inner: LeaseRepository) -> None:
        self.inner = inner
        self.cut = asyncio.Event()
        self.renewed_at: float | None = None

    async def acquire(self, name: str, holder: str, lease_seconds: float) -> Lease | None:
        if self.cut.is_set():
            raise ConnectionError("cut off")
        started = time.monotonic()
        lease = await self.inner.acquire(name, holder, lease_seconds)
        if lease is not None:
            self.renewed_at = started
        return lease

    async def renew(self, name: str, holder: str, term: int, lease_seconds: float) -> bool:
        if self.cut.is_set():
            raise ConnectionError("cut off")
        started = time.monotonic()
        held = await self.inner.renew(name, holder, term, lease_seconds)
        if held:
            self.renewed_at = started
        return held

    async def release(self, name: str, holder: str, term: int) -> bool:
        return await self.inner.release(name, holder, term)


@dataclass
class Replica:
    """An elector whose leader work records the intervals in which it ran, by monotonic clock."""

    holder: str
    leases: CutLeases
    telemetry: Telemetry = field(default_factory=lambda: Telemetry.create(CollectorRegistry()))
    timings: Timings = FAST
    intervals: list[tuple[int, float, float | None]] = field(default_factory=list)
    leading: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    fail_with: BaseException | None = None

    def __post_init__(self) -> None:
        self.fence = LeaseFence(NAME, self.holder)
        self.elector = Elector(self.leases, self.fence, self.timings, self.telemetry)

    async def lead(self, work_stop: asyncio.Event) -> None:
        term = self.fence.term
        assert term is not None
        self.intervals.append((term, time.monotonic(), None))
        self.leading.set()
        try:
            if self.fail_with is not None:
                failure, self.fail_with = self.fail_with, None
                raise failure
            await work_stop.wait()
        finally:
            self.leading.clear()
            self.intervals[-1] = (term, self.intervals[-1][1], time.monotonic())

    def start(self) -> asyncio.Task[None]:
        return asyncio.create_task(self.elector.run(self.stop, self.lead))

    def metric(self, name: str, **labels: str) -> float | None:
        return self.telemetry.registry.get_sample_value(name, labels)


async def test_one_leader_at_a_time_and_a_stop_hands_over_at_once(leases: LeaseRepository) -> None:
    a = Replica("a", CutLeases(leases), timings=Timings(60, 40, 0.1, 2.0))
    b = Replica("b", CutLeases(leases), timings=Timings(60, 40, 0.1, 2.0))
    running_a = a.start()
    await asyncio.wait_for(a.leading.wait(), 10)
    running_b = b.start()
    try:
        assert a.metric("inno_notify_leader") == 1
        assert a.metric("inno_notify_leader_term") == a.fence.term
        # With a 60 s lease, b can only lead this soon because a releases the lease when stopped.
        a.stop.set()
        await asyncio.wait_for(running_a, 10)
        await asyncio.wait_for(b.leading.wait(), 10)
        (term_a, _, a_ended), (term_b, b_began, _) = a.intervals[0], b.intervals[0]
        assert a_ended is not None and a_ended <= b_began and term_b > term_a
        assert a.fence.term is None and a.metric("inno_notify_leader") == 0
        assert a.metric("inno_notify_leader_changes_total", change="released") == 1
        assert b.metric("inno_notify_leader_changes_total", change="acquired") == 1
    finally:
        b.stop.set()
        await asyncio.wait_for(running_b, 10)
    lease = await leases.get(NAME)
    assert lease is not None and lease.holder == b.holder


async def test_a_leader_cut_off_stops_its_work_before_its_lease_can_be_taken(leases: LeaseRepository) -> None:
    a = Replica("a", CutLeases(leases))
    b = Replica("b", CutLeases(leases))
    running_a = a.start()
    await asyncio.wait_for(a.leading.wait(), 10)
    running_b = b.start()
    try:
        a.leases.cut.set()
        await asyncio.wait_for(b.leading.wait(), 10)
        assert a.intervals and a.intervals[0][2] is not None, "a still works while b leads"
        (term_a, _, a_ended), (term_b, b_began, _) = a.intervals[0], b.intervals[0]
        assert a_ended is not None and a.leases.renewed_at is not None
        # a's work ended within its renew deadline plus the loss grace of the last renewal's start,
        # which is before its lease (written after that start) could expire for anyone else.
        limit = a.leases.renewed_at + FAST.renew_deadline_seconds + FAST.loss_grace_seconds + 0.5
        assert a_ended <= limit and a_ended < b_began and term_b > term_a
        assert a.fence.term is None
        assert a.metric("inno_notify_leader_changes_total", change="lost") == 1
        assert a.metric("inno_notify_leader") == 0 and b.metric("inno_notify_leader") == 1
    finally:
        a.stop.set()
        b.stop.set()
        await asyncio.wait_for(asyncio.gather(running_a, running_b), 10)


async def test_leader_work_fenced_out_steps_down_and_campaigns_again(leases: LeaseRepository) -> None:
    a = Replica("a", CutLeases(leases), fail_with=LostLeadership("the term moved"))
    running = a.start()
    try:
        await eventually(
            lambda: len(a.intervals) >= 2 and a.leading.is_set(), within=10, what="a second term"
        )
        (first, _, ended), (second, began, _) = a.intervals[:2]
        assert ended is not None and ended <= began and second > first
        assert a.metric("inno_notify_leader_changes_total", change="lost") == 1
    finally:
        a.stop.set()
        await asyncio.wait_for(running, 10)


async def test_leader_work_that_fails_releases_the_lease_and_is_raised(leases: LeaseRepository) -> None:
    a = Replica("a", CutLeases(leases), timings=Timings(60, 40, 0.1, 2.0), fail_with=RuntimeError("bug"))
    with pytest.raises(RuntimeError, match="bug"):
        await asyncio.wait_for(a.start(), 10)
    # Released, not left to expire in 60 s: another replica takes it at its next try.
    assert await leases.acquire(NAME, "b", 60) is not None


def test_identity_names_the_pod_or_host_and_is_new_in_every_process() -> None:
    cases = [
        (None, {"POD_NAME": "inno-notify-7d9c-x2x"}, "node-1", "inno-notify-7d9c-x2x-42-"),
        (None, {}, "node-1", "node-1-42-"),
        ("replica-a", {"POD_NAME": "ignored"}, "node-1", "replica-a-42-"),
    ]
    for configured, env, host, prefix in cases:
        first, second = (replica_identity(configured, env, host, 42) for _ in range(2))
        assert first.startswith(prefix) and second.startswith(prefix) and first != second


def test_timings_must_nest() -> None:
    for lease, deadline, retry in ((15, 15, 2), (15, 10, 10), (15, 20, 2), (15, 10, 0)):
        with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
            Timings(lease, deadline, retry)
    assert Timings().loss_grace_seconds == 2.5


async def test_a_leader_frozen_past_its_renew_deadline_no_longer_holds_before_its_elector_runs(
    leases: LeaseRepository,
) -> None:
    """What the dispatcher asks before each send (LeaseFence.holds): after a freeze the answer is
    no at once, whichever task the event loop resumes first."""
    now = [100.0]
    fence = LeaseFence(NAME, "a", monotonic=lambda: now[0])
    elector = Elector(leases, fence, FAST, monotonic=lambda: now[0])
    leading, stop = asyncio.Event(), asyncio.Event()

    async def lead(work_stop: asyncio.Event) -> None:
        leading.set()
        await work_stop.wait()

    running = asyncio.create_task(elector.run(stop, lead))
    try:
        await asyncio.wait_for(leading.wait(), 10)
        assert fence.holds()
        now[0] += FAST.renew_deadline_seconds  # SIGSTOP for a renew deadline, then SIGCONT
        assert fence.term is not None, "the elector has not run since"
        assert not fence.holds()
    finally:
        stop.set()
        await asyncio.wait_for(running, 10)
