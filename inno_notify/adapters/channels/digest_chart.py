"""The digest's chart: daily GPU-hours held vs used per person, and the team's weeks, as a PNG.

A lead reads the digest in a mail client or Slack, where no script runs, so the chart is an image
(matplotlib, Agg backend, no display needed). One small panel per person, days along the bottom,
a light bar for GPU-hours held and a dark one for GPU-hours used: the gap between them is the idle
time, visible at a glance. Below them, when the team has a trend (domain/trends.py), one wide panel
of the same bars per week. The figure object is built directly (not through pyplot) so rendering
keeps no global state and is safe from any thread. The PNG carries no timestamp, so the same
digest always gives the same bytes.
"""

from __future__ import annotations

import io
import math

from matplotlib.axes import Axes

# The Agg canvas is attached to the figure directly: no pyplot, so no backend switch is needed.
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from inno_notify.domain.digest import Digest, PersonSeries

# More panels than this stop being readable in a mail; the rest are summed into one "others" panel.
MAX_PANELS = 8
_COLUMNS = 2
_HELD = "#b9cde5"
_USED = "#1f4e79"
_DAY_LABELS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


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


def render_chart(digest: Digest, *, dpi: int = 100) -> bytes | None:
    """The chart as PNG bytes; None for a week without measured GPU-hours (nothing to draw)."""
    drawn = panels(digest)
    if not drawn:
        return None
    rows = math.ceil(len(drawn) / _COLUMNS)
    columns = min(_COLUMNS, len(drawn))
    trend = _trend_drawn(digest)
    figure = Figure(
        figsize=(4.2 * columns, 2.2 * rows + 0.6 + (1.6 if trend else 0.0)), dpi=dpi, layout="constrained"
    )
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(rows + (1 if trend else 0), columns)
    axes: list[Axes] = []
    for index in range(rows * columns):
        share = axes[0] if axes else None
        axes.append(figure.add_subplot(grid[index // columns, index % columns], sharey=share))
    top = max((max(s.held) for s in drawn), default=0.0) or 1.0
    days = range(7)
    for index, ax in enumerate(axes):
        if index >= len(drawn):
            ax.set_visible(False)
            continue
        person = drawn[index]
        ax.bar(days, person.held, width=0.8, color=_HELD, label="held")
        # A day with any job lacking a utilization figure has no "used" bar, rather than a false 0.
        used = [v if v is not None else 0.0 for v in person.used]
        ax.bar(days, used, width=0.45, color=_USED, label="used")
        for d, v in enumerate(person.used):
            if v is None and person.held[d] > 0:
                ax.text(d, person.held[d], "n/a", ha="center", va="bottom", fontsize=7)
        ax.set_title(person.owner, fontsize=9, loc="left")
        ax.set_xticks(list(days), _DAY_LABELS, fontsize=8)
        ax.set_ylim(0, top * 1.15)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", linewidth=0.3)
        if index % _COLUMNS == 0:
            ax.set_ylabel("GPU-hours", fontsize=8)
    if trend:
        _draw_trend(figure.add_subplot(grid[rows, :]), digest)
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    figure.suptitle(f"{digest.team} · {digest.week}: GPU-hours held vs used per day", fontsize=10)
    buffer = io.BytesIO()
    # No Software/creation metadata: identical digests give identical bytes.
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _trend_drawn(digest: Digest) -> bool:
    """Whether the weekly trend gets its panel: more than one week, some of it held."""
    return len(digest.trend) > 1 and any(p.gpu_hours for p in digest.trend)


def _draw_trend(ax: Axes, digest: Digest) -> None:
    """The team's weeks: GPU-hours held (light) and used (dark), the newest week on the right."""
    weeks = range(len(digest.trend))
    held = [p.gpu_hours or 0.0 for p in digest.trend]
    # A week whose use was not measured has no "used" bar, rather than a false 0.
    used = [p.used_gpu_hours or 0.0 for p in digest.trend]
    ax.bar(weeks, held, width=0.8, color=_HELD)
    ax.bar(weeks, used, width=0.45, color=_USED)
    ax.set_xticks(list(weeks), [p.week[-3:] for p in digest.trend], fontsize=7)
    ax.set_title(f"last {len(digest.trend)} weeks", fontsize=9, loc="left")
    ax.tick_params(axis="y", labelsize=8)
    ax.grid(axis="y", linewidth=0.3)
    ax.set_ylabel("GPU-hours", fontsize=8)


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
