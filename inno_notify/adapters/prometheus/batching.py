"""How a round of finished pods is cut into queries: buckets by end time, then chunks by URL length.

The number of queries must not grow with the number of jobs. One bucket serves every pod whose
end lies close to the others (a query range may be far longer than a pod's life, since a pod's
series only have samples while it lived), so a round normally is one bucket; a new bucket starts
only after a long gap between end times, or for a pod whose (namespace, name) already appears in
the bucket (a reused name would mix two pods' series). prometheus-api-client sends the query in
the URL even with POST, so a bucket's pod regex is split into chunks that keep URLs short.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

from inno_notify.adapters.prometheus.queries import Window, regex_alternation

# nginx's default large_client_header_buffers is 8 KiB for the request line; stay below it.
DEFAULT_MAX_URL_BYTES = 8000
_URL_OVERHEAD = len("GET /api/v1/query?&timeout=30s HTTP/1.1") + 200  # path, params, a proxy's prefix


@dataclass(frozen=True, slots=True)
class PodWindow:
    """A pod to measure and the interval it held its resources (scheduled → last container finished)."""

    namespace: str
    pod: str
    uid: str
    held_from: datetime
    held_until: datetime

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
    for target in sorted(targets, key=lambda t: (t.held_until, t.uid)):
        last = groups[-1] if groups else None
        if (
            last is not None
            and (target.held_until - last[-1].held_until).total_seconds() <= gap_seconds
            and not any(p.namespace == target.namespace and p.pod == target.pod for p in last)
        ):
            last.append(target)
        else:
            groups.append([target])
    step = max(1, round(scrape_seconds))
    buckets = []
    for group in groups:
        # One scrape after the last end, so its final sample has landed inside the range (ranges are
        # left-open, right-closed), and one scrape before the first start for the same reason.
        at = max(p.held_until for p in group).timestamp() + scrape_seconds
        start = min(p.held_from for p in group).timestamp() - scrape_seconds
        span = max(step, math.ceil(at - start))
        buckets.append(Bucket(window=Window(at=at, range_seconds=span, step_seconds=step), pods=tuple(group)))
    return buckets


def url_length(promql: str) -> int:
    return len(urlencode({"query": promql})) + _URL_OVERHEAD


def chunk_pods(
    pods: Sequence[PodWindow], build: Callable[[str, str], str], *, max_url_bytes: int
) -> list[tuple[tuple[PodWindow, ...], str]]:
    """Split ``pods`` so that ``build(pod_regex, namespace_regex)`` stays under ``max_url_bytes``.

    Returns (pods, query) pairs. A single pod whose query is too long on its own still gets its query.
    """
    chunks: list[tuple[tuple[PodWindow, ...], str]] = []
    current: list[PodWindow] = []
    current_query = ""
    for pod in pods:
        candidate = [*current, pod]
        query = _build(candidate, build)
        if current and url_length(query) > max_url_bytes:
            chunks.append((tuple(current), current_query))
            current, current_query = [pod], _build([pod], build)
        else:
            current, current_query = candidate, query
    if current:
        chunks.append((tuple(current), current_query))
    return chunks


def _build(pods: Sequence[PodWindow], build: Callable[[str, str], str]) -> str:
    return build(regex_alternation([p.pod for p in pods]), regex_alternation([p.namespace for p in pods]))
