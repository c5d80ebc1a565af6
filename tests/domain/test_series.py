"""A job's pods' points on one grid: steps, merging, caps, shared GPUs, hostile values."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from inno_notify.domain.model import GpuUsage, SeriesPod
from inno_notify.domain.series import MAX_POINTS, PodPoints, grid_time, job_series, series_step


@pytest.mark.parametrize(
    ("span", "scrape", "step"),
    [
        (0, 15, 15),
        (600, 15, 15),  # 40 scrapes: every sample its own point
        (1800, 15, 15),  # exactly 120 steps
        (1801, 15, 30),
        (3 * 3600, 15, 120),
        (3 * 86400, 15, 3840),
        (3600, 60, 60),
        (3600, 0.4, 32),  # a sub-second scrape still steps in whole seconds (1, 2, 4, ...)
        (float("inf"), 15, 15),
        (-50, 15, 15),
    ],
)
def test_step_fits_the_runtime_in_at_most_120_points(span: float, scrape: float, step: int) -> None:
    assert series_step(span, scrape) == step
    if math.isfinite(span) and span > 0:
        assert span / step <= MAX_POINTS


def test_pods_share_one_grid_a_gpu_used_again_stays_one_line_and_ram_is_per_pod() -> None:
    first = PodPoints(
        "u1", "job-0", 60, gpu_util={"n/0": {60: 10.0, 120: 20.0}}, memory={60: 100.0, 120: 300.0}
    )
    retry = PodPoints("u2", "job-1", 60, gpu_util={"n/0": {120: 40.0, 180: 50.0}}, memory={180: 200.0})
    series = job_series([first, retry], pods=[SeriesPod("job-0", "node-a"), SeriesPod("job-1", None)])
    assert series.step_seconds == 60
    assert series.start == datetime.fromtimestamp(60, UTC)
    (util,) = series.gpu_util
    assert util.label == "n/0" and util.values == (10.0, 30.0, 50.0)  # both pods at 120: their mean
    assert [(line.label, line.values) for line in series.memory] == [
        ("job-0", (100.0, 300.0, None)),
        ("job-1", (None, None, 200.0)),
    ]
    assert series.pods == (SeriesPod("job-0", "node-a"), SeriesPod("job-1", None))
    assert series.points == 3 and series.measured


def test_a_grid_longer_than_the_cap_is_coarsened() -> None:
    values = {t * 15: float(t % 2) * 100 for t in range(1, 1000)}
    series = job_series([PodPoints("u", "p", 15, gpu_memory={"g": values})], max_points=120)
    assert series.points <= 120
    assert series.step_seconds == 15 * 16
    # GPU memory keeps each step's peak.
    assert all(v == 100.0 for v in series.gpu_memory[0].values if v is not None)


def test_lines_beyond_the_cap_are_merged_into_one() -> None:
    pod = PodPoints("u", "p", 60, gpu_util={f"n/{i:02d}": {60: float(i)} for i in range(10)})
    series = job_series([pod], max_lines=4)
    assert [line.label for line in series.gpu_util] == ["n/00", "n/01", "n/02", "7 more"]
    assert series.gpu_util[-1].values == (sum(range(3, 10)) / 7,)


def test_shared_gpus_are_marked() -> None:
    pod = PodPoints("u", "p", 60, gpu_util={"n/0": {60: 50.0}, "n/1": {60: 5.0}})
    gpus = [GpuUsage("u", "p", "n/0", shared=True), GpuUsage("u", "p", "n/1")]
    series = job_series([pod], gpus=gpus)
    assert [(line.label, line.shared) for line in series.gpu_util] == [("n/0", True), ("n/1", False)]


def test_nothing_measured_keeps_the_pods_for_links() -> None:
    hostile = PodPoints("u", "p", 60, gpu_util={"g": {60: float("nan"), 120: float("inf")}})
    series = job_series([hostile], pods=[SeriesPod("p" * 400, "n")])
    assert not series.measured and series.start is None
    assert len(series.pods[0].name) == 253


def test_grid_time_is_the_end_of_the_step_holding_the_time() -> None:
    assert [grid_time(t, 60) for t in (0, 1, 59.9, 60, 60.1)] == [0, 60, 60, 60, 120]
