"""A usage round's batched reads and write (adapters.db.usage_round) against the per-job queries
they replace: the same runs, the same rows, in a fixed number of statements."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
import sqlalchemy as sa

from inno_notify.adapters.db import jobs as job_queries
from inno_notify.adapters.db.jobs import ClaimLost, SummaryState
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.db.usage_round import JobSummary, RunsAsked, runs_before
from inno_notify.domain.adoption import judge
from inno_notify.domain.model import UsageSeries
from tests import stored
from tests.adapters.db import records
from tests.adapters.db.records import T0

CLUSTER = "default"


async def _family(store: Store) -> None:
    """Six measured runs of train-resnet an hour apart (run-0 the newest), one unmeasured run, one
    run of another family and one in another namespace, all with pods; run-1 has advice."""
    runs = [records.job(f"run-{i}", finished_at=T0 - timedelta(hours=i)) for i in range(6)]
    others = [
        records.job("unmeasured", finished_at=T0 - timedelta(minutes=30)),
        records.job("other-family", family="train-bert", finished_at=T0 - timedelta(minutes=20)),
        records.job("other-namespace", namespace="nlp", finished_at=T0 - timedelta(minutes=10)),
    ]
    await stored.upsert_jobs(store, [*runs, *others])
    await stored.upsert_pods(store, [records.pod(f"pod-{j.uid}", j.uid) for j in [*runs, *others]])
    for run in [*runs, *others[1:]]:
        await stored.save_usage(store, CLUSTER, run.uid, records.usage())
    await stored.save_recommendations(store, CLUSTER, "run-1", records.recommendations())


async def test_each_ask_gets_what_family_history_gives_it(store: Store) -> None:
    await _family(store)
    asks = [
        RunsAsked("face-research", "train-resnet", T0 + timedelta(minutes=1), 3),
        RunsAsked("face-research", "train-resnet", T0 - timedelta(minutes=90), 10),
        RunsAsked("face-research", "train-resnet", T0 + timedelta(minutes=1), 1, exclude_uid="run-0"),
        RunsAsked("face-research", "train-bert", T0, 5),
        RunsAsked("face-research", "no-such-family", T0, 5),
    ]
    async with store.read() as conn:
        found = await runs_before(conn, CLUSTER, asks)
        expected = [
            await job_queries.family_history(conn, CLUSTER, a.namespace, a.family, a.before, a.limit)
            for a in asks[:2]
        ]
    assert [[run.uid for run, _ in runs] for runs in found] == [
        ["run-0", "run-1", "run-2"],
        ["run-2", "run-3", "run-4", "run-5"],
        ["run-1"],
        ["other-family"],
        [],
    ]
    assert found[:2] == expected  # the same records and usage, not only the same uids


async def test_reading_a_round_brings_pods_and_advice_where_asked(store: Store) -> None:
    await _family(store)
    asks = [
        RunsAsked("face-research", "train-resnet", T0 - timedelta(minutes=30), 2, with_pods=True),
        RunsAsked("face-research", "train-resnet", T0 - timedelta(minutes=30), 1, "x", with_advice=True),
    ]
    await stored.mark_terminal(store, CLUSTER, "unmeasured", T0)
    reads = await store.jobs.read_round(CLUSTER, ["unmeasured"], asks)
    assert [[run.uid for run, _ in runs] for runs in reads.runs] == [["run-1", "run-2"], ["run-1"]]
    assert sorted(reads.pods) == ["run-1", "run-2", "unmeasured"]
    assert reads.pods["run-1"] == await stored.pods_of(store, CLUSTER, "run-1")
    assert reads.states == {"unmeasured": SummaryState.AWAITING_USAGE}
    assert reads.advice == {"run-1": list(records.recommendations())}


def _summaries(uids: list[str]) -> list[JobSummary]:
    judged = judge(records.job(), None, [], T0)
    assert judged is not None
    return [
        JobSummary(
            uid,
            records.usage(),
            list(records.recommendations()) if i % 2 == 0 else [],
            [replace(records.notification(), dedup_key=f"summary/{uid}", job_uid=uid)],
            usage_series=UsageSeries(step_seconds=60, start=T0),
            adoption=replace(judged, job_uid=uid),
        )
        for i, uid in enumerate(uids)
    ]


async def _claimed(store: Store, uids: list[str]) -> str:
    await stored.upsert_jobs(store, [records.job(uid, finished_at=T0) for uid in uids])
    for uid in uids:
        await stored.mark_terminal(store, CLUSTER, uid, T0)
    claim = await store.jobs.claim_usage(T0 + timedelta(minutes=5), 100)
    assert sorted(j.uid for j in claim.jobs) == sorted(uids)
    return claim.token


async def test_summaries_are_stored_as_one_by_one_in_a_fixed_number_of_statements(store: Store) -> None:
    uids = [f"job-{i}" for i in range(7)]
    token = await _claimed(store, uids)
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    sa.event.listen(store.engine.sync_engine, "before_cursor_execute", seen)
    try:
        added = await store.jobs.complete_summaries(CLUSTER, _summaries(uids), claim=token)
    finally:
        sa.event.remove(store.engine.sync_engine, "before_cursor_execute", seen)
    assert added == dict.fromkeys(uids, 1)
    assert len(statements) <= 10  # one per table, whatever the number of jobs

    for i, uid in enumerate(uids):
        assert await stored.summary_state(store, CLUSTER, uid) is SummaryState.SUMMARIZED
        assert await store.usage.get_usage(CLUSTER, uid) == records.usage()
        expected = list(records.recommendations()) if i % 2 == 0 else []
        assert await stored.recommendations_of(store, CLUSTER, uid) == expected
        assert (await store.usage.series_of(CLUSTER, [uid]))[uid].step_seconds == 60
        adoption = await store.adoption.get(CLUSTER, uid)
        assert adoption is not None and adoption.job_uid == uid
    # The job's copies of its figures and of its advice's largest waste, for the trend and the digest.
    for uid, advice in (("job-0", records.recommendations()), ("job-1", ())):
        copied = job_queries.usage_copies(records.usage(), advice)
        async with store.read() as conn:
            query = sa.text(f"SELECT {', '.join(copied)} FROM jobs WHERE uid = :uid")
            row = (await conn.execute(query, {"uid": uid})).one()
        assert dict(zip(copied, row, strict=True)) == copied
        assert copied["memory_peak_bytes"] is not None
        assert copied["top_waste_gpu_minutes"] == (120.0 if advice else None)


async def test_a_claim_lost_on_one_job_stores_nothing_of_the_batch(store: Store) -> None:
    uids = ["a", "b", "c"]
    token = await _claimed(store, uids)
    await store.jobs.release_usage(CLUSTER, ["b"], T0, claim=token)
    with pytest.raises(ClaimLost, match="default/b"):
        await store.jobs.complete_summaries(CLUSTER, _summaries(uids), claim=token)
    for uid in uids:
        assert await stored.summary_state(store, CLUSTER, uid) is SummaryState.AWAITING_USAGE
        assert await store.usage.get_usage(CLUSTER, uid) is None
    # The others alone are stored; written again, their notifications are not new.
    others = [s for s in _summaries(uids) if s.uid != "b"]
    assert await store.jobs.complete_summaries(CLUSTER, others, claim=token) == {"a": 1, "c": 1}
    assert await store.jobs.complete_summaries(CLUSTER, others) == {"a": 0, "c": 0}
