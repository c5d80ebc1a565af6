"""A job's chart: its GPUs' utilization over its runtime (idle GPUs flat at zero), GPU memory and RAM.

One layout, two outputs. Messages get a PNG (e-mail inline, a Telegram photo, a Slack upload); the
job page gets the same picture as inline SVG, crisp at any width. The layout draws on a small
``Canvas``: ``PngCanvas`` paints with Pillow (a palette image, C drawing calls, zlib level 1),
``SvgCanvas`` writes elements. Pillow, not matplotlib: every summary carries its own chart, and a
matplotlib figure costs far more CPU per chart (docs/channels.md, Charts, has the measurements),
which would make drawing the dispatcher's bottleneck. The digest's chart (digest_chart.py) paints
on the same ``PngCanvas``, so every chart is drawn one way and the image ships no plotting library.

Sized for a phone: 560 px wide with 15 px text, so a phone showing it 360 px wide still reads
it; the page's SVG has a narrower layout too (NARROW_WIDTH), which a phone shrinks less. Up to 8
GPUs are lines with a legend (mean per GPU, "idle" below the threshold); more are a heat strip, a
row per GPU, darker when busier. A grouped message (a sweep) gets one small panel per job. Labels
come from cluster objects and exporters: the PNG draws them as text, the SVG escapes them. Nothing
here reads a clock, so the same series always gives the same bytes.

The PNGs are drawn in worker processes (service.job_charts): ``render_job_png`` and
``render_group_png`` are top-level functions of picklable arguments (frozen dataclasses of tuples),
and what they cache (fonts, glyphs, lines of text) is per process and thread.
"""

from __future__ import annotations

import io
import math
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Protocol

from PIL import Image, ImageDraw, ImageFont

from inno_notify.adapters.channels import figures
from inno_notify.domain.model import SeriesLine, UsageSeries

WIDTH = 560
TEXT = 15
SMALL = 13
# Lines drawn as lines; beyond, GPUs are rows of a heat strip.
MAX_LINES = 8
# Jobs drawn in a grouped message's chart; the alt text says how many more there were.
MAX_GROUP_PANELS = 8
GIB = 1024**3

# The SVG drawn for a phone's page: narrower, so its text shrinks less on a small screen.
NARROW_WIDTH = 400
_LEFT, _RIGHT = 56, 12
# Okabe-Ito (safe for colour-blind readers), yellow left out (unreadable on white).
LINE_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#999999")
INK, MUTED, GRID, PAPER = "#222222", "#666666", "#DDDDDD", "#FFFFFF"
_HEAT = tuple(
    f"#{r:02X}{g:02X}{b:02X}" for r, g, b in ((240 - 20 * i, 244 - 14 * i, 250 - 8 * i) for i in range(11))
)
_PALETTE = (PAPER, INK, MUTED, GRID, *LINE_COLORS, *_HEAT)


@dataclass(frozen=True, slots=True)
class ChartJob:
    """What one job's chart shows: its reference ("namespace/name"), its series, and when it started
    (the x axis counts from there; the series' first step where unknown)."""

    ref: str
    series: UsageSeries
    started_at: datetime | None = None


class Canvas(Protocol):
    # False for the pass that only measures the height: it skips the lines, which are most of the work.
    draws: bool
    width: int

    def line(self, points: Sequence[tuple[float, float]], color: str, width: int = 2) -> None: ...

    def rect(self, x0: float, y0: float, x1: float, y1: float, color: str) -> None: ...

    def text(
        self, x: float, y: float, text: str, *, size: int = TEXT, color: str = INK, anchor: str = "la"
    ) -> None:
        """``anchor``: horizontal l/m/r, then vertical a (top) or m (middle), as Pillow spells it."""
        ...

    def text_width(self, text: str, size: int = TEXT) -> float: ...


# --- the layout -------------------------------------------------------------------------------------


def chartable(series: UsageSeries | None) -> bool:
    """Whether there is anything to draw: GPU utilization or RAM over more than one point."""
    return (
        series is not None
        and series.measured
        and series.points > 1
        and bool(series.gpu_util or series.memory)
    )


def job_height(job: ChartJob) -> int:
    return _draw_job(_Measure(), job, idle_percent=5.0)


def _draw_job(canvas: Canvas, job: ChartJob, *, idle_percent: float) -> int:
    """Draws the chart of one job top-down; returns the height used."""
    s = job.series
    y: float = 8
    canvas.text(_LEFT, y, ascii_text(job.ref), size=TEXT, anchor="la")
    y += 24
    if s.gpu_util:
        canvas.text(_LEFT, y, "GPU utilization per GPU (%)", size=SMALL, color=MUTED)
        y += 18
        if len(s.gpu_util) <= MAX_LINES:
            y = _line_panel(canvas, s, s.gpu_util, y, 140, 0.0, 100.0, _percent_ticks())
            y = _legend(canvas, s.gpu_util, y + 10, idle_percent)
        else:
            y = _heat_panel(canvas, s, s.gpu_util, y, idle_percent)
    if s.gpu_memory and len(s.gpu_memory) <= MAX_LINES:
        y += 10
        canvas.text(_LEFT, y, "GPU memory per GPU (GiB)", size=SMALL, color=MUTED)
        y += 18
        top = _nice_top(max((v for line in s.gpu_memory for v in line.values if v is not None), default=0.0))
        y = _line_panel(canvas, s, s.gpu_memory, y, 70, 0.0, top, _size_ticks(top))
    if s.memory:
        y += 10
        lines = s.memory if len(s.memory) <= 4 else (_largest(s.memory),)
        caption = "RAM (GiB)" if len(s.memory) == 1 else "RAM per pod (GiB)"
        if len(s.memory) > 4:
            caption = f"RAM of the largest of {len(s.memory)} pods at each time (GiB)"
        canvas.text(_LEFT, y, caption, size=SMALL, color=MUTED)
        y += 18
        top = _nice_top(max((v for line in lines for v in line.values if v is not None), default=0.0))
        y = _line_panel(canvas, s, lines, y, 60, 0.0, top, _size_ticks(top), ram=True)
    y = _time_axis(canvas, job, y_axis=y)
    return math.ceil(y + 8)


def _line_panel(
    canvas: Canvas,
    s: UsageSeries,
    lines: Sequence[SeriesLine],
    top: float,
    height: float,
    low: float,
    high: float,
    ticks: Sequence[tuple[float, str]],
    *,
    ram: bool = False,
) -> float:
    bottom = top + height
    span = (high - low) or 1.0
    # Zero sits a little above the axis, so a GPU idling at 0 % is a line of its own, not the axis.
    pad = 4.0

    scale = (height - pad) / span
    base = bottom - pad + low * scale

    def ypos(value: float) -> float:
        return bottom - pad - (min(high, max(low, value)) - low) * scale

    for value, label in ticks:
        canvas.line([(_LEFT, ypos(value)), (_LEFT + _plot_w(canvas), ypos(value))], GRID, 1)
        canvas.text(_LEFT - 6, ypos(value), label, size=SMALL, color=MUTED, anchor="rm")
    canvas.line([(_LEFT, bottom), (_LEFT + _plot_w(canvas), bottom)], MUTED, 1)
    xstep = _plot_w(canvas) / max(1, s.points)
    for index, line in enumerate(lines if canvas.draws else ()):
        color = LINE_COLORS[0] if ram and len(lines) == 1 else LINE_COLORS[index % len(LINE_COLORS)]
        for run in _runs(line.values):
            # Point i summarises the step ending at start + i × step: drawn at the middle of its step.
            points = [
                (_LEFT + (i + 0.5) * xstep, base - (high if v > high else low if v < low else v) * scale)
                for i, v in run
            ]
            if len(points) == 1:
                x, yy = points[0]
                canvas.rect(x - 2, yy - 2, x + 2, yy + 2, color)
            else:
                canvas.line(points, color, 2)
    return bottom


def _heat_panel(
    canvas: Canvas, s: UsageSeries, lines: Sequence[SeriesLine], top: float, idle: float
) -> float:
    row = max(3, min(12, 240 // len(lines)))
    cell = _plot_w(canvas) / max(1, s.points)
    for r, line in enumerate(lines if canvas.draws else ()):
        y0 = top + r * row
        for i, value in enumerate(line.values):
            if value is None:
                continue
            shade = _HEAT[min(10, max(0, round(value / 10)))]
            canvas.rect(_LEFT + i * cell, y0, _LEFT + (i + 1) * cell, y0 + row - 1, shade)
    bottom = top + len(lines) * row
    idle_count = sum(1 for line in lines if (m := _mean(line)) is not None and m < idle)
    canvas.text(
        _LEFT,
        bottom + 6,
        f"{len(lines)} GPUs, one row each, darker = busier; {idle_count} idle",
        size=SMALL,
        color=MUTED,
    )
    return bottom + 26


def _legend(canvas: Canvas, lines: Sequence[SeriesLine], top: float, idle: float) -> float:
    x, y = float(_LEFT), top
    for index, line in enumerate(lines):
        label = _utilization_text(line, idle, legend=True)
        width = 22 + canvas.text_width(label, SMALL) + 14
        if x + width > canvas.width - _RIGHT and x > _LEFT:
            x, y = float(_LEFT), y + 20
        canvas.rect(x, y + 5, x + 16, y + 9, LINE_COLORS[index % len(LINE_COLORS)])
        canvas.text(x + 22, y, label, size=SMALL, color=INK)
        x += width
    return y + 22


def _time_axis(canvas: Canvas, job: ChartJob, *, y_axis: float) -> float:
    """Ticks under the last panel (at ``y_axis``), counting from the job's start."""
    s = job.series
    if s.start is None:
        return y_axis
    first = s.start.timestamp() - s.step_seconds
    origin = job.started_at.timestamp() if job.started_at is not None else first
    total = first + s.points * s.step_seconds - origin
    tick = _tick_seconds(total)
    t = 0.0
    while t <= total + 1e-6:
        x = _LEFT + (origin + t - first) / (s.points * s.step_seconds) * _plot_w(canvas)
        if _LEFT - 1 <= x <= _LEFT + _plot_w(canvas) + 1:
            canvas.line([(x, y_axis), (x, y_axis + 4)], MUTED, 1)
            canvas.text(x, y_axis + 6, _elapsed(t), size=SMALL, color=MUTED, anchor="ma")
        t += tick
    canvas.text(
        _LEFT + _plot_w(canvas), y_axis + 24, "time since start", size=SMALL, color=MUTED, anchor="ra"
    )
    return y_axis + 44


def _plot_w(canvas: Canvas) -> float:
    return canvas.width - _LEFT - _RIGHT


def _runs(values: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """Stretches without gaps: a step without samples breaks the line instead of bridging it."""
    if None not in values and all(math.isfinite(v) for v in values if v is not None):
        return [[(i, v) for i, v in enumerate(values) if v is not None]] if values else []
    runs: list[list[tuple[int, float]]] = [[]]
    for i, value in enumerate(values):
        if value is None or not math.isfinite(value):
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((i, value))
    return [run for run in runs if run]


def _largest(lines: Sequence[SeriesLine]) -> SeriesLine:
    count = max(len(line.values) for line in lines)
    values: list[float | None] = []
    for i in range(count):
        present = [line.values[i] for line in lines if i < len(line.values) and line.values[i] is not None]
        values.append(max(v for v in present if v is not None) if present else None)
    return SeriesLine("largest pod", "", tuple(values))


def _utilization_text(line: SeriesLine, idle: float, *, legend: bool) -> str:
    """A GPU's mean utilization, whether it idled (mean under `idle` %) and whether the GPU is shared:
    short for the `legend` (drawn in ASCII), else in words for the alt text."""
    mean = _mean(line)
    if legend:
        text = f"{ascii_text(line.label)}: {'n/a' if mean is None else figures.number(mean) + ' %'}"
    else:
        text = f"{line.label} {'not measured' if mean is None else 'mean ' + figures.number(mean) + ' %'}"
    if mean is not None and mean < idle:
        text += " idle" if legend else " (idle)"
    if line.shared:
        text += " (shared GPU)" if legend else " (shared GPU: whole GPU's figures)"
    return text


def _mean(line: SeriesLine) -> float | None:
    present = [v for v in line.values if v is not None]
    return sum(present) / len(present) if present else None


def _percent_ticks() -> list[tuple[float, str]]:
    return [(0.0, "0"), (50.0, "50"), (100.0, "100")]


_TOPS_GIB = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 384, 512, 768, 1024)


def _nice_top(peak: float) -> float:
    """A round upper bound in bytes, in GiB: 1, 2, 4, 8, 12, 16, 24 … (at least 1 GiB)."""
    gib = max(1.0, peak / GIB * 1.05)
    top = next((t for t in _TOPS_GIB if t >= gib), None)
    return float(top if top is not None else 2 ** math.ceil(math.log2(gib))) * GIB


def _size_ticks(top: float) -> list[tuple[float, str]]:
    return [(0.0, "0"), (top / 2, figures.number(top / 2 / GIB)), (top, figures.number(top / GIB))]


_TICKS = (60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)


def _tick_seconds(total: float) -> float:
    found = next((t for t in _TICKS if total / t <= 6), None)
    # Beyond six weeks (a step or a start no job has, but the drawing must end): whole days, six ticks.
    return float(found) if found is not None else math.ceil(total / 6 / 86400) * 86400.0


def _elapsed(seconds: float) -> str:
    minutes = round(seconds / 60)
    hours, minutes = divmod(minutes, 60)
    if hours >= 48:
        return f"{hours // 24} d" + (f" {hours % 24} h" if hours % 24 else "")
    return f"{hours}:{minutes:02d}"


def ascii_text(text: str) -> str:
    """The PNG's font has Latin letters only: anything else becomes "?" (the alt text keeps it)."""
    return "".join(c if " " <= c <= "~" else "?" for c in text)[:80]


# --- a grouped message: one panel per job -------------------------------------------------------


def _draw_group(canvas: Canvas, jobs: Sequence[ChartJob], *, idle_percent: float) -> int:
    y = 8
    shown = list(jobs[:MAX_GROUP_PANELS])
    title = "GPU utilization per GPU (%), one panel per job"
    canvas.text(_LEFT, y, title, size=SMALL, color=MUTED)
    y += 22
    for job in shown:
        s = job.series
        means = [m for line in s.gpu_util if (m := _mean(line)) is not None]
        idle = sum(1 for m in means if m < idle_percent)
        note = f"{len(s.gpu_util)} GPU{'s' if len(s.gpu_util) != 1 else ''}"
        if idle:
            note += f", {idle} idle"
        canvas.text(_LEFT, y, f"{ascii_text(job.ref)}  ({note})", size=SMALL, color=INK)
        y += 18
        lines = s.gpu_util if len(s.gpu_util) <= MAX_LINES else s.gpu_util[:MAX_LINES]
        y = int(_line_panel(canvas, s, lines, y, 56, 0.0, 100.0, [(0.0, "0"), (100.0, "100")])) + 12
    if len(jobs) > len(shown):
        canvas.text(
            _LEFT, y, f"and {len(jobs) - len(shown)} more jobs (see the links)", size=SMALL, color=MUTED
        )
        y += 20
    return y + 4


# --- the two canvases ---------------------------------------------------------------------------


class _Measure:
    """A canvas that draws nothing: the layout run once to learn the height."""

    draws = False

    def __init__(self, width: int = WIDTH) -> None:
        self.width = width

    def line(self, points: Sequence[tuple[float, float]], color: str, width: int = 2) -> None:
        pass

    def rect(self, x0: float, y0: float, x1: float, y1: float, color: str) -> None:
        pass

    def text(
        self, x: float, y: float, text: str, *, size: int = TEXT, color: str = INK, anchor: str = "la"
    ) -> None:
        pass

    def text_width(self, text: str, size: int = TEXT) -> float:
        return sum(_glyph(c, size)[3] for c in text)


_fonts = threading.local()


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    # One font object per thread and size: renders run in a pool, and a font is not shared.
    cache: dict[int, ImageFont.FreeTypeFont | ImageFont.ImageFont] | None = getattr(_fonts, "cache", None)
    if cache is None:
        cache = _fonts.cache = {}
    if size not in cache:
        cache[size] = ImageFont.load_default(size=size)
    return cache[size]


def _glyphs() -> dict[tuple[str, int], tuple[Image.Image | None, int, int, float]]:
    cache: dict[tuple[str, int], tuple[Image.Image | None, int, int, float]] | None = getattr(
        _fonts, "glyphs", None
    )
    if cache is None:
        cache = _fonts.glyphs = {}
    return cache


def _glyph(char: str, size: int) -> tuple[Image.Image | None, int, int, float]:
    """One character as a one-bit mask, its offset from the pen on the baseline, and its advance.

    Cached per thread: a chart's text is a few dozen characters of a small alphabet, and FreeType
    rendering whole strings was most of a chart's cost. Rendered anti-aliased (the font's own
    metrics), then cut to one bit: a palette image has no blending."""
    cache = _glyphs()
    found = cache.get((char, size))
    if found is not None:
        return found
    font = _font(size)
    advance = font.getlength(char)
    x0, y0, x1, y1 = (int(v) for v in font.getbbox(char, anchor="ls"))
    mask: Image.Image | None = None
    if x1 > x0 and y1 > y0:
        grey = Image.new("L", (x1 - x0, y1 - y0), 0)
        ImageDraw.Draw(grey).text((-x0, -y0), char, fill=255, font=font, anchor="ls")
        mask = grey.point(lambda v: 255 if v >= 96 else 0).convert("1")
    if len(cache) < 4096:  # the alphabet is small; hostile labels are cut to ASCII before this
        cache[(char, size)] = (mask, x0, y0, advance)
    return mask, x0, y0, advance


_LINE_CACHE_SIZE = 1024


def _line_of_text(text: str, size: int) -> tuple[Image.Image | None, float, int]:
    """A string as one one-bit mask (its glyphs side by side), its width, and its top relative to
    the baseline. Cached per thread (LRU): tick labels and captions come back on every chart."""
    cache: OrderedDict[tuple[str, int], tuple[Image.Image | None, float, int]] | None = getattr(
        _fonts, "lines", None
    )
    if cache is None:
        cache = _fonts.lines = OrderedDict()
    found = cache.get((text, size))
    if found is not None:
        cache.move_to_end((text, size))
        return found
    glyphs = [_glyph(c, size) for c in text]
    width = sum(g[3] for g in glyphs)
    inked = [g for g in glyphs if g[0] is not None]
    line: tuple[Image.Image | None, float, int] = (None, width, 0)
    if inked:
        top = min(g[2] for g in inked)
        bottom = max(g[2] + g[0].height for g in inked if g[0] is not None)
        mask = Image.new("1", (max(1, math.ceil(width) + 2), bottom - top), 0)
        pen = 0.0
        for glyph, dx, dy, advance in glyphs:
            if glyph is not None:
                mask.paste(1, (round(pen) + dx, dy - top), glyph)
            pen += advance
        line = (mask, width, top)
    cache[(text, size)] = line
    if len(cache) > _LINE_CACHE_SIZE:
        cache.popitem(last=False)
    return line


def _ascent_descent(size: int) -> tuple[int, int]:
    font = _font(size)
    if isinstance(font, ImageFont.FreeTypeFont):
        ascent, descent = font.getmetrics()
        return ascent, descent
    return size, size // 4  # Pillow without FreeType: its small bitmap font


class PngCanvas(_Measure):
    """A palette image: the chart colours plus any ``colors`` a caller draws with (the digest's bars)."""

    draws = True

    def __init__(self, height: int, *, width: int = WIDTH, colors: Sequence[str] = ()) -> None:
        super().__init__(width)
        palette = (*_PALETTE, *(c for c in colors if c not in _PALETTE))
        self.image = Image.new("P", (width, height), 0)
        self.image.putpalette([c for color in palette for c in _rgb(color)])
        self._draw = ImageDraw.Draw(self.image)
        self._index = {color: i for i, color in enumerate(palette)}

    def line(self, points: Sequence[tuple[float, float]], color: str, width: int = 2) -> None:
        self._draw.line(list(points), fill=self._index[color], width=1)
        if width > 1:
            # Two one-pixel lines a pixel apart: a 2 px line at a fraction of Pillow's wide-line cost.
            self._draw.line([(x, y + 1) for x, y in points], fill=self._index[color], width=1)

    def rect(self, x0: float, y0: float, x1: float, y1: float, color: str) -> None:
        self._draw.rectangle((x0, y0, max(x0, x1 - 1), max(y0, y1)), fill=self._index[color])

    def text(
        self, x: float, y: float, text: str, *, size: int = TEXT, color: str = INK, anchor: str = "la"
    ) -> None:
        mask, width, top = _line_of_text(text, size)
        left = x - {"l": 0.0, "m": width / 2, "r": width}[anchor[0]]
        ascent, descent = _ascent_descent(size)
        baseline = y + (ascent if anchor[1] == "a" else (ascent - descent) / 2)
        if mask is not None:
            self.image.paste(self._index[color], (round(left), round(baseline) + top), mask)

    def png(self) -> bytes:
        buffer = io.BytesIO()
        # Fastest zlib level, run-length matching: the picture is runs of one colour.
        self.image.save(buffer, format="PNG", compress_level=1, compress_type=zlib.Z_RLE)
        return buffer.getvalue()


class SvgCanvas(_Measure):
    draws = True

    def __init__(self, width: int = WIDTH) -> None:
        super().__init__(width)
        self.parts: list[str] = []

    def line(self, points: Sequence[tuple[float, float]], color: str, width: int = 2) -> None:
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="{width}"/>'
        )

    def rect(self, x0: float, y0: float, x1: float, y1: float, color: str) -> None:
        width, height = max(0.5, x1 - x0), max(0.5, y1 - y0)
        self.parts.append(
            f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{width:.1f}" height="{height:.1f}" fill="{color}"/>'
        )

    def text(
        self, x: float, y: float, text: str, *, size: int = TEXT, color: str = INK, anchor: str = "la"
    ) -> None:
        horizontal = {"l": "start", "m": "middle", "r": "end"}[anchor[0]]
        baseline = {"a": "hanging", "m": "central"}.get(anchor[1], "hanging")
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{color}" text-anchor="{horizontal}" '
            f'dominant-baseline="{baseline}">{escape(text)}</text>'
        )

    def svg(self, height: int, alt: str, css_class: str = "") -> str:
        body = "".join(self.parts)
        classes = f' class="{css_class}"' if css_class else ""
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {height}" width="100%"'
            f'{classes} role="img" aria-label="{escape(alt)}" font-family="sans-serif">'
            f"<title>{escape(alt)}</title>{body}</svg>"
        )


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


# --- what callers use -------------------------------------------------------------------------


def render_job_png(job: ChartJob, *, idle_percent: float = 5.0) -> bytes | None:
    """The chart of one job as PNG; None when there is nothing to draw."""
    if not chartable(job.series):
        return None
    height = _draw_job(_Measure(), job, idle_percent=idle_percent)
    canvas = PngCanvas(height)
    _draw_job(canvas, job, idle_percent=idle_percent)
    return canvas.png()


def render_job_svg(
    job: ChartJob, *, idle_percent: float = 5.0, width: int = WIDTH, css_class: str = ""
) -> str | None:
    """The same chart as an inline SVG element (the job page), its alt text as title and label;
    `width` lays it out narrower (NARROW_WIDTH for a phone, whose page shrinks it less)."""
    if not chartable(job.series):
        return None
    canvas = SvgCanvas(width)
    height = _draw_job(canvas, job, idle_percent=idle_percent)
    return canvas.svg(height, job_alt_text(job, idle_percent=idle_percent), css_class)


def render_group_png(jobs: Sequence[ChartJob], *, idle_percent: float = 5.0) -> bytes | None:
    """One picture for a grouped message: a small utilization panel per job (the first
    MAX_GROUP_PANELS with GPU series); None when none has one."""
    drawn = [job for job in jobs if chartable(job.series) and job.series.gpu_util]
    if not drawn:
        return None
    height = _draw_group(_Measure(), drawn, idle_percent=idle_percent)
    canvas = PngCanvas(height)
    _draw_group(canvas, drawn, idle_percent=idle_percent)
    return canvas.png()


def job_alt_text(job: ChartJob, *, idle_percent: float = 5.0) -> str:
    """What the chart shows, in words: for screen readers and mail clients that block images."""
    s = job.series
    duration = figures.duration(s.points * s.step_seconds)
    parts = [f"Chart of {job.ref} over {duration}."]
    if s.gpu_util:
        gpus = [_utilization_text(line, idle_percent, legend=False) for line in s.gpu_util]
        parts.append("GPU utilization: " + "; ".join(gpus) + ".")
    peaks = [v for line in s.gpu_memory for v in line.values if v is not None]
    if peaks:
        parts.append(f"Peak GPU memory {figures.size(max(peaks))}.")
    ram = [v for line in s.memory for v in line.values if v is not None]
    if ram:
        parts.append(f"Peak RAM {figures.size(max(ram))}.")
    return " ".join(parts)


def group_alt_text(jobs: Sequence[ChartJob], *, idle_percent: float = 5.0) -> str:
    drawn = [job for job in jobs if chartable(job.series) and job.series.gpu_util]
    parts = []
    for job in drawn[:MAX_GROUP_PANELS]:
        means = [m for line in job.series.gpu_util if (m := _mean(line)) is not None]
        idle = sum(1 for m in means if m < idle_percent)
        mean = f"mean {figures.number(sum(means) / len(means))} %" if means else "not measured"
        parts.append(f"{job.ref}: {len(job.series.gpu_util)} GPUs, {mean}, {idle} idle")
    text = "GPU utilization per job: " + "; ".join(parts) + "."
    if len(drawn) > MAX_GROUP_PANELS:
        text += f" {len(drawn) - MAX_GROUP_PANELS} more jobs not drawn."
    return text
