"""The digest's chart: daily GPU-hours held vs used per person, and the team's weeks, as a PNG.

A lead reads the digest in a mail client or Slack, where no script runs, so the chart is an image.
One small panel per person, days along the bottom, a light bar for GPU-hours held and a dark one
for GPU-hours used: the gap between them is the idle time, visible at a glance. The person panels
share one scale, so the panels compare. Below them, when the team has a trend (domain/trends.py),
one wide panel of the same bars per week. It paints on the job charts' ``PngCanvas``
(job_chart.py): every chart is drawn one way, with Pillow, and nothing here reads a clock, so the
same digest always gives the same bytes.

A budget's bar (spend against the allowance, the forecast marked) is drawn here too: as inline SVG
for the team page and as a line of block characters for chat and plain text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from inno_notify.adapters.channels import figures
from inno_notify.adapters.channels.job_chart import (
    GRID,
    INK,
    MUTED,
    SMALL,
    TEXT,
    WIDTH,
    Canvas,
    PngCanvas,
    ascii_text,
)
from inno_notify.domain.digest import Digest, PersonSeries

# More panels than this stop being readable in a mail; the rest are summed into one "others" panel.
MAX_PANELS = 8
_COLUMNS = 2
HELD = "#b9cde5"
USED = "#1f4e79"
_DAY_LABELS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# Heights of a person's panel and of the trend's bars; the room left of a plot for its scale.
_PANEL_PLOT = 110
_TREND_PLOT = 100
_SCALE_ROOM = 40
_GAP = 12


def panels(digest: Digest, limit: int = MAX_PANELS) -> list[PersonSeries]:
    """The people drawn: the largest consumers, then everyone else summed as "others"."""
    series = list(digest.daily)
    if len(series) <= limit:
        return series
    shown, rest = series[: limit - 1], series[limit - 1 :]
    held = tuple(sum(s.held[d] for s in rest) for d in range(7))
    used: list[float | None] = []
    for d in range(7):
        values = [s.used[d] for s in rest]
        used.append(None if any(v is None for v in values) else sum(v or 0.0 for v in values))
    return [*shown, PersonSeries(f"{len(rest)} others", held, tuple(used))]


def render_chart(digest: Digest) -> bytes | None:
    """The chart as PNG bytes; None for a week without measured GPU-hours (nothing to draw)."""
    drawn = panels(digest)
    if not drawn:
        return None
    canvas = PngCanvas(_draw(None, digest, drawn), colors=(HELD, USED))
    _draw(canvas, digest, drawn)
    return canvas.png()


def _draw(canvas: Canvas | None, digest: Digest, drawn: Sequence[PersonSeries]) -> int:
    """Lays the chart out top-down on ``canvas`` (None: only measures); returns the height used."""
    columns = min(_COLUMNS, len(drawn))
    width = WIDTH // columns
    y = 8
    if canvas is not None:
        title = f"{digest.team} · {digest.week}: GPU-hours held vs used per day"
        canvas.text(WIDTH / 2, y, _fit(canvas, ascii_text(title.replace("·", "-")), TEXT, WIDTH - 16),
                    size=TEXT, anchor="ma")  # fmt: skip
    y += 28
    top = max((max(s.held) for s in drawn), default=0.0) or 1.0
    for row in range(math.ceil(len(drawn) / columns)):
        for column, person in enumerate(drawn[row * columns : (row + 1) * columns]):
            if canvas is not None:
                left = column * width
                canvas.text(left + _SCALE_ROOM, y, _fit(canvas, ascii_text(person.owner), SMALL, width - 52),
                            size=SMALL, color=INK)  # fmt: skip
                _bars(canvas, left, width, y + 20, _PANEL_PLOT, top, person.held, person.used, _DAY_LABELS)
        y += 20 + _PANEL_PLOT + 22 + _GAP
    if _trend_drawn(digest):
        if canvas is not None:
            weeks = digest.trend
            canvas.text(_SCALE_ROOM, y, f"last {len(weeks)} weeks (GPU-hours)", size=SMALL, color=INK)
            held = tuple(p.gpu_hours or 0.0 for p in weeks)
            # A week whose use was not measured has no "used" bar, rather than a false 0.
            used = tuple(p.used_gpu_hours for p in weeks)
            top_week = max(held) or 1.0
            _bars(canvas, 0, WIDTH, y + 20, _TREND_PLOT, top_week, held, used, [p.week[-3:] for p in weeks])
        y += 20 + _TREND_PLOT + 22 + _GAP
    if canvas is not None:
        _legend(canvas, y)
    return y + 24


def _bars(
    canvas: Canvas,
    left: float,
    width: float,
    top: float,
    height: float,
    high: float,
    held: Sequence[float],
    used: Sequence[float | None],
    labels: Sequence[str],
) -> None:
    """One panel: a scale, then per slot a wide light bar (held) and a narrow dark one (used)."""
    x0, x1 = left + _SCALE_ROOM, left + width - 10
    bottom = top + height
    ceiling = high * 1.15

    def ypos(value: float) -> float:
        return bottom - min(value, ceiling) / ceiling * height

    for value in _ticks(ceiling):
        canvas.line([(x0, ypos(value)), (x1, ypos(value))], GRID, 1)
        canvas.text(x0 - 5, ypos(value), figures.number(value), size=SMALL, color=MUTED, anchor="rm")
    step = (x1 - x0) / max(1, len(held))
    label_size = SMALL if step >= 30 else SMALL - 2
    for slot, value in enumerate(held):
        middle = x0 + (slot + 0.5) * step
        if value > 0:
            canvas.rect(middle - 0.4 * step, ypos(value), middle + 0.4 * step, bottom, HELD)
        measured = used[slot]
        # A slot with any job lacking a utilization figure has no "used" bar, rather than a false 0.
        if measured is None:
            if value > 0:
                canvas.text(middle, ypos(value) - 14, "n/a", size=SMALL - 2, color=MUTED, anchor="ma")
        elif measured > 0:
            canvas.rect(middle - 0.225 * step, ypos(measured), middle + 0.225 * step, bottom, USED)
        canvas.text(middle, bottom + 5, labels[slot], size=label_size, color=MUTED, anchor="ma")
    canvas.line([(x0, bottom), (x1, bottom)], MUTED, 1)


def _ticks(ceiling: float) -> list[float]:
    """Round values from 0 up to ``ceiling``: steps of 1, 2 or 5 times a power of ten, 3 to 6 of them."""
    raw = ceiling / 4
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(ceiling / step + 1e-9) + 1)]


def _legend(canvas: Canvas, y: float) -> None:
    x = WIDTH / 2 - 90
    for color, label in ((HELD, "held"), (USED, "used")):
        canvas.rect(x, y + 3, x + 22, y + 13, color)
        canvas.text(x + 28, y, label, size=SMALL, color=INK)
        x += 100


def _fit(canvas: Canvas, text: str, size: int, width: float) -> str:
    """The text cut (with "...") to fit ``width`` pixels: a long address stays in its panel."""
    if canvas.text_width(text, size) <= width:
        return text
    while text and canvas.text_width(text + "...", size) > width:
        text = text[:-1]
    return text + "..."


def _trend_drawn(digest: Digest) -> bool:
    """Whether the weekly trend gets its panel: more than one week, some of it held."""
    return len(digest.trend) > 1 and any(p.gpu_hours for p in digest.trend)


def chart_alt_text(digest: Digest) -> str:
    """What the chart shows, for screen readers and mail clients that block images."""
    drawn = panels(digest)
    if not drawn:
        return f"No GPU jobs for {digest.team} in {digest.week}."
    parts = []
    for person in drawn:
        held = sum(person.held)
        used = None if any(v is None for v in person.used) else sum(v or 0.0 for v in person.used)
        used_text = "used not measured" if used is None else f"{used:.1f} used"
        parts.append(f"{person.owner} {held:.1f} held, {used_text}")
    text = (
        f"Bar chart of daily GPU-hours held vs used per person, {digest.team}, {digest.week}. "
        f"Week totals: {'; '.join(parts)}."
    )
    if _trend_drawn(digest):
        weeks = "; ".join(
            f"{p.week} {p.gpu_hours or 0.0:.1f} held"
            + ("" if p.used_gpu_hours is None else f", {p.used_gpu_hours:.1f} used")
            for p in digest.trend
        )
        text += f" Below, GPU-hours per week: {weeks}."
    return text


# --- a budget's bar: spend against the allowance, the forecast marked ------------------------------

BAR_CELLS = 20
_BAR_WIDTH = 480
_BAR_HEIGHT = 22
_OK, _WARN, _OVER = "#2e7d32", "#ef6c00", "#c62828"


def _bar_color(share: float) -> str:
    return _OVER if share >= 1.0 else _WARN if share >= 0.8 else _OK


def budget_bar_text(spent: float | None, allowance: float, forecast: float | None) -> str:
    """A one-line bar for chat and plain text: "█" spent, "░" left, "┃" where the forecast lands
    (a "▶" after the bar when it lands past the budget). "" where the spend is unknown."""
    if spent is None or allowance <= 0:
        return ""
    filled = min(BAR_CELLS, round(spent / allowance * BAR_CELLS))
    cells = ["█"] * filled + ["░"] * (BAR_CELLS - filled)
    tail = ""
    if forecast is not None:
        at = round(forecast / allowance * BAR_CELLS)
        if at > BAR_CELLS:
            tail = "▶"
        elif filled <= at - 1 < BAR_CELLS:
            cells[at - 1] = "┃"
    return "[" + "".join(cells) + "]" + tail


def budget_bar_svg(spent: float | None, allowance: float, forecast: float | None, label: str) -> str:
    """The page's bar as inline SVG: spend filled (green, orange from 80 %, red from 100 %), the
    budget a solid line, the forecast a dashed one; the scale reaches the largest of the three, so
    an overrun shows past the budget's line. ``label`` is the bar's accessible name (escaped here,
    as the markup goes to the page unescaped)."""
    top = max(allowance, spent or 0.0, forecast or 0.0)

    def x(value: float) -> float:
        return round(value / top * (_BAR_WIDTH - 2) + 1, 1)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="budget-bar" role="img" width="{_BAR_WIDTH}"'
        f' height="{_BAR_HEIGHT + 4}" viewBox="0 0 {_BAR_WIDTH} {_BAR_HEIGHT + 4}"'
        f' style="max-width:100%;height:auto" aria-label="{html.escape(label)}">',
        f"<title>{html.escape(label)}</title>",
        f'<rect x="1" y="2" width="{_BAR_WIDTH - 2}" height="{_BAR_HEIGHT}" fill="#eeeeee"/>',
    ]
    if spent is not None and spent > 0:
        color = _bar_color(spent / allowance)
        parts.append(
            f'<rect class="spent" x="1" y="2" width="{x(spent) - 1}" height="{_BAR_HEIGHT}" fill="{color}"/>'
        )
    parts.append(
        f'<line class="budget" x1="{x(allowance)}" y1="0" x2="{x(allowance)}" y2="{_BAR_HEIGHT + 4}"'
        ' stroke="#222222" stroke-width="2"/>'
    )
    if forecast is not None:
        parts.append(
            f'<line class="forecast" x1="{x(forecast)}" y1="0" x2="{x(forecast)}" y2="{_BAR_HEIGHT + 4}"'
            ' stroke="#1f4e79" stroke-width="2" stroke-dasharray="4 3"/>'
        )
    parts.append("</svg>")
    return "".join(parts)
