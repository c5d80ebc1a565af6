"""The trend line and the Kueue line as people read them: sparklines, the digest's trend figure and
chart panel, and a summary's preemptions, spelt from hand-made records."""

from __future__ import annotations

import pytest

from inno_notify.adapters.channels.digest_chart import chart_alt_text, render_chart
from inno_notify.adapters.channels.digest_figures import sparkline, trend_text
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.domain.digest import DailyRow, Digest, DigestRows, PersonRow, TeamTotals, build_digest
from inno_notify.domain.model import JobRecord, KueueInfo
from inno_notify.domain.trends import TrendGroup, TrendRow, build_series, trend_weeks


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0.0, 1.0, 2.0, 4.0, 8.0], "▁▂▃▅█"),
        ([0.0, 0.0], "▁▁"),
        ([None, 3.0], " █"),
        ([], ""),
    ],
)
def test_sparkline(values: list[float | None], expected: str) -> None:
    assert sparkline(values) == expected


WEEKS = trend_weeks("2026-W48", 4)
ROWS = [
    TrendRow("face", 0, jobs=1, gpu_minutes=600.0, used_gpu_minutes=240.0, idle_gpu_minutes=60.0),
    TrendRow("face", 2, jobs=2, gpu_minutes=1200.0, used_gpu_minutes=900.0, idle_gpu_minutes=0.0),
    TrendRow("face", 3, jobs=2, gpu_minutes=1800.0, used_gpu_minutes=1260.0, idle_gpu_minutes=0.0),
]
[SERIES] = build_series(TrendGroup.TEAM, WEEKS, "UTC", ROWS, quotas={"face": 1.0})


def test_trend_text() -> None:
    assert (
        trend_text(SERIES.points) == "▃▁▆█ GPU-h held, 10 h → 30 h; efficiency 40 % → 70 %; quota share 18 %"
    )


def digest_with_trend() -> Digest:
    rows = DigestRows(
        TeamTotals(jobs=2, gpu_minutes=1800.0, used_gpu_minutes=1260.0, idle_gpu_minutes=0.0),
        people=(PersonRow("alice@example.com", 2, 1800.0, 1260.0, 0.0),),
        daily=(DailyRow("alice@example.com", 1, 1800.0, 1260.0),),
    )
    return build_digest("face", "2026-W48", "UTC", rows, quota_gpus=1.0, trend=SERIES.points)


def test_the_digest_shows_the_trend_in_every_channel_and_the_chart() -> None:
    digest = digest_with_trend()
    renderer = DigestRenderer()
    text = renderer.text(digest)
    assert "Trend (4 weeks)" in text and "▃▁▆█ GPU-h held, 10 h → 30 h" in text
    for channel in ("telegram", "slack", "email"):
        message = renderer.message(channel, digest, None)
        assert "▃▁▆█" in str(message)
    png = render_chart(digest)
    assert png is not None and png.startswith(b"\x89PNG")
    assert "Below, GPU-hours per week: 2026-W45 10.0 held, 4.0 used;" in chart_alt_text(digest)


@pytest.mark.parametrize(
    ("kueue", "expected"),
    [
        (None, ""),
        (KueueInfo(cluster_queue="cq"), ""),
        (
            KueueInfo(evictions=1, preemptions=1, last_eviction_reason="Preempted"),
            "preempted 1× by Kueue (last: Preempted)",
        ),
        (KueueInfo(evictions=3, preemptions=2), "preempted 2× by Kueue, evicted 1× otherwise"),
        (
            KueueInfo(evictions=1, last_eviction_reason="PodsReadyTimeout"),
            "evicted 1× by Kueue (last: PodsReadyTimeout)",
        ),
        # Conditions alone can show a preemption without an eviction count.
        (KueueInfo(preemptions=1), "preempted 1× by Kueue"),
    ],
)
def test_a_summary_names_kueue_preemptions_and_evictions(kueue: KueueInfo | None, expected: str) -> None:
    job = JobRecord(cluster="c", uid="u", namespace="ns", name="train", kueue=kueue)
    assert SummaryView.from_records(job, None).evictions == expected
