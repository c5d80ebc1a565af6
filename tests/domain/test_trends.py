"""Weekly trends in the domain: the weeks a trend spans, the series with every week, quota shares."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from inno_notify.domain.trends import (
    TrendGroup,
    TrendRow,
    build_series,
    team_quota_gpus,
    trend_bounds,
    trend_weeks,
)


@pytest.mark.parametrize(
    ("last", "count", "expected"),
    [
        ("2026-W48", 3, ("2026-W46", "2026-W47", "2026-W48")),
        ("2026-W01", 2, ("2025-W52", "2026-W01")),
        ("2021-W01", 2, ("2020-W53", "2021-W01")),  # 2020 had 53 ISO weeks
        ("2026-W48", 1, ("2026-W48",)),
    ],
)
def test_trend_weeks(last: str, count: int, expected: tuple[str, ...]) -> None:
    assert trend_weeks(last, count) == expected


@pytest.mark.parametrize("count", [0, -1, 105])
def test_trend_weeks_refuses_a_silly_length(count: int) -> None:
    with pytest.raises(ValueError):
        trend_weeks("2026-W48", count)


def test_bounds_follow_the_zone_across_a_dst_change() -> None:
    # Europe/Berlin leaves summer time on Sunday 25 Oct 2026: W43 is 169 hours long.
    bounds = trend_bounds(("2026-W43", "2026-W44"), "Europe/Berlin")
    assert bounds == (
        datetime(2026, 10, 18, 22, tzinfo=UTC),
        datetime(2026, 10, 25, 23, tzinfo=UTC),
        datetime(2026, 11, 1, 23, tzinfo=UTC),
    )


WEEKS = ("2026-W46", "2026-W47", "2026-W48")


def test_series_fill_every_week_and_compute_hours_efficiency_and_share() -> None:
    rows = [
        TrendRow(
            "face",
            1,
            jobs=2,
            gpu_minutes=600.0,
            used_gpu_minutes=240.0,
            used_basis_gpu_minutes=480.0,
            idle_gpu_minutes=60.0,
        ),
        TrendRow("face", 2, jobs=1, jobs_unmeasured=1),
        TrendRow("speech", 2, jobs=1, gpu_minutes=60.0, used_gpu_minutes=None, idle_gpu_minutes=0.0),
    ]
    face, speech = build_series(TrendGroup.TEAM, WEEKS, "UTC", rows, quotas={"face": 4.0})
    assert (face.group, face.quota_gpus, speech.group, speech.quota_gpus) == ("face", 4.0, "speech", None)
    quiet, busy, unmeasured = face.points
    # A week without GPU jobs held nothing: 0, not unknown; it has no efficiency.
    assert (quiet.week, quiet.jobs, quiet.gpu_hours, quiet.efficiency, quiet.quota_share) == (
        "2026-W46",
        0,
        0.0,
        None,
        0.0,
    )
    # Efficiency over the GPU-minutes whose use was measured (480), not all 600.
    assert (busy.gpu_hours, busy.used_gpu_hours, busy.idle_gpu_hours, busy.efficiency) == (
        10.0,
        4.0,
        1.0,
        0.5,
    )
    assert busy.quota_share == pytest.approx(10.0 / (4.0 * 168))
    assert (unmeasured.jobs, unmeasured.jobs_unmeasured, unmeasured.gpu_hours, unmeasured.quota_share) == (
        1,
        1,
        None,
        None,
    )
    assert speech.points[2].efficiency is None and speech.points[2].gpu_hours == 1.0


def test_a_group_asked_for_by_name_has_a_series_without_jobs() -> None:
    [series] = build_series(TrendGroup.CLUSTER, WEEKS, "UTC", [], groups=["default"])
    assert [p.jobs for p in series.points] == [0, 0, 0]


@pytest.mark.parametrize(
    ("namespaces", "expected"),
    [
        (("face-research",), 8.0),
        # Two namespaces reaching one ClusterQueue count it once.
        (("face-research", "face-dev"), 8.0),
        (("face-research", "speech"), 12.0),
        # A ClusterQueue without a GPU resource gives no quota, not 0.
        (("cpu-only",), None),
        (("nowhere",), None),
        ((), None),
    ],
)
def test_team_quota_by_namespace(namespaces: tuple[str, ...], expected: float | None) -> None:
    local = {
        "face-research": [("c", "cq-face")],
        "face-dev": [("c", "cq-face")],
        "speech": [("c", "cq-speech")],
        "cpu-only": [("c", "cq-cpu")],
    }
    nominal = {("c", "cq-face"): 8.0, ("c", "cq-speech"): 4.0, ("c", "cq-cpu"): None}
    assert team_quota_gpus(namespaces, local, nominal) == expected
