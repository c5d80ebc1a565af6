"""The node agent's per-process series, for pods on shared GPUs: whose GPU was shared, and each pod's share.

On a time-sliced GPU dcgm-exporter's figures are the whole GPU's (FACTS.md), so they are not any one
pod's. The node agent (``inno-notify agent``, docs/agent.md) exports per container and GPU the
memory and SM utilization of the container's own processes. After ``measure`` has read dcgm-exporter,
this module finds which of the round's GPUs were shared and, where the agent read them, puts the
pod's own share in place of the whole-GPU row (``source="nvml_agent"``, ``shared=True`` and how the
sharing was found in ``sharing``). A shared GPU the agent did not read keeps its dcgm row, marked
shared: accounting then states no figure rather than the whole GPU's.

A GPU is shared for a pod when
- the pod asked for a time-sliced resource (``PodWindow.shared_resource``: ``resource``);
- another pod was on the same GPU (UUID, MIG profile and instance) while this one held it, in
  dcgm-exporter's pod labels (``overlap``) or in the agent's process series (``agent_processes``).
  This is read over each pod's own time, so pods measured in different rounds (one ended hours
  before the other) are found too; within a round ``measure.mark_shared_gpus`` already compared them.

Queries per bucket of the round, none per pod:
1. ``agent_probe``: which GPUs the agent read in the bucket's range (model, memory size) and whether
   its workload labels arrived as ``exported_*`` (a scrape without ``honor_labels``);
2. ``agent`` (only where the agent read something): per pod and GPU, the peak of its processes'
   memory summed at one instant, and the sum, count and maximum of its SM utilization samples;
3. ``sharing`` (only where the round measured GPUs): one subquery over the bucket's range at the
   scrape step, for every GPU of the round: the timestamps of the agent's samples of it and of each
   pod's series on it (agent and dcgm-exporter). Each pod's own time is read out of them in Python.

A pod's share of a GPU: memory is the peak of its own processes; utilization the sum of its
processes' SM utilization over the agent's samples of that GPU in the pod's time, divided by their
number. A sample in which the pod had no process counts as 0 % and 0 bytes — the agent read the GPU
and the pod was not on it — but a GPU the agent read for less than half of the pod's time gives no
figure (``MIN_COVERAGE``): an agent that was down is not a pod that was idle.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.batching import Bucket, PodWindow, chunk_pods, plan_buckets
from inno_notify.adapters.prometheus.client import PrometheusClient, Sample
from inno_notify.domain.model import GPU_SOURCE_AGENT, GpuUsage

# The agent's metrics (inno_notify.service.agent_metrics).
PROCESS_MEMORY = "inno_notify_gpu_process_memory_bytes"
PROCESS_SM = "inno_notify_gpu_process_sm_util_percent"
DEVICE_TOTAL = "inno_notify_gpu_memory_total_bytes"
GPU_INFO = "inno_notify_gpu_info"
AGENT_GPU = ("gpu_uuid", "mig_profile", "gpu_instance")
DCGM_GPU = ("UUID", "GPU_I_PROFILE", "GPU_I_ID")

SHARING_RESOURCE = "resource"
SHARING_OVERLAP = "overlap"
SHARING_AGENT = "agent_processes"
# The agent must have read the GPU for at least this share of the pod's time.
MIN_COVERAGE = 0.5
# Another pod's processes must be on the GPU in at least two of the agent's samples within the pod's
# time: a single sample can be the last of the previous pod, taken as this one was scheduled.
MIN_AGENT_SAMPLES_TOGETHER = 2
# dcgm-exporter may label a GPU with the pod that held it until the kubelet hands the GPU to the
# next one (its collection runs every 30 s): its pod labels must overlap for longer than that.
MIN_DCGM_OVERLAP_SECONDS = 120.0
# Steps of the sharing subquery at most; a bucket longer than this many scrapes gets coarser steps.
MAX_STEPS = 2000

# (UUID, MIG profile, MIG GPU instance): "" for the last two on a whole GPU.
GpuKey = tuple[str, str, str]
_Pod = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, slots=True)
class AgentLabels:
    """How the agent's workload labels arrive in Prometheus (plain with ``honor_labels``, else
    ``exported_*``)."""

    namespace: str = "namespace"
    pod: str = "pod"

    def selector(self, metric: str, pods: str, namespaces: str) -> str:
        return f'{metric}{{{self.namespace}=~"{namespaces}",{self.pod}=~"{pods}"}}'

    def group_by(self) -> str:
        return ", ".join((self.namespace, self.pod, *AGENT_GPU))


@dataclass(slots=True)
class _Figures:
    mem_peak: float | None = None
    mem_samples: float = 0.0
    util_sum: float | None = None
    util_samples: float = 0.0
    util_max: float | None = None


@dataclass(slots=True)
class _Bucketed:
    """What the queries of one bucket said."""

    models: dict[str, str] = field(default_factory=dict)  # agent GPUs: uuid -> model
    totals: dict[GpuKey, float] = field(default_factory=dict)
    figures: dict[tuple[_Pod, GpuKey], _Figures] = field(default_factory=dict)
    # Sample timestamps: the agent's of each GPU, and each pod's on each GPU (agent, dcgm-exporter).
    device_samples: dict[GpuKey, set[float]] = field(default_factory=dict)
    agent_pods: dict[GpuKey, dict[_Pod, set[float]]] = field(default_factory=dict)
    dcgm_pods: dict[GpuKey, dict[_Pod, set[float]]] = field(default_factory=dict)
    step: float = 0.0


_FIGURE_STATS = frozenset({"mem_peak", "mem_samples", "util_sum", "util_samples", "util_max"})


def _tag(expr: str, stat: str) -> str:
    return f'label_replace({expr}, "{q.STAT}", "{stat}", "", "")'


def probe_query(window: q.Window, pod_labels: Sequence[str]) -> str:
    """GPUs the agent read (model; memory size per instance) and which pod label spellings occur."""
    rng = window.range()
    parts = [
        _tag(f"max by (gpu_uuid, model) (last_over_time({GPU_INFO}{rng}))", "gpu"),
        _tag(f"max by ({', '.join(AGENT_GPU)}) (max_over_time({DEVICE_TOTAL}{rng}))", "total"),
    ]
    for label in pod_labels:
        count = f'count(last_over_time({PROCESS_MEMORY}{{{label}!=""}}{rng}))'
        parts.append(f'label_replace({_tag(count, "spelling")}, "label", "{label}", "", "")')
    return " or ".join(parts)


def figures_query(labels: AgentLabels, pods: str, namespaces: str, window: q.Window) -> str:
    """Per pod and GPU: peak summed memory, memory sample count, SM utilization sum/count/max."""
    memory = labels.selector(PROCESS_MEMORY, pods, namespaces)
    sm = labels.selector(PROCESS_SM, pods, namespaces)
    by = labels.group_by()
    rng = window.range()
    return " or ".join(
        (
            _tag(f"max_over_time(sum by ({by}) ({memory}){window.subquery()})", "mem_peak"),
            _tag(f"max by ({by}) (count_over_time({memory}{rng}))", "mem_samples"),
            _tag(f"sum by ({by}) (sum_over_time({sm}{rng}))", "util_sum"),
            _tag(f"max by ({by}) (count_over_time({sm}{rng}))", "util_samples"),
            _tag(f"max by ({by}) (max_over_time({sm}{rng}))", "util_max"),
        )
    )


def sharing_query(
    uuids: str,
    window: q.Window,
    step: int,
    labels: AgentLabels,
    dcgm: q.DcgmSelector | None,
) -> str:
    """At every step of the bucket's range, for the GPUs in ``uuids``, the timestamp of the latest
    sample: of the agent's reading of each GPU (``device``), and of each pod's series on it
    (``agent_pod``, ``dcgm_pod``). Collected over the steps, they are the sample times themselves,
    which Python then counts within each pod's own time: exact whatever the range boundaries of the
    Prometheus version, and unmoved by the lookback that repeats a sample after its series ends."""
    agent_gpu = ", ".join(AGENT_GPU)
    parts = [
        _tag(f'max by ({agent_gpu}) (timestamp({DEVICE_TOTAL}{{gpu_uuid=~"{uuids}"}}))', "device"),
        _tag(
            f"max by ({agent_gpu}, {labels.namespace}, {labels.pod}) "
            f'(timestamp({PROCESS_MEMORY}{{gpu_uuid=~"{uuids}"}}))',
            "agent_pod",
        ),
    ]
    if dcgm is not None:
        parts.append(
            _tag(
                f"max by ({', '.join(DCGM_GPU)}, {dcgm.namespace_label}, {dcgm.pod_label}) "
                f'(timestamp({q.FB_USED}{{UUID=~"{uuids}"}}))',
                "dcgm_pod",
            )
        )
    return f"({' or '.join(parts)})[{window.range_seconds}s:{step}s] @ {window.at:.3f}"


def gpu_key(gpu: GpuUsage) -> GpuKey | None:
    """The key of a measured row: dcgm-exporter's ``<host>/<index>/mig<GPU_I_ID>`` names the instance."""
    if not gpu.uuid:
        return None
    instance = gpu.gpu.rsplit("/mig", 1)[1] if "/mig" in gpu.gpu else ""
    return (gpu.uuid, gpu.mig_profile or "", instance)


class AgentSeries:
    """Replaces the rows of shared GPUs by the agent's per-pod share; see the module docstring."""

    def __init__(
        self,
        client: PrometheusClient,
        *,
        scrape_interval_seconds: float = 15.0,
        bucket_gap_seconds: float = 6 * 3600,
        budget_bytes: Callable[[], int],
        labels: q.LabelConfig | None = None,
    ) -> None:
        self._client = client
        self._scrape = scrape_interval_seconds
        self._gap = bucket_gap_seconds
        self._budget = budget_bytes
        self._labels = labels or q.LabelConfig()
        self._spelling: AgentLabels | None = None
        self.last_queries_by_kind: Counter[str] = Counter()

    async def prefer_for_shared(
        self,
        targets: Sequence[PodWindow],
        gpus: Mapping[str, tuple[GpuUsage, ...]],
        dcgm: q.DcgmSelector | None,
    ) -> dict[str, tuple[GpuUsage, ...]]:
        """The GPU rows of every target after sharing is decided (the same tuple where nothing changed)."""
        self.last_queries_by_kind = Counter()
        result = dict(gpus)
        buckets = plan_buckets(targets, scrape_seconds=self._scrape, gap_seconds=self._gap)
        for bucket in buckets:
            found = await self._read(bucket, gpus, dcgm)
            for target in bucket.pods:
                rows = gpus.get(target.uid, ())
                result[target.uid] = self._decide(target, rows, found)
        return result

    # -- queries ------------------------------------------------------------------------------

    async def _query(self, kind: str, promql: str) -> list[Sample]:
        self.last_queries_by_kind[kind] += 1
        return await self._client.query(promql)

    async def _read(
        self, bucket: Bucket, gpus: Mapping[str, tuple[GpuUsage, ...]], dcgm: q.DcgmSelector | None
    ) -> _Bucketed:
        found = _Bucketed()
        window = bucket.window
        spellings = self._labels.dcgm_spellings()
        for sample in await self._query("agent_probe", probe_query(window, [pod for pod, _ in spellings])):
            labels = sample["metric"]
            stat, value = labels.get(q.STAT), _value(sample)
            if stat == "gpu" and labels.get("gpu_uuid"):
                found.models[labels["gpu_uuid"]] = labels.get("model", "")
            elif stat == "total" and value is not None:
                found.totals[_agent_key(labels)] = value
            elif stat == "spelling" and value:
                # The spelling that exists besides the plain one wins (exported_pod means the plain
                # `pod` is the agent's own pod, set by the scrape).
                for pod_label, ns_label in spellings[::-1]:
                    if pod_label == labels.get("label"):
                        if self._spelling is None or pod_label != spellings[0][0]:
                            self._spelling = AgentLabels(namespace=ns_label, pod=pod_label)
                        break
        agent = self._spelling or AgentLabels(namespace=spellings[0][1], pod=spellings[0][0])
        by_name = {(p.namespace, p.pod): p for p in bucket.pods}
        if found.models:
            for _pods, promql in self._chunks(bucket.pods, lambda p, n, w: figures_query(agent, p, n, w)):
                for sample in await self._query("agent", promql):
                    self._add_figure(found, sample, agent, by_name)

        uuids = sorted(
            {g.uuid for p in bucket.pods for g in gpus.get(p.uid, ()) if g.uuid}
            | {gpu[0] for _pod, gpu in found.figures}
        )
        if not uuids:
            return found
        scrape = max(1, round(self._scrape))
        step = max(scrape, math.ceil(window.range_seconds / MAX_STEPS))
        found.step = float(step)
        for chunk in self._uuid_chunks(uuids, lambda u: sharing_query(u, window, step, agent, dcgm)):
            for sample in await self._query("sharing", chunk):
                self._add_presence(found, sample, agent, dcgm)
        return found

    def _chunks(
        self, pods: Sequence[PodWindow], build: Callable[[str, str, q.Window], str]
    ) -> list[tuple[tuple[PodWindow, ...], str]]:
        return chunk_pods(pods, build, max_url_bytes=self._budget(), scrape_seconds=self._scrape)

    def _uuid_chunks(self, uuids: list[str], build: Callable[[str], str]) -> list[str]:
        """Queries over groups of GPUs, each within the byte budget (the UUIDs are the regex)."""
        budget = self._budget()
        queries: list[str] = []
        group: list[str] = []
        for uuid in uuids:
            if group and len(build(q.regex_alternation([*group, uuid])).encode()) > budget:
                queries.append(build(q.regex_alternation(group)))
                group = []
            group.append(uuid)
        if group:
            queries.append(build(q.regex_alternation(group)))
        return queries

    @staticmethod
    def _add_figure(
        found: _Bucketed, sample: Sample, agent: AgentLabels, by_name: Mapping[_Pod, PodWindow]
    ) -> None:
        labels = sample["metric"]
        pod = (labels.get(agent.namespace, ""), labels.get(agent.pod, ""))
        value = _value(sample)
        if pod not in by_name or value is None:
            return
        stat = labels.get(q.STAT)
        if stat in _FIGURE_STATS:
            setattr(found.figures.setdefault((pod, _agent_key(labels)), _Figures()), stat, value)

    @staticmethod
    def _add_presence(
        found: _Bucketed, sample: Sample, agent: AgentLabels, dcgm: q.DcgmSelector | None
    ) -> None:
        labels = sample["metric"]
        stat = labels.get(q.STAT)
        # The value at each step is a sample's timestamp (ms precision); the steps repeat them.
        stamps = {round(v, 3) for t, v in (_point(p) for p in sample.get("values") or ()) if t is not None}
        if stat == "device":
            found.device_samples.setdefault(_agent_key(labels), set()).update(stamps)
            return
        if stat == "agent_pod":
            key, pod = _agent_key(labels), (labels.get(agent.namespace, ""), labels.get(agent.pod, ""))
            seen = found.agent_pods
        elif stat == "dcgm_pod" and dcgm is not None:
            key = (labels.get("UUID", ""), labels.get("GPU_I_PROFILE", ""), labels.get("GPU_I_ID", ""))
            pod = (labels.get(dcgm.namespace_label, ""), labels.get(dcgm.pod_label, ""))
            seen = found.dcgm_pods
        else:
            return
        if pod[1]:  # dcgm-exporter's series of an idle GPU carry no pod
            seen.setdefault(key, {}).setdefault(pod, set()).update(stamps)

    # -- decisions ----------------------------------------------------------------------------

    def _decide(
        self, target: PodWindow, rows: tuple[GpuUsage, ...], found: _Bucketed
    ) -> tuple[GpuUsage, ...]:
        name = (target.namespace, target.pod)
        by_key: dict[GpuKey, list[GpuUsage]] = defaultdict(list)
        unkeyed: list[GpuUsage] = []
        for row in rows:
            key = gpu_key(row)
            if key is None:
                unkeyed.append(row)
            else:
                by_key[key].append(row)
        for pod, key in found.figures:
            if pod == name and key not in by_key:
                by_key[key] = []  # a GPU only the agent saw this pod on
        if not by_key:
            return rows
        decided: list[GpuUsage] = list(unkeyed)
        changed = False
        for key, dcgm_rows in by_key.items():
            sharing = self._sharing(target, key, dcgm_rows, found)
            agent_row = self._agent_row(target, key, dcgm_rows, found, sharing)
            if sharing is not None and agent_row is not None:
                decided.append(agent_row)
                changed = True
            elif sharing is not None:
                marked = [replace(r, shared=True, sharing=r.sharing or sharing) for r in dcgm_rows]
                changed = changed or marked != dcgm_rows
                decided.extend(marked)
            elif dcgm_rows:
                decided.extend(dcgm_rows)
            elif agent_row is not None:
                decided.append(agent_row)  # dcgm-exporter did not label this pod's GPU; the agent did
                changed = True
        return tuple(decided) if changed else rows

    def _sharing(
        self, target: PodWindow, key: GpuKey, dcgm_rows: Sequence[GpuUsage], found: _Bucketed
    ) -> str | None:
        if target.shared_resource:
            return SHARING_RESOURCE
        if any(r.shared for r in dcgm_rows):
            return next((r.sharing for r in dcgm_rows if r.sharing), SHARING_OVERLAP)
        if self._others(
            target, found.agent_pods.get(key, {}), lambda t: len(t) >= MIN_AGENT_SAMPLES_TOGETHER
        ):
            return SHARING_AGENT
        if self._others(
            target, found.dcgm_pods.get(key, {}), lambda t: max(t) - min(t) >= MIN_DCGM_OVERLAP_SECONDS
        ):
            return SHARING_OVERLAP
        return None

    @staticmethod
    def _others(
        target: PodWindow, present: Mapping[_Pod, set[float]], enough: Callable[[list[float]], bool]
    ) -> bool:
        """Whether another pod's samples on the GPU within this pod's time are ``enough``."""
        start, end = target.held_from.timestamp(), target.held_until.timestamp()
        for pod, stamps in present.items():
            if pod == (target.namespace, target.pod):
                continue
            inside = [t for t in stamps if start <= t <= end]
            if inside and enough(inside):
                return True
        return False

    def _agent_row(
        self,
        target: PodWindow,
        key: GpuKey,
        dcgm_rows: Sequence[GpuUsage],
        found: _Bucketed,
        sharing: str | None,
    ) -> GpuUsage | None:
        uuid, profile, instance = key
        if uuid not in found.models:
            return None  # no agent on that GPU's node
        start, end = target.held_from.timestamp(), target.held_until.timestamp()
        seen = sum(1 for t in found.device_samples.get(key, ()) if start <= t <= end)
        # A step longer than the scrape interval sees one sample per step of the several taken.
        samples = seen * max(1.0, (found.step or self._scrape) / self._scrape)
        if samples <= 0 or samples * self._scrape < MIN_COVERAGE * target.held_seconds:
            return None
        figures = found.figures.get(((target.namespace, target.pod), key))
        if figures is None:
            memory: float | None = 0.0  # the agent read the GPU and this pod had no process on it
            util: float | None = 0.0
            util_max: float | None = 0.0
        else:
            memory = figures.mem_peak if figures.mem_samples else None
            if figures.util_samples and figures.util_sum is not None:
                util = min(100.0, figures.util_sum / max(samples, figures.util_samples))
                util_max = figures.util_max
            else:
                util = util_max = None  # processes seen, per-process utilization not reported
        first = dcgm_rows[0] if dcgm_rows else None
        total = found.totals.get(key)
        gpu_name = first.gpu if first is not None else "/".join(p for p in (uuid, profile, instance) if p)
        return GpuUsage(
            pod_uid=target.uid,
            pod_name=target.pod,
            gpu=gpu_name,
            uuid=uuid,
            model=(first.model if first is not None else None) or found.models.get(uuid) or None,
            mig_profile=profile or None,
            held_minutes=target.held_seconds / 60,
            util_mean_percent=util,
            util_max_percent=util_max,
            fb_used_peak_bytes=None if memory is None else round(memory),
            fb_total_bytes=round(total) if total is not None else (first.fb_total_bytes if first else None),
            shared=sharing is not None,
            samples=round(samples),
            source=GPU_SOURCE_AGENT,
            sharing=sharing,
        )


def _agent_overlap(stamps: list[float]) -> bool:
    return len(stamps) >= MIN_AGENT_SAMPLES_TOGETHER


def _dcgm_overlap(stamps: list[float]) -> bool:
    return max(stamps) - min(stamps) >= MIN_DCGM_OVERLAP_SECONDS


def _agent_key(labels: Mapping[str, str]) -> GpuKey:
    return (labels.get("gpu_uuid", ""), labels.get("mig_profile", ""), labels.get("gpu_instance", ""))


def _value(sample: Sample) -> float | None:
    try:
        value = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _point(point: object) -> tuple[float | None, float]:
    """One ``[t, "value"]`` pair of a matrix answer; (None, 0) for anything else."""
    if not isinstance(point, list | tuple) or len(point) != 2:
        return None, 0.0
    try:
        return float(point[0]), float(point[1])
    except (TypeError, ValueError):
        return None, 0.0
