"""The digest's pure parts: the digest built from rows (tests/domain/test_weeks.py: its calendar)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from inno_notify.domain.digest import (
    NO_OWNER,
    DailyRow,
    DigestRows,
    PersonRow,
    TeamTotals,
    WasteRow,
    build_digest,
    change,
    digest_to_dict,
    percentile,
)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [
        ([], 0.5, None),
        ([7.0], 0.95, 7.0),
        ([10.0, 20.0], 0.5, 15.0),
        ([0.0, 60.0, 120.0, 600.0], 0.5, 90.0),
        # position 0.95 × 3 = 2.85: 120 + 0.85 × 480
        ([0.0, 60.0, 120.0, 600.0], 0.95, 528.0),
    ],
)
def test_percentile_interpolates_like_percentile_cont(
    values: list[float], fraction: float, expected: float | None
) -> None:
    got = percentile(values, fraction)
    assert got == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(
    ("current", "previous", "delta", "percent"),
    [(120.0, 100.0, 20.0, 20.0), (50.0, 100.0, -50.0, -50.0), (5.0, 0.0, 5.0, None), (None, 3.0, None, None)],
)
def test_change(
    current: float | None, previous: float | None, delta: float | None, percent: float | None
) -> None:
    got = change(current, previous)
    assert (got.previous, got.delta, got.percent) == (previous, delta, percent)


ROWS = DigestRows(
    totals=TeamTotals(
        jobs=4,
        jobs_unmeasured=1,
        succeeded=2,
        failed=2,
        oom=1,
        gpu_minutes=600.0,
        used_gpu_minutes=240.0,
        idle_gpu_minutes=180.0,
        memory_requested_gib_hours=64.0,
        memory_peak_gib_hours=16.0,
    ),
    people=(
        PersonRow("bob@example.com", 1, 120.0, 100.0, 0.0),
        PersonRow("alice@example.com", 2, 480.0, 140.0, 180.0),
        PersonRow(None, 1, None, None, None),
    ),
    daily=(
        DailyRow("alice@example.com", 0, 240.0, 20.0),
        DailyRow("alice@example.com", 6, 240.0, 120.0),
        DailyRow("bob@example.com", 2, 120.0, 100.0),
    ),
    top_waste=tuple(
        WasteRow(
            "c", f"u{i}", "ns", f"job-{i}", "alice@example.com", float(w), "idle_gpu", "warning", f"fix {i}"
        )
        for i, w in enumerate([30, 90, 0, 60, 10, 20, 45])
    ),
    queue_seconds_sorted=(0.0, 60.0, 120.0, 600.0),
)


def test_build_digest_figures() -> None:
    d = build_digest(
        "face",
        "2026-W43",
        "Europe/Berlin",
        ROWS,
        TeamTotals(jobs=3, gpu_minutes=300.0, used_gpu_minutes=150.0, idle_gpu_minutes=240.0),
        quota_gpus=2.0,
    )
    assert not d.no_gpu_jobs
    assert (d.jobs, d.jobs_unmeasured, d.succeeded, d.failed, d.oom) == (4, 1, 2, 2, 1)
    assert (d.gpu_hours, d.used_gpu_hours, d.idle_gpu_hours) == (10.0, 4.0, 3.0)
    assert d.efficiency == pytest.approx(0.4)
    assert (d.queue_p50_seconds, d.queue_p95_seconds) == pytest.approx((90.0, 528.0))
    assert d.week_hours == 169
    assert d.quota_share == pytest.approx(10.0 / (2.0 * 169))
    assert d.change_gpu_hours.delta == 5.0 and d.change_gpu_hours.percent == 100.0
    assert d.change_efficiency.delta == pytest.approx(-0.1)
    assert d.change_idle_gpu_hours.delta == -1.0
    assert [p.owner for p in d.people] == ["alice@example.com", "bob@example.com", NO_OWNER]
    assert d.people[0].efficiency == pytest.approx(140 / 480)
    assert d.people[2].gpu_hours is None and d.people[2].efficiency is None
    assert [w.name for w in d.top_waste] == ["job-1", "job-3", "job-6", "job-0", "job-5"]
    assert d.top_waste[0].waste_gpu_hours == 1.5
    assert d.days[0] == date(2026, 10, 19) and d.days[6] == date(2026, 10, 25)
    assert [s.owner for s in d.daily] == ["alice@example.com", "bob@example.com"]
    assert d.daily[0].held == (4.0, 0, 0, 0, 0, 0, 4.0)
    assert d.daily[0].used[6] == 2.0
    assert d.missing == ()


def test_a_week_without_gpu_jobs_is_a_short_digest_not_an_error() -> None:
    d = build_digest(
        "face", "2026-W48", "UTC", DigestRows(TeamTotals()), TeamTotals(jobs=2, gpu_minutes=60.0)
    )
    assert d.no_gpu_jobs
    assert d.gpu_hours is None and d.efficiency is None and d.people == () and d.top_waste == ()
    assert d.change_gpu_hours.previous == 1.0 and d.change_gpu_hours.delta is None
    assert [m.figure for m in d.missing] == ["quota_share"]


def test_unmeasured_figures_are_none_with_a_reason() -> None:
    rows = DigestRows(TeamTotals(jobs=2, jobs_unmeasured=2, succeeded=2))
    d = build_digest("face", "2026-W48", "UTC", rows, quota_gpus=4.0)
    assert d.gpu_hours is None and d.quota_share is None
    figures = {m.figure for m in d.missing}
    assert {"gpu_hours", "used_gpu_hours", "idle_gpu_hours", "memory_gib_hours", "queue_wait"} <= figures
    assert "quota_share" not in figures


def test_digest_to_dict_is_json_ready() -> None:
    import json

    d = build_digest("face", "2026-W43", "Europe/Berlin", ROWS)
    data = json.loads(json.dumps(digest_to_dict(d)))
    assert data["week_hours"] == 169
    assert data["gpu_hours"] == 10.0
    assert data["jobs"] == {"total": 4, "unmeasured": 1, "succeeded": 2, "failed": 2, "oom": 1}
    assert data["people"][0]["owner"] == "alice@example.com"
    assert len(data["top_waste"]) == 5
    assert data["quota"] == {"gpus": None, "share": None}
    assert data["daily"]["days"][0] == "2026-10-19"
