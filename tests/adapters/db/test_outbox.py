"""The outbox: dedup on enqueue, the dispatcher's claim (lease, token, companions, figures), the
outcomes that only the claim's holder can record, the log, admin retry."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial

import pytest
import sqlalchemy as sa

from inno_notify.adapters.db import InvalidCursor, RecordNotFound, Store, SummaryState
from inno_notify.adapters.db.tables import outbox
from inno_notify.domain.delivery import plan_batch
from inno_notify.domain.model import DeliveryStatus, Notification
from tests import stored

from .records import T0, job, notification


async def _only(store: Store) -> Notification:
    page, _ = await store.outbox.list_notifications(limit=10)
    assert len(page) == 1
    return page[0]


async def test_enqueue_round_trip(store: Store) -> None:
    assert await store.outbox.enqueue([notification()]) == 1
    got = await _only(store)
    assert got.id is not None
    # next_attempt_at of a new pending row starts at its due time.
    assert got == replace(notification(), id=got.id, next_attempt_at=notification().due_at)
    assert await store.outbox.get_notification(got.id) == got


async def test_enqueue_deduplicates_across_and_within_batches(store: Store) -> None:
    assert await store.outbox.enqueue([notification("a"), notification("b"), notification("a")]) == 2
    assert await store.outbox.enqueue([notification("b"), notification("c")]) == 1
    assert await store.outbox.enqueue([]) == 0
    page, _ = await store.outbox.list_notifications(limit=10)
    assert sorted(n.dedup_key for n in page) == ["a", "b", "c"]


async def _claim(store: Store, now: datetime, limit: int = 10, lease: float = 60) -> list[Notification]:
    """The rows one claim leases, every due row a message of its own."""
    claim = await store.outbox.claim(now, limit, lease)
    return [row for message in claim.messages for row in message]


async def test_claim_takes_only_due_rows_oldest_first_and_counts_an_attempt(store: Store) -> None:
    await store.outbox.enqueue([notification(f"n{i}", due=T0 + timedelta(minutes=i)) for i in range(4)])

    claim = await store.outbox.claim(T0 + timedelta(minutes=2), limit=2, lease_seconds=30)

    assert [[n.dedup_key for n in message] for message in claim.messages] == [["n0"], ["n1"]]
    claimed = [n for message in claim.messages for n in message]
    assert all(n.attempts == 1 for n in claimed)
    assert claim.lease_until == T0 + timedelta(minutes=2, seconds=30)
    assert all(n.next_attempt_at == claim.lease_until for n in claimed)
    assert claim.rows == 2 and len(claim.token) == 32 and claim.term is None


async def test_a_claimed_row_comes_back_when_its_lease_runs_out(store: Store) -> None:
    await store.outbox.enqueue([notification()])
    now = T0
    assert len(await _claim(store, now)) == 1
    # Still leased: nobody else gets it.
    assert await _claim(store, now + timedelta(seconds=59)) == []
    # The claimer crashed without recording anything: the row is due again, one attempt later.
    again = await _claim(store, now + timedelta(seconds=60))
    assert [n.attempts for n in again] == [2]


async def test_concurrent_claimers_never_get_the_same_row(store: Store) -> None:
    await store.outbox.enqueue([notification(f"n{i:03d}", recipient=f"u{i}@example.com") for i in range(60)])
    claims = await asyncio.gather(*(store.outbox.claim(T0, 15, 60) for _ in range(6)))
    ids = [n.id for claim in claims for message in claim.messages for n in message]
    assert len(ids) == len(set(ids)) == 60
    assert len({claim.token for claim in claims}) == 6


async def test_concurrent_claimers_with_the_dispatchers_planner_share_no_row(store: Store) -> None:
    # Five recipients, each with due rows and rows still waiting that may ride along (companions):
    # the planner groups them, and still no row is in two claims.
    due = [notification(f"d{i:02d}", recipient=f"u{i % 5}@example.com", group_key=None) for i in range(40)]
    waiting = [
        notification(
            f"w{i:02d}", due=T0 + timedelta(seconds=20), recipient=f"u{i % 5}@example.com", group_key=None
        )
        for i in range(20)
    ]
    await store.outbox.enqueue([*due, *waiting])
    planner = partial(plan_batch, now=T0, group_wait_seconds=30.0)

    claims = await asyncio.gather(*(store.outbox.claim(T0, 8, 60, planner) for _ in range(6)))

    ids = [n.id for claim in claims for message in claim.messages for n in message]
    assert len(ids) == len(set(ids))
    assert {n.dedup_key for claim in claims for m in claim.messages for n in m} >= {n.dedup_key for n in due}


async def test_the_claim_reads_the_figures_of_its_jobs(store: Store) -> None:
    await stored.upsert_jobs(store, [job()])
    await store.outbox.enqueue(
        [notification("mine"), notification("ghost", job_uid="job-gone", recipient="b@x.org")]
    )

    claim = await store.outbox.claim(T0, 10, 60)

    assert set(claim.summaries) == {("default", "job-1")}
    record, figures, advice = claim.summaries[("default", "job-1")]
    assert (record.uid, figures, advice) == ("job-1", None, [])


async def test_a_claim_stores_its_token_and_term(store: Store) -> None:
    await store.outbox.enqueue([notification()])
    claim = await store.outbox.claim(T0, 10, 60, term=7)
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.select(outbox.c.claim_token, outbox.c.claim_term))).one()
    assert tuple(row) == (claim.token, 7)


async def test_sent_rows_are_not_claimed_again(store: Store) -> None:
    await store.outbox.enqueue([notification()])
    claim = await store.outbox.claim(T0, 1, 60)
    ((claimed,),) = claim.messages
    assert claimed.id is not None
    assert (
        await stored.mark_sent(store, claim, [(claimed.id, "1700000000.123", T0 + timedelta(seconds=1))]) == 1
    )

    got = await store.outbox.get_notification(claimed.id)
    assert got is not None
    assert (got.status, got.provider_message_id, got.sent_at) == (
        DeliveryStatus.SENT,
        "1700000000.123",
        T0 + timedelta(seconds=1),
    )
    assert got.next_attempt_at is None
    assert await _claim(store, T0 + timedelta(days=1)) == []


async def test_a_late_outcome_of_an_expired_claim_changes_nothing(store: Store) -> None:
    """The first claimer's lease ran out and a second claimer took the row: the first one's
    sent, retry and failed marks all miss; the second one's mark settles it."""
    await store.outbox.enqueue([notification()])
    first = await store.outbox.claim(T0, 1, 60)
    second = await store.outbox.claim(T0 + timedelta(seconds=60), 1, 60)
    ((row,),) = second.messages
    assert row.id is not None and first.token != second.token

    late = T0 + timedelta(seconds=61)
    assert await stored.mark_sent(store, first, [(row.id, "old", late)]) == 0
    assert await stored.mark_retry(store, first, [(row.id, "old", late)]) == 0
    assert await stored.mark_failed(store, first, [(row.id, "old")], late) == 0
    unchanged = await store.outbox.get_notification(row.id)
    assert unchanged is not None
    assert (unchanged.status, unchanged.last_error, unchanged.attempts) == (DeliveryStatus.PENDING, None, 2)

    assert await stored.mark_sent(store, second, [(row.id, "new", late)]) == 1
    sent = await store.outbox.get_notification(row.id)
    assert sent is not None and (sent.status, sent.provider_message_id) == (DeliveryStatus.SENT, "new")


async def test_one_recorder_settles_many_rows_and_counts_them(store: Store) -> None:
    await store.outbox.enqueue([notification(f"n{i}", recipient=f"u{i}@example.com") for i in range(5)])
    claim = await store.outbox.claim(T0, 10, 60)
    ids = [n.id for m in claim.messages for n in m if n.id is not None]
    async with store.outbox.recorder(claim) as outcomes:
        assert await outcomes.sent([(ids[0], "a", T0), (ids[1], None, T0)]) == 2
        assert await outcomes.sent([(ids[0], "again", T0)]) == 0  # already sent
        assert await outcomes.retry([(ids[2], "429", T0 + timedelta(seconds=5))]) == 1
        assert await outcomes.failed([(ids[3], "403"), (ids[4], "550")], T0) == 2
        assert await outcomes.sent([]) == 0
    by_id = {n.id: n for n in (await store.outbox.list_notifications(limit=10))[0]}
    assert [by_id[i].status for i in ids] == [
        DeliveryStatus.SENT,
        DeliveryStatus.SENT,
        DeliveryStatus.PENDING,
        DeliveryStatus.FAILED,
        DeliveryStatus.FAILED,
    ]
    assert (by_id[ids[0]].provider_message_id, by_id[ids[3]].last_error) == ("a", "403")


async def test_retry_sets_the_next_attempt_keeps_the_error_and_gives_the_claim_up(store: Store) -> None:
    await store.outbox.enqueue([notification()])
    claim = await store.outbox.claim(T0, 1, 60)
    ((claimed,),) = claim.messages
    assert claimed.id is not None
    assert await stored.mark_retry(
        store, claim, [(claimed.id, "429 Retry-After 5", T0 + timedelta(seconds=5))]
    )
    # Released: a second outcome of the same claim no longer applies.
    assert await stored.mark_sent(store, claim, [(claimed.id, "late", T0)]) == 0

    assert await _claim(store, T0 + timedelta(seconds=4)) == []
    (again,) = await _claim(store, T0 + timedelta(seconds=5))
    assert (again.id, again.attempts, again.last_error) == (claimed.id, 2, "429 Retry-After 5")


async def test_failed_rows_stay_failed_until_an_admin_retries(store: Store) -> None:
    await store.outbox.enqueue([notification()])
    claim = await store.outbox.claim(T0, 1, 60)
    ((claimed,),) = claim.messages
    assert claimed.id is not None
    assert await stored.mark_failed(store, claim, [(claimed.id, "403 Forbidden: bot was blocked")], T0) == 1
    # Outcomes only apply to pending rows.
    assert await stored.mark_retry(store, claim, [(claimed.id, "late", T0)]) == 0
    assert await stored.mark_failed(store, claim, [(claimed.id, "again")], T0) == 0
    failed = await store.outbox.get_notification(claimed.id)
    assert failed is not None
    assert (failed.status, failed.last_error) == (DeliveryStatus.FAILED, "403 Forbidden: bot was blocked")
    assert await _claim(store, T0 + timedelta(days=1)) == []

    later = T0 + timedelta(hours=2)
    assert await store.outbox.retry_notification(claimed.id, later)
    assert not await store.outbox.retry_notification(claimed.id, later)  # pending now, nothing to retry
    (retried,) = await _claim(store, later)
    assert (retried.id, retried.status, retried.attempts, retried.due_at) == (
        claimed.id,
        DeliveryStatus.PENDING,
        1,
        later,
    )


async def test_unknown_ids(store: Store) -> None:
    assert await store.outbox.get_notification(12345) is None
    assert await stored.mark_sent(store, "no-such-claim", [(12345, None, T0)]) == 0
    assert not await store.outbox.retry_notification(12345, T0)


async def test_companions_ride_along_and_waiting_groups_are_deferred(store: Store) -> None:
    due = notification("due", group_key=None)
    rider = notification("rider", due=T0 + timedelta(seconds=10), group_key=None)
    # A group whose newest member is due later is not ready: its due member waits for that time.
    first = notification("first", group_key="sweep")
    last = notification("last", due=T0 + timedelta(seconds=25), group_key="sweep")
    elsewhere = notification(
        "elsewhere", recipient="bob@example.com", due=T0 + timedelta(seconds=10), group_key=None
    )
    await store.outbox.enqueue([due, rider, first, last, elsewhere])
    planner = partial(plan_batch, now=T0, group_wait_seconds=30.0)

    claim = await store.outbox.claim(T0, 10, 60, planner)

    assert [[n.dedup_key for n in m] for m in claim.messages] == [["due", "rider"]]
    assert [(n.dedup_key, at) for n, at in claim.deferred] == [("first", T0 + timedelta(seconds=25))]
    rows = {n.dedup_key: n for n in (await store.outbox.list_notifications(limit=10))[0]}
    assert rows["rider"].attempts == 1 and rows["rider"].next_attempt_at == claim.lease_until
    # Deferred is not attempted; a row of another recipient is no companion.
    assert (rows["first"].attempts, rows["first"].next_attempt_at) == (0, T0 + timedelta(seconds=25))
    assert (rows["last"].attempts, rows["elsewhere"].attempts) == (0, 0)


async def test_next_due_is_the_earliest_pending_time(store: Store) -> None:
    assert await store.outbox.next_due() is None
    await store.outbox.enqueue([notification("a", due=T0 + timedelta(minutes=5)), notification("b", due=T0)])
    assert await store.outbox.next_due() == T0
    await _claim(store, T0, lease=60)
    assert await store.outbox.next_due() == T0 + timedelta(seconds=60)
    assert await store.outbox.next_due(kinds={"digest"}) is None


async def test_delivery_log_pages_newest_first_by_status(store: Store) -> None:
    await store.outbox.enqueue([notification(f"n{i:02d}") for i in range(9)])
    claim = await store.outbox.claim(T0, 3, 60)
    claimed = [n for m in claim.messages for n in m]
    await stored.mark_sent(store, claim, [(n.id, None, T0) for n in claimed if n.id is not None])

    seen: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = await store.outbox.list_notifications(DeliveryStatus.PENDING, limit=4, cursor=cursor)
        seen += [n.dedup_key for n in page]
        if cursor is None:
            break
    pending = sorted({f"n{i:02d}" for i in range(9)} - {n.dedup_key for n in claimed}, reverse=True)
    assert seen == pending
    sent, cursor = await store.outbox.list_notifications(DeliveryStatus.SENT, limit=10)
    assert (sorted(n.dedup_key for n in sent), cursor) == (sorted(n.dedup_key for n in claimed), None)
    with pytest.raises(InvalidCursor):
        await store.outbox.list_notifications(limit=4, cursor="WyJ4Il0")


async def test_summarize_sets_the_state_and_enqueues_in_one_transaction(store: Store) -> None:
    await stored.upsert_jobs(store, [job()])
    await stored.mark_terminal(store, "default", "job-1", T0)

    assert await stored.summarize(store, "default", "job-1", [notification("s1"), notification("s2")]) == 2
    # A replay changes nothing.
    assert await stored.summarize(store, "default", "job-1", [notification("s1")]) == 0
    assert await stored.summary_state(store, "default", "job-1") is SummaryState.SUMMARIZED


async def test_summarize_of_an_unknown_job_enqueues_nothing(store: Store) -> None:
    with pytest.raises(RecordNotFound):
        await stored.summarize(store, "default", "missing", [notification()])
    assert await store.outbox.list_notifications() == ([], None)
