"""Advice for a sweep: stated once per family, not once per job.

The runs of a sweep (jobs grouped into one message) are runs of one family, and each was advised
on its own peak, so a grouped message used to repeat three slightly different CPU advices for the
same family without saying which job each belonged to. Here the advice of the group's runs is
combined per family and field: a decrease suggests the p95 of the runs' suggestions (the family's
p95, rounded up as the rules round), an increase the largest suggestion (an OOM must not recur),
and the message names the family and how many of its runs the advice is for:
"For the 7 runs of sweep-lr: set resources.requests["cpu"]: 32 → 8.". A job without a family, a
family with one run in the group, and a MIG suggestion on which the runs disagree keep their own
advice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from inno_notify.domain.model import Recommendation, RecommendationKind, Severity, Unit
from inno_notify.domain.rightsizing.family import p95
from inno_notify.domain.rightsizing.quantities import (
    cores,
    count,
    exact,
    quantity_bytes,
    round_cores_up,
    round_memory_up,
)

_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


@dataclass(frozen=True, slots=True)
class SweepRun:
    """One job of a grouped message: its name, its family and its advice."""

    name: str
    family: str | None
    advice: Sequence[Recommendation]


@dataclass(frozen=True, slots=True)
class FamilyAdvice:
    """One piece of advice for a family's runs in the group (or one job's own advice)."""

    family: str | None
    runs: int
    """The family's runs in the group."""
    advised: int
    """Of those, runs that were given this advice."""
    recommendation: Recommendation


def _amount(value: float, unit: Unit) -> str:
    if unit is Unit.BYTES:
        return quantity_bytes(int(value))
    if unit is Unit.CORES:
        return cores(value)
    return count(value)


def _round_up(value: float, unit: Unit) -> float:
    if unit is Unit.BYTES:
        return float(round_memory_up(Fraction(math.ceil(value))))
    if unit is Unit.CORES:
        return round_cores_up(exact(value))
    return float(math.ceil(value))


def _numbers(values: Sequence[float | str | None]) -> list[float] | None:
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return [float(v) for v in numbers] if len(numbers) == len(values) else None


def _combined(family: str, runs: int, recs: Sequence[Recommendation]) -> Recommendation | None:
    """The family's advice for one field from each run's; None when the runs' suggestions cannot
    be combined (names that differ, missing amounts)."""
    first = recs[0]
    worst = max(recs, key=lambda r: _SEVERITY_RANK[r.severity])
    suggested_values = _numbers([r.suggested for r in recs])
    current_values = _numbers([r.current for r in recs])
    if suggested_values is None:
        names = {r.suggested for r in recs}
        if len(names) != 1:
            return None
        suggested: float | str = first.suggested
        current: float | str | None = first.current if len({r.current for r in recs}) == 1 else None
        change = f"{current} → {suggested}" if current is not None else str(suggested)
    else:
        increase = first.kind is RecommendationKind.MEMORY_INCREASE or (
            current_values is not None
            and all(s > c for s, c in zip(suggested_values, current_values, strict=True))
        )
        value = max(suggested_values) if increase else p95(suggested_values)
        suggested = _round_up(value, first.unit)
        current = max(current_values) if current_values is not None else None
        after = _amount(suggested, first.unit)
        change = f"{_amount(current, first.unit)} → {after}" if current is not None else after
    whom = f"the {runs} runs" if len(recs) == runs else f"{len(recs)} of the {runs} runs"
    where = f"set {first.field_path}: " if first.field_path else f"{first.kind.value}: "
    return Recommendation(
        kind=first.kind,
        severity=worst.severity,
        current=current,
        suggested=suggested,
        unit=first.unit,
        message=f"For {whom} of {family}: {where}{change}.",
        waste_gpu_minutes=round(sum(r.waste_gpu_minutes for r in recs), 2),
        waste_gib_hours=round(sum(r.waste_gib_hours for r in recs), 2),
        waste_core_hours=round(sum(r.waste_core_hours for r in recs), 2),
        field_path=first.field_path,
        evidence={"runs": len(recs)},
    )


def _rank(item: FamilyAdvice) -> tuple[int, float, float, float]:
    rec = item.recommendation
    return (_SEVERITY_RANK[rec.severity], rec.waste_gpu_minutes, rec.waste_gib_hours, rec.waste_core_hours)


def advice_per_family(runs: Sequence[SweepRun]) -> list[FamilyAdvice]:
    """The group's advice, once per family and field, most severe and most wasteful first."""
    families: dict[str, list[SweepRun]] = {}
    alone: list[SweepRun] = []
    for run in runs:
        if run.family:
            families.setdefault(run.family, []).append(run)
        else:
            alone.append(run)
    found: list[FamilyAdvice] = []
    for family, members in families.items():
        if len(members) == 1:
            alone.append(members[0])
            continue
        by_field: dict[tuple[RecommendationKind, str | None], list[Recommendation]] = {}
        for member in members:
            for rec in member.advice:
                by_field.setdefault((rec.kind, rec.field_path), []).append(rec)
        for recs in by_field.values():
            combined = _combined(family, len(members), recs)
            if combined is not None:
                found.append(FamilyAdvice(family, len(members), len(recs), combined))
            else:
                found.extend(FamilyAdvice(family, len(members), 1, rec) for rec in recs)
    for run in alone:
        found.extend(FamilyAdvice(run.family, 1, 1, rec) for rec in run.advice)
    # Each message once: jobs without a family may still repeat one another word for word.
    unique = {item.recommendation.message: item for item in found}
    return sorted(unique.values(), key=_rank, reverse=True)
