"""The outbox: dedup on enqueue, claim with a lease, the delivery outcomes, the log, admin retry."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from inno_notify.adapters.db import InvalidCursor, RecordNotFound, Store, SummaryState
from inno_notify.domain.model import DeliveryStatus, Notification

from .records import T0, job, notification


async def _only(store: Store) -> Notification:
    page, _ = await store.list_notifications(limit=10)
    assert len(page) == 1
    return page[0]


async def test_enqueue_round_trip(store: Store) -> None:
    assert await store.enqueue([notification()]) == 1
    got = await _only(store)
    assert got.id is not None
    # next_attempt_at of a new pending row starts at its due time.
    assert got == replace(notification(), id=got.id, next_attempt_at=notification().due_at)
    assert await store.get_notification(got.id) == got


async def test_enqueue_deduplicates_across_and_within_batches(store: Store) -> None:
    assert await store.enqueue([notification("a"), notification("b"), notification("a")]) == 2
    assert await store.enqueue([notification("b"), notification("c")]) == 1
    assert await store.enqueue([]) == 0
    page, _ = await store.list_notifications(limit=10)
    assert sorted(n.dedup_key for n in page) == ["a", "b", "c"]


async def test_claim_takes_only_due_rows_oldest_first_and_counts_an_attempt(store: Store) -> None:
    await store.enqueue([notification(f"n{i}", due=T0 + timedelta(minutes=i)) for i in range(4)])

    claimed = await store.claim_due(T0 + timedelta(minutes=2), limit=2, lease_seconds=30)

    assert [n.dedup_key for n in claimed] == ["n0", "n1"]
    assert all(n.attempts == 1 for n in claimed)
    assert all(n.next_attempt_at == T0 + timedelta(minutes=2, seconds=30) for n in claimed)


async def test_a_claimed_row_comes_back_when_its_lease_runs_out(store: Store) -> None:
    await store.enqueue([notification()])
    now = T0
    assert len(await store.claim_due(now, limit=10, lease_seconds=60)) == 1
    # Still leased: nobody else gets it.
    assert await store.claim_due(now + timedelta(seconds=59), limit=10, lease_seconds=60) == []
    # The claimer crashed without recording anything: the row is due again, one attempt later.
    again = await store.claim_due(now + timedelta(seconds=60), limit=10, lease_seconds=60)
    assert [n.attempts for n in again] == [2]


async def test_concurrent_claimers_never_get_the_same_row(store: Store) -> None:
    await store.enqueue([notification(f"n{i:03d}") for i in range(60)])
    batches = await asyncio.gather(*(store.claim_due(T0, limit=15, lease_seconds=60) for _ in range(6)))
    ids = [n.id for batch in batches for n in batch]
    assert len(ids) == len(set(ids)) == 60


async def test_sent_rows_are_not_claimed_again(store: Store) -> None:
    await store.enqueue([notification()])
    (claimed,) = await store.claim_due(T0, limit=1, lease_seconds=60)
    assert claimed.id is not None
    assert await store.mark_sent(claimed.id, "1700000000.123", T0 + timedelta(seconds=1))

    got = await store.get_notification(claimed.id)
    assert got is not None
    assert (got.status, got.provider_message_id, got.sent_at) == (
        DeliveryStatus.SENT,
        "1700000000.123",
        T0 + timedelta(seconds=1),
    )
    assert got.next_attempt_at is None
    assert await store.claim_due(T0 + timedelta(days=1), limit=10, lease_seconds=60) == []


async def test_retry_sets_the_next_attempt_and_keeps_the_error(store: Store) -> None:
    await store.enqueue([notification()])
    (claimed,) = await store.claim_due(T0, limit=1, lease_seconds=60)
    assert claimed.id is not None
    assert await store.mark_retry(claimed.id, "429 Retry-After 5", T0 + timedelta(seconds=5))

    assert await store.claim_due(T0 + timedelta(seconds=4), limit=1, lease_seconds=60) == []
    (again,) = await store.claim_due(T0 + timedelta(seconds=5), limit=1, lease_seconds=60)
    assert (again.id, again.attempts, again.last_error) == (claimed.id, 2, "429 Retry-After 5")


async def test_failed_rows_stay_failed_until_an_admin_retries(store: Store) -> None:
    await store.enqueue([notification()])
    (claimed,) = await store.claim_due(T0, limit=1, lease_seconds=60)
    assert claimed.id is not None
    assert await store.mark_failed(claimed.id, "403 Forbidden: bot was blocked", T0)
    # Outcomes only apply to pending rows.
    assert not await store.mark_retry(claimed.id, "late", T0)
    assert not await store.mark_failed(claimed.id, "again", T0)
    failed = await store.get_notification(claimed.id)
    assert failed is not None
    assert (failed.status, failed.last_error) == (DeliveryStatus.FAILED, "403 Forbidden: bot was blocked")
    assert await store.claim_due(T0 + timedelta(days=1), limit=10, lease_seconds=60) == []

    later = T0 + timedelta(hours=2)
    assert await store.retry_notification(claimed.id, later)
    assert not await store.retry_notification(claimed.id, later)  # pending now, nothing to retry
    (retried,) = await store.claim_due(later, limit=1, lease_seconds=60)
    assert (retried.id, retried.status, retried.attempts, retried.due_at) == (
        claimed.id,
        DeliveryStatus.PENDING,
        1,
        later,
    )


async def test_unknown_ids(store: Store) -> None:
    assert await store.get_notification(12345) is None
    assert not await store.mark_sent(12345, None, T0)
    assert not await store.retry_notification(12345, T0)


async def test_delivery_log_pages_newest_first_by_status(store: Store) -> None:
    await store.enqueue([notification(f"n{i:02d}") for i in range(9)])
    claimed = await store.claim_due(T0, limit=3, lease_seconds=60)
    for n in claimed:
        assert n.id is not None
        await store.mark_sent(n.id, None, T0)

    seen: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = await store.list_notifications(DeliveryStatus.PENDING, limit=4, cursor=cursor)
        seen += [n.dedup_key for n in page]
        if cursor is None:
            break
    pending = sorted({f"n{i:02d}" for i in range(9)} - {n.dedup_key for n in claimed}, reverse=True)
    assert seen == pending
    sent, cursor = await store.list_notifications(DeliveryStatus.SENT, limit=10)
    assert (sorted(n.dedup_key for n in sent), cursor) == (sorted(n.dedup_key for n in claimed), None)
    with pytest.raises(InvalidCursor):
        await store.list_notifications(limit=4, cursor="WyJ4Il0")


async def test_summarize_sets_the_state_and_enqueues_in_one_transaction(store: Store) -> None:
    await store.upsert_jobs([job()])
    await store.mark_terminal("default", "job-1", T0)

    assert await store.summarize("default", "job-1", [notification("s1"), notification("s2")]) == 2
    # A replay changes nothing.
    assert await store.summarize("default", "job-1", [notification("s1")]) == 0
    assert await store.summary_state("default", "job-1") is SummaryState.SUMMARIZED


async def test_summarize_of_an_unknown_job_enqueues_nothing(store: Store) -> None:
    with pytest.raises(RecordNotFound):
        await store.summarize("default", "missing", [notification()])
    assert await store.list_notifications() == ([], None)
