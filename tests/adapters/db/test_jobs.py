"""Jobs, pods, usage and recommendations through the Store, on both dialects."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, timedelta

import pytest

from inno_notify.adapters.db import InvalidCursor, JobFilter, Store, SummaryState
from inno_notify.adapters.db.job_details import CLUSTER, UID
from inno_notify.domain.model import JobStatus, Usage
from tests import stored

from .records import PLUS3, T0, job, pod, recommendations, usage


async def test_job_round_trip_keeps_every_field_and_comes_back_in_utc(store: Store) -> None:
    record = job()
    await stored.upsert_jobs(store, [record])

    got = await stored.get_job(store, "default", record.uid)

    assert got == record
    assert got is not None
    times = [got.created_at, got.started_at, got.finished_at, got.first_scheduled_at]
    assert all(t is not None and t.tzinfo is UTC for t in times)
    assert got.kueue is not None and got.kueue.admitted_at is not None
    assert got.kueue.admitted_at.tzinfo is UTC


async def test_minimal_job_round_trip(store: Store) -> None:
    record = job(
        channels=None, kueue=None, created_at=None, started_at=None, finished_at=None, first_scheduled_at=None
    )
    record = replace(
        record, requested=replace(record.requested, cpu_cores=None, memory_bytes=None, extended={})
    )
    await stored.upsert_jobs(store, [record])
    assert await stored.get_job(store, "default", record.uid) == record


async def test_upsert_is_idempotent_and_later_versions_overwrite(store: Store) -> None:
    first = job("a", status=JobStatus.RUNNING, finished_at=None, exit_code=None)
    await stored.upsert_jobs(store, [first, job("b")])
    await stored.upsert_jobs(store, [first])
    assert await stored.get_job(store, "default", "a") == first

    done = replace(first, status=JobStatus.SUCCEEDED, finished_at=T0 + timedelta(hours=2), exit_code=0)
    # The last version of a key in one batch wins.
    await stored.upsert_jobs(store, [first, done])
    assert await stored.get_jobs(store, "default", ["a", "b", "missing"]) == {"a": done, "b": job("b")}


async def test_upsert_keeps_the_store_owned_summary_columns(store: Store) -> None:
    await stored.upsert_jobs(store, [job()])
    assert await stored.mark_terminal(store, "default", "job-1", T0, usage_due_at=T0 + timedelta(minutes=1))
    await stored.upsert_jobs(store, [job()])
    assert await stored.summary_state(store, "default", "job-1") is SummaryState.AWAITING_USAGE


async def test_same_uid_in_two_clusters_are_two_jobs(store: Store) -> None:
    await stored.upsert_jobs(store, [job(), job(cluster="other", name="elsewhere")])
    got = await stored.get_job(store, "other", "job-1")
    assert got is not None and got.name == "elsewhere"
    assert (await stored.get_job(store, "default", "job-1")) == job()


async def test_get_jobs_in_batches_larger_than_one_statement(store: Store) -> None:
    records = [job(f"u{i:05d}") for i in range(2500)]
    await stored.upsert_jobs(store, records)
    got = await stored.get_jobs(store, "default", [r.uid for r in records])
    assert got == {r.uid: r for r in records}


async def test_find_job_returns_the_newest_of_a_name_or_the_one_with_the_uid(store: Store) -> None:
    old = job("old", name="train", created_at=T0)
    new = job("new", name="train", created_at=T0 + timedelta(days=1))
    never_seen_created = job("null", name="train", created_at=None)
    await stored.upsert_jobs(store, [old, new, never_seen_created, job("x", name="other")])

    assert await store.jobs.find_job("face-research", "train") == new
    assert await store.jobs.find_job("face-research", "train", "old") == old
    assert await store.jobs.find_job("face-research", "train", "x") is None
    assert await store.jobs.find_job("elsewhere", "train") is None


async def test_pods_round_trip_in_creation_order(store: Store) -> None:
    later = pod("p2", created_at=T0 + timedelta(minutes=5))
    first = pod("p1")
    unknown = pod("p0", created_at=None, containers=())
    other_job = pod("p3", job_uid="job-2")
    await stored.upsert_pods(store, [later, first, unknown, other_job])
    await stored.upsert_pods(store, [later])

    assert await stored.pods_of(store, "default", "job-1") == [first, later, unknown]
    assert await stored.pods_of(store, "default", "job-2") == [other_job]
    assert await stored.pods_of(store, "default", "none") == []


async def test_pod_update_overwrites(store: Store) -> None:
    await stored.upsert_pods(store, [pod(phase="Running", finished_at=None)])
    await stored.upsert_pods(store, [pod()])
    assert await stored.pods_of(store, "default", "job-1") == [pod()]


async def test_mark_terminal_is_true_exactly_once(store: Store) -> None:
    await stored.upsert_jobs(store, [job()])
    results = [
        await stored.mark_terminal(store, "default", "job-1", T0 + timedelta(seconds=i)) for i in range(3)
    ]
    assert results == [True, False, False]
    assert await stored.mark_terminal(store, "default", "unknown", T0) is False


async def test_silent_terminal_jobs_are_never_claimed_for_usage(store: Store) -> None:
    await stored.upsert_jobs(store, [job("quiet"), job("loud")])
    await stored.mark_terminal(store, "default", "quiet", T0, state=SummaryState.SILENT)
    await stored.mark_terminal(store, "default", "loud", T0)

    claimed = await stored.claim_usage_due(store, T0 + timedelta(days=1), limit=10)
    assert [j.uid for j in claimed] == ["loud"]
    assert await stored.summary_state(store, "default", "quiet") is SummaryState.SILENT


async def test_claim_usage_due_takes_due_jobs_and_leases_them(store: Store) -> None:
    await stored.upsert_jobs(store, [job(f"j{i}") for i in range(4)])
    for i in range(4):
        await stored.mark_terminal(store, "default", f"j{i}", T0, usage_due_at=T0 + timedelta(minutes=i))
    now = T0 + timedelta(minutes=2)

    first = await stored.claim_usage_due(store, now, limit=2, lease_seconds=60)
    second = await stored.claim_usage_due(store, now, limit=10, lease_seconds=60)
    after_lease = await stored.claim_usage_due(store, now + timedelta(seconds=60), limit=10, lease_seconds=60)

    assert sorted(j.uid for j in first) == ["j0", "j1"]
    assert first[0] == job(first[0].uid)
    assert [j.uid for j in second] == ["j2"]
    # Leases of the first two claims ran out, and j3 became due meanwhile.
    assert sorted(j.uid for j in after_lease) == ["j0", "j1", "j2", "j3"]


async def test_reschedule_and_summarize_end_the_wait(store: Store) -> None:
    await stored.upsert_jobs(store, [job()])
    await stored.mark_terminal(store, "default", "job-1", T0)
    assert await store.jobs.reschedule_usage("default", "job-1", T0 + timedelta(hours=1))
    assert await stored.claim_usage_due(store, T0 + timedelta(minutes=59), limit=5) == []
    assert len(await stored.claim_usage_due(store, T0 + timedelta(hours=1), limit=5)) == 1

    assert await stored.summarize(store, "default", "job-1", []) == 0
    assert await stored.summary_state(store, "default", "job-1") is SummaryState.SUMMARIZED
    assert await stored.claim_usage_due(store, T0 + timedelta(days=9), limit=5) == []
    assert not await store.jobs.reschedule_usage("default", "job-1", T0)


async def test_usage_round_trip_and_replace(store: Store) -> None:
    await stored.upsert_jobs(store, [job()])
    assert await store.usage.get_usage("default", "job-1") is None

    await stored.save_usage(store, "default", "job-1", usage())
    assert await store.usage.get_usage("default", "job-1") == usage()

    unmeasured = Usage(missing=usage().missing)
    await stored.save_usage(store, "default", "job-1", unmeasured)
    assert await store.usage.get_usage("default", "job-1") == unmeasured


async def test_recommendations_are_replaced_as_a_set_and_keep_their_order(store: Store) -> None:
    await stored.upsert_jobs(store, [job(), job("job-2")])
    recs = recommendations()
    await stored.save_recommendations(store, "default", "job-1", recs)
    await stored.save_recommendations(store, "default", "job-2", recs[:1])
    assert await stored.recommendations_of(store, "default", "job-1") == list(recs)

    await stored.save_recommendations(store, "default", "job-1", recs[1:])
    assert await stored.recommendations_of(store, "default", "job-1") == list(recs[1:])
    await stored.save_recommendations(store, "default", "job-1", [])
    assert await stored.recommendations_of(store, "default", "job-1") == []
    assert await stored.recommendations_of(store, "default", "job-2") == list(recs[:1])


async def _all_pages(store: Store, filters: JobFilter, limit: int) -> list[list[tuple[str, str]]]:
    pages: list[list[tuple[str, str]]] = []
    cursor: str | None = None
    while True:
        page = await store.jobs.job_page(filters, limit=limit, cursor=cursor)
        pages.append([(row[CLUSTER], row[UID]) for row in page.rows])
        cursor = page.next_cursor
        if cursor is None:
            return pages


async def test_keyset_pagination_over_ties_has_no_duplicates_or_gaps(store: Store) -> None:
    # Many jobs share a finish time (a sweep, and the same uid in another cluster), some only have
    # a creation time, some neither.
    records = [job(f"tie-{i:02d}", finished_at=T0) for i in range(7)]
    records += [job("tie-00", cluster="other", finished_at=T0)]
    records += [job(f"run-{i}", finished_at=None, created_at=T0 + timedelta(minutes=i + 1)) for i in range(3)]
    records += [job(f"old-{i}", finished_at=None, created_at=None) for i in range(2)]
    await stored.upsert_jobs(store, records)
    keys = {(r.cluster, r.uid) for r in records}

    for limit in (1, 2, 3, 5, 12, 13, 50):
        pages = await _all_pages(store, JobFilter(), limit)
        flat = [key for page in pages for key in page]
        assert len(flat) == len(set(flat)) == len(keys), limit
        assert set(flat) == keys
        assert all(len(page) <= limit for page in pages)
        assert all(pages[:-1]), "only the last page may be empty"
        # Newest first: running jobs (created after T0), then the sweep, then the undated ones.
        assert [uid for _, uid in flat[:3]] == ["run-2", "run-1", "run-0"]
        assert {uid for _, uid in flat[3:11]} == {f"tie-{i:02d}" for i in range(7)}
        assert {uid for _, uid in flat[11:]} == {"old-0", "old-1"}


async def test_list_jobs_filters(store: Store) -> None:
    await stored.upsert_jobs(
        store,
        [
            job("a", owner="alice@example.com", team="face", status=JobStatus.FAILED),
            job("b", owner="bob@example.com", team="face", status=JobStatus.SUCCEEDED),
            job("c", owner="bob@example.com", team="voice", namespace="voice", status=JobStatus.SUCCEEDED),
            job("d", finished_at=T0 + timedelta(days=3)),
        ],
    )
    cases = [
        (JobFilter(owner="bob@example.com"), {"b", "c"}),
        (JobFilter(team="face", status=JobStatus.SUCCEEDED), {"b"}),
        (JobFilter(namespace="voice"), {"c"}),
        (JobFilter(since=T0 + timedelta(days=1)), {"d"}),
        (JobFilter(until=T0 + timedelta(days=1)), {"a", "b", "c"}),
        (JobFilter(cluster="other"), set()),
    ]
    for filters, expected in cases:
        page = await store.jobs.job_page(filters, limit=10)
        assert {row[UID] for row in page.rows} == expected, filters
        assert page.next_cursor is None


@pytest.mark.parametrize("cursor", ["", "not-base64!!", "WzEsMl0", "WyJ4IiwiYSIsImIiXQ"])
async def test_list_jobs_rejects_foreign_cursors(store: Store, cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        await store.jobs.job_page(JobFilter(), limit=5, cursor=cursor)


async def test_naive_datetimes_are_refused(store: Store) -> None:
    with pytest.raises(Exception, match="naive datetime"):
        await stored.upsert_jobs(store, [job(created_at=T0.replace(tzinfo=None))])


async def test_times_in_other_zones_are_the_same_instant(store: Store) -> None:
    await stored.upsert_jobs(store, [job(created_at=T0.astimezone(PLUS3))])
    got = await stored.get_job(store, "default", "job-1")
    assert got is not None and got.created_at == T0 and got.created_at.tzinfo is UTC
