"""Claims under leadership terms: a new leader takes the outbox rows and usage jobs leased in a term
that ended at once (not after the claim's lease), the old claimer's late writes settle nothing, and
a fenced store writes nothing once its term is over."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest

from inno_notify.adapters.db import Store, SummaryState
from inno_notify.adapters.db.jobs import ClaimLost
from inno_notify.adapters.db.leases import LeaseFence, LeaseRepository, LostLeadership
from inno_notify.domain.model import DeliveryStatus, RejectedObject
from tests import stored

from .records import T0, job, notification, recommendations, usage

LEASE = 300.0  # the claims' own lease: a takeover must not wait for it


@dataclass
class Replica:
    """A store whose leader-only writes are fenced by its own leadership of `cluster`."""

    store: Store
    fence: LeaseFence

    async def lead(self, leases: LeaseRepository) -> int:
        lease = await leases.acquire(self.fence.name, self.fence.holder, 60)
        assert lease is not None, f"{self.fence.holder} could not acquire {self.fence.name}"
        self.fence.arm(lease.term)
        return lease.term


@pytest.fixture
async def replicas(database_url: str) -> AsyncIterator[dict[str, Replica]]:
    made = {
        name: Replica(Store.from_url(database_url, fence), fence)
        for name, fence in (
            ("a", LeaseFence("default", "a")),
            ("b", LeaseFence("default", "b")),
            ("other-cluster", LeaseFence("other", "c")),
        )
    }
    try:
        yield made
    finally:
        for replica in made.values():
            await replica.store.close()


async def test_a_new_leader_takes_the_rows_of_an_ended_term_at_once(
    store: Store, leases: LeaseRepository, replicas: dict[str, Replica]
) -> None:
    a, b = replicas["a"], replicas["b"]
    await store.outbox.enqueue([notification(f"n{i}", recipient=f"u{i}@example.com") for i in range(3)])
    term_a = await a.lead(leases)
    old = await a.store.outbox.claim(T0, 10, LEASE)
    assert old.term == term_a and old.rows == 3

    # While a leads, nobody else takes its rows before their lease, not even another cluster's leader.
    await replicas["other-cluster"].lead(leases)
    assert (await replicas["other-cluster"].store.outbox.claim(T0, 10, LEASE)).rows == 0

    assert await leases.release("default", "a", term_a)
    term_b = await b.lead(leases)
    new = await b.store.outbox.claim(T0, 10, LEASE)  # the same instant: no lease has run out
    assert new.term == term_b > term_a and new.rows == 3

    (first, *_), *_ = old.messages
    assert first.id is not None
    # a's late outcome settles nothing; its fence refuses its next claim.
    assert await stored.mark_sent(a.store, old, [(first.id, "late", T0)]) == 0
    with pytest.raises(LostLeadership):
        await a.store.outbox.claim(T0, 10, LEASE)
    assert await stored.mark_sent(b.store, new, [(first.id, "new", T0)]) == 1
    sent = await store.outbox.get_notification(first.id)
    assert sent is not None and (sent.status, sent.provider_message_id) == (DeliveryStatus.SENT, "new")


async def test_claims_without_a_term_and_rows_waiting_for_a_retry_keep_their_time(
    store: Store, leases: LeaseRepository, replicas: dict[str, Replica]
) -> None:
    """Rows claimed with election off (`inno-notify digest --send`: a process that may be alive)
    wait for their lease; a retried row gave its claim up and waits for its retry time."""
    await store.outbox.enqueue(
        [
            notification("untermed"),
            notification("leased", recipient="bob@example.com"),
            notification("retried", recipient="carol@example.com"),
        ]
    )
    assert (await store.outbox.claim(T0, 1, LEASE)).rows == 1  # "untermed", without a term
    a, b = replicas["a"], replicas["b"]
    term_a = await a.lead(leases)
    claim_a = await a.store.outbox.claim(T0, 10, LEASE)
    by_key = {row.dedup_key: row for message in claim_a.messages for row in message}
    assert sorted(by_key) == ["leased", "retried"]
    retry_at = T0 + timedelta(minutes=2)  # before the claims' lease runs out
    retried = by_key["retried"].id
    assert retried is not None
    assert await stored.mark_retry(a.store, claim_a, [(retried, "429", retry_at)]) == 1

    assert await leases.release("default", "a", term_a)
    await b.lead(leases)
    taken = await b.store.outbox.claim(T0, 10, LEASE)
    assert [row.dedup_key for message in taken.messages for row in message] == ["leased"]
    later = await b.store.outbox.claim(retry_at, 10, LEASE)
    assert [row.dedup_key for message in later.messages for row in message] == ["retried"]


async def test_rows_given_back_are_due_at_once_without_a_counted_attempt(store: Store) -> None:
    await store.outbox.enqueue([notification("n0"), notification("n1", recipient="bob@example.com")])
    claim = await store.outbox.claim(T0, 10, LEASE)
    ids = [row.id for message in claim.messages for row in message if row.id is not None]
    async with store.outbox.recorder(claim) as outcomes:
        assert await outcomes.given_back(ids, T0 + timedelta(seconds=1)) == 2
        assert await outcomes.given_back(ids, T0) == 0  # given back already: not this claim's any more
    again = await store.outbox.claim(T0 + timedelta(seconds=1), 10, LEASE)
    assert again.rows == 2
    assert {row.attempts for message in again.messages for row in message} == {1}


async def _awaiting_usage(store: Store, *uids: str) -> None:
    await stored.upsert_jobs(store, [job(uid) for uid in uids])
    for uid in uids:
        await stored.mark_terminal(store, "default", uid, T0)


async def test_usage_writes_check_the_claim_token(store: Store) -> None:
    """A collector whose usage lease ran out and was taken by another stores nothing: the whole
    summary (usage, advice, state, notifications) is refused; the new claimer's goes through."""
    await _awaiting_usage(store, "job-1")
    first = await store.jobs.claim_usage(T0, 10, lease_seconds=60)
    second = await store.jobs.claim_usage(T0 + timedelta(seconds=60), 10, lease_seconds=60)
    assert [j.uid for j in first.jobs] == [j.uid for j in second.jobs] == ["job-1"]
    assert first.token != second.token

    with pytest.raises(ClaimLost):
        await store.jobs.complete_summary(
            "default", "job-1", usage(), recommendations(), [notification()], claim=first.token
        )
    assert await store.usage.get_usage("default", "job-1") is None
    assert (await store.outbox.list_notifications(limit=5))[0] == []
    assert not await store.jobs.reschedule_usage("default", "job-1", T0, claim=first.token)
    with pytest.raises(ClaimLost):
        await store.jobs.set_summary_state("default", "job-1", SummaryState.SUMMARIZED, claim=first.token)

    assert (
        await store.jobs.complete_summary(
            "default", "job-1", usage(), [], [notification()], claim=second.token
        )
        == 1
    )
    assert await stored.summary_state(store, "default", "job-1") is SummaryState.SUMMARIZED


async def test_a_rescheduled_job_gives_its_claim_up(store: Store) -> None:
    await _awaiting_usage(store, "job-1")
    claim = await store.jobs.claim_usage(T0, 10, lease_seconds=60)
    later = T0 + timedelta(minutes=5)
    assert await store.jobs.reschedule_usage("default", "job-1", later, claim=claim.token)
    assert not await store.jobs.reschedule_usage("default", "job-1", later, claim=claim.token)
    assert (await store.jobs.claim_usage(later - timedelta(seconds=1), 10)).jobs == ()
    assert [j.uid for j in (await store.jobs.claim_usage(later, 10)).jobs] == ["job-1"]


async def test_a_released_claim_hands_only_the_jobs_it_still_holds_to_the_next_claim(store: Store) -> None:
    """A round that could not settle its jobs releases them (issue 32): due again when it says,
    not after the lease; the jobs it settled, and those another claim took, are left alone."""
    for uid in ("job-1", "job-2", "job-3"):
        await _awaiting_usage(store, uid)
    claim = await store.jobs.claim_usage(T0, 2, lease_seconds=LEASE)
    held = [j.uid for j in claim.jobs]
    assert len(held) == 2
    await store.jobs.complete_summary("default", held[0], usage(), [], [notification()], claim=claim.token)
    other = await store.jobs.claim_usage(T0, 10, lease_seconds=LEASE)
    (taken,) = [j.uid for j in other.jobs]

    due = T0 + timedelta(seconds=15)
    assert await store.jobs.release_usage("default", [*held, taken], due, claim=claim.token) == 1
    assert (await store.jobs.claim_usage(due - timedelta(seconds=1), 10)).jobs == ()
    assert [j.uid for j in (await store.jobs.claim_usage(due, 10)).jobs] == [held[1]]
    # Released once: the old claim's writes settle nothing any more.
    with pytest.raises(ClaimLost):
        await store.jobs.set_summary_state("default", held[1], SummaryState.SUMMARIZED, claim=claim.token)
    assert await stored.summary_state(store, "default", held[0]) is SummaryState.SUMMARIZED


async def test_a_new_leader_takes_the_usage_jobs_of_an_ended_term_at_once(
    store: Store, leases: LeaseRepository, replicas: dict[str, Replica]
) -> None:
    a, b = replicas["a"], replicas["b"]
    await _awaiting_usage(store, "job-1", "job-2")
    term_a = await a.lead(leases)
    old = await a.store.jobs.claim_usage(T0, 10, LEASE)
    assert old.term == term_a and len(old.jobs) == 2
    await replicas["other-cluster"].lead(leases)
    assert (await replicas["other-cluster"].store.jobs.claim_usage(T0, 10, LEASE)).jobs == ()
    # b cannot lead while a holds the lease; a's writes pass its fence.
    assert await leases.acquire("default", "b", 60) is None

    assert await leases.release("default", "a", term_a)
    with pytest.raises(LostLeadership):
        await a.store.jobs.complete_summary("default", "job-1", usage(), [], [], claim=old.token)
    await b.lead(leases)
    new = await b.store.jobs.claim_usage(T0, 10, LEASE)
    assert sorted(j.uid for j in new.jobs) == ["job-1", "job-2"]
    a.fence.disarm()  # what the elector does the moment it stops leading
    with pytest.raises(LostLeadership):
        await a.store.jobs.set_summary_state("default", "job-2", SummaryState.SUMMARIZED, claim=old.token)
    assert await b.store.jobs.complete_summary("default", "job-1", usage(), [], [], claim=new.token) == 0
    assert await store.usage.get_usage("default", "job-1") == usage()


async def test_every_leader_only_write_is_fenced(store: Store, replicas: dict[str, Replica]) -> None:
    """A replica that does not lead (its fence disarmed) writes nothing of the leader's."""
    await stored.upsert_jobs(store, [job()])
    fenced = replicas["a"].store
    rejected = RejectedObject(cluster="default", kind="Job", uid="u", reason="malformed")
    writes: dict[str, Callable[[], Awaitable[object]]] = {
        "claim_usage": lambda: fenced.jobs.claim_usage(T0, 10),
        "reschedule_usage": lambda: fenced.jobs.reschedule_usage("default", "job-1", T0),
        "set_summary_state": lambda: fenced.jobs.set_summary_state("default", "job-1", SummaryState.SILENT),
        "complete_summary": lambda: fenced.jobs.complete_summary(
            "default", "job-1", usage(), [], [notification()]
        ),
        "enqueue": lambda: fenced.outbox.enqueue([notification()]),
        "enqueue_nudges": lambda: fenced.live.enqueue_nudges([([notification()], ())]),
        "record_rejected": lambda: fenced.jobs.record_rejected([rejected], T0),
        "outbox.claim": lambda: fenced.outbox.claim(T0, 10, LEASE),
        "set_telegram_offset": lambda: fenced.directory.set_telegram_offset("4242", 5),
    }
    for name, write in writes.items():
        with pytest.raises(LostLeadership):
            await write()
            pytest.fail(f"{name} was not fenced")
    with pytest.raises(LostLeadership):
        async with fenced.jobs.ingest_transaction():
            pytest.fail("an ingest transaction began")
    with pytest.raises(LostLeadership):
        async with fenced.directory.bot_transaction(fenced=True):
            pytest.fail("a polled Telegram update's transaction began")
    # Nothing of it reached the database; reads and the unfenced store are not affected.
    assert (await fenced.outbox.list_notifications(limit=5))[0] == []
    assert await stored.summary_state(fenced, "default", "job-1") is SummaryState.NONE
