"""Several clusters in one database (issue 21): a claimer of one cluster takes only that cluster's
work (usage jobs, workflow summaries, outbox rows, plus the outbox rows of no cluster), and
workflow summary claims carry a token and a term like usage claims: a new leader takes an ended
term's claims at once, and the old claimer's late writes settle nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.jobs import ClaimLost
from inno_notify.adapters.db.leases import LeaseFence, LeaseRepository
from inno_notify.adapters.db.workflow_rows import TerminalWorkflow, WorkflowState
from inno_notify.domain.model import Channel, JobStatus, NotificationKind
from inno_notify.domain.workflows import WorkflowKind, WorkflowRecord
from tests import stored

from .records import T0, job, notification

LEASE = 300.0
CLUSTERS = ("north", "south")


async def awaiting_usage(store: Store) -> None:
    # The same uid in both clusters: the key is (cluster, uid).
    for cluster in CLUSTERS:
        await stored.upsert_jobs(
            store, [job("job-1", cluster=cluster), job(f"only-{cluster}", cluster=cluster)]
        )
        for uid in ("job-1", f"only-{cluster}"):
            await stored.mark_terminal(store, cluster, uid, T0)


async def awaiting_workflows(store: Store, *clusters: str) -> None:
    for cluster in clusters:
        record = WorkflowRecord(
            cluster, "wf-1", WorkflowKind.ARGO, "face-research", "pipeline", status=JobStatus.SUCCEEDED
        )
        async with store.workflows.workflow_transaction() as tx:
            end = TerminalWorkflow("wf-1", T0, WorkflowState.AWAITING, T0)
            assert await tx.write([(record, None)], [], [end], cluster) == 1


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        ("north", [("north", "job-1"), ("north", "only-north")]),
        ("south", [("south", "job-1"), ("south", "only-south")]),
        (None, [("north", "job-1"), ("north", "only-north"), ("south", "job-1"), ("south", "only-south")]),
    ],
)
async def test_usage_claims_of_one_cluster(
    store: Store, cluster: str | None, expected: list[tuple[str, str]]
) -> None:
    await awaiting_usage(store)
    claim = await store.jobs.claim_usage(T0, 10, LEASE, cluster=cluster)
    assert sorted((j.cluster, j.uid) for j in claim.jobs) == expected


async def test_workflow_claims_of_one_cluster(store: Store) -> None:
    await awaiting_workflows(store, *CLUSTERS)
    north = await store.workflows.claim_workflows(T0, 10, LEASE, cluster="north")
    assert [(w.cluster, w.uid) for w in north.workflows] == [("north", "wf-1")]
    south = await store.workflows.claim_workflows(T0, 10, LEASE, cluster="south")
    assert [(w.cluster, w.uid) for w in south.workflows] == [("south", "wf-1")]
    assert (await store.workflows.claim_workflows(T0, 10, LEASE)).workflows == ()  # both leased


async def test_outbox_claims_take_their_cluster_and_rows_of_no_cluster(store: Store) -> None:
    rows = [
        notification("north-summary", cluster="north", job_uid="job-1", recipient="a@example.com"),
        notification("south-summary", cluster="south", job_uid="job-1", recipient="b@example.com"),
        notification(
            "digest", cluster=None, job_uid=None, kind=NotificationKind.DIGEST, recipient="lead@example.com"
        ),
    ]
    assert await store.outbox.enqueue(rows) == 3
    assert await store.outbox.next_due(cluster="south") == T0
    north = await store.outbox.claim(T0, 10, LEASE, cluster="north")
    assert sorted(r.dedup_key for m in north.messages for r in m) == ["digest", "north-summary"]
    # North's rows are leased; what is left for north is due after the lease, south's row is due now.
    assert await store.outbox.next_due(cluster="north") == T0 + timedelta(seconds=LEASE)
    south = await store.outbox.claim(T0, 10, LEASE, cluster="south")
    assert [r.dedup_key for m in south.messages for r in m] == ["south-summary"]


async def test_rows_of_no_cluster_go_to_a_claimer_that_can_send_them(store: Store) -> None:
    """An e-mail digest is left to a cluster's service that has e-mail, not failed by one without."""
    digest = notification("digest", cluster=None, job_uid=None, kind=NotificationKind.DIGEST)
    assert await store.outbox.enqueue([replace(digest, channel=Channel.EMAIL)]) == 1
    assert await store.outbox.next_due(cluster="north", shared_channels={"slack"}) is None
    assert (await store.outbox.claim(T0, 10, LEASE, cluster="north", shared_channels={"slack"})).rows == 0
    claim = await store.outbox.claim(T0, 10, LEASE, cluster="south", shared_channels={"slack", "email"})
    assert claim.rows == 1


async def test_a_new_leader_takes_the_workflow_claims_of_an_ended_term_at_once(
    database_url: str, store: Store, leases: LeaseRepository
) -> None:
    await awaiting_workflows(store, "north", "south")
    fences = {
        name: LeaseFence(cluster, name) for name, cluster in (("a", "north"), ("b", "north"), ("c", "south"))
    }
    stores = {name: Store.from_url(database_url, fence) for name, fence in fences.items()}
    try:

        async def lead(name: str) -> int:
            fence = fences[name]
            lease = await leases.acquire(fence.name, fence.holder, 60)
            assert lease is not None
            fence.arm(lease.term)
            return lease.term

        term_a = await lead("a")
        old = await stores["a"].workflows.claim_workflows(T0, 10, LEASE, cluster="north")
        assert old.term == term_a and [w.uid for w in old.workflows] == ["wf-1"]
        # South's leader neither takes north's claim nor loses its own to north's takeover.
        await lead("c")
        south = await stores["c"].workflows.claim_workflows(T0, 10, LEASE, cluster="south")
        assert [w.cluster for w in south.workflows] == ["south"]

        assert await leases.release("north", "a", term_a)
        term_b = await lead("b")
        new = await stores["b"].workflows.claim_workflows(T0, 10, LEASE, cluster="north")  # no lease ran out
        assert new.term == term_b and [(w.cluster, w.uid) for w in new.workflows] == [("north", "wf-1")]
        # South's term lives: nothing of south's is taken.
        assert (await stores["b"].workflows.claim_workflows(T0, 10, LEASE)).workflows == ()

        # The old claimer's late writes settle nothing (its fence would refuse them too; here the
        # token alone is checked, through an unfenced store).
        assert not await store.workflows.reschedule_workflow("north", "wf-1", T0, claim=old.token)
        with pytest.raises(ClaimLost):
            await store.workflows.complete_workflow(
                "north", "wf-1", [notification("late", cluster="north")], claim=old.token
            )
        assert await store.outbox.delivery_statuses(["late"]) == {}
        later = replace(notification("wf-summary", cluster="north"), kind=NotificationKind.WORKFLOW_SUMMARY)
        assert await stores["b"].workflows.complete_workflow("north", "wf-1", [later], claim=new.token) == 1
        assert await store.workflows.workflow_state("north", "wf-1") is WorkflowState.SUMMARIZED
        assert await store.workflows.workflow_state("south", "wf-1") is WorkflowState.AWAITING
    finally:
        for made in stores.values():
            await made.close()
