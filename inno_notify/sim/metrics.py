"""Synthetic DCGM and cAdvisor traces of the simulated workload, served like the Prometheus meter.

For the demo without a Prometheus server: `SimMetrics.measure_pods` has the signature of the
Prometheus adapter's `UsageMeter.measure_pods`, and `SimMetrics.observe` that of the live meter's
`LiveMeter.observe` (what running pods' GPUs did over the last window); both answer from sample
traces generated every `scrape_seconds` (utilization with noise around each GPU's true mean,
framebuffer ramping to its peak, the pod's working set with its short spike, CPU with noise).
The figures come out of the samples the same way PromQL would compute them (mean, max, p95 over
the held interval), so a job shorter than one scrape has no samples and its figures are missing,
exactly as in production. The same samples, averaged (utilization) or maxed (memory) per step of
the job's grid (domain.series), are its usage series, as Prometheus' range queries would give them.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.live_meter import LiveTarget
from inno_notify.adapters.prometheus.measure import PodMeasurement
from inno_notify.domain.live import GpuWindow
from inno_notify.domain.model import GpuUsage, PodUsage
from inno_notify.domain.series import PodPoints, grid_time, series_step
from inno_notify.sim.behaviour import GIB, Behaviour
from inno_notify.sim.workload import GPU_MODEL, SimJob, SimWorkspace, gpu_model_of

MIB = 1024 * 1024


def _sample_times(start: datetime, end: datetime, step: float) -> list[datetime]:
    """Scrape instants strictly inside (start, end]: a scrape lands every `step` seconds of the epoch."""
    first = math.floor(start.timestamp() / step) * step + step
    times = []
    t = first
    while t <= end.timestamp():
        times.append(datetime.fromtimestamp(t, tz=start.tzinfo))
        t += step
    return times


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


class SimMetrics:
    """Measures simulated pods from their traces; `queries` counts calls like the meter counts queries."""

    def __init__(
        self,
        jobs: Sequence[SimJob],
        scrape_seconds: float = 15.0,
        pods: Mapping[str, Behaviour] | None = None,
        workspaces: Sequence[SimWorkspace] = (),
        spans: Mapping[str, tuple[str, datetime, datetime | None]] | None = None,
    ) -> None:
        """`pods`: more pods to answer for (workflow steps, training pods), each with how it really
        ran; `workspaces`: notebook servers, which the live check looks at while they run; `spans`:
        more of `pods` for the live check, each with its node and when it held its GPUs (until
        None: still holding)."""
        self._by_pod: dict[str, tuple[Behaviour, str | None]] = {
            job.pod_uid: (job.behaviour, job.mig_profile) for job in jobs
        }
        self._by_pod.update({uid: (behaviour, None) for uid, behaviour in (pods or {}).items()})
        self._by_pod.update({w.pod_uid: (w.behaviour, None) for w in workspaces})
        # What the live check needs besides: when each pod ran, and on which node.
        self._jobs = {job.pod_uid: job for job in jobs}
        # The `modelName` of each pod's GPUs: a job's by its node (two models), the others' H100.
        self._models = {job.pod_uid: gpu_model_of(job.node) for job in jobs}
        self._workspaces = {w.pod_uid: w for w in workspaces}
        self._spans = {uid: span for uid, span in (spans or {}).items() if uid in self._by_pod}
        self._step = scrape_seconds
        self.calls = 0

    async def observe(
        self, targets: Sequence[LiveTarget], now: datetime, window_seconds: float, idle_util_percent: float
    ) -> Mapping[str, tuple[GpuWindow, ...]]:
        """Per running pod, its GPUs over the last window, from the same traces as measure_pods."""
        self.calls += 1
        found: dict[str, tuple[GpuWindow, ...]] = {}
        for target in targets:
            running = self._running(target.uid)
            if running is None:
                continue
            means, fb_gib, mig, node, start, end = running
            window = _sample_times(now - timedelta(seconds=window_seconds), min(now, end), self._step)
            history = _sample_times(start, min(now, end), self._step)
            gpus = []
            for index, mean in enumerate(means):
                utils = [self._util(target.uid, index, mean, t) for t in window]
                if not utils:
                    continue
                busy = None
                if max(utils) < idle_util_percent:
                    busy = next(
                        (
                            t
                            for t in reversed(history)
                            if self._util(target.uid, index, mean, t) >= idle_util_percent
                        ),
                        None,
                    )
                gpus.append(
                    GpuWindow(
                        gpu=str(index),
                        uuid=f"GPU-{target.uid[:8]}-{index}",
                        model=self._models.get(target.uid, GPU_MODEL),
                        mig_profile=mig,
                        host=node,
                        util_max_percent=max(utils),
                        samples=len(utils),
                        fb_held_mib=fb_gib[index] * GIB / MIB,
                        busy_at=busy,
                    )
                )
            if gpus:
                found[target.uid] = tuple(gpus)
        return found

    def _running(
        self, uid: str
    ) -> tuple[tuple[float, ...], tuple[float, ...], str | None, str, datetime, datetime] | None:
        if uid in self._workspaces:
            w = self._workspaces[uid]
            return (0.0,) * w.gpus, (w.gpu_memory_gib,) * w.gpus, None, w.node, w.start, w.stop
        if uid in self._spans:
            node, start, end = self._spans[uid]
            b = self._by_pod[uid][0]
            return (
                b.gpu_util_percent,
                b.gpu_memory_gib,
                None,
                node,
                start,
                end or datetime.max.replace(tzinfo=UTC),
            )
        job = self._jobs.get(uid)
        if job is None:
            return None
        b = job.behaviour
        return b.gpu_util_percent, b.gpu_memory_gib, job.mig_profile, job.node, job.scheduled_at, job.ends_at

    @staticmethod
    def _util(uid: str, index: int, mean: float, at: datetime) -> float:
        # The same noise around the GPU's mean as measure_pods draws, seeded per sample so that
        # every look at one instant sees the same value.
        rng = random.Random(f"{uid}/{index}/{at.timestamp():.0f}")
        return min(100.0, max(0.0, rng.gauss(mean, min(8.0, mean / 4))))

    async def measure_pods(self, targets: Sequence[PodWindow]) -> Mapping[str, PodMeasurement]:
        self.calls += 1
        spans: dict[str, list[float]] = defaultdict(list)
        for t in targets:
            spans[t.job_uid or t.uid] += [t.held_from.timestamp(), t.held_until.timestamp()]
        steps = {job: series_step(max(ends) - min(ends), self._step) for job, ends in spans.items()}
        return {t.uid: self._measure(t, steps[t.job_uid or t.uid]) for t in targets if t.uid in self._by_pod}

    def _measure(self, window: PodWindow, step: int) -> PodMeasurement:
        behaviour, mig_profile = self._by_pod[window.uid]
        times = _sample_times(window.held_from, window.held_until, self._step)
        rng = random.Random(window.uid)
        util_points: dict[str, dict[int, float]] = {}
        fb_points: dict[str, dict[int, float]] = {}
        gpus = []
        for g in range(len(behaviour.gpu_util_percent)):
            usage, utils, fbs = self._gpu(behaviour, mig_profile, window, g, times, rng)
            gpus.append(usage)
            util_points[usage.gpu] = _per_step(times, utils, step, mean=True)
            fb_points[usage.gpu] = _per_step(times, fbs, step, mean=False)
        pod, memory = self._pod(behaviour, window, times, rng)
        points = PodPoints(
            window.uid,
            window.pod,
            step,
            gpu_util=util_points,
            gpu_memory=fb_points,
            memory=_per_step(times, memory, step, mean=False),
        )
        return PodMeasurement(window=window, gpus=tuple(gpus), pod=pod, points=points)

    def _gpu(
        self,
        behaviour: Behaviour,
        mig_profile: str | None,
        window: PodWindow,
        index: int,
        times: list[datetime],
        rng: random.Random,
    ) -> tuple[GpuUsage, list[float], list[float]]:
        mean = behaviour.gpu_util_percent[index]
        peak_fb = behaviour.gpu_memory_gib[index] * GIB
        utils = [min(100.0, max(0.0, rng.gauss(mean, min(8.0, mean / 4)))) for _ in times]
        ramp = [min(1.0, (i + 1) / 8) for i in range(len(times))]
        fbs = [peak_fb * r for r in ramp]
        total = 80 * GIB if mig_profile is None else 10 * GIB
        # dcgm-exporter reports MiB: round like the exporter does.
        fbs = [float(int(fb // MIB * MIB)) for fb in fbs]
        usage = GpuUsage(
            pod_uid=window.uid,
            pod_name=window.pod,
            gpu=str(index),
            uuid=f"GPU-{window.uid[:8]}-{index}" if mig_profile is None else f"MIG-{window.uid[:8]}",
            model=self._models.get(window.uid, GPU_MODEL),
            mig_profile=mig_profile,
            held_minutes=window.held_seconds / 60,
            util_mean_percent=sum(utils) / len(utils) if utils else None,
            util_max_percent=max(utils) if utils else None,
            fb_used_peak_bytes=int(max(fbs)) if fbs else None,
            fb_total_bytes=int(total),
            samples=len(utils),
        )
        return usage, utils, fbs

    def _pod(
        self, b: Behaviour, window: PodWindow, times: list[datetime], rng: random.Random
    ) -> tuple[PodUsage, list[float]]:
        spike_at = window.held_from + (window.held_until - window.held_from) * 0.7
        spike_end = spike_at + timedelta(seconds=max(b.memory_spike_seconds, self._step))
        memory = [
            b.memory_peak_bytes
            if spike_at <= t <= spike_end
            else b.memory_peak_bytes * rng.uniform(0.55, 0.65)
            for t in times
        ]
        cpus = [max(0.05, rng.gauss(b.cpu_cores, b.cpu_cores / 6)) for _ in times]
        usage = PodUsage(
            pod_uid=window.uid,
            pod_name=window.pod,
            memory_peak_bytes=int(max(memory)) if memory else None,
            cpu_cores_mean=sum(cpus) / len(cpus) if cpus else None,
            cpu_cores_p95=_p95(cpus) if cpus else None,
            samples=len(times),
        )
        return usage, memory


def _per_step(
    times: Sequence[datetime], values: Sequence[float], step: int, *, mean: bool
) -> dict[int, float]:
    """Samples on the job's grid: each step's mean (utilization) or peak (memory)."""
    buckets: dict[int, list[float]] = defaultdict(list)
    for t, value in zip(times, values, strict=True):
        buckets[grid_time(t.timestamp(), step)].append(value)
    return {g: (sum(v) / len(v) if mean else max(v)) for g, v in buckets.items()}
