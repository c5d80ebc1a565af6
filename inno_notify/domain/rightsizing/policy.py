"""Every threshold the right-sizing rules use, typed, with its default and why.

This dataclass *is* the ``rightsizing:`` section of the configuration: the settings embed it, so
pydantic validates each field's type and runs ``__post_init__``, and the attribute docstrings
below are the descriptions in docs/configuration.md. The rules are passed the policy and never
read configuration themselves. Defaults come
from the tools we copy (KRR, jobstats, Job Defense Shield) where they publish one, and are
marked as our own choice where they do not (docs/rightsizing.md lists each).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class RightsizingPolicy:
    """Thresholds of the right-sizing rules (config section ``rightsizing``)."""

    idle_gpu_util_percent: float = 5.0
    """A GPU whose mean utilization over its held time is below this is idle (CONTRACT.md §4)."""

    headroom: float = 1.2
    """Safety factor on the observed peak (memory, GPU memory) or p95 (CPU) before suggesting it
    (jobstats: 1.2 × peak; KRR uses 1.15 for memory)."""

    min_memory_waste_gib: float = 8.0
    """A memory decrease is suggested only when the request exceeds the suggestion by at least
    this many GiB per pod."""

    family_min_runs: int = 3
    """Runs of the job's family (the current one included) with a figure needed before the
    suggestion uses the family's p95 instead of this run alone."""

    family_max_runs: int = 20
    """Only this many most recent runs of the family are considered."""

    family_window_days: float = 30.0
    """Only runs of the family that finished within this many days before ``now`` count."""

    over_request_factor: float = 2.0
    """A decrease is suggested only when the current request is at least this multiple of the
    suggestion (jobstats: 2×)."""

    min_cpu_waste_cores: float = 2.0
    """A CPU decrease is suggested only when the request exceeds the suggestion by at least this
    many cores per pod."""

    min_samples: int = 10
    """Fewest metric samples behind a figure before a rule acts on it (about 5 minutes at the
    30 s DCGM interval). KRR asks for 100, but it sizes long-lived services, not batch jobs."""

    min_waste_gpu_minutes: float = 30.0
    """GPU advice below this many wasted GPU-minutes is not reported (materiality)."""

    min_waste_gib_hours: float = 8.0
    """Memory advice below this many GiB-hours of unused request is not reported."""

    min_waste_core_hours: float = 2.0
    """CPU advice below this many core-hours of unused request is not reported."""

    warning_gpu_minutes: float = 120.0
    """Wasted GPU-minutes from which advice is a warning (below: info)."""

    critical_gpu_minutes: float = 480.0
    """Wasted GPU-minutes from which advice is critical."""

    warning_gib_hours: float = 64.0
    """Unused GiB-hours of memory request from which advice is a warning."""

    critical_gib_hours: float = 512.0
    """Unused GiB-hours of memory request from which advice is critical."""

    warning_core_hours: float = 16.0
    """Unused core-hours of CPU request from which advice is a warning."""

    critical_core_hours: float = 128.0
    """Unused core-hours of CPU request from which advice is critical."""

    low_util_percent: float = 15.0
    """``gpu_memory``: a single GPU used on average below this (but not idle) may move to a MIG
    slice or a time-sliced GPU (jobstats: 15 %)."""

    time_slicing_max_memory_fraction: float = 0.5
    """``gpu_memory`` on a GPU without MIG: time-slicing is suggested only when peak × headroom
    fits in this fraction of the GPU's memory, so that at least two jobs can share it."""

    oom_limit_factor: float = 1.5
    """``memory_increase``: an OOM-killed container's limit is multiplied by this."""

    oom_peak_factor: float = 1.25
    """``memory_increase``: the observed peak is multiplied by this (KRR: 1.25 after an OOM)."""

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value < 0:
                raise ValueError(f"rightsizing.{item.name} must not be negative, got {value}")
        for name in ("headroom", "over_request_factor", "oom_limit_factor", "oom_peak_factor"):
            if getattr(self, name) < 1:
                raise ValueError(f"rightsizing.{name} must be at least 1, got {getattr(self, name)}")
        if self.family_min_runs < 2:
            raise ValueError("rightsizing.family_min_runs must be at least 2 (a p95 needs two runs)")
        if self.family_max_runs < self.family_min_runs:
            raise ValueError("rightsizing.family_max_runs must not be below family_min_runs")
        if not 0 < self.time_slicing_max_memory_fraction <= 1:
            raise ValueError("rightsizing.time_slicing_max_memory_fraction must be in (0, 1]")
        pairs = (
            ("min_waste_gpu_minutes", "warning_gpu_minutes", "critical_gpu_minutes"),
            ("min_waste_gib_hours", "warning_gib_hours", "critical_gib_hours"),
            ("min_waste_core_hours", "warning_core_hours", "critical_core_hours"),
        )
        for low, mid, high in pairs:
            if not getattr(self, low) <= getattr(self, mid) <= getattr(self, high):
                raise ValueError(f"rightsizing: need {low} <= {mid} <= {high}")
