"""The usage of a round's pods over time, downsampled by Prometheus: what a job's chart draws.

Asked in the same round as the figures (``measure`` runs it beside the instant queries of each
bucket), with a fixed number of range queries per metric that does not grow with the jobs:

- Every job gets a step (``domain.series.series_step``): its runtime over at most 120 points, on a
  doubling ladder of the scrape interval, so jobs of similar length share a step. The pods of one
  step form a class.
- A class's pods, in start order, are cut into spans of at most ``max_steps_per_query`` steps (a
  range query evaluates every step for every series it selects, so a span caps its cost), then into
  chunks by query size (``batching.chunk_pods``, as the instant queries).
- Each chunk is one range query per metric on the grid of its step: GPU utilization (mean over each
  step) and GPU memory (peak in each step) per GPU, RAM per pod (peak in each step, with the pod
  UID from cAdvisor's cgroup path so that a reused pod name is not mixed in).

A pod keeps only the points whose step overlaps the time it held its resources (a reused name's
earlier pod falls outside). The answer is per pod uid (``domain.series.PodPoints``); the usage
service puts each job's pods on one grid with ``domain.series.job_series``.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.batching import PodWindow, chunk_pods
from inno_notify.adapters.prometheus.client import PrometheusClient, Sample
from inno_notify.domain.series import MAX_POINTS, PodPoints, grid_time, series_step

MIB = 1024 * 1024
# A range query's steps: Prometheus refuses more than 11,000 points per series; far fewer keeps a
# query's cost (steps × series selected) near what its pods need.
DEFAULT_MAX_STEPS_PER_QUERY = 1440

_Build = Callable[[str, str, int], str]


@dataclass(frozen=True, slots=True)
class _Query:
    kind: str
    promql: str
    start: float
    end: float
    step: int
    pods: tuple[PodWindow, ...]


class SeriesSampler:
    """Downsampled series of a bucket's pods, in range queries per step class and metric."""

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

    async def sample(self, pods: Sequence[PodWindow], dcgm: q.DcgmSelector) -> dict[str, PodPoints]:
        """Every pod's points (an entry per pod, empty where Prometheus had none). Raises the
        client's ``PrometheusError`` like the instant queries: a round has all its answers or none."""
        self.last_queries_by_kind = Counter()
        steps = self.steps(pods)
        builders: dict[str, _Build] = {
            "series_util": lambda p, ns, s: q.series_gpu_util(dcgm, p, ns, s),
            "series_fb": lambda p, ns, s: q.series_gpu_memory(dcgm, p, ns, s),
            "series_mem": lambda p, ns, s: q.series_pod_memory(self._cadvisor, p, ns, s),
        }
        plan: list[_Query] = []
        by_step: dict[int, list[PodWindow]] = defaultdict(list)
        for pod in pods:
            by_step[steps[pod.uid]].append(pod)
        for step, members in sorted(by_step.items()):
            for span in self._spans(members, step):
                for kind, build in builders.items():
                    plan += self._chunks(kind, span, step, build)
        self.last_queries_by_kind.update(query.kind for query in plan)
        answers = await asyncio.gather(
            *(self._client.query_range(x.promql, x.start, x.end, x.step) for x in plan)
        )
        return self._assemble(pods, steps, dcgm, zip(plan, answers, strict=True))

    def _spans(self, pods: Sequence[PodWindow], step: int) -> list[list[PodWindow]]:
        """Pods in start order, cut where a query would cover more than the allowed steps."""
        spans: list[list[PodWindow]] = []
        first = last = 0.0
        for pod in sorted(pods, key=lambda p: (p.held_from, p.uid)):
            start, end = pod.held_from.timestamp(), pod.held_until.timestamp()
            if spans and (max(last, end) - first) / step + 2 <= self._max_steps:
                spans[-1].append(pod)
                last = max(last, end)
            else:
                spans.append([pod])
                first, last = start, end
        return spans

    def _chunks(self, kind: str, pods: Sequence[PodWindow], step: int, build: _Build) -> list[_Query]:
        chunks = chunk_pods(
            sorted(pods, key=lambda p: (p.held_until, p.uid)),
            lambda pod_regex, ns_regex, _window: build(pod_regex, ns_regex, step),
            max_url_bytes=self._budget(),
            scrape_seconds=self._scrape,
        )
        queries = []
        for members, promql in chunks:
            # The first point is the step holding the first start; the last one step after the step
            # holding the last end, where the final scrape of a pod may have landed.
            start = grid_time(min(p.held_from.timestamp() for p in members), step)
            end = grid_time(max(p.held_until.timestamp() for p in members) + self._scrape, step)
            queries.append(_Query(kind, promql, start, end, step, members))
        return queries

    def _assemble(
        self,
        pods: Sequence[PodWindow],
        steps: Mapping[str, int],
        dcgm: q.DcgmSelector,
        answered: Sequence[tuple[_Query, list[Sample]]] | zip[tuple[_Query, list[Sample]]],
    ) -> dict[str, PodPoints]:
        gpu_util: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
        gpu_memory: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
        memory: dict[str, dict[int, float]] = defaultdict(dict)
        cad = self._cadvisor
        for query, rows in answered:
            by_name = {(p.namespace, p.pod): p for p in query.pods}
            for row in rows:
                labels = row.get("metric", {})
                if query.kind == "series_mem":
                    pod = by_name.get((labels.get(cad.namespace_label, ""), labels.get(cad.pod_label, "")))
                    uid = str(labels.get(q.UID_LABEL, "")).replace("_", "-")
                    if pod is None or (uid and uid != pod.uid):
                        continue  # another pod that had the same name within the range
                    _keep(memory[pod.uid], row, pod, query.step, self._scrape, 1)
                    continue
                pod = by_name.get((labels.get(dcgm.namespace_label, ""), labels.get(dcgm.pod_label, "")))
                if pod is None:
                    continue
                name = q.gpu_name(q.gpu_key(labels, dcgm.hostname_labels))
                if query.kind == "series_util":
                    _keep(gpu_util[pod.uid][name], row, pod, query.step, self._scrape, 1)
                else:
                    _keep(gpu_memory[pod.uid][name], row, pod, query.step, self._scrape, MIB)
        return {
            pod.uid: PodPoints(
                pod_uid=pod.uid,
                pod_name=pod.pod,
                step_seconds=steps[pod.uid],
                gpu_util={name: dict(v) for name, v in gpu_util.get(pod.uid, {}).items() if v},
                gpu_memory={name: dict(v) for name, v in gpu_memory.get(pod.uid, {}).items() if v},
                memory=dict(memory.get(pod.uid, {})),
            )
            for pod in pods
        }


def _keep(into: dict[int, float], row: Sample, pod: PodWindow, step: int, scrape: float, unit: float) -> None:
    """The row's points whose step overlaps the pod's held time (plus one scrape for its last sample).

    Runs for every point of a round (hundreds of thousands): plain loop, no per-point try."""
    held_from, held_until = pod.held_from.timestamp(), pod.held_until.timestamp() + scrape
    values = row.get("values")
    if not isinstance(values, list):
        return
    kept: dict[int, float] = {}
    try:
        for t_text, v_text in values:
            t = float(t_text)
            if t < held_from or t - step >= held_until:
                continue
            value = float(v_text) * unit
            if value - value == 0.0:  # finite: NaN and ±Inf give NaN
                kept[int(t)] = value
    except (TypeError, ValueError):
        return  # a malformed point (a proxy's rewrite, a bug): none of the row's points is trusted
    into.update(kept)
