"""What a dispatcher does to keep few messages between a provider's acceptance and their record,
the ones a crash repeats: started (a new leader's term, a restart), it has one message in flight
at first and its full concurrency only after `ramp_seconds`; and a record lingers for other sends
to share it only while other sends are at a provider."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.outbox_repository import Outcomes

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


@pytest.fixture
def sent_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each write of sent rows carried (the store's own method, counted)."""
    writes: list[int] = []
    real = Outcomes.sent

    async def sent(self: Outcomes, rows: Any) -> int:
        writes.append(len(rows))
        return await real(self, rows)

    monkeypatch.setattr(Outcomes, "sent", sent)
    return writes


async def test_a_record_lingers_for_a_send_still_at_the_provider_and_they_share_it(
    store: Store, sent_writes: list[int]
) -> None:
    await seed(store, people=2)
    clock = FakeClock(T0)

    async def second_finishes_a_little_later(number: int) -> None:
        if number == 1:
            await asyncio.sleep(0.05)  # within the first record's linger

    worker = dispatcher(
        store,
        {"telegram": ScriptedSender(second_finishes_a_little_later)},
        clock,
        concurrency=2,
        record_linger_seconds=0.5,
    )

    assert await asyncio.wait_for(worker.run_once(T0), 10) == 2
    assert sent_writes == [2]
