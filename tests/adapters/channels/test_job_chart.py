"""The job chart: what it draws (idle GPUs flat at zero, a line per GPU, RAM), as PNG and SVG, and
its alt text; hostile labels stay text; nothing to draw gives no picture."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta

import pytest
from PIL import Image

from inno_notify.adapters.channels.job_chart import (
    LINE_COLORS,
    MAX_GROUP_PANELS,
    WIDTH,
    ChartJob,
    chartable,
    group_alt_text,
    job_alt_text,
    render_group_png,
    render_job_png,
    render_job_svg,
)
from inno_notify.domain.model import SeriesLine, UsageSeries

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
GIB = 1024**3
N = 60


def series(*utils: tuple[float | None, ...], labels: tuple[str, ...] | None = None) -> UsageSeries:
    names = labels or tuple(f"node-a/{i}" for i in range(len(utils)))
    return UsageSeries(
        step_seconds=120,
        start=T0 + timedelta(minutes=2),
        gpu_util=tuple(SeriesLine(name, "pod-0", values) for name, values in zip(names, utils, strict=True)),
        gpu_memory=tuple(SeriesLine(name, "pod-0", (10.0 * GIB,) * N) for name in names),
        memory=(SeriesLine("pod-0", "pod-0", tuple(20.0 * GIB + i * 1e8 for i in range(N))),),
    )


BUSY = tuple(70.0 + (i % 7) for i in range(N))
IDLE = (0.0,) * N


def polylines(svg: str) -> dict[str, list[list[tuple[float, float]]]]:
    found: dict[str, list[list[tuple[float, float]]]] = {}
    for points, color in re.findall(r'<polyline points="([^"]+)" fill="none" stroke="([^"]+)"', svg):
        coords = [(float(x), float(y)) for x, y in (p.split(",") for p in points.split())]
        found.setdefault(color, []).append(coords)
    return found


def test_idle_gpus_are_flat_lines_at_zero_above_the_axis() -> None:
    job = ChartJob("face/train-7", series(BUSY, BUSY, IDLE, IDLE), T0)
    svg = render_job_svg(job)
    assert svg is not None
    lines = polylines(svg)
    # The first panel's line of each GPU, by its colour.
    util = {i: lines[LINE_COLORS[i]][0] for i in range(4)}
    zero_y = {y for _, y in util[2]}
    assert len(zero_y) == 1 and {y for _, y in util[3]} == zero_y  # flat, both at the same height
    busy_y = [y for _, y in util[0]]
    assert max(busy_y) < min(zero_y)  # busy GPUs above them (SVG's y grows downwards)
    # Zero is drawn 4 px above the panel's axis, not on it.
    axis = re.findall(r'<polyline points="56.0,([0-9.]+) 548.0,\1" fill="none" stroke="#666666"', svg)
    assert any(float(y) - next(iter(zero_y)) == pytest.approx(4.0) for y in axis)
    assert len(util[0]) == N  # a point per grid step


def test_png_is_a_palette_image_560_wide_and_the_same_series_gives_the_same_bytes() -> None:
    job = ChartJob("face/train-7", series(BUSY, IDLE), T0)
    png = render_job_png(job)
    assert png is not None and png == render_job_png(job)
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.width == WIDTH and 300 < image.height < 700
    # The idle GPU's colour is drawn (its flat line), as is the busy one's.
    colors = {color for _, color in image.convert("RGB").getcolors(maxcolors=1 << 16) or []}
    assert {(0, 0x72, 0xB2), (0xE6, 0x9F, 0x00)} <= colors


def test_alt_text_names_each_gpu_its_mean_and_the_idle_ones() -> None:
    job = ChartJob("face/train-7", series(BUSY, IDLE, (None,) * N), T0)
    alt = job_alt_text(job)
    assert alt.startswith("Chart of face/train-7 over 2 h.")
    assert (
        "node-a/0 mean 72.9 %" in alt and "node-a/1 mean 0 % (idle)" in alt and "node-a/2 not measured" in alt
    )
    assert "Peak GPU memory 10 GiB." in alt and "Peak RAM 25.5 GiB." in alt


def test_a_gap_in_the_samples_breaks_the_line() -> None:
    gappy = BUSY[:20] + (None,) * 10 + BUSY[30:]
    svg = render_job_svg(ChartJob("a/b", series(gappy)))
    assert svg is not None
    assert [len(run) for run in polylines(svg)[LINE_COLORS[0]][:2]] == [20, 30]


def test_many_gpus_are_a_heat_strip_and_the_legend_counts_idle_ones() -> None:
    utils = [BUSY] * 10 + [IDLE] * 6
    svg = render_job_svg(ChartJob("a/big", series(*utils)))
    assert svg is not None
    assert "16 GPUs, one row each, darker = busier; 6 idle" in svg
    assert LINE_COLORS[0] not in {
        c for c in polylines(svg) if polylines(svg)[c] and c == LINE_COLORS[0] and False
    }


def test_hostile_labels_are_text_in_the_svg_and_ascii_in_the_png() -> None:
    label = '<script>alert(1)</script>&"x'
    job = ChartJob("ns/<img src=x onerror=alert(1)>", series(BUSY, labels=(label,)))
    svg = render_job_svg(job)
    assert svg is not None
    assert "<script>" not in svg and "<img" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;" in svg
    assert render_job_png(ChartJob("ns/名前", series(BUSY, labels=("ノード/0",)))) is not None


@pytest.mark.parametrize(
    "value",
    [
        None,
        UsageSeries(),
        UsageSeries(step_seconds=60, start=T0, gpu_util=(SeriesLine("g", "p", (50.0,)),)),  # one point
        UsageSeries(step_seconds=60, start=None, gpu_util=(SeriesLine("g", "p", (50.0, 60.0)),)),
    ],
)
def test_nothing_to_draw_gives_no_picture(value: UsageSeries | None) -> None:
    assert not chartable(value)
    if value is not None:
        assert (
            render_job_png(ChartJob("a/b", value)) is None and render_job_svg(ChartJob("a/b", value)) is None
        )


def test_a_sweep_is_one_picture_with_a_panel_per_job_up_to_the_cap() -> None:
    jobs = [ChartJob(f"face/sweep-{i}", series(BUSY, IDLE)) for i in range(MAX_GROUP_PANELS + 3)]
    png = render_group_png(jobs)
    assert png is not None
    height = Image.open(io.BytesIO(png)).height
    assert height > MAX_GROUP_PANELS * 80
    alt = group_alt_text(jobs)
    assert alt.count("2 GPUs") == MAX_GROUP_PANELS and "3 more jobs not drawn." in alt
    assert "face/sweep-0: 2 GPUs, mean 36.5 %, 1 idle" in alt
    assert render_group_png([ChartJob("a/b", UsageSeries())]) is None
