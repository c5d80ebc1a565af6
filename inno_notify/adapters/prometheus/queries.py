"""Every PromQL expression the usage measurement sends, in one place.

Each builder returns one instant query that answers one metric family for a whole batch of pods:
the pods are selected by a regex over their names, the range covers the longest time any of them
held its resources, and ``@ T`` pins the evaluation to just after the batch ended (so when the
query runs does not matter). Several statistics of one family come back in one answer, told apart
by a ``stat`` label added with ``label_replace``. The range of a selector only finds samples while
the pod's labels existed, so a range longer than one pod's lifetime does not dilute its figures.

What a query costs is mostly how often it reads the samples in its range: PromQL evaluates every
selector on its own, so each statistic of one series is one more read. The builders keep reads to
what the figures need; where two figures come from one read, ``count_values`` carries them (the
value in the ``STAT_VALUE`` label, exact: Prometheus writes it in shortest round-trip form).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

# dcgm-exporter metric names (FACTS.md). FB values are MiB.
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
# cAdvisor (kubelet /metrics/cadvisor).
WORKING_SET = "container_memory_working_set_bytes"
CPU_USAGE = "container_cpu_usage_seconds_total"
CPU_THROTTLED = "container_cpu_cfs_throttled_seconds_total"

# The pod UID inside cAdvisor's cgroup path `id`, cgroupfs (`pod<uid>/`) or systemd
# (`-pod<uid_with_underscores>.slice`). Pod names can repeat; the UID cannot.
UID_IN_CGROUP = ".*pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}).*"
UID_LABEL = "pod_uid"
# dcgm-exporter labels that identify one GPU or MIG instance and describe it.
GPU_IDENTITY = ("gpu", "UUID", "modelName", "GPU_I_PROFILE", "GPU_I_ID")
STAT = "stat"
# count_values writes each distinct value into this label; the sample's value is how many series had it.
STAT_VALUE = "stat_value"


@dataclass(frozen=True, slots=True)
class LabelConfig:
    """Label spellings. For dcgm-exporter series several candidates are tried (see ``measure``):
    with the Helm chart's ``honorLabels: false`` the workload's labels arrive as ``exported_*``
    and ``pod``/``namespace`` name the exporter itself. cAdvisor series come from the kubelet
    with plain names."""

    pod: tuple[str, ...] = ("pod", "exported_pod")
    namespace: tuple[str, ...] = ("namespace", "exported_namespace")
    container: tuple[str, ...] = ("container", "exported_container")
    hostname: tuple[str, ...] = ("Hostname", "hostname")
    cadvisor_pod: str = "pod"
    cadvisor_namespace: str = "namespace"
    cadvisor_container: str = "container"

    def dcgm_spellings(self) -> list[tuple[str, str]]:
        """(pod label, namespace label) pairs, paired by position, in the order to try them."""
        namespaces = self.namespace or ("namespace",)
        return [(pod, namespaces[min(i, len(namespaces) - 1)]) for i, pod in enumerate(self.pod or ("pod",))]


# A GPU as dcgm-exporter names it: (hostname, gpu index, UUID, MIG instance id).
GpuKey = tuple[str, str, str, str]


def gpu_key(labels: Mapping[str, str], hostname_labels: Iterable[str]) -> GpuKey:
    """The GPU (or MIG instance) a dcgm-exporter series is about."""
    host = ""
    for name in hostname_labels:
        host = labels.get(name, "")
        if host:
            break
    return (host, labels.get("gpu", ""), labels.get("UUID", ""), labels.get("GPU_I_ID", ""))


def gpu_name(key: GpuKey) -> str:
    """How figures and charts name a GPU: ``host/index``, ``/mig<instance>`` added for a MIG instance."""
    host, index, _uuid, instance = key
    name = f"{host}/{index}" if host else index
    return f"{name}/mig{instance}" if instance else name


@dataclass(frozen=True, slots=True)
class Window:
    """Where one query looks: ``[T - range_seconds, T]`` evaluated ``@ T``."""

    at: float  # unix seconds
    range_seconds: int
    step_seconds: int

    def range(self) -> str:
        return f"[{self.range_seconds}s] @ {self.at:.3f}"

    def subquery(self, step_seconds: int | None = None) -> str:
        return f"[{self.range_seconds}s:{step_seconds or self.step_seconds}s] @ {self.at:.3f}"


# RE2's metacharacters (Go's regexp.QuoteMeta escapes exactly these); anything else stands for itself.
_RE2_META = "\\.+*?()|[]{}^$"
_RE2_QUOTED = str.maketrans({c: "\\" + c for c in _RE2_META})
# A lone surrogate (from a JSON escape) is not valid Unicode, and no label value, always UTF-8, can
# equal a value that holds one: such a value gets an alternative that matches no string.
_SURROGATE = re.compile("[\ud800-\udfff]")
_NEVER = "[^\\x{0}-\\x{10FFFF}]"
# Backslash and quote escaped, control characters as `\xNN` (a literal newline would end the string).
_LITERAL = str.maketrans({"\\": "\\\\", '"': '\\"', **{chr(c): f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}})


def promql_string(text: str) -> str:
    """`text` as the inside of a double-quoted PromQL string literal, for any text: backslash and
    quote escaped, control characters as `\\xNN` (a literal newline would end the query's string),
    everything else, non-ASCII included, as UTF-8 itself."""
    return text.translate(_LITERAL)


def re2_quote(value: str) -> str:
    """An RE2 pattern that matches exactly `value` (PromQL anchors it)."""
    if _SURROGATE.search(value):
        return _NEVER
    return value.translate(_RE2_QUOTED)


def regex_alternation(values: list[str]) -> str:
    """The inside of a PromQL string literal holding the RE2 alternation that matches exactly these
    values, whatever they contain (cluster names are DNS labels in practice, but nothing here
    relies on it): RE2-quoted first, then escaped for the string literal."""
    return promql_string("|".join(re2_quote(value) for value in sorted(set(values))))


def _tag(expr: str, stat: str) -> str:
    return f'label_replace({expr}, "{STAT}", "{stat}", "", "")'


def _union(*tagged: str) -> str:
    return " or ".join(tagged)


@dataclass(frozen=True, slots=True)
class DcgmSelector:
    pod_label: str
    namespace_label: str
    hostname_labels: tuple[str, ...]

    def selector(self, metric: str, pods: str, namespaces: str) -> str:
        return f'{metric}{{{self.namespace_label}=~"{namespaces}",{self.pod_label}=~"{pods}"}}'

    def group_by(self) -> str:
        # Labels that do not exist are simply empty in `by`, so both host spellings can be listed.
        labels = [self.namespace_label, self.pod_label, *GPU_IDENTITY, *self.hostname_labels]
        return ", ".join(labels)


def spelling_probe(sel: DcgmSelector, pods: str, namespaces: str, window: Window) -> str:
    """Does this spelling find any dcgm-exporter series of these pods? (one number or nothing)."""
    return f"count(count_over_time({sel.selector(FB_USED, pods, namespaces)}{window.range()}))"


def gpu_util(sel: DcgmSelector, metric: str, pods: str, namespaces: str, window: Window) -> str:
    """Mean, max (percent) and sample count per GPU of ``metric`` (GR_ENGINE_ACTIVE is a 0–1 ratio)."""
    scale = " * 100" if metric == GR_ENGINE_ACTIVE else ""
    series = sel.selector(metric, pods, namespaces) + window.range()
    by = sel.group_by()
    return _union(
        _tag(f"avg by ({by}) (avg_over_time({series})){scale}", "mean"),
        _tag(f"max by ({by}) (max_over_time({series})){scale}", "max"),
        _tag(f"sum by ({by}) (count_over_time({series}))", "samples"),
    )


def gpu_memory(sel: DcgmSelector, pods: str, namespaces: str, window: Window) -> str:
    """Peak framebuffer used and least free, in MiB: one read of each series.

    used + free is constant (the card's size less the reserved part), so ``used_peak + free_min``
    is the usable size (``measure`` adds them) without reading FB_USED a second time for its minimum.
    """
    used = sel.selector(FB_USED, pods, namespaces) + window.range()
    free = sel.selector(FB_FREE, pods, namespaces) + window.range()
    by = sel.group_by()
    return _union(
        _tag(f"max by ({by}) (max_over_time({used}))", "used_peak"),
        _tag(f"min by ({by}) (min_over_time({free}))", "free_min"),
    )


@dataclass(frozen=True, slots=True)
class CadvisorSelector:
    pod_label: str = "pod"
    namespace_label: str = "namespace"
    container_label: str = "container"

    def selector(self, metric: str, pods: str, namespaces: str) -> str:
        # container="" is the pod cgroup and image="" the pause sandbox: both would double count.
        return (
            f'{metric}{{{self.namespace_label}=~"{namespaces}",{self.pod_label}=~"{pods}",'
            f'{self.container_label}!="",image!=""}}'
        )

    def with_uid(self, expr: str) -> str:
        return f'label_replace({expr}, "{UID_LABEL}", "$1", "id", "{UID_IN_CGROUP}")'

    def group_by(self) -> str:
        return f"{self.namespace_label}, {self.pod_label}, {UID_LABEL}"


def pod_memory(sel: CadvisorSelector, pods: str, namespaces: str, window: Window) -> str:
    """Per pod: the peak of its largest container series (``series_peak``), and per distinct sample
    count of its container series how many series had it (``samples``, via ``count_values``): the
    largest count is the pod's scrape count, the sum of the values its number of series. For a pod
    with one series the first is its peak; the others need ``pod_memory_summed`` (a subquery,
    several times dearer), so only they pay for it. Two reads of the series, not three."""
    series = sel.selector(WORKING_SET, pods, namespaces)
    by = sel.group_by()
    per_series = sel.with_uid(f"max_over_time({series}{window.range()})")
    counts = sel.with_uid(f"count_over_time({series}{window.range()})")
    return _union(
        _tag(f"max by ({by}) ({per_series})", "series_peak"),
        _tag(f'count_values by ({by}) ("{STAT_VALUE}", {counts})', "samples"),
    )


def pod_memory_summed(sel: CadvisorSelector, pods: str, namespaces: str, window: Window) -> str:
    """Peak of the pod's working set summed over its containers at one instant.

    Grouped by name only: a label_replace per step doubles the subquery's cost, and at one instant
    a name belongs to one pod. ``pod_memory`` carries the UID, so a name that two pods used within
    the range shows up there (``measure`` then states no peak rather than a mixed one).
    """
    series = sel.selector(WORKING_SET, pods, namespaces)
    per_instant = f"sum by ({sel.namespace_label}, {sel.pod_label}) ({series})"
    return _tag(f"max_over_time({per_instant}{window.subquery()})", "peak")


def pod_cpu(sel: CadvisorSelector, pods: str, namespaces: str, window: Window, rate_seconds: int) -> str:
    """CPU seconds used (the counters' last values: every container's counter starts at 0 with it),
    p95 of cores over the lifetime per container series, and CFS throttled seconds where cAdvisor
    reports them.

    The p95 is over back-to-back ``rate_seconds`` windows (the subquery steps by the window, so
    each sample counts once): the 95th percentile of the per-window mean cores. It comes per series
    through ``count_values`` (value in ``STAT_VALUE``, count of series with it): for a pod with one
    container series that is the pod's p95; only pods with several need ``pod_cpu_summed``, whose
    ``sum by`` at every step of the subquery costs more than the rest of this query.
    """
    usage = sel.selector(CPU_USAGE, pods, namespaces)
    throttled = sel.selector(CPU_THROTTLED, pods, namespaces)
    by = sel.group_by()
    per_series_p95 = sel.with_uid(
        f"quantile_over_time(0.95, rate({usage}[{rate_seconds}s]){window.subquery(rate_seconds)})"
    )
    return _union(
        _tag(f"sum by ({by}) ({sel.with_uid(f'max_over_time({usage}{window.range()})')})", "seconds"),
        _tag(f'count_values by ({by}) ("{STAT_VALUE}", {per_series_p95})', "p95"),
        _tag(f"sum by ({by}) ({sel.with_uid(f'max_over_time({throttled}{window.range()})')})", "throttled"),
    )


def pod_cpu_summed(
    sel: CadvisorSelector, pods: str, namespaces: str, window: Window, rate_seconds: int
) -> str:
    """p95 of the pod's cores summed over its container series, for pods with several of them.

    Grouped by name only, for the same reason as ``pod_memory_summed``.
    """
    usage = sel.selector(CPU_USAGE, pods, namespaces)
    cores = f"sum by ({sel.namespace_label}, {sel.pod_label}) (rate({usage}[{rate_seconds}s]))"
    return _tag(f"quantile_over_time(0.95, {cores}{window.subquery(rate_seconds)})", "p95")


# --- series over time (range queries, see series.py) ---------------------------------------------
#
# One range query per metric serves pods of several step classes. Each class is a branch that
# selects its own pods and reads windows of its own step; a class coarser than the query's step is
# evaluated on its own grid inside a subquery and shows only there (``_on_grid``). The branches
# return every series as it is, with no aggregation: in a range query an aggregation, like any
# operator, handles each point at every step with its labels, and grouping GPUs was several times
# the cost of reading the samples; the rows are grouped in ``series`` (per GPU, per pod) instead.
# The branches select disjoint pods, so their union (``or``, a pass over the points) keeps every row.

# Which steps a class selects: pod regex and namespace regex of its pods, by step in seconds.
Classes = Mapping[int, tuple[str, str]]


def _step_range(step_seconds: int) -> str:
    """The range that covers one step, ``(t − step, t]``: one millisecond short of the step, since
    Prometheus 2.x ranges include their left end (3.x: left-open) and a sample exactly on a step
    boundary must count in one step only."""
    return f"[{step_seconds * 1000 - 1}ms]"


def _on_grid(expr: str, step_seconds: int, query_step_seconds: int) -> str:
    """``expr`` evaluated on the grid of ``step_seconds`` (a multiple of the query's step), present
    only at those times: the subquery evaluates it once per step of its own grid (subquery steps
    are aligned to multiples of their step), and each query step looks back less than one query
    step, so it finds a point only where the two grids meet."""
    if step_seconds == query_step_seconds:
        return expr
    return f"last_over_time(({expr})[{query_step_seconds * 1000 - 1}ms:{step_seconds}s])"


def series_step(classes: Classes) -> int:
    """The step of the range query for these classes: the finest (every class step is a multiple
    of it, ``domain.series.series_step``)."""
    return min(classes)


def _per_class(classes: Classes, branch: Callable[[int, str, str], str]) -> str:
    """The union of ``branch(step, pods, namespaces)`` of every class, each on its own grid."""
    query_step = series_step(classes)
    return _union(
        *(
            f"({_on_grid(branch(step, pods, ns), step, query_step)})"
            for step, (pods, ns) in sorted(classes.items())
        )
    )


def series_gpu_prof(sel: DcgmSelector, classes: Classes) -> str:
    """Per GPU series and step, the mean GR_ENGINE_ACTIVE in percent over the step: the better
    measure of utilization, and the only one on MIG instances. Where a GPU has it at a step, it
    stands for the GPU's GPU_UTIL there (``series`` prefers it). Asked apart from ``series_gpu_util``
    rather than as ``prof or on(…) util``: in a range query the ``or`` matches label signatures at
    every step, which costs Prometheus several times the reading of the samples."""
    return _per_class(
        classes,
        lambda step, pods, ns: (
            f"avg_over_time({sel.selector(GR_ENGINE_ACTIVE, pods, ns)}{_step_range(step)}) * 100"
        ),
    )


def series_gpu_util(sel: DcgmSelector, classes: Classes) -> str:
    """Per GPU series and step, the mean GPU_UTIL in percent over the step."""
    return _per_class(
        classes,
        lambda step, pods, ns: f"avg_over_time({sel.selector(GPU_UTIL, pods, ns)}{_step_range(step)})",
    )


def series_gpu_memory(sel: DcgmSelector, classes: Classes) -> str:
    """Per GPU series and step, the peak framebuffer used in the step (MiB)."""
    return _per_class(
        classes, lambda step, pods, ns: f"max_over_time({sel.selector(FB_USED, pods, ns)}{_step_range(step)})"
    )


def series_pod_memory(sel: CadvisorSelector, classes: Classes) -> str:
    """Per container series and step, its peak in the step (``series`` adds up a pod's series, and
    reads the pod UID from the cgroup path ``id``)."""
    return _per_class(
        classes,
        lambda step, pods, ns: f"max_over_time({sel.selector(WORKING_SET, pods, ns)}{_step_range(step)})",
    )
