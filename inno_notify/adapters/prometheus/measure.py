"""Usage of a round of finished pods, measured with a fixed number of queries per metric family.

``UsageMeter.measure_pods`` plans buckets and chunks (``batching``), sends the PromQL of
``queries`` for every chunk concurrently, and turns the answers into the domain's ``GpuUsage``
and ``PodUsage``. Pods with several container series get a second, smaller step: their memory
peak and CPU p95 are of sums at one instant, a subquery that only they pay for. Beside them, in the
same round, ``series`` asks for every pod's usage over time (one range query per metric) for the
charts; when those fail the figures still stand. It only measures:
deciding when a job is ready, retrying after ``PrometheusUnavailable`` and giving up belong to the
usage service; turning figures into job totals belongs to ``domain.accounting``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.agent_series import AgentSeries
from inno_notify.adapters.prometheus.batching import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_URL_BYTES,
    Bucket,
    PodWindow,
    chunk_pods,
    plan_buckets,
)
from inno_notify.adapters.prometheus.client import PrometheusClient, Sample, sample_value
from inno_notify.adapters.prometheus.errors import PrometheusError
from inno_notify.adapters.prometheus.series import SeriesSampler
from inno_notify.domain.model import GpuUsage, PodUsage
from inno_notify.domain.parsing.storable import label_name
from inno_notify.domain.series import MAX_POINTS, PodPoints

log = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PodMeasurement:
    """What Prometheus knows about one pod: one row per GPU (or MIG instance) it held, and its CPU/memory."""

    window: PodWindow
    gpus: tuple[GpuUsage, ...]
    pod: PodUsage
    # Its usage over time, downsampled (series.py); None where series were not asked for.
    points: PodPoints | None = None


@dataclass(frozen=True, slots=True)
class MeterConfig:
    scrape_interval_seconds: float = 15.0
    # Query size per request: max_url_bytes where the client sends queries in the URL, else max_body_bytes.
    max_url_bytes: int = DEFAULT_MAX_URL_BYTES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # Ends further apart than this go to separate buckets; below it one range serves them all.
    bucket_gap_seconds: float = 6 * 3600
    labels: q.LabelConfig = field(default_factory=q.LabelConfig)
    # Usage over time for the charts (series.py), at most this many points per job; 0: none.
    series_points: int = MAX_POINTS


_GpuKey = q.GpuKey
_Stats = dict[str, float]


class UsageMeter:
    def __init__(self, client: PrometheusClient, config: MeterConfig | None = None) -> None:
        self._client = client
        self._config = config or MeterConfig()
        # The spelling of dcgm-exporter's pod labels does not change within a cluster: learn it once.
        self._spelling: tuple[str, str] | None = None
        # Queries per metric family in the last measure_pods call (spelling probes as "probe").
        self.last_queries_by_kind: Counter[str] = Counter()
        labels = self._config.labels
        self._cadvisor = q.CadvisorSelector(
            labels.cadvisor_pod, labels.cadvisor_namespace, labels.cadvisor_container
        )
        # Shared GPUs: the node agent's per-process series replace the whole-GPU rows (agent_series).
        self._agent = AgentSeries(
            client,
            scrape_interval_seconds=self._config.scrape_interval_seconds,
            bucket_gap_seconds=self._config.bucket_gap_seconds,
            budget_bytes=self._budget_bytes,
            labels=labels,
        )
        self._series = SeriesSampler(
            client,
            scrape_interval_seconds=self._config.scrape_interval_seconds,
            budget_bytes=self._budget_bytes,
            cadvisor=self._cadvisor,
            max_points=max(1, self._config.series_points),
        )

    @property
    def client(self) -> PrometheusClient:
        return self._client

    @property
    def config(self) -> MeterConfig:
        return self._config

    def series_steps(self, targets: Sequence[PodWindow]) -> dict[str, int]:
        """The step of every target's usage series (a job's pods share one), by pod uid."""
        return self._series.steps(targets)

    async def measure_pods(self, targets: Sequence[PodWindow]) -> dict[str, PodMeasurement]:
        """Measure every target; the result has one entry per target uid, with or without data.

        Raises ``PrometheusUnavailable`` (retry later) or ``PrometheusQueryError`` if any query fails:
        a round is measured completely or not at all, so no job is summarized from half the answers.
        """
        cfg = self._config
        self.last_queries_by_kind = Counter()
        buckets = plan_buckets(
            targets, scrape_seconds=cfg.scrape_interval_seconds, gap_seconds=cfg.bucket_gap_seconds
        )
        # One step per job for the whole round: a job whose pods fall in several buckets keeps one.
        steps = self._series.steps(targets) if cfg.series_points > 0 else {}
        per_bucket = await asyncio.gather(*(self._measure_bucket(b, steps) for b in buckets))
        results: dict[str, PodMeasurement] = {}
        for part in per_bucket:
            results.update(part)
        results = mark_shared_gpus(results)
        decided = await self._agent.prefer_for_shared(targets, {uid: m.gpus for uid, m in results.items()})
        self.last_queries_by_kind.update(self._agent.last_queries_by_kind)
        return {
            uid: m if decided[uid] is m.gpus else replace(m, gpus=decided[uid]) for uid, m in results.items()
        }

    async def _measure_bucket(self, bucket: Bucket, steps: Mapping[str, int]) -> dict[str, PodMeasurement]:
        spelling = self._spelling or await self._detect_spelling(bucket)
        dcgm = q.DcgmSelector(spelling[0], spelling[1], self._config.labels.hostname)
        step = max(1, round(self._config.scrape_interval_seconds))
        rate_seconds = max(60, 4 * step)
        builders: dict[str, Callable[[str, str, q.Window], str]] = {
            "prof": lambda pods, ns, w: q.gpu_util(dcgm, q.GR_ENGINE_ACTIVE, pods, ns, w),
            "util": lambda pods, ns, w: q.gpu_util(dcgm, q.GPU_UTIL, pods, ns, w),
            "fb": lambda pods, ns, w: q.gpu_memory(dcgm, pods, ns, w),
            "mem": lambda pods, ns, w: q.pod_memory(self._cadvisor, pods, ns, w),
            "cpu": lambda pods, ns, w: q.pod_cpu(self._cadvisor, pods, ns, w, rate_seconds),
        }
        jobs: list[tuple[str, str]] = []
        for kind, build in builders.items():
            for _pods, promql in self._chunks(bucket.pods, build):
                jobs.append((kind, promql))
        by_kind, points = await asyncio.gather(self._run(jobs), self._sample_series(bucket, dcgm, steps))
        # Second step, only for pods with several container series: their memory peak and CPU p95
        # are of sums at one instant, which cost a subquery each.
        cad = self._cadvisor
        second: list[tuple[str, str]] = []
        mem_multi = _multi_series(bucket.pods, by_kind.get("mem", []), cad)
        if mem_multi:
            summed = functools.partial(q.pod_memory_summed, cad)
            second += [("mem_sum", promql) for _, promql in self._chunks(mem_multi, summed)]
        cpu_multi = _multi_series(bucket.pods, by_kind.get("cpu", []), cad)
        if cpu_multi:
            cpu_summed = functools.partial(q.pod_cpu_summed, cad, rate_seconds=rate_seconds)
            second += [("cpu_sum", promql) for _, promql in self._chunks(cpu_multi, cpu_summed)]
        if second:
            by_kind.update(await self._run(second))
        measured = self._assemble(bucket.pods, dcgm, by_kind)
        return {uid: replace(m, points=points.get(uid)) if points else m for uid, m in measured.items()}

    async def _sample_series(
        self, bucket: Bucket, dcgm: q.DcgmSelector, steps: Mapping[str, int]
    ) -> dict[str, PodPoints]:
        """The bucket's series; none when they cannot be had: a chart is not worth a job's figures."""
        if self._config.series_points <= 0:
            return {}
        try:
            points = await self._series.sample(bucket.pods, dcgm, steps)
        except PrometheusError as exc:
            log.warning(
                "usage series of %d pod(s) not measured, their charts are left out: %s", len(bucket.pods), exc
            )
            return {}
        finally:
            self.last_queries_by_kind.update(self._series.last_queries_by_kind)
        return points

    async def _run(self, jobs: list[tuple[str, str]]) -> dict[str, list[Sample]]:
        self.last_queries_by_kind.update(kind for kind, _ in jobs)
        answers = await asyncio.gather(*(self._client.query(promql) for _, promql in jobs))
        by_kind: dict[str, list[Sample]] = defaultdict(list)
        for (kind, _), answer in zip(jobs, answers, strict=True):
            by_kind[kind].extend(answer)
        return by_kind

    def _budget_bytes(self) -> int:
        cfg = self._config
        return cfg.max_body_bytes if self._client.config.form_body else cfg.max_url_bytes

    def _chunks(
        self, pods: Sequence[PodWindow], build: Callable[[str, str, q.Window], str]
    ) -> list[tuple[tuple[PodWindow, ...], str]]:
        cfg = self._config
        budget = cfg.max_body_bytes if self._client.config.form_body else cfg.max_url_bytes
        return chunk_pods(pods, build, max_url_bytes=budget, scrape_seconds=cfg.scrape_interval_seconds)

    async def _detect_spelling(self, bucket: Bucket) -> tuple[str, str]:
        spellings = self._config.labels.dcgm_spellings()
        if len(spellings) == 1:
            self._spelling = spellings[0]
            return spellings[0]
        probes = []
        for pod_label, ns_label in spellings:
            sel = q.DcgmSelector(pod_label, ns_label, ())
            # The first chunk is enough: a cluster uses one spelling for all its pods.
            chunks = self._chunks(bucket.pods, functools.partial(q.spelling_probe, sel))
            probes.append(self._client.query(chunks[0][1]))
            self.last_queries_by_kind["probe"] += 1
        answers = await asyncio.gather(*probes)
        for spelling, answer in zip(spellings, answers, strict=True):
            if answer:
                self._spelling = spelling
                return spelling
        # No GPU series for these pods under any spelling: nothing to learn yet.
        return spellings[0]

    def _assemble(
        self, pods: Iterable[PodWindow], dcgm: q.DcgmSelector, by_kind: Mapping[str, list[Sample]]
    ) -> dict[str, PodMeasurement]:
        # Runs on the event loop for every answer row of a round: plain loops and local names.
        by_name = {(p.namespace, p.pod): p for p in pods}
        # Per pod uid and GPU, the figures as "kind.stat" (e.g. "util.mean").
        gpu_stats: dict[str, dict[_GpuKey, _Stats]] = defaultdict(dict)
        gpu_info: dict[_GpuKey, Mapping[str, str]] = {}
        ns_label, pod_label, hosts = dcgm.namespace_label, dcgm.pod_label, dcgm.hostname_labels
        for kind in ("prof", "util", "fb"):
            prefix = kind + "."
            for sample in by_kind.get(kind, ()):
                labels = sample["metric"]
                target = by_name.get((labels.get(ns_label, ""), labels.get(pod_label, "")))
                value = sample_value(sample)
                if target is None or value is None:
                    continue
                key = q.gpu_key(labels, hosts)
                per_gpu = gpu_stats[target.uid]
                stats = per_gpu.get(key)
                if stats is None:
                    stats = per_gpu[key] = {}
                    gpu_info.setdefault(key, labels)
                stats[prefix + labels.get(q.STAT, "")] = value

        pod_stats: dict[str, _Stats] = defaultdict(dict)
        reused: set[str] = set()
        cad = self._cadvisor
        for kind in ("mem", "mem_sum", "cpu", "cpu_sum"):
            for sample in by_kind.get(kind, ()):
                labels = sample["metric"]
                target = by_name.get((labels.get(cad.namespace_label, ""), labels.get(cad.pod_label, "")))
                value = sample_value(sample)
                if target is None or value is None:
                    continue
                uid = labels.get(q.UID_LABEL, "").replace("_", "-")
                if uid and uid != target.uid:
                    reused.add(target.uid)  # another pod had the same name within the range
                    continue
                stats = pod_stats[target.uid]
                name = f"{kind}.{labels.get(q.STAT, '')}"
                if q.STAT_VALUE in labels:
                    # count_values: the per-series figure is the label, the value how many series had it.
                    stats[name + ".series"] = stats.get(name + ".series", 0.0) + value
                    per_series = _parse(labels[q.STAT_VALUE])
                    if per_series is not None:
                        stats[name] = max(stats.get(name, per_series), per_series)
                else:
                    stats[name] = value
        for uid in reused:
            # Figures grouped by name alone may mix the two pods: better none than a wrong one.
            for stat in ("mem_sum.peak", "cpu.p95", "cpu_sum.p95"):
                pod_stats[uid].pop(stat, None)

        results = {}
        for target in by_name.values():
            held_minutes = target.held_seconds / 60
            gpus = tuple(
                _gpu_usage(target, held_minutes, key, gpu_info[key], stats)
                for key, stats in sorted(gpu_stats.get(target.uid, {}).items())
            )
            if target.uid in reused:
                # dcgm-exporter has no UID label: these series may be both pods'. State nothing.
                gpus = tuple(
                    replace(
                        g, util_mean_percent=None, util_max_percent=None, fb_used_peak_bytes=None, samples=0
                    )
                    for g in gpus
                )
            results[target.uid] = PodMeasurement(
                window=target, gpus=gpus, pod=_pod_usage(target, pod_stats.get(target.uid, {}))
            )
        return results


def _parse(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _bytes(value: float | None, unit: int = 1) -> int | None:
    """Whole bytes of `value` units; None where an exporter's nonsense overflows a float."""
    if value is None:
        return None
    scaled = value * unit
    return round(scaled) if math.isfinite(scaled) else None


def _gpu_usage(
    target: PodWindow, held_minutes: float, key: _GpuKey, labels: Mapping[str, str], stats: _Stats
) -> GpuUsage:
    uuid = key[2]
    # GR_ENGINE_ACTIVE is the better measure where present (and the only one on MIG instances).
    util = "prof." if stats.get("prof.samples") else "util."
    name = q.gpu_name(key)
    used_peak = stats.get("fb.used_peak")
    free_min = stats.get("fb.free_min")
    # used + free is constant: at the instant used peaked, free was at its least.
    total = None if used_peak is None or free_min is None else used_peak + free_min
    return GpuUsage(
        pod_uid=target.uid,
        pod_name=target.pod,
        gpu=name,
        uuid=uuid or None,
        # Label values are whatever the exporter (or a relabelling) wrote: one short line of each.
        model=label_name(labels.get("modelName")),
        mig_profile=label_name(labels.get("GPU_I_PROFILE")),
        held_minutes=held_minutes,
        util_mean_percent=stats.get(util + "mean"),
        util_max_percent=stats.get(util + "max"),
        fb_used_peak_bytes=_bytes(used_peak, MIB),
        fb_total_bytes=_bytes(total, MIB),
        samples=int(stats.get(util + "samples", 0)),
    )


def _multi_series(
    pods: Iterable[PodWindow], answers: Iterable[Sample], sel: q.CadvisorSelector
) -> list[PodWindow]:
    """Pods with more than one container series (sidecars, restarts), in the order given: the
    ``count_values`` rows of an answer, their counts added per pod UID."""
    counts: dict[tuple[str, str, str], float] = defaultdict(float)
    for sample in answers:
        labels = sample["metric"]
        if q.STAT_VALUE in labels:
            key = (
                labels.get(sel.namespace_label, ""),
                labels.get(sel.pod_label, ""),
                labels.get(q.UID_LABEL, ""),
            )
            counts[key] += sample_value(sample) or 0.0
    most: dict[tuple[str, str], float] = {}
    for (namespace, pod, _uid), n in counts.items():
        most[(namespace, pod)] = max(most.get((namespace, pod), 0.0), n)
    return [p for p in pods if most.get((p.namespace, p.pod), 0) > 1]


def _pod_usage(target: PodWindow, stats: Mapping[str, float]) -> PodUsage:
    series = stats.get("mem.samples.series", 0)
    peak = stats.get("mem.series_peak") if series == 1 else stats.get("mem_sum.peak")
    p95 = stats.get("cpu.p95") if stats.get("cpu.p95.series", 0) == 1 else stats.get("cpu_sum.p95")
    seconds = stats.get("cpu.seconds")
    held = target.held_seconds
    return PodUsage(
        pod_uid=target.uid,
        pod_name=target.pod,
        memory_peak_bytes=_bytes(peak),
        cpu_cores_mean=None if seconds is None or held <= 0 else seconds / held,
        cpu_cores_p95=p95,
        cpu_throttled_seconds=stats.get("cpu.throttled"),
        samples=int(stats.get("mem.samples", 0)),
    )


def mark_shared_gpus(results: Mapping[str, PodMeasurement]) -> dict[str, PodMeasurement]:
    """Flag GPUs that two pods held at overlapping times (time-slicing): their figures are the whole
    GPU's, not either pod's. Only pods of the same round are compared."""
    holders: dict[tuple[str, str], list[PodWindow]] = defaultdict(list)
    for measurement in results.values():
        for gpu in measurement.gpus:
            if gpu.uuid:
                holders[_physical(gpu)].append(measurement.window)
    shared: set[tuple[str, tuple[str, str]]] = set()
    for device, windows in holders.items():
        for i, a in enumerate(windows):
            for b in windows[i + 1 :]:
                if a.uid != b.uid and a.held_from < b.held_until and b.held_from < a.held_until:
                    shared.update({(a.uid, device), (b.uid, device)})
    sharing = {uid for uid, _ in shared}
    # dataclasses.replace is dear and rounds are large: rebuild only the measurements that change.
    return {
        uid: replace(
            m, gpus=tuple(replace(g, shared=True) if (uid, _physical(g)) in shared else g for g in m.gpus)
        )
        if uid in sharing
        else m
        for uid, m in results.items()
    }


def _physical(gpu: GpuUsage) -> tuple[str, str]:
    """(UUID, MIG instance): a MIG instance carries its parent GPU's UUID."""
    return (gpu.uuid or "", gpu.gpu.rsplit("/mig", 1)[1] if "/mig" in gpu.gpu else "")
