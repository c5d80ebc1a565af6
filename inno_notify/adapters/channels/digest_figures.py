"""GPU-hours, percentages and trends spelt as the digests show them: shared by the team digest
(digest_views) and the admins' cluster digest (cluster_digest_views), so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from inno_notify.adapters.channels import figures
from inno_notify.domain.cluster_digest import TeamWeekLine
from inno_notify.domain.digest import PersonLine
from inno_notify.domain.trends import TrendPoint

NOT_MEASURED = figures.not_available("not measured")


def hours(value: float | None, unit: str = "h") -> str:
    return NOT_MEASURED if value is None else f"{figures.number(value)} {unit}"


class HoursColumns(TypedDict):
    """A line of GPU-hours as the digests show it: a person's (team digest), a team's (cluster digest)."""

    jobs: str
    gpu_hours: str
    used_gpu_hours: str
    idle_gpu_hours: str
    efficiency: str


def hours_columns(line: PersonLine | TeamWeekLine) -> HoursColumns:
    return HoursColumns(
        jobs=str(line.jobs),
        gpu_hours=hours(line.gpu_hours),
        used_gpu_hours=hours(line.used_gpu_hours),
        idle_gpu_hours=hours(line.idle_gpu_hours),
        efficiency=percent(line.efficiency),
    )


NO_RATE = figures.not_available("no rate for its GPU model")


def money(value: float | None, currency: str | None) -> str:
    """ "1,234.50 EUR"; n/a where no rate priced it (never a cost of 0 for an unpriced figure)."""
    return NO_RATE if value is None else f"{value:,.2f} {currency or ''}".rstrip()


def percent(value: float | None) -> str:
    return NOT_MEASURED if value is None else f"{round(100 * value)} %"


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None]) -> str:
    """One block character per value, scaled to the largest ("▁▃█"); a space where unknown."""
    top = max((v for v in values if v is not None), default=0.0)
    if top <= 0:
        return "".join(" " if v is None else _BARS[0] for v in values)
    return "".join(" " if v is None else _BARS[round(v / top * (len(_BARS) - 1))] for v in values)


def trend_text(trend: Sequence[TrendPoint]) -> str:
    """ "▂▃▅█ GPU-h held, 12 → 30 h; efficiency 40 % → 55 %": the sparkline of held GPU-hours and
    the first and last weeks' figures."""
    first, last = trend[0], trend[-1]
    line = sparkline([p.gpu_hours for p in trend])
    text = f"{line} GPU-h held, {hours(first.gpu_hours)} → {hours(last.gpu_hours)}"
    if first.efficiency is not None or last.efficiency is not None:
        text += f"; efficiency {_percent_or_dash(first.efficiency)} → {_percent_or_dash(last.efficiency)}"
    if last.quota_share is not None:
        text += f"; quota share {percent(last.quota_share)}"
    return text


def _percent_or_dash(value: float | None) -> str:
    return "–" if value is None else f"{round(100 * value)} %"
