"""The node agent's per-process series, for pods on shared GPUs: whose GPU was shared, and each pod's share.

On a time-sliced GPU dcgm-exporter's figures are the whole GPU's (FACTS.md), so they are not any one
pod's. The node agent (``inno-notify agent``, docs/agent.md) exports per container and GPU the
memory and SM utilization of the container's own processes. After ``measure`` has read dcgm-exporter,
this module finds which of the round's GPUs were shared and, where the agent read them, puts the
pod's own share in place of the whole-GPU row (``source="nvml_agent"``, ``shared=True``, and how the
sharing was found in ``sharing``). A shared GPU the agent did not read keeps its dcgm row, marked
shared: accounting then states no figure rather than the whole GPU's.

A GPU is shared for a pod when
- the pod asked for a time-sliced resource (``PodWindow.shared_resource``: ``resource``);
- the round itself shows another pod on it at the same time (``measure.mark_shared_gpus``:
  ``overlap``);
- the agent saw another pod's processes on it while this pod held it (``agent_processes``), read
  over the pod's own time, so a pod measured hours before or after this one counts too. Without
  the agent, pods of different rounds are not compared: dcgm-exporter gives a time-sliced GPU's
  labels to one of its pods only, and reading every GPU's label history for every round would cost
  more than the rest of the round together.

Queries per bucket of the round (none at all beyond the probe where no agent runs):
1. ``agent_probe``: which GPUs the agent read in the bucket's range (model; memory size per
   instance) and whether its workload labels arrived as ``exported_*`` (a scrape without
   ``honor_labels``);
2. ``agent``: per pod and GPU, the peak of its processes' memory, and the sum, count and maximum of
   its SM utilization samples (pod-labelled series exist only while the pod ran, as for
   dcgm-exporter); ``agent_sum``: the peak of the sum for pods with several container series;
3. ``agent_window``: for each pod on a GPU the agent reads, over the pod's own time (its own range
   and ``@``): how many samples the agent took of the GPU, and how many each pod had on it. The
   terms of many pods go into one query, up to the byte budget.

A pod's share of a GPU: memory is the peak of its own processes; utilization the sum of its
processes' SM utilization over the agent's samples of that GPU in the pod's time, divided by their
number. A sample in which the pod had no process counts as 0 % and 0 bytes — the agent read the GPU
and the pod was not on it — but a GPU the agent read for less than half of the pod's time gives no
figure (``MIN_COVERAGE``): an agent that was down is not a pod that was idle.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import quote_plus

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.batching import Bucket, PodWindow, chunk_pods, plan_buckets
from inno_notify.adapters.prometheus.client import PrometheusClient, Sample, sample_value
from inno_notify.domain.model import GPU_SOURCE_AGENT, GpuUsage
from inno_notify.domain.parsing.storable import label_name

# The agent's metrics (inno_notify.service.agent_metrics).
PROCESS_MEMORY = "inno_notify_gpu_process_memory_bytes"
PROCESS_SM = "inno_notify_gpu_process_sm_util_percent"
DEVICE_TOTAL = "inno_notify_gpu_memory_total_bytes"
GPU_INFO = "inno_notify_gpu_info"
AGENT_GPU = ("gpu_uuid", "mig_profile", "gpu_instance")

SHARING_RESOURCE = "resource"
SHARING_OVERLAP = "overlap"
SHARING_AGENT = "agent_processes"
# The agent must have read the GPU for at least this share of the pod's time.
MIN_COVERAGE = 0.5
# Another pod's processes must be on the GPU in at least this many of the agent's samples within
# the pod's time: a single one can be the last of the previous pod, taken as this one was scheduled.
MIN_SAMPLES_TOGETHER = 2

# (UUID, MIG profile, MIG GPU instance): "" for the last two on a whole GPU.
GpuKey = tuple[str, str, str]
_Pod = tuple[str, str]  # (namespace, name)
_FIGURE_STATS = frozenset({"mem_peak", "mem_series", "mem_samples", "util_sum", "util_samples", "util_max"})
_POD_UID = "pod_uid"


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
    mem_series: float = 0.0
    mem_samples: float = 0.0
    util_sum: float | None = None
    util_samples: float = 0.0
    util_max: float | None = None


@dataclass(slots=True)
class _Found:
    """What the queries of one bucket said."""

    models: dict[str, str] = field(default_factory=dict)  # GPUs the agent read: uuid -> model
    totals: dict[GpuKey, float] = field(default_factory=dict)
    figures: dict[tuple[_Pod, GpuKey], _Figures] = field(default_factory=dict)
    # Within each pod's own time (by pod uid): the agent's samples of the GPU, and each pod's on it.
    device_samples: dict[tuple[str, GpuKey], float] = field(default_factory=dict)
    pod_samples: dict[tuple[str, GpuKey], dict[_Pod, float]] = field(default_factory=dict)


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
    """Per pod and GPU: the peak of its largest container series and how many series it has, its
    memory sample count, and the sum, count and maximum of its SM utilization samples."""
    memory = labels.selector(PROCESS_MEMORY, pods, namespaces) + window.range()
    sm = labels.selector(PROCESS_SM, pods, namespaces) + window.range()
    by = labels.group_by()
    return " or ".join(
        (
            _tag(f"max by ({by}) (max_over_time({memory}))", "mem_peak"),
            _tag(f"count by ({by}) (max_over_time({memory}))", "mem_series"),
            _tag(f"max by ({by}) (count_over_time({memory}))", "mem_samples"),
            _tag(f"sum by ({by}) (sum_over_time({sm}))", "util_sum"),
            _tag(f"max by ({by}) (count_over_time({sm}))", "util_samples"),
            _tag(f"max by ({by}) (max_over_time({sm}))", "util_max"),
        )
    )


def summed_peak_query(labels: AgentLabels, pods: str, namespaces: str, window: q.Window) -> str:
    """The peak of a pod's memory on a GPU summed over its container series at one instant."""
    memory = labels.selector(PROCESS_MEMORY, pods, namespaces)
    return _tag(f"max_over_time(sum by ({labels.group_by()}) ({memory}){window.subquery()})", "mem_peak")


def window_terms(target: PodWindow, uuids: Sequence[str], labels: AgentLabels) -> str:
    """Over the pod's own time: the agent's samples of its GPUs, and each pod's samples on them."""
    duration = max(1, math.ceil(target.held_seconds))
    rng = f"[{duration}s] @ {target.held_until.timestamp():.3f}"
    # One GPU (the usual case): an equality matcher, which Prometheus looks up without a regex.
    gpus = (
        f'gpu_uuid="{q.promql_string(uuids[0])}"'
        if len(uuids) == 1
        else f'gpu_uuid=~"{q.regex_alternation(list(uuids))}"'
    )
    agent_gpu = ", ".join(AGENT_GPU)
    device = f"max by ({agent_gpu}) (count_over_time({DEVICE_TOTAL}{{{gpus}}}{rng}))"
    pods = (
        f"max by ({agent_gpu}, {labels.namespace}, {labels.pod}) "
        f"(count_over_time({PROCESS_MEMORY}{{{gpus}}}{rng}))"
    )
    return " or ".join(
        f'label_replace({_tag(expr, stat)}, "{_POD_UID}", "{target.uid}", "", "")'
        for expr, stat in ((device, "device"), (pods, "pod"))
    )


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
        self, targets: Sequence[PodWindow], gpus: Mapping[str, tuple[GpuUsage, ...]]
    ) -> dict[str, tuple[GpuUsage, ...]]:
        """The GPU rows of every target after sharing is decided (the same tuple where nothing changed)."""
        self.last_queries_by_kind = Counter()
        result = dict(gpus)
        for bucket in plan_buckets(targets, scrape_seconds=self._scrape, gap_seconds=self._gap):
            found = await self._read(bucket, gpus)
            for target in bucket.pods:
                result[target.uid] = self._decide(target, gpus.get(target.uid, ()), found)
        return result

    # -- queries ------------------------------------------------------------------------------

    async def _query(self, kind: str, promql: str) -> list[Sample]:
        self.last_queries_by_kind[kind] += 1
        return await self._client.query(promql)

    async def _all(self, kind: str, queries: Sequence[str]) -> list[list[Sample]]:
        """The queries of one kind at once (the client bounds how many run in parallel)."""
        return list(await asyncio.gather(*(self._query(kind, promql) for promql in queries)))

    async def _read(self, bucket: Bucket, gpus: Mapping[str, tuple[GpuUsage, ...]]) -> _Found:
        found = _Found()
        spellings = self._labels.dcgm_spellings()
        probe = probe_query(bucket.window, [pod for pod, _ in spellings])
        for sample in await self._query("agent_probe", probe):
            labels = sample["metric"]
            stat, value = labels.get(q.STAT), sample_value(sample)
            if stat == "gpu" and labels.get("gpu_uuid"):
                found.models[labels["gpu_uuid"]] = labels.get("model", "")
            elif stat == "total" and value is not None:
                found.totals[_agent_key(labels)] = value
            elif stat == "spelling" and value:
                self._learn_spelling(labels.get("label", ""), spellings)
        if not found.models:
            return found  # no agent in this bucket's range: nothing more to ask
        agent = self._spelling or AgentLabels(namespace=spellings[0][1], pod=spellings[0][0])
        by_name = {(p.namespace, p.pod): p for p in bucket.pods}

        def figures(pods: str, namespaces: str, window: q.Window) -> str:
            return figures_query(agent, pods, namespaces, window)

        for answer in await self._all(
            "agent", [promql for _pods, promql in self._chunks(bucket.pods, figures)]
        ):
            for sample in answer:
                self._add_figure(found, sample, agent, by_name)
        # Several container series on one GPU: their sum at one instant, a subquery only they pay for.
        several = {pod for (pod, _key), f in found.figures.items() if f.mem_series > 1}
        if several:
            summed = [p for p in bucket.pods if (p.namespace, p.pod) in several]

            def peaks(pods: str, namespaces: str, window: q.Window) -> str:
                return summed_peak_query(agent, pods, namespaces, window)

            for answer in await self._all(
                "agent_sum", [promql for _pods, promql in self._chunks(summed, peaks)]
            ):
                for sample in answer:
                    self._add_figure(found, sample, agent, by_name)

        terms = []
        for target in bucket.pods:
            uuids = sorted(
                {g.uuid for g in gpus.get(target.uid, ()) if g.uuid in found.models}
                | {key[0] for pod, key in found.figures if pod == (target.namespace, target.pod)}
            )
            if uuids:
                terms.append(window_terms(target, uuids, agent))
        for answer in await self._all("agent_window", self._join(terms)):
            for sample in answer:
                self._add_window(found, sample, agent)
        return found

    def _learn_spelling(self, pod_label: str, spellings: Sequence[tuple[str, str]]) -> None:
        # A spelling besides the plain one wins: `exported_pod` means a scrape set `pod` to the
        # agent's own pod.
        for label, namespace in spellings:
            if label == pod_label and (self._spelling is None or label != spellings[0][0]):
                self._spelling = AgentLabels(namespace=namespace, pod=label)

    def _chunks(
        self, pods: Sequence[PodWindow], build: Callable[[str, str, q.Window], str]
    ) -> list[tuple[tuple[PodWindow, ...], str]]:
        return chunk_pods(pods, build, max_url_bytes=self._budget(), scrape_seconds=self._scrape)

    def _join(self, terms: Sequence[str]) -> list[str]:
        """Terms joined with ``or`` into queries within the byte budget (a term too long alone still
        gets its query)."""
        budget = self._budget()
        queries: list[str] = []
        current: list[str] = []
        size = 0
        for term in terms:
            length = len(quote_plus(term)) + len(quote_plus(" or "))
            if current and size + length > budget:
                queries.append(" or ".join(current))
                current, size = [], 0
            current.append(term)
            size += length
        if current:
            queries.append(" or ".join(current))
        return queries

    @staticmethod
    def _add_figure(
        found: _Found, sample: Sample, agent: AgentLabels, by_name: Mapping[_Pod, PodWindow]
    ) -> None:
        labels = sample["metric"]
        pod = (labels.get(agent.namespace, ""), labels.get(agent.pod, ""))
        value = sample_value(sample)
        stat = labels.get(q.STAT)
        if pod in by_name and value is not None and stat in _FIGURE_STATS:
            setattr(found.figures.setdefault((pod, _agent_key(labels)), _Figures()), stat, value)

    @staticmethod
    def _add_window(found: _Found, sample: Sample, agent: AgentLabels) -> None:
        labels = sample["metric"]
        value = sample_value(sample)
        uid = labels.get(_POD_UID, "")
        if value is None or not uid:
            return
        key = (uid, _agent_key(labels))
        if labels.get(q.STAT) == "device":
            found.device_samples[key] = value
        elif labels.get(q.STAT) == "pod":
            pod = (labels.get(agent.namespace, ""), labels.get(agent.pod, ""))
            found.pod_samples.setdefault(key, {})[pod] = value

    # -- decisions ----------------------------------------------------------------------------

    def _decide(self, target: PodWindow, rows: tuple[GpuUsage, ...], found: _Found) -> tuple[GpuUsage, ...]:
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
        decided: list[GpuUsage] = list(unkeyed)
        changed = False
        for key, dcgm_rows in by_key.items():
            sharing = self._sharing(target, key, dcgm_rows, found)
            agent_row = self._agent_row(target, key, dcgm_rows, found, sharing)
            if agent_row is not None and (sharing is not None or not dcgm_rows):
                # A shared GPU's share; or a GPU dcgm-exporter did not label with this pod.
                decided.append(agent_row)
                changed = True
            elif sharing is not None:
                marked = [replace(r, shared=True, sharing=r.sharing or sharing) for r in dcgm_rows]
                changed = changed or marked != dcgm_rows
                decided.extend(marked)
            else:
                decided.extend(dcgm_rows)
        return tuple(decided) if changed else rows

    @staticmethod
    def _sharing(target: PodWindow, key: GpuKey, dcgm_rows: Sequence[GpuUsage], found: _Found) -> str | None:
        if target.shared_resource:
            return SHARING_RESOURCE
        if any(r.shared for r in dcgm_rows):
            return next((r.sharing for r in dcgm_rows if r.sharing), SHARING_OVERLAP)
        me = (target.namespace, target.pod)
        others = found.pod_samples.get((target.uid, key), {})
        if any(pod != me and count >= MIN_SAMPLES_TOGETHER for pod, count in others.items()):
            return SHARING_AGENT
        return None

    def _agent_row(
        self,
        target: PodWindow,
        key: GpuKey,
        dcgm_rows: Sequence[GpuUsage],
        found: _Found,
        sharing: str | None,
    ) -> GpuUsage | None:
        uuid, profile, _instance = key
        samples = found.device_samples.get((target.uid, key), 0.0)
        if uuid not in found.models or samples <= 0:
            return None  # no agent on that GPU's node, or none while this pod held it
        if samples * self._scrape < MIN_COVERAGE * target.held_seconds:
            return None
        figures = found.figures.get(((target.namespace, target.pod), key))
        memory: float | None
        util: float | None
        util_max: float | None
        if figures is None:
            memory = util = util_max = 0.0  # the agent read the GPU and this pod had no process on it
        else:
            memory = figures.mem_peak if figures.mem_samples else None
            if figures.util_samples and figures.util_sum is not None:
                util = min(100.0, figures.util_sum / max(samples, figures.util_samples))
                util_max = figures.util_max
            else:
                util = util_max = None  # processes seen, their utilization not reported (MIG)
        first = dcgm_rows[0] if dcgm_rows else None
        total = found.totals.get(key)
        return GpuUsage(
            pod_uid=target.uid,
            pod_name=target.pod,
            gpu=first.gpu if first is not None else "/".join(p for p in key if p),
            uuid=uuid,
            model=(first.model if first is not None else None) or label_name(found.models.get(uuid)),
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


def _agent_key(labels: Mapping[str, str]) -> GpuKey:
    return (labels.get("gpu_uuid", ""), labels.get("mig_profile", ""), labels.get("gpu_instance", ""))
