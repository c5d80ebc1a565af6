"""Usage series through the Store, on both dialects: stored with the summary and the chart drawn
from it, read back whole (with the chart for the send, without it for the page)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from inno_notify.adapters.db import Store, SummaryState
from inno_notify.adapters.db.series import StoredSeries
from inno_notify.adapters.db.usage_round import JobSummary
from inno_notify.domain.model import SeriesLine, SeriesPod, UsageSeries
from tests import stored

from .records import T0, job, notification, usage


def series(**changes: object) -> UsageSeries:
    base = UsageSeries(
        step_seconds=60,
        start=T0 + timedelta(minutes=5),
        gpu_util=(
            SeriesLine("gpu-node-0/0", "train-0", (12.5, None, 99.9)),
            SeriesLine("gpu-node-0/1", "train-0", (0.0, 0.0, 0.0), shared=True),
        ),
        gpu_memory=(SeriesLine("gpu-node-0/0", "train-0", (1024.0**3, 2 * 1024.0**3, None)),),
        memory=(SeriesLine("train-0", "train-0", (5e9, 6e9, 7e9)),),
        pods=(SeriesPod("train-0", "gpu-node-0"), SeriesPod("train-1", None)),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


async def test_series_is_stored_with_the_summary_and_read_back_whole(store: Store) -> None:
    await stored.upsert_jobs(store, [job("a"), job("b")])
    await store.jobs.complete_summary("default", "a", usage(), [], [], usage_series=series())
    await store.jobs.complete_summary("default", "b", usage(), [], [], SummaryState.SUMMARIZED)

    found = await store.usage.series_of("default", ["a", "b", "missing"])

    assert found == {"a": series()}
    assert found["a"].start is not None and found["a"].start.tzinfo is not None


async def test_measuring_again_replaces_the_series(store: Store) -> None:
    await stored.upsert_jobs(store, [job("a")])
    await store.jobs.complete_summary("default", "a", usage(), [], [], usage_series=series())
    unmeasured = UsageSeries(pods=(SeriesPod("train-0", "gpu-node-0"),))
    await store.jobs.complete_summary("default", "a", usage(), [], [], usage_series=unmeasured)
    assert await store.usage.series_of("default", ["a"]) == {"a": unmeasured}


async def test_hostile_labels_and_values_are_stored_on_both_databases(store: Store) -> None:
    await stored.upsert_jobs(store, [job("a")])
    hostile = series(
        gpu_util=(SeriesLine("node\x00/0", "pod\ud800", (float("nan"), float("inf"), 1.0)),),
        pods=(SeriesPod("pod\x00", "node\ud800"),),
    )
    await store.jobs.complete_summary("default", "a", usage(), [], [], usage_series=hostile)
    (line,) = (await store.usage.series_of("default", ["a"]))["a"].gpu_util
    assert line.values == (None, None, 1.0)
    assert "\x00" not in line.label and line.label.startswith("node")
    assert (await store.usage.series_of("default", ["a"]))["a"].pods[0].name.startswith("pod")


# A PNG's bytes as the store must keep them: NUL and every other byte value, and some size.
CHART = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 80


async def test_the_chart_is_stored_with_its_series_and_read_only_for_the_send(store: Store) -> None:
    await stored.upsert_jobs(store, [job("a"), job("b"), job("c")])
    await store.jobs.complete_summary("default", "a", usage(), [], [], usage_series=series(), chart=CHART)
    # The usage round's batch write: a chart where one was drawn, none where drawing failed.
    await store.jobs.complete_summaries(
        "default",
        [
            JobSummary("b", usage(), [], [], usage_series=series(step_seconds=30), chart=CHART[:100]),
            JobSummary("c", usage(), [], [], usage_series=series()),
        ],
    )

    found = await store.usage.charts_of("default", ["a", "b", "c", "missing"])

    assert found == {
        "a": StoredSeries(series(), CHART),
        "b": StoredSeries(series(step_seconds=30), CHART[:100]),
        "c": StoredSeries(series(), None),
    }
    assert isinstance(found["a"].chart, bytes)
    # The page's read leaves the pictures in the database.
    assert await store.usage.series_of("default", ["a", "b"]) == {"a": series(), "b": series(step_seconds=30)}


async def test_a_series_stored_again_takes_its_own_chart_or_none(store: Store) -> None:
    await stored.upsert_jobs(store, [job("a")])
    await store.jobs.complete_summary("default", "a", usage(), [], [], usage_series=series(), chart=CHART)
    # Measured again: the old picture is not the new series', so it goes with it.
    again = series(step_seconds=120)
    await store.jobs.complete_summaries("default", [JobSummary("a", usage(), [], [], usage_series=again)])
    assert await store.usage.charts_of("default", ["a"]) == {"a": StoredSeries(again, None)}


async def test_a_chart_is_released_once_no_message_of_its_job_is_pending(store: Store) -> None:
    await stored.upsert_jobs(store, [job(uid) for uid in ("waiting", "sent", "failed", "silent")])
    for uid in ("waiting", "sent", "failed", "silent"):
        rows = [] if uid == "silent" else [notification(f"n-{uid}", job_uid=uid)]
        await store.jobs.complete_summary(
            "default", uid, usage(), [], rows, usage_series=series(), chart=CHART
        )
    claim = await store.outbox.claim(T0 + timedelta(hours=1), 10, 60)
    ids = {n.job_uid: n.id for m in claim.messages for n in m if n.id is not None}
    await stored.mark_sent(store, claim, [(ids["sent"], "msg-1", T0 + timedelta(hours=1))])
    await stored.mark_failed(store, claim, [(ids["failed"], "400 Bad Request")], T0 + timedelta(hours=1))
    await stored.mark_retry(store, claim, [(ids["waiting"], "429", T0 + timedelta(hours=2))])

    assert await store.usage.release_sent_charts() == 3

    charts = await store.usage.charts_of("default", ["waiting", "sent", "failed", "silent"])
    assert {uid: found.chart for uid, found in charts.items()} == {
        "waiting": CHART,
        "sent": None,
        "failed": None,
        "silent": None,
    }
    # The series stay for the page; nothing is left to release until the last message goes.
    assert all(found.series == series() for found in charts.values())
    assert await store.usage.release_sent_charts() == 0


async def test_charts_are_released_a_bounded_number_at_a_time(store: Store) -> None:
    uids = [f"j{i}" for i in range(5)]
    await stored.upsert_jobs(store, [job(uid) for uid in uids])
    for uid in uids:
        await store.jobs.complete_summary("default", uid, usage(), [], [], usage_series=series(), chart=CHART)
    assert [await store.usage.release_sent_charts(limit=2) for _ in range(4)] == [2, 2, 1, 0]
