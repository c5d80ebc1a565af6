"""How a round of finished pods is cut into queries: buckets by end time, then chunks by query length.

The number of queries must not grow with the number of jobs. One bucket serves every pod whose
end lies close to the others (a query range may be far longer than a pod's life, since a pod's
series only have samples while it lived), so a round normally is one bucket; a new bucket starts
only after a long gap between end times, or for a pod whose (namespace, name) already appears in
the bucket (a reused name would mix two pods' series). A bucket's pod regex is split into chunks
that keep each query within a byte budget: 8 KB where the query travels in the URL, far more in a
POST body (``client``), where a round of thousands of pods is one query per metric. A query may
select several groups of pods on their own terms (the usage series: a branch per step class,
``chunk_groups``); the same budget cuts it.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote_plus, urlencode

from inno_notify.adapters.prometheus.queries import Window, regex_alternation

# nginx's default large_client_header_buffers is 8 KiB for the request line; stay below it.
DEFAULT_MAX_URL_BYTES = 8000
# A form body has no such limit (Prometheus reads up to 10 MB). Enough for about four thousand pods
# per query: a round, even one of a backlog, is one query per metric, well below Prometheus' sample
# limit.
DEFAULT_MAX_BODY_BYTES = 256_000
_URL_OVERHEAD = len("GET /api/v1/query?&timeout=30s HTTP/1.1") + 200  # path, params, a proxy's prefix


@dataclass(frozen=True, slots=True)
class PodWindow:
    """A pod to measure and the interval it held its resources (scheduled → last container finished)."""

    namespace: str
    pod: str
    uid: str
    held_from: datetime
    held_until: datetime
    # It asked for a time-sliced GPU resource (nvidia.com/gpu.shared): its GPU is shared by construction.
    shared_resource: bool = False
    # The job it belongs to: a job's pods share one step of its usage series ("": the pod alone).
    job_uid: str = ""

    @property
    def held_seconds(self) -> float:
        return max(0.0, (self.held_until - self.held_from).total_seconds())


@dataclass(frozen=True, slots=True)
class Bucket:
    window: Window
    pods: tuple[PodWindow, ...]


def plan_buckets(targets: Sequence[PodWindow], *, scrape_seconds: float, gap_seconds: float) -> list[Bucket]:
    """Group pods by end time: consecutive ends further apart than ``gap_seconds`` start a new bucket."""
    groups: list[list[PodWindow]] = []
    names: set[tuple[str, str]] = set()  # (namespace, pod) in the last group
    for target in sorted(targets, key=lambda t: (t.held_until, t.uid)):
        last = groups[-1] if groups else None
        name = (target.namespace, target.pod)
        if (
            last is not None
            and (target.held_until - last[-1].held_until).total_seconds() <= gap_seconds
            and name not in names
        ):
            last.append(target)
        else:
            groups.append([target])
            names = set()
        names.add(name)
    return [Bucket(window=window_for(group, scrape_seconds), pods=tuple(group)) for group in groups]


def window_for(pods: Sequence[PodWindow], scrape_seconds: float) -> Window:
    """``@`` one scrape after the last end, so its final sample has landed inside the range (ranges
    are left-open, right-closed); the range reaches one scrape before the first start."""
    step = max(1, round(scrape_seconds))
    at = max(p.held_until for p in pods).timestamp() + scrape_seconds
    start = min(p.held_from for p in pods).timestamp() - scrape_seconds
    return Window(at=at, range_seconds=max(step, math.ceil(at - start)), step_seconds=step)


def url_length(promql: str) -> int:
    return len(urlencode({"query": promql})) + _URL_OVERHEAD


def chunk_pods(
    pods: Sequence[PodWindow],
    build: Callable[[str, str, Window], str],
    *,
    max_url_bytes: int,
    scrape_seconds: float,
) -> list[tuple[tuple[PodWindow, ...], str]]:
    """Split ``pods`` (in end-time order) so that ``build(pod_regex, namespace_regex, window)`` stays
    under ``max_url_bytes``; each chunk gets the window of its own pods.

    Consecutive pods end close together, so a chunk's range is hardly longer than its longest pod's
    life: subqueries, whose cost grows with range × series, stay cheap at no extra query. Returns
    (pods, query) pairs; a single pod whose query is too long on its own still gets its query.
    """
    return chunk_groups(
        pods,
        lambda _pod: 0,
        lambda selections, window: build(*selections[0], window),
        max_url_bytes=max_url_bytes,
        scrape_seconds=scrape_seconds,
    )


def chunk_groups(
    pods: Sequence[PodWindow],
    group_of: Callable[[PodWindow], int],
    build: Callable[[Mapping[int, tuple[str, str]], Window], str],
    *,
    max_url_bytes: int,
    scrape_seconds: float,
) -> list[tuple[tuple[PodWindow, ...], str]]:
    """``chunk_pods`` for a query that selects several groups of pods each on its own terms (the
    usage series: one branch per step class). ``build`` gets, for every group with pods in the
    chunk, its (pod regex, namespace regex).

    A pod name stays in one group within a chunk: a group's selector matches every name of its regex
    in every namespace of its regex, so a name in two groups could bring one pod's series into the
    other group's branch, where the two would be taken for one. Such a pod starts a new chunk (a
    name reused across namespaces by pods of different classes: rare). The length is added up from
    a template, not rebuilt per pod.
    """
    if not pods:
        return []
    groups = sorted({group_of(pod) for pod in pods})
    marks = {g: (f"{_POD_MARK}{i}Z", f"{_NS_MARK}{i}Z") for i, g in enumerate(groups)}
    template = build(marks, window_for(pods, scrape_seconds))
    pod_uses = {g: template.count(pod_mark) for g, (pod_mark, _) in marks.items()}
    ns_uses = {g: template.count(ns_mark) for g, (_, ns_mark) in marks.items()}
    # Margin for a chunk window's numbers being longer than the template's.
    base = url_length(template) + 16
    base -= sum(
        pod_uses[g] * len(pod_mark) + ns_uses[g] * len(ns_mark) for g, (pod_mark, ns_mark) in marks.items()
    )
    chunks: list[tuple[PodWindow, ...]] = []
    current: list[PodWindow] = []
    names: dict[int, set[str]] = defaultdict(set)
    namespaces: dict[int, set[str]] = defaultdict(set)
    group_of_name: dict[str, int] = {}
    length = base
    for pod in pods:
        group = group_of(pod)
        added = 0
        if pod.pod not in names[group]:
            added += pod_uses[group] * (_encoded(pod.pod) + (_SEPARATOR if names[group] else 0))
        if pod.namespace not in namespaces[group]:
            added += ns_uses[group] * (_encoded(pod.namespace) + (_SEPARATOR if namespaces[group] else 0))
        clash = group_of_name.get(pod.pod, group) != group
        if current and (clash or length + added > max_url_bytes):
            chunks.append(tuple(current))
            current, names, namespaces, group_of_name = [], defaultdict(set), defaultdict(set), {}
            length = base + pod_uses[group] * _encoded(pod.pod) + ns_uses[group] * _encoded(pod.namespace)
        else:
            length += added
        current.append(pod)
        names[group].add(pod.pod)
        namespaces[group].add(pod.namespace)
        group_of_name[pod.pod] = group
    chunks.append(tuple(current))
    return [(chunk, _build(chunk, group_of, build, scrape_seconds)) for chunk in chunks]


_POD_MARK = "PODREGEXMARK"
_NS_MARK = "NSREGEXMARK"
_SEPARATOR = len(quote_plus("|"))


@functools.lru_cache(maxsize=65536)
def _encoded(name: str) -> int:
    # Asked once per pod and query kind in every round: the same names come back each time.
    return len(quote_plus(regex_alternation([name])))


def _build(
    pods: Sequence[PodWindow],
    group_of: Callable[[PodWindow], int],
    build: Callable[[Mapping[int, tuple[str, str]], Window], str],
    scrape_seconds: float,
) -> str:
    members: dict[int, list[PodWindow]] = defaultdict(list)
    for pod in pods:
        members[group_of(pod)].append(pod)
    selections = {
        group: (regex_alternation([p.pod for p in of]), regex_alternation([p.namespace for p in of]))
        for group, of in sorted(members.items())
    }
    return build(selections, window_for(pods, scrape_seconds))
