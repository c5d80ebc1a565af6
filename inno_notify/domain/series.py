"""A job's usage over time: the step a job is sampled at, and its pods' points merged into one grid.

The measurement asks Prometheus, per round, for every pod's GPU utilization, GPU memory and RAM
at one step per job (``series_step``: the job's runtime over at most ``MAX_POINTS`` steps, on a
doubling ladder of the scrape interval, so that jobs of similar length share one query). Each pod
comes back as ``PodPoints``: values keyed by the grid time that ends their step. ``job_series``
puts the pods of one job on one grid (a GPU a retry used again stays one line; RAM is one line
per pod), marks time-sliced GPUs, and keeps the result within ``MAX_POINTS`` points and
``MAX_LINES`` lines whatever the input: a job's chart and its stored row stay small.

Pure: no clock, no I/O. Values are rounded to what a chart can show (0.1 % and whole bytes).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from inno_notify.domain.model import GpuUsage, SeriesLine, SeriesPod, UsageSeries

# Points per line: enough for a chart a phone shows at full width, small enough to store per job.
MAX_POINTS = 120
# Lines per kind: beyond, the rest are summed up into one line (a GPU job rarely has more).
MAX_LINES = 64
# Pod and GPU labels come from cluster objects and exporters: cap what a chart and a row carry.
MAX_LABEL_CHARS = 253

# Grid time (unix seconds, a multiple of the step) -> value.
Points = Mapping[int, float]


@dataclass(frozen=True, slots=True)
class PodPoints:
    """One pod's usage over time as the measurement read it, keyed by grid time.

    ``gpu_util`` and ``gpu_memory`` map a GPU's name (as in ``GpuUsage.gpu``) to its points; memory
    values are bytes, utilization percent."""

    pod_uid: str
    pod_name: str
    step_seconds: int
    gpu_util: Mapping[str, Points] = field(default_factory=dict)
    gpu_memory: Mapping[str, Points] = field(default_factory=dict)
    memory: Points = field(default_factory=dict)


def series_step(span_seconds: float, scrape_seconds: float, max_points: int = MAX_POINTS) -> int:
    """The step of a job that held its resources for ``span_seconds``: the scrape interval doubled
    until the span fits in ``max_points`` steps (whole seconds, at least one)."""
    step = max(1, round(scrape_seconds))
    span = max(0.0, span_seconds) if math.isfinite(span_seconds) else 0.0
    while span / step > max_points:
        step *= 2
    return step


def grid_time(t: float, step: int) -> int:
    """The grid point whose step ``(g − step, g]`` holds ``t``."""
    return math.ceil(t / step) * step


def job_series(
    points: Sequence[PodPoints],
    *,
    gpus: Sequence[GpuUsage] = (),
    pods: Sequence[SeriesPod] = (),
    max_points: int = MAX_POINTS,
    max_lines: int = MAX_LINES,
) -> UsageSeries:
    """The pods' points on one grid. The step is the largest of the pods' (they normally share one);
    a grid longer than ``max_points`` is coarsened by doubling the step. Lines of a GPU whose
    measured row (``gpus``) is shared and not the pod's own share are marked ``shared``."""
    pods_listed = tuple(SeriesPod(_label(p.name), _label(p.node) if p.node else None) for p in pods)
    step = max((p.step_seconds for p in points if p.step_seconds > 0), default=0)
    times = [t for p in points for t in _all_times(p)]
    if step <= 0 or not times:
        return UsageSeries(pods=pods_listed)
    first, last = grid_time(min(times), step), grid_time(max(times), step)
    while (last - first) // step + 1 > max_points:
        step *= 2
        first, last = grid_time(min(times), step), grid_time(max(times), step)
    count = (last - first) // step + 1
    shared = {(g.pod_name, g.gpu) for g in gpus if not g.own_share}

    util: dict[str, _Line] = {}
    memory_gpu: dict[str, _Line] = {}
    memory: dict[str, _Line] = {}
    for pod in points:
        for name, values in pod.gpu_util.items():
            line = util.setdefault(name, _Line(_label(name), _label(pod.pod_name)))
            line.add(values, step)
            line.shared |= (pod.pod_name, name) in shared
        for name, values in pod.gpu_memory.items():
            line = memory_gpu.setdefault(name, _Line(_label(name), _label(pod.pod_name)))
            line.add(values, step)
            line.shared |= (pod.pod_name, name) in shared
        if pod.memory:
            line = memory.setdefault(pod.pod_uid, _Line(_label(pod.pod_name), _label(pod.pod_name)))
            line.add(pod.memory, step)

    return UsageSeries(
        step_seconds=step,
        start=datetime.fromtimestamp(first, UTC),
        gpu_util=_finish(util.values(), first, step, count, max_lines, "mean", digits=1),
        gpu_memory=_finish(memory_gpu.values(), first, step, count, max_lines, "max", digits=0),
        memory=_finish(memory.values(), first, step, count, max_lines, "max", digits=0),
        pods=pods_listed,
    )


def _all_times(pod: PodPoints) -> Iterable[float]:
    for values in (*pod.gpu_util.values(), *pod.gpu_memory.values(), pod.memory):
        yield from (t for t, v in values.items() if math.isfinite(t) and math.isfinite(v))


class _Line:
    """A line being assembled: per grid time, the values that fall there (several pods, or a
    coarser step), combined when the line is finished."""

    def __init__(self, label: str, pod_name: str) -> None:
        self.label = label
        self.pod_name = pod_name
        self.shared = False
        self.buckets: dict[int, list[float]] = defaultdict(list)

    def add(self, values: Points, step: int) -> None:
        for t, value in values.items():
            if math.isfinite(t) and math.isfinite(value):
                self.buckets[grid_time(t, step)].append(value)


def _finish(
    lines: Iterable[_Line], first: int, step: int, count: int, max_lines: int, combine: str, *, digits: int
) -> tuple[SeriesLine, ...]:
    ordered = sorted(lines, key=lambda line: (line.label, line.pod_name))
    if len(ordered) > max_lines:
        kept, rest = ordered[: max_lines - 1], ordered[max_lines - 1 :]
        merged = _Line(f"{len(rest)} more", "")
        merged.shared = any(line.shared for line in rest)
        for line in rest:
            for t, bucket in line.buckets.items():
                merged.buckets[t].extend(bucket)
        ordered = [*kept, merged]
    finished = []
    for line in ordered:
        values: list[float | None] = [None] * count
        for t, bucket in line.buckets.items():
            index = (t - first) // step
            if 0 <= index < count and bucket:
                value = sum(bucket) / len(bucket) if combine == "mean" else max(bucket)
                values[index] = round(value, digits) if digits else float(round(value))
        finished.append(SeriesLine(line.label, line.pod_name, tuple(values), line.shared))
    return tuple(finished)


def _label(text: str) -> str:
    return text[:MAX_LABEL_CHARS]
