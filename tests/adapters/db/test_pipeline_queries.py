"""Store queries of the ingestion pipeline and the usage collector, on SQLite and Postgres."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from inno_notify.adapters.db.repository import Store, SummaryState, TerminalMark
from inno_notify.domain.model import JobStatus
from tests import stored
from tests.adapters.db import records as r


async def test_ingest_writes_jobs_pods_and_terminal_marks_in_one_go(store: Store) -> None:
    jobs = [r.job("a"), r.job("b", status=JobStatus.RUNNING, finished_at=None)]
    pods = [r.pod("pa", job_uid="a"), r.pod("pb1", job_uid="b"), r.pod("pb2", job_uid="b")]
    marks = [TerminalMark("a", r.T0, SummaryState.AWAITING_USAGE, r.T0 + timedelta(minutes=1))]
    assert await stored.ingest(store, jobs, pods, marks) == 1
    assert await stored.ingest(store, jobs, pods, marks) == 0  # a replay records no second end
    assert await stored.summary_state(store, "default", "a") is SummaryState.AWAITING_USAGE
    assert await stored.summary_state(store, "default", "b") is SummaryState.NONE

    by_job = await store.jobs.pods_of_jobs("default", ["a", "b", "missing"])
    assert {k: sorted(p.uid for p in v) for k, v in by_job.items()} == {"a": ["pa"], "b": ["pb1", "pb2"]}
    assert await stored.job_uids_of_pods(store, "default", ["pa", "pb2", "nope"]) == {"pa": "a", "pb2": "b"}
    assert [j.uid for j in await stored.open_jobs(store, "default")] == ["b"]
    assert await stored.open_jobs(store, "default", ["other-namespace"]) == []
    assert await stored.open_jobs(store, "other-cluster") == []


async def test_a_batch_of_terminal_marks_is_recorded_once_when_two_replicas_replay_it(store: Store) -> None:
    await stored.upsert_jobs(store, [r.job(f"j{i}") for i in range(5)])
    due = r.T0 + timedelta(minutes=1)
    states = [SummaryState.SILENT, SummaryState.AWAITING_USAGE] * 2 + [SummaryState.SILENT]
    marks = [TerminalMark(f"j{i}", r.T0, state, due) for i, state in enumerate(states)]

    async def replica() -> int:
        async with store.jobs.ingest_transaction() as tx:
            return await tx.write("default", [], [], marks)

    # Both write the same ends at once: one records all five, the other (after the lock) none.
    assert sorted(await asyncio.gather(replica(), replica())) == [0, 5]
    assert [await stored.summary_state(store, "default", f"j{i}") for i in range(5)] == states
    # Only the jobs awaiting usage got a due time: exactly those are claimed once it has passed.
    claimed = await stored.claim_usage_due(store, due + timedelta(seconds=1), 10)
    assert sorted(job.uid for job in claimed) == ["j1", "j3"]


async def test_ingest_refuses_mixed_clusters(store: Store) -> None:
    with pytest.raises(ValueError, match="one cluster"):
        await stored.ingest(store, [r.job("a"), r.job("b", cluster="other")], [], [])


async def test_family_history_is_newest_first_within_namespace_and_before(store: Store) -> None:
    runs = [r.job(f"run-{i}", family="train-resnet", finished_at=r.T0 + timedelta(hours=i)) for i in range(5)]
    other_ns = r.job("elsewhere", family="train-resnet", namespace="other", finished_at=r.T0)
    unmeasured = r.job("unmeasured", family="train-resnet", finished_at=r.T0 + timedelta(hours=2))
    await stored.upsert_jobs(store, [*runs, other_ns, unmeasured])
    for job in [*runs, other_ns]:
        await stored.save_usage(store, "default", job.uid, r.usage())

    history = await store.usage.family_history(
        "default", "face-research", "train-resnet", before=r.T0 + timedelta(hours=4), limit=3
    )
    assert [job.uid for job, _ in history] == ["run-3", "run-2", "run-1"]
    assert all(usage == r.usage() for _, usage in history)


async def test_complete_summary_is_one_transaction(store: Store) -> None:
    await stored.upsert_jobs(store, [r.job("a")])
    await stored.mark_terminal(store, "default", "a", r.T0)
    notes = [r.notification("k1", job_uid="a"), r.notification("k2", job_uid="a")]
    assert await store.jobs.complete_summary("default", "a", r.usage(), r.recommendations(), notes) == 2
    assert await stored.summary_state(store, "default", "a") is SummaryState.SUMMARIZED
    assert await store.usage.get_usage("default", "a") == r.usage()
    assert tuple(await stored.recommendations_of(store, "default", "a")) == r.recommendations()
    # Planning the same summary again (a collector that crashed after commit) adds nothing.
    assert await store.jobs.complete_summary("default", "a", r.usage(), r.recommendations(), notes) == 0
