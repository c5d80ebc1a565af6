"""What a dispatcher does to keep few messages between a provider's acceptance and their record,
the ones a crash repeats: started (a new leader's term, a restart), it has one message in flight
at first and its full concurrency only after `ramp_seconds`; and a record lingers for other sends
to share it only while other sends are at a provider."""

from __future__ import annotations

import asyncio

import pytest

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.outbox_repository import SentRecord
from inno_notify.service.dispatcher import _SentRecorder

from .support import T0, FakeClock
from .test_dispatcher_faults import PEOPLE, ScriptedSender, dispatcher, seed

CONCURRENCY = 4
SECONDS_PER_SEND = 10.0
FIRST_ROUND = PEOPLE // CONCURRENCY  # rows claimed at the start: in proportion to one seat of four


async def test_a_started_dispatcher_sends_one_at_a_time_until_its_ramp_is_over(store: Store) -> None:
    await seed(store)
    clock = FakeClock(T0)
    stop = asyncio.Event()
    in_flight = 0
    all_seats_taken = asyncio.Event()
    seen: list[tuple[float, int]] = []  # (seconds since the start, messages in flight) at each send

    async def send(number: int) -> None:
        nonlocal in_flight
        in_flight += 1
        seen.append(((clock.now - T0).total_seconds(), in_flight))
        if in_flight == CONCURRENCY:
            all_seats_taken.set()
        if number >= FIRST_ROUND:
            # Past the ramp: each send holds its seat until every seat is taken.
            await asyncio.wait_for(all_seats_taken.wait(), 5)
        in_flight -= 1
        clock.advance(SECONDS_PER_SEND)
        if number == PEOPLE - 1:
            stop.set()

    sender = ScriptedSender(send)
    worker = dispatcher(
        store, {"telegram": sender}, clock, concurrency=CONCURRENCY, ramp_seconds=30.0, batch_size=PEOPLE
    )
    await asyncio.wait_for(worker.run(stop), 10)

    assert len(sender.calls) == PEOPLE, seen
    # The first round (at 0 s): one seat, and a claim in proportion (20 rows × 1/4): five sends, one
    # after the other, until 50 s. The next round is past the ramp: all four seats.
    first_round = [at for at, flying in seen if at < 50]
    assert first_round == [0, 10, 20, 30, 40] and len(first_round) == FIRST_ROUND
    assert all(flying == 1 for at, flying in seen if at < 50)
    assert max(flying for _, flying in seen) == CONCURRENCY, seen


async def test_a_round_of_its_own_has_the_full_concurrency(store: Store) -> None:
    """`run_once` without `run` (the `digest` command, benchmarks): no start, so no ramp."""
    await seed(store)
    clock = FakeClock(T0)
    worker = dispatcher(store, {"telegram": ScriptedSender()}, clock, concurrency=CONCURRENCY)

    assert worker.concurrency_at(T0) == CONCURRENCY
    assert await worker.run_once(T0) == PEOPLE


async def test_with_one_seat_a_sent_message_is_recorded_without_lingering(store: Store) -> None:
    """Nothing else can finish meanwhile to share the record: a linger would only widen the window
    between the provider's acceptance and the record (here a minute: the round would outlast the
    test's bound)."""
    await seed(store, people=2)
    clock = FakeClock(T0)
    worker = dispatcher(
        store, {"telegram": ScriptedSender()}, clock, concurrency=1, record_linger_seconds=60.0
    )

    assert await asyncio.wait_for(worker.run_once(T0), 10) == 2


@pytest.mark.parametrize("others_sending", [True, False])
async def test_a_record_lingers_for_others_to_share_it_only_while_other_sends_are_at_a_provider(
    others_sending: bool,
) -> None:
    """The recorder on its own, its linger's sleep held by the test: a record queued while the
    first lingers shares its write; with no other send at a provider the first is written at once."""
    writes: list[list[SentRecord]] = []
    lingering, release = asyncio.Event(), asyncio.Event()

    async def write(rows: list[SentRecord]) -> int:
        writes.append(rows)
        return len(rows)

    async def linger(seconds: float) -> None:
        lingering.set()
        await release.wait()

    recorder = _SentRecorder(write, 0.005, others_sending=lambda: others_sending, sleep=linger)
    first = asyncio.create_task(recorder.record([1], "m1", T0))
    if others_sending:
        await asyncio.wait_for(lingering.wait(), 10)
        second = asyncio.create_task(recorder.record([2], "m2", T0))
        release.set()
        await asyncio.wait_for(asyncio.gather(first, second), 10)
        assert writes == [[(1, "m1", T0), (2, "m2", T0)]]
    else:
        await asyncio.wait_for(first, 10)
        assert writes == [[(1, "m1", T0)]] and not lingering.is_set()
