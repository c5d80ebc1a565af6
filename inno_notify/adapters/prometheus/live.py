"""What the GPUs of running pods did over the last window: one batched PromQL round, whatever the pod count.

The live check asks, every interval, about all running GPU pods at once. A round is two queries:

1. **Window** (one query): per GPU series of dcgm-exporter, over ``[now - window, now]``: the highest
   utilization (``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` × 100 where the GPU reports it, which MIG
   instances need; ``DCGM_FI_DEV_GPU_UTIL`` otherwise), the sample counts, and the least
   framebuffer in use. The query does not list pods: it takes every series that carries a pod
   label (in each configured spelling, ``pod`` and ``exported_pod``; and within
   ``kubernetes.namespaces`` where that is set), so its length and its number do not grow with the
   pods; the answer is matched to the running pods here. A series carrying both spellings (the
   Helm chart's ``honorLabels: false``) comes back once: ``or`` keeps one of equal label sets.
2. **Last busy** (one query for the GPUs that stayed below the threshold): per such GPU, the latest
   time within the lookback its utilization was at or above the threshold,
   ``max_over_time(timestamp(util >= threshold)[lookback:step])``. Only the idle pods are listed
   (a regex of their names in a form body, whose budget holds thousands of names), and the lookback
   reaches back no further than the oldest of them got its GPUs, capped (a week by default).

Everything is evaluated ``@ now``, so a round answers for the moment it was asked about, whenever it
runs. ``observe(..., listed=True)`` lists the pods in the window query too (regex, chunked by the
body budget): what the benchmark's one-query-per-pod baseline uses with a single pod.
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.batching import DEFAULT_MAX_URL_BYTES, PodWindow, chunk_pods
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient, Sample
from inno_notify.domain.live import GpuWindow
from inno_notify.settings import PrometheusSettings

__all__ = [
    "DEFAULT_LOOKBACK_SECONDS",
    "LIVE_MAX_BODY_BYTES",
    "LiveConfig",
    "LiveMeter",
    "LiveTarget",
    "build_live_meter",
]

# A week: a workspace left idle over a weekend shows since when; older idleness reads "at least".
DEFAULT_LOOKBACK_SECONDS = 7 * 86400.0
# A form body has no practical limit (Go's form parser takes 10 MB); this holds the names of
# several thousand idle pods in one query.
LIVE_MAX_BODY_BYTES = 512_000
_STAT = q.STAT


@dataclass(frozen=True, slots=True)
class LiveTarget:
    """A running GPU pod to look at, and since when it holds its GPUs."""

    namespace: str
    pod: str
    uid: str
    held_from: datetime


@dataclass(frozen=True, slots=True)
class LiveConfig:
    scrape_interval_seconds: float = 15.0
    labels: q.LabelConfig = field(default_factory=q.LabelConfig)
    # Namespaces the service watches; empty: all (the window query then takes every GPU series).
    namespaces: tuple[str, ...] = ()
    lookback_seconds: float = DEFAULT_LOOKBACK_SECONDS
    # Resolution of "last busy": a subquery step; a minute is plenty for "idle since 10:05".
    busy_step_seconds: float = 60.0
    max_body_bytes: int = LIVE_MAX_BODY_BYTES
    max_url_bytes: int = DEFAULT_MAX_URL_BYTES


# A GPU as dcgm-exporter names it: (hostname, gpu index, UUID, MIG instance id).
_GpuKey = tuple[str, str, str, str]


class LiveMeter:
    """Answers, for a round of running pods, what each of their GPUs did over the window."""

    def __init__(self, client: PrometheusClient, config: LiveConfig | None = None) -> None:
        self._client = client
        self._config = config or LiveConfig()
        labels = self._config.labels
        self._spellings = labels.dcgm_spellings()
        spelt = [*(p for p, _ in self._spellings), *(n for _, n in self._spellings)]
        self._by = ", ".join(dict.fromkeys([*spelt, *q.GPU_IDENTITY, *labels.hostname]))
        # Queries sent by the last observe() call (benchmarks and tests read it).
        self.last_queries = 0

    @property
    def client(self) -> PrometheusClient:
        return self._client

    async def observe(
        self,
        targets: Sequence[LiveTarget],
        now: datetime,
        window_seconds: float,
        idle_util_percent: float,
        *,
        listed: bool = False,
    ) -> dict[str, tuple[GpuWindow, ...]]:
        """Per target uid, its GPUs as seen over ``[now - window, now]``; ``busy_at`` is filled for
        the GPUs that stayed below ``idle_util_percent``. Targets without GPU series are absent.

        Raises ``PrometheusUnavailable`` (retry later) or ``PrometheusQueryError`` (don't).
        """
        self.last_queries = 0
        if not targets:
            return {}
        at = now.timestamp()
        window = max(1, math.ceil(window_seconds))
        windows = [PodWindow(t.namespace, t.pod, t.uid, t.held_from, now) for t in targets]
        if listed:
            queries = [
                p for _, p in self._chunks(windows, lambda pods, ns: self._window_query(pods, ns, window, at))
            ]
        else:
            queries = [self._window_query(None, self._namespaces(), window, at)]
        samples = await self._run(queries)
        gpus = self._assemble_window(targets, samples)

        idle_uids = {
            uid
            for uid, per_gpu in gpus.items()
            if any(_below(s, idle_util_percent) for s in per_gpu.values())
        }
        if idle_uids:
            idle = [w for w in windows if w.uid in idle_uids]
            oldest = min(w.held_from for w in idle)
            step = max(1, math.ceil(self._config.busy_step_seconds))
            reach = min(self._config.lookback_seconds, max(window_seconds, (now - oldest).total_seconds()))
            lookback = step * math.ceil((reach + step) / step)
            busy = await self._run(
                [
                    p
                    for _, p in self._chunks(
                        idle,
                        lambda pods, ns: self._busy_query(pods, ns, lookback, step, at, idle_util_percent),
                    )
                ]
            )
            self._assemble_busy(targets, idle_uids, gpus, busy)
        return {
            uid: tuple(_window(stats) for _, stats in sorted(per_gpu.items()))
            for uid, per_gpu in gpus.items()
        }

    # --- PromQL -----------------------------------------------------------------------------------

    def _namespaces(self) -> str | None:
        return q.regex_alternation(list(self._config.namespaces)) if self._config.namespaces else None

    def _matchers(self, pods: str | None, namespaces: str | None) -> list[str]:
        """One label matcher per spelling: listed pods, or any pod (the label set, not empty)."""
        matchers = []
        for pod_label, ns_label in self._spellings:
            parts = [f'{pod_label}=~"{pods}"' if pods is not None else f'{pod_label}!=""']
            if namespaces is not None:
                parts.insert(0, f'{ns_label}=~"{namespaces}"')
            matchers.append(",".join(parts))
        return matchers

    def _over(self, function: str, metric: str, matchers: list[str], window: int, at: float) -> str:
        return " or ".join(f"{function}({metric}{{{m}}}[{window}s] @ {at:.3f})" for m in matchers)

    def _window_query(self, pods: str | None, namespaces: str | None, window: int, at: float) -> str:
        m = self._matchers(pods, namespaces)
        by = self._by
        parts = [
            (f"max by ({by}) ({self._over('max_over_time', q.GPU_UTIL, m, window, at)})", "util_max"),
            (f"sum by ({by}) ({self._over('count_over_time', q.GPU_UTIL, m, window, at)})", "util_samples"),
            (
                f"max by ({by}) ({self._over('max_over_time', q.GR_ENGINE_ACTIVE, m, window, at)}) * 100",
                "prof_max",
            ),
            (
                f"sum by ({by}) ({self._over('count_over_time', q.GR_ENGINE_ACTIVE, m, window, at)})",
                "prof_samples",
            ),
            (f"min by ({by}) ({self._over('min_over_time', q.FB_USED, m, window, at)})", "fb_min"),
        ]
        return " or ".join(f'label_replace({expr}, "{_STAT}", "{stat}", "", "")' for expr, stat in parts)

    def _busy_query(
        self, pods: str, namespaces: str, lookback: int, step: int, at: float, threshold: float
    ) -> str:
        m = self._matchers(pods, namespaces)
        parts = []
        for metric, limit, stat in (
            (q.GPU_UTIL, threshold, "util_busy"),
            (q.GR_ENGINE_ACTIVE, threshold / 100, "prof_busy"),
        ):
            inner = " or ".join(f"timestamp({metric}{{{x}}} >= {limit:g})" for x in m)
            expr = f"max by ({self._by}) (max_over_time(({inner})[{lookback}s:{step}s] @ {at:.3f}))"
            parts.append(f'label_replace({expr}, "{_STAT}", "{stat}", "", "")')
        return " or ".join(parts)

    def _chunks(
        self, windows: Sequence[PodWindow], build: Callable[[str, str], str]
    ) -> list[tuple[tuple[PodWindow, ...], str]]:
        cfg = self._config
        budget = cfg.max_body_bytes if self._client.config.form_body else cfg.max_url_bytes
        return chunk_pods(
            windows,
            lambda pods, ns, _window: build(pods, ns),
            max_url_bytes=budget,
            scrape_seconds=cfg.scrape_interval_seconds,
        )

    async def _run(self, queries: list[str]) -> list[Sample]:
        self.last_queries += len(queries)
        answers = await asyncio.gather(*(self._client.query(promql) for promql in queries))
        return [sample for answer in answers for sample in answer]

    # --- answers ------------------------------------------------------------------------------------

    def _target_of(
        self, labels: Mapping[str, str], by_name: Mapping[tuple[str, str], LiveTarget]
    ) -> LiveTarget | None:
        for pod_label, ns_label in self._spellings:
            found = by_name.get((labels.get(ns_label, ""), labels.get(pod_label, "")))
            if found is not None:
                return found
        return None

    def _gpu_key(self, labels: Mapping[str, str]) -> _GpuKey:
        host = next((labels[h] for h in self._config.labels.hostname if labels.get(h)), "")
        return (host, labels.get("gpu", ""), labels.get("UUID", ""), labels.get("GPU_I_ID", ""))

    def _assemble_window(
        self, targets: Sequence[LiveTarget], samples: list[Sample]
    ) -> dict[str, dict[_GpuKey, dict[str, object]]]:
        by_name = {(t.namespace, t.pod): t for t in targets}
        gpus: dict[str, dict[_GpuKey, dict[str, object]]] = defaultdict(dict)
        for sample in samples:
            labels = sample["metric"]
            target = self._target_of(labels, by_name)
            value = _value(sample)
            if target is None or value is None:
                continue
            stats = gpus[target.uid].setdefault(self._gpu_key(labels), {"labels": labels})
            stats[labels.get(_STAT, "")] = value
        return gpus

    def _assemble_busy(
        self,
        targets: Sequence[LiveTarget],
        idle_uids: set[str],
        gpus: dict[str, dict[_GpuKey, dict[str, object]]],
        samples: list[Sample],
    ) -> None:
        by_name = {(t.namespace, t.pod): t for t in targets if t.uid in idle_uids}
        for sample in samples:
            labels = sample["metric"]
            target = self._target_of(labels, by_name)
            value = _value(sample)
            if target is None or value is None:
                continue
            stats = gpus[target.uid].get(self._gpu_key(labels))
            if stats is not None:
                stats[labels.get(_STAT, "")] = value


def _value(sample: Sample) -> float | None:
    try:
        value = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _stat(stats: Mapping[str, object], name: str) -> float | None:
    value = stats.get(name)
    return float(value) if isinstance(value, int | float) else None


def _uses_prof(stats: Mapping[str, object]) -> bool:
    return bool(_stat(stats, "prof_samples"))


def _util(stats: Mapping[str, object]) -> float | None:
    return _stat(stats, "prof_max") if _uses_prof(stats) else _stat(stats, "util_max")


def _below(stats: Mapping[str, object], threshold: float) -> bool:
    util = _util(stats)
    return util is not None and util < threshold


def _window(stats: Mapping[str, object]) -> GpuWindow:
    labels = stats["labels"]
    assert isinstance(labels, Mapping)
    prof = _uses_prof(stats)
    busy = _stat(stats, "prof_busy" if prof else "util_busy")
    host = labels.get("Hostname") or labels.get("hostname")
    return GpuWindow(
        gpu=str(labels.get("gpu", "")),
        uuid=labels.get("UUID") or None,
        model=labels.get("modelName") or None,
        mig_profile=labels.get("GPU_I_PROFILE") or None,
        host=host or None,
        util_max_percent=_util(stats),
        samples=int(_stat(stats, "prof_samples" if prof else "util_samples") or 0),
        fb_held_mib=_stat(stats, "fb_min"),
        busy_at=None if busy is None else datetime.fromtimestamp(busy, tz=UTC),
    )


def build_live_meter(
    settings: PrometheusSettings, namespaces: Sequence[str] = (), *, max_workers: int = 2
) -> LiveMeter:
    """A live meter (and its own client) configured from ``settings.prometheus``."""
    labels = q.LabelConfig(
        pod=tuple(settings.labels.pod),
        namespace=tuple(settings.labels.namespace),
        container=tuple(settings.labels.container),
        hostname=tuple(settings.labels.hostname),
    )
    client = PrometheusClient(
        ClientConfig(url=settings.url, timeout_seconds=settings.timeout_seconds, max_workers=max_workers)
    )
    return LiveMeter(
        client,
        LiveConfig(
            scrape_interval_seconds=settings.scrape_interval_seconds,
            labels=labels,
            namespaces=tuple(namespaces),
        ),
    )
