"""A job's family (its earlier runs) and the p95 of their peaks.

One run is a noisy sample: a training job may peak higher on the next dataset shard. When the
same job has run often enough, suggestions use the 95th percentile of its runs' peaks, so one
lucky run does not talk a user into a request the next run will exceed, and one outlier does
not keep a request inflated for ever.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

FAMILY_LABEL = "inno-notify/family"

# Suffixes a controller or a script appends to each run's name: CronJob's scheduled minute and
# run counters ("-29707813", "-7"), and the five characters of metadata.generateName, drawn
# from Kubernetes' vowel-free alphabet so that words ("-model") are not mistaken for one.
_GENERATED_SUFFIX = re.compile(r"-(?:\d+|[bcdfghjklmnpqrstvwxz2456789]{5})$")


@dataclass(frozen=True, slots=True)
class FamilyRun:
    """What one finished run of a family showed; figures not measured are None."""

    job_uid: str
    finished_at: datetime
    memory_peak_bytes: int | None = None
    cpu_cores_p95: float | None = None
    gpu_memory_peak_bytes: int | None = None
    # Most GPUs of one pod that were not idle; lets gpu_count advice follow the family.
    gpus_busy: int | None = None
    # The memory limit the run was OOM-killed at, if it was.
    oom_limit_bytes: int | None = None


def family_of(name: str, labels: Mapping[str, str], generate_name: str | None = None) -> str | None:
    """The family key: the ``inno-notify/family`` label, else the name without its generated
    suffix, else ``generateName`` without its trailing dash."""
    label = labels.get(FAMILY_LABEL, "").strip()
    if label:
        return label
    stem = name
    while True:
        shorter = _GENERATED_SUFFIX.sub("", stem)
        if shorter == stem or not shorter:
            break
        stem = shorter
    if stem:
        return stem
    if generate_name:
        return generate_name.rstrip("-") or None
    return None


def recent_runs(
    runs: Sequence[FamilyRun], now: datetime, window: timedelta, max_runs: int
) -> tuple[FamilyRun, ...]:
    """The runs that finished in ``(now - window, now]``, newest first, at most ``max_runs``,
    one per job uid."""
    seen: set[str] = set()
    kept: list[FamilyRun] = []
    for run in sorted(runs, key=lambda r: r.finished_at, reverse=True):
        if run.job_uid in seen or run.finished_at > now or run.finished_at <= now - window:
            continue
        seen.add(run.job_uid)
        kept.append(run)
    return tuple(kept[:max_runs])


def p95(values: Sequence[float]) -> float:
    """The 95th percentile, interpolated between the two nearest ranks (numpy's default)."""
    if not values:
        raise ValueError("p95 of no values")
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=20, method="inclusive")[18]


@dataclass(frozen=True, slots=True)
class FamilyFigure:
    """A family's p95 of one figure and how many runs it stands on."""

    value: float
    runs: int


def family_p95(
    runs: Sequence[FamilyRun], figure: Callable[[FamilyRun], float | None], min_runs: int
) -> FamilyFigure | None:
    """The p95 of ``figure`` over the runs that measured it, or None below ``min_runs`` of them."""
    values = [v for v in (figure(run) for run in runs) if v is not None]
    if len(values) < min_runs:
        return None
    return FamilyFigure(value=p95(values), runs=len(values))
