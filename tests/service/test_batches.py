"""The shared batch mechanism on its own: halving keeps order, a refused write is split down to the
one unit at fault, only transient failures are retried, LostLeadership ends the write."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import exc as sa_exc

from inno_notify.adapters.db.leases import LostLeadership
from inno_notify.service.batches import BatchQueue, Piece, PieceWriter, PipelineStats


@pytest.mark.parametrize(
    ("units", "closing", "first", "second"),
    [
        ([1, 2, 3], ["r"], ([1, 2], []), ([3], ["r"])),
        ([1], ["r"], ([1], []), ([], ["r"])),
        ([1, 2], [], ([1], []), ([2], [])),
        ([], ["r", "s"], ([], ["r"]), ([], ["s"])),
    ],
)
def test_halves_keep_the_order_and_the_closing_last(
    units: list[int],
    closing: list[str],
    first: tuple[list[int], list[str]],
    second: tuple[list[int], list[str]],
) -> None:
    a, b = Piece(units, closing).halves()
    assert (a.units, a.closing) == first
    assert (b.units, b.closing) == second


class _Data(Exception):
    """A failure due to the data (not transient)."""


async def test_a_refused_write_is_split_down_to_the_one_unit_and_the_rest_commit() -> None:
    committed: list[int] = []
    refused: list[tuple[list[int], list[str]]] = []
    stats = PipelineStats()
    writer: PieceWriter[int, str] = PieceWriter(lambda p, e: refused.append((p.units, p.closing)), stats)

    async def transaction(piece: Piece[int, str]) -> None:
        if 3 in piece.units:
            raise _Data("refused")
        committed.extend(piece.units)

    await writer.write(Piece([1, 2, 3, 4, 5], ["relist"]), transaction)
    assert committed == [1, 2, 4, 5]
    assert refused == [([3], [])]
    assert stats.splits > 0 and stats.write_errors == 0


async def test_transient_failures_are_retried_with_backoff_and_leadership_is_not_split() -> None:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    stats = PipelineStats()
    writer: PieceWriter[int, str] = PieceWriter(lambda p, e: None, stats, retry_cap_seconds=0.3, sleep=sleep)
    failures = [sa_exc.OperationalError("INSERT", {}, ConnectionResetError("lost"))] * 3

    async def flaky(piece: Piece[int, str]) -> None:
        if failures:
            raise failures.pop()

    await writer.write(Piece([1, 2]), flaky)
    assert sleeps == [0.1, 0.2, 0.3]
    assert (stats.write_errors, stats.retried_writes, stats.splits) == (3, 1, 0)

    async def deposed(piece: Piece[int, str]) -> None:
        raise LostLeadership("term over")

    with pytest.raises(LostLeadership):
        await writer.write(Piece([1, 2]), deposed)
    assert stats.splits == 0


async def test_without_retries_a_transient_failure_splits_and_a_refusal_may_stop_the_write() -> None:
    """The usage round's way: no backoff (its store tried a fresh connection already); the writer
    splits whatever fails, and the refusal callback ends the write by raising."""
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    lost = sa_exc.OperationalError("INSERT", {}, ConnectionResetError("lost"))
    committed: list[int] = []
    refused: list[int] = []

    def refuse(piece: Piece[int, str], exc: Exception) -> None:
        refused.extend(piece.units)
        if len(refused) == 2:
            raise exc

    async def down_for_odd_units(piece: Piece[int, str]) -> None:
        if any(unit % 2 for unit in piece.units):
            raise lost
        committed.extend(piece.units)

    stats = PipelineStats()
    writer: PieceWriter[int, str] = PieceWriter(refuse, stats, retry_transient=False, sleep=sleep)
    with pytest.raises(sa_exc.OperationalError):
        await writer.write(Piece([1, 2, 3, 4, 5]), down_for_odd_units)
    # Halves [1, 2, 3] and [4, 5], then [1, 2] and [3], … : 1 refused, 2 written, 3 refused: stop.
    assert (refused, committed, sleeps) == ([1, 3], [2], [])
    assert stats.write_errors == 0 and stats.splits > 0


async def test_the_queue_batches_and_a_failing_batch_is_dropped_not_the_consumer() -> None:
    queue: BatchQueue[int] = BatchQueue("test", queue_max=10, batch_max=3)
    batches: list[list[int]] = []

    async def apply(items: list[int]) -> None:
        batches.append(items)
        if 4 in items:
            raise RuntimeError("a bug")

    for item in range(1, 7):
        await queue.put(item)
    stop = asyncio.Event()
    stop.set()  # finish what is queued, then return
    stats = PipelineStats()
    await queue.run(apply, stats, stop)
    await queue.drained()
    assert batches == [[1, 2, 3], [4, 5, 6]]
    assert stats.dropped_batches == 1
