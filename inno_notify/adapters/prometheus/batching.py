"""How a round of finished pods is cut into queries: buckets by end time, then chunks by query length.

The number of queries must not grow with the number of jobs. One bucket serves every pod whose
end lies close to the others (a query range may be far longer than a pod's life, since a pod's
series only have samples while it lived), so a round normally is one bucket; a new bucket starts
only after a long gap between end times, or for a pod whose (namespace, name) already appears in
the bucket (a reused name would mix two pods' series). A bucket's pod regex is split into chunks
that keep each query within a byte budget: 8 KB where the query travels in the URL, far more in a
POST body (``client``), where a round of hundreds of pods is one query per metric.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote_plus, urlencode

from inno_notify.adapters.prometheus.queries import Window, regex_alternation

# nginx's default large_client_header_buffers is 8 KiB for the request line; stay below it.
DEFAULT_MAX_URL_BYTES = 8000
# A form body has no such limit. Enough for about a thousand pods per query: a round is one query
# per metric, and a very large round still a handful, each well below Prometheus' sample limit.
DEFAULT_MAX_BODY_BYTES = 64_000
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
    (pods, query) pairs; a single pod whose query is too long on its own still gets its query. The
    length is added up from a template, not rebuilt per pod.
    """
    template = build(_POD_MARK, _NS_MARK, window_for(pods, scrape_seconds)) if pods else ""
    pod_uses, ns_uses = template.count(_POD_MARK), template.count(_NS_MARK)
    # Margin for a chunk window's numbers being longer than the template's.
    base = url_length(template) - pod_uses * len(_POD_MARK) - ns_uses * len(_NS_MARK) + 16
    chunks: list[tuple[PodWindow, ...]] = []
    current: list[PodWindow] = []
    names: set[str] = set()
    namespaces: set[str] = set()
    length = base
    for pod in pods:
        added = 0
        if pod.pod not in names:
            added += pod_uses * (_encoded(pod.pod) + (_SEPARATOR if names else 0))
        if pod.namespace not in namespaces:
            added += ns_uses * (_encoded(pod.namespace) + (_SEPARATOR if namespaces else 0))
        if current and length + added > max_url_bytes:
            chunks.append(tuple(current))
            current, names, namespaces = [], set(), set()
            length = base + pod_uses * _encoded(pod.pod) + ns_uses * _encoded(pod.namespace)
        else:
            length += added
        current.append(pod)
        names.add(pod.pod)
        namespaces.add(pod.namespace)
    if current:
        chunks.append(tuple(current))
    return [(chunk, _build(chunk, build, scrape_seconds)) for chunk in chunks]


_POD_MARK = "PODREGEXMARK"
_NS_MARK = "NSREGEXMARK"
_SEPARATOR = len(quote_plus("|"))


@functools.lru_cache(maxsize=65536)
def _encoded(name: str) -> int:
    # Asked once per pod and query kind in every round: the same names come back each time.
    return len(quote_plus(regex_alternation([name])))


def _build(pods: Sequence[PodWindow], build: Callable[[str, str, Window], str], scrape_seconds: float) -> str:
    return build(
        regex_alternation([p.pod for p in pods]),
        regex_alternation([p.namespace for p in pods]),
        window_for(pods, scrape_seconds),
    )
