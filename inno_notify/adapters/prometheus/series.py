"""The usage of a round's pods over time, downsampled by Prometheus: what a job's chart draws.

Asked in the same round as the figures (``measure`` runs it beside the instant queries of each
bucket), in one range query per metric whatever the number of jobs:

- Every job gets a step (``domain.series.series_step``): its runtime over at most 120 points, on a
  doubling ladder of the scrape interval. The pods of one step form a class.
- One query per metric serves every class (``queries.series_*``): each class is a branch over its
  own pods with windows of its own step, the query steps at the finest class step, and a coarser
  class shows only on its own grid. The pods are cut into spans only where a query would exceed
  ``max_steps_per_query`` steps (Prometheus refuses more than 11,000 points per series), then into
  chunks by query size (``batching.chunk_groups``, as the instant queries).
- The metrics: GPU utilization (mean over each step; GR_ENGINE_ACTIVE where the GPU has it at that
  step, else GPU_UTIL, asked as two queries and chosen here) and GPU memory (peak in each step) per GPU, RAM
  per pod (the sum over its container series of each one's peak in the step, with the pod UID from
  cAdvisor's cgroup path so that a reused pod name is not mixed in).

Prometheus returns every series as it is (an aggregation in a range query costs several times the
reading of the samples); the rows are grouped here, per GPU as dcgm-exporter labels it
(``queries.DcgmSelector.group_by``) and per pod and UID, as the figures' instant queries group them.
A pod keeps only the points whose step overlaps the time it held its resources (a reused name's
earlier pod falls outside). The answer is per pod uid (``domain.series.PodPoints``); the usage
service puts each job's pods on one grid with ``domain.series.job_series``. A point is the same
whether its pod is measured alone or with a round of others: it depends only on the pod's step and
the time.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.batching import PodWindow, chunk_groups
from inno_notify.adapters.prometheus.client import PrometheusClient, Sample
from inno_notify.domain.series import MAX_POINTS, PodPoints, grid_time, series_step

MIB = 1024 * 1024
# A range query's steps: Prometheus refuses more than 11,000 points per series. A query's cost grows
# with its steps times the series of its coarser classes, which are looked up at every step.
DEFAULT_MAX_STEPS_PER_QUERY = 10_000

_Build = Callable[[q.Classes], str]
_UID_IN_CGROUP = re.compile(q.UID_IN_CGROUP)


@dataclass(slots=True)
class _Gpu:
    """The rows of one GPU (its labels as the figures group them) for one pod."""

    name: str
    rows: list[dict[int, float]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Query:
    kind: str
    promql: str
    start: float
    end: float
    step: int
    pods: tuple[PodWindow, ...]


class SeriesSampler:
    """Downsampled series of a bucket's pods: one range query per metric (and span, and chunk)."""

    def __init__(
        self,
        client: PrometheusClient,
        *,
        scrape_interval_seconds: float,
        budget_bytes: Callable[[], int],
        cadvisor: q.CadvisorSelector,
        max_points: int = MAX_POINTS,
        max_steps_per_query: int = DEFAULT_MAX_STEPS_PER_QUERY,
    ) -> None:
        self._client = client
        self._scrape = scrape_interval_seconds
        self._budget = budget_bytes
        self._cadvisor = cadvisor
        self._max_points = max_points
        self._max_steps = max(max_points * 2, max_steps_per_query)
        self.last_queries_by_kind: Counter[str] = Counter()

    def steps(self, pods: Sequence[PodWindow]) -> dict[str, int]:
        """The step of every pod: its job's runtime (all the job's pods in ``pods``) in at most
        ``max_points`` steps."""
        spans: dict[str, tuple[float, float]] = {}
        for pod in pods:
            job = pod.job_uid or pod.uid
            start, end = pod.held_from.timestamp(), pod.held_until.timestamp()
            if job in spans:
                start, end = min(start, spans[job][0]), max(end, spans[job][1])
            spans[job] = (start, end)
        return {
            pod.uid: series_step(
                spans[pod.job_uid or pod.uid][1] - spans[pod.job_uid or pod.uid][0],
                self._scrape,
                self._max_points,
            )
            for pod in pods
        }

    async def sample(
        self, pods: Sequence[PodWindow], dcgm: q.DcgmSelector, steps: Mapping[str, int] | None = None
    ) -> dict[str, PodPoints]:
        """Every pod's points (an entry per pod, empty where Prometheus had none), at ``steps`` (by
        pod uid; default: ``self.steps(pods)``, pass the whole round's so that a job's pods in
        several buckets share one). Raises the client's ``PrometheusError`` like the instant
        queries: a round has all its answers or none."""
        self.last_queries_by_kind = Counter()
        steps = dict(steps) if steps is not None else self.steps(pods)
        builders: dict[str, _Build] = {
            "series_prof": lambda classes: q.series_gpu_prof(dcgm, classes),
            "series_util": lambda classes: q.series_gpu_util(dcgm, classes),
            "series_fb": lambda classes: q.series_gpu_memory(dcgm, classes),
            "series_mem": lambda classes: q.series_pod_memory(self._cadvisor, classes),
        }
        plan: list[_Query] = []
        for span in self._spans(pods, steps):
            for kind, build in builders.items():
                plan += self._chunks(kind, span, steps, build)
        self.last_queries_by_kind.update(query.kind for query in plan)
        answers = await asyncio.gather(
            *(self._client.query_range(x.promql, x.start, x.end, x.step) for x in plan)
        )
        return self._assemble(pods, steps, dcgm, zip(plan, answers, strict=True))

    def _end(self, pod: PodWindow, step: int) -> int:
        """The pod's last point: one step after the step holding its end, where its final scrape
        may have landed."""
        return grid_time(pod.held_until.timestamp() + self._scrape, step)

    def _spans(self, pods: Sequence[PodWindow], steps: Mapping[str, int]) -> list[list[PodWindow]]:
        """Pods in start order, cut where a query (stepping at its finest class) would cover more
        than the allowed steps. A round normally is one span."""
        spans: list[list[PodWindow]] = []
        first = last = 0.0
        finest = 0
        for pod in sorted(pods, key=lambda p: (p.held_from, p.uid)):
            step = steps[pod.uid]
            end = self._end(pod, step)
            if spans and (max(last, end) - first) / min(finest, step) + 2 <= self._max_steps:
                spans[-1].append(pod)
                last, finest = max(last, end), min(finest, step)
            else:
                spans.append([pod])
                first, last, finest = pod.held_from.timestamp(), end, step
        return spans

    def _chunks(
        self, kind: str, pods: Sequence[PodWindow], steps: Mapping[str, int], build: _Build
    ) -> list[_Query]:
        chunks = chunk_groups(
            sorted(pods, key=lambda p: (p.held_until, p.uid)),
            lambda pod: steps[pod.uid],
            lambda classes, _window: build(classes),
            max_url_bytes=self._budget(),
            scrape_seconds=self._scrape,
        )
        queries = []
        for members, promql in chunks:
            step = min(steps[p.uid] for p in members)
            # The first point is the step holding the first start; the query steps at the finest
            # class, on whose grid every class's points lie.
            start = grid_time(min(p.held_from.timestamp() for p in members), step)
            end = max(self._end(p, steps[p.uid]) for p in members)
            queries.append(_Query(kind, promql, start, end, step, members))
        return queries

    def _assemble(
        self,
        pods: Sequence[PodWindow],
        steps: Mapping[str, int],
        dcgm: q.DcgmSelector,
        answered: Iterable[tuple[_Query, list[Sample]]],
    ) -> dict[str, PodPoints]:
        # Rows of one GPU (its labels as the figures group them) or of one pod and UID, by pod uid:
        # one row each, normally; several (two scrapes of one exporter, a restarted container) are
        # combined point by point as the figures' aggregations would.
        gpu_util: dict[str, dict[tuple[str, ...], _Gpu]] = defaultdict(dict)
        gpu_prof: dict[str, dict[tuple[str, ...], _Gpu]] = defaultdict(dict)
        gpu_memory: dict[str, dict[tuple[str, ...], _Gpu]] = defaultdict(dict)
        memory: dict[str, dict[str, list[dict[int, float]]]] = defaultdict(dict)
        scrape = self._scrape
        ns_label, pod_label, cad = dcgm.namespace_label, dcgm.pod_label, self._cadvisor
        hosts = dcgm.hostname_labels
        gpu_labels = (ns_label, pod_label, *q.GPU_IDENTITY, *hosts)
        for query, rows in answered:
            by_name = {(p.namespace, p.pod): p for p in query.pods}
            for row in rows:
                labels = row.get("metric")
                if not isinstance(labels, dict):
                    continue
                if query.kind == "series_mem":
                    pod = by_name.get((labels.get(cad.namespace_label, ""), labels.get(cad.pod_label, "")))
                    if pod is None:
                        continue
                    uid = _pod_uid(labels.get("id"))
                    if uid and uid != pod.uid:
                        continue  # another pod that had the same name within the range
                    points = _points(row, pod, steps[pod.uid], scrape, 1.0)
                    if points is not None:
                        memory[pod.uid].setdefault(uid, []).append(points)
                    continue
                pod = by_name.get((labels.get(ns_label, ""), labels.get(pod_label, "")))
                if pod is None:
                    continue
                unit = MIB if query.kind == "series_fb" else 1.0
                # A GR_ENGINE_ACTIVE point without a value still hides GPU_UTIL at its time, as the
                # figures' ``or`` would: its NaN is dropped only once the two are merged.
                prof = query.kind == "series_prof"
                points = _points(row, pod, steps[pod.uid], scrape, unit, keep_nonfinite=prof)
                if points is None:
                    continue
                into = {"series_util": gpu_util, "series_prof": gpu_prof}.get(query.kind, gpu_memory)[pod.uid]
                group = tuple(str(labels.get(name, "")) for name in gpu_labels)
                if group not in into:
                    into[group] = _Gpu(q.gpu_name(q.gpu_key(labels, hosts)))
                into[group].rows.append(points)
        return {
            pod.uid: PodPoints(
                pod_uid=pod.uid,
                pod_name=pod.pod,
                step_seconds=steps[pod.uid],
                gpu_util=_by_gpu(gpu_util.get(pod.uid, {}), _mean, preferred=gpu_prof.get(pod.uid, {})),
                gpu_memory=_by_gpu(gpu_memory.get(pod.uid, {}), max),
                memory=_merged((_combine(rows, sum) for _, rows in sorted(memory.get(pod.uid, {}).items()))),
            )
            for pod in pods
        }


def _pod_uid(cgroup: object) -> str:
    """The pod UID in cAdvisor's cgroup path, as the figures' ``label_replace`` reads it ("" where
    the path has none)."""
    if not isinstance(cgroup, str):
        return ""
    match = _UID_IN_CGROUP.fullmatch(cgroup)
    return match.group(1).replace("_", "-") if match else ""


def _points(
    row: Sample, pod: PodWindow, step: int, scrape: float, unit: float, *, keep_nonfinite: bool = False
) -> dict[int, float] | None:
    """The row's finite points (times ``unit``; NaN and ±Inf too with ``keep_nonfinite``) whose step
    overlaps the pod's held time (plus one scrape for its last sample); None for a row with a
    malformed point (a proxy's rewrite, a bug): none of its points is trusted.

    Runs for every point of a round (hundreds of thousands): one comprehension, no per-point try."""
    values = row.get("values")
    if not isinstance(values, list):
        return None
    low, high = pod.held_from.timestamp(), pod.held_until.timestamp() + scrape + step
    try:
        if values and low <= values[0][0] and values[-1][0] < high:
            # The whole row lies in the pod's time (Prometheus sends the points in time order).
            kept = {int(t): float(v) for t, v in values}
        else:
            kept = {int(t): float(v) for t, v in values if low <= t < high}
    except (TypeError, ValueError, OverflowError, IndexError, KeyError):
        return None
    if unit != 1.0:
        kept = {t: v * unit for t, v in kept.items()}
    if not keep_nonfinite and not math.isfinite(sum(kept.values())):
        kept = _finite(kept)  # rarely: NaN or ±Inf (no measurement), or a huge sum
    return kept


def _finite(points: dict[int, float]) -> dict[int, float]:
    return {t: v for t, v in points.items() if math.isfinite(v)}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _combine(
    rows: Sequence[dict[int, float]], combine: Callable[[Sequence[float]], float]
) -> dict[int, float]:
    """Several rows of one GPU or pod as one: at each time, ``combine`` of the rows that have it."""
    if len(rows) == 1:
        return rows[0]
    at: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        for t, value in row.items():
            at[t].append(value)
    return _finite({t: combine(values) for t, values in at.items()})


def _merged(parts: Iterable[dict[int, float]]) -> dict[int, float]:
    merged: dict[int, float] = {}
    for part in parts:
        merged.update(part)
    return merged


def _by_gpu(
    groups: Mapping[tuple[str, ...], _Gpu],
    combine: Callable[[Sequence[float]], float],
    preferred: Mapping[tuple[str, ...], _Gpu] | None = None,
) -> dict[str, dict[int, float]]:
    """Each GPU's points under its name (``queries.gpu_name``); at a time where the same label set
    has a ``preferred`` point (GR_ENGINE_ACTIVE over GPU_UTIL), that one. Label sets that give one
    name but differ in a descriptive label (model, MIG profile) are merged, the later in label order
    winning at a time both have."""
    preferred = preferred or {}
    by_name: dict[str, dict[int, float]] = {}
    for key in sorted(groups.keys() | preferred.keys()):
        gpu = preferred.get(key) or groups[key]
        points = _combine(groups[key].rows, combine) if key in groups else {}
        if key in preferred:
            # Any point of the preferred rows, a NaN too, hides the other rows' at its time.
            rows = preferred[key].rows
            hidden = {t for row in rows for t in row}
            points = {t: v for t, v in points.items() if t not in hidden}
            points.update(_combine([_finite(row) for row in rows], combine))
        if points:
            by_name.setdefault(gpu.name, {}).update(points)
    return by_name
