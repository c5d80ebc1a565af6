"""What the node agent exposes on ``agent.listen``: the last sample as Prometheus series, and its own health.

Every sample replaces the whole set at once (a custom collector over the latest ``Snapshot``), so
a scrape never sees half of one sample and half of the next, and a series whose figure is missing in
this sample is simply absent — a gap, never a 0. Gaps are counted by figure and reason in the
snapshot, errors by reason in a counter. The registry is the agent's own, never the global one.

Series (``namespace``, ``pod``, ``container`` are the workload's, ``gpu_uuid`` the physical GPU's,
``mig_profile`` and ``gpu_instance`` (MIG GPU instance ID) "" on a whole GPU):

- ``inno_notify_gpu_process_memory_bytes``, ``inno_notify_gpu_process_sm_util_percent`` per container and GPU;
- ``inno_notify_gpu_utilization_percent``, ``inno_notify_gpu_memory_used_bytes``,
  ``inno_notify_gpu_memory_total_bytes``, ``inno_notify_gpu_processes`` per GPU or MIG instance
  (``gpu_instance`` "" on a whole GPU), ``inno_notify_gpu_info`` (model, index, node);
- ``inno_notify_gpu_unattributed_memory_bytes`` / ``_processes`` by reason (host processes, pods not
  known yet, processes that exited);
- ``inno_notify_agent_*``: NVML up, gaps in the last sample, errors, samples, NVML (re)initializations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Counter as CounterMetric
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from inno_notify.domain.agent import Attribution, DeviceReading, Gap, NodeReading, SeriesKey

PROCESS_LABELS = ("namespace", "pod", "container", "gpu_uuid", "mig_profile", "gpu_instance")
DEVICE_LABELS = ("gpu_uuid", "gpu_index", "mig_profile", "gpu_instance")
INFO_LABELS = ("gpu_uuid", "gpu_index", "model", "node")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One sample as the metrics show it."""

    reading: NodeReading = field(default_factory=NodeReading)
    attribution: Attribution = field(default_factory=Attribution)
    finished_at: float | None = None  # unix seconds
    duration_seconds: float | None = None
    pods_known: int | None = None


def _device_labels(device: DeviceReading) -> list[str]:
    instance = "" if device.gpu_instance_id is None else str(device.gpu_instance_id)
    return [device.gpu_uuid, str(device.index), device.mig_profile or "", instance]


class AgentMetrics:
    """The agent's registry; ``publish`` after every sample, ``render`` for ``/metrics``."""

    def __init__(self, node: str, registry: CollectorRegistry | None = None) -> None:
        self.node = node
        self.registry = registry or CollectorRegistry()
        self.snapshot = Snapshot()
        self.samples = 0
        self.inits = 0
        self.errors = CounterMetric(
            "inno_notify_agent_errors",
            "Failed NVML calls (and pod lookups) by reason; a figure the hardware does not support "
            "is a gap, not an error.",
            ["reason"],
            registry=self.registry,
        )
        self.registry.register(_SnapshotCollector(self))

    def publish(self, snapshot: Snapshot, *, inits: int) -> None:
        self.snapshot = snapshot
        self.samples += 1
        self.inits = inits
        for gap in snapshot.attribution.gaps:
            if gap.reason.is_error:
                self.errors.labels(gap.reason.value).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _gauge(name: str, doc: str, labels: Sequence[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


class _SnapshotCollector:
    def __init__(self, metrics: AgentMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Metric]:
        metrics = self._metrics
        snap = metrics.snapshot
        memory = _gauge(
            "inno_notify_gpu_process_memory_bytes",
            "GPU memory used by the container's processes on this GPU (or MIG instance), from NVML.",
            PROCESS_LABELS,
        )
        sm = _gauge(
            "inno_notify_gpu_process_sm_util_percent",
            "Share of the GPU's SM time the container's processes used since the previous sample, "
            "percent of the whole GPU, from NVML's per-process samples.",
            PROCESS_LABELS,
        )
        for series in snap.attribution.series:
            labels = _key_labels(series.key)
            if series.memory_bytes is not None:
                memory.add_metric(labels, series.memory_bytes)
            if series.sm_util_percent is not None:
                sm.add_metric(labels, series.sm_util_percent)
        yield memory
        yield sm

        util = _gauge("inno_notify_gpu_utilization_percent", "GPU utilization (NVML).", DEVICE_LABELS)
        used = _gauge("inno_notify_gpu_memory_used_bytes", "GPU memory in use (NVML).", DEVICE_LABELS)
        total = _gauge("inno_notify_gpu_memory_total_bytes", "GPU memory size (NVML).", DEVICE_LABELS)
        processes = _gauge("inno_notify_gpu_processes", "Compute processes on the GPU (NVML).", DEVICE_LABELS)
        info = _gauge(
            "inno_notify_gpu_info",
            "GPUs this agent reads: 1 per GPU.",
            ("gpu_uuid", "gpu_index", "model", "node"),
        )
        seen: set[str] = set()
        for device in snap.reading.devices:
            labels = _device_labels(device)
            for family, value in (
                (util, device.util_percent),
                (used, device.memory_used_bytes),
                (total, device.memory_total_bytes),
                (processes, None if device.processes is None else len(device.processes)),
            ):
                if value is not None:
                    family.add_metric(labels, value)
            if device.gpu_uuid not in seen:
                seen.add(device.gpu_uuid)
                info.add_metric([device.gpu_uuid, str(device.index), device.model or "", metrics.node], 1)
        yield from (util, used, total, processes, info)

        lost_memory = _gauge(
            "inno_notify_gpu_unattributed_memory_bytes",
            "GPU memory of processes not attributed to a pod, by reason.",
            ("gpu_uuid", "mig_profile", "reason"),
        )
        lost_processes = _gauge(
            "inno_notify_gpu_unattributed_processes",
            "Processes on the GPU not attributed to a pod, by reason.",
            ("gpu_uuid", "mig_profile", "reason"),
        )
        for item in snap.attribution.unattributed:
            labels = [item.gpu_uuid, item.mig_profile, item.reason.value]
            lost_processes.add_metric(labels, item.processes)
            if item.memory_bytes is not None:
                lost_memory.add_metric(labels, item.memory_bytes)
        yield lost_memory
        yield lost_processes

        yield from self._health(snap)

    def _health(self, snap: Snapshot) -> Iterable[Metric]:
        metrics = self._metrics
        up = _gauge("inno_notify_agent_nvml_up", "1 when NVML answered in the last sample.", ())
        up.add_metric([], 1 if snap.reading.nvml_up and snap.finished_at is not None else 0)
        yield up
        gaps = _gauge(
            "inno_notify_agent_gaps",
            "Figures missing from the last sample (their series are absent), by figure, reason and GPU.",
            ("figure", "reason", "gpu_uuid"),
        )
        for (figure, reason, uuid), count in sorted(_count(snap.attribution.gaps).items()):
            gaps.add_metric([figure, reason, uuid], count)
        yield gaps
        samples = CounterMetricFamily("inno_notify_agent_samples", "Samples taken.", labels=[])
        samples.add_metric([], metrics.samples)
        yield samples
        inits = CounterMetricFamily(
            "inno_notify_agent_nvml_inits",
            "Successful NVML initializations; more than one means NVML was started again (driver reload).",
            labels=[],
        )
        inits.add_metric([], metrics.inits)
        yield inits
        # Gauges of the last sample, each exported once the agent has a value for it.
        last_sample: tuple[tuple[str, str, float | None], ...] = (
            ("inno_notify_agent_last_sample_timestamp_seconds", "End of the last sample.", snap.finished_at),
            (
                "inno_notify_agent_sample_duration_seconds",
                "Duration of the last sample.",
                snap.duration_seconds,
            ),
            ("inno_notify_agent_pods_known", "Pods of this node the agent knows.", snap.pods_known),
        )
        for name, documentation, value in last_sample:
            if value is not None:
                gauge = _gauge(name, documentation, ())
                gauge.add_metric([], value)
                yield gauge


def _key_labels(key: SeriesKey) -> list[str]:
    return [key.namespace, key.pod, key.container, key.gpu_uuid, key.mig_profile, key.gpu_instance]


def _count(gaps: Iterable[Gap]) -> Counter[tuple[str, str, str]]:
    return Counter((gap.figure, gap.reason.value, gap.gpu_uuid) for gap in gaps)
