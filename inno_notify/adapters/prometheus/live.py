"""What the GPUs of running pods did over the last window, in a few PromQL queries whatever the pod count.

The live check asks, every interval, about all running GPU pods at once. A round is at most five
queries:

1. **Window** (one query): per GPU series of dcgm-exporter, the highest utilization over
   ``[now - window, now]``, as ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (× 100, which MIG instances need) and
   as ``DCGM_FI_DEV_GPU_UTIL`` (the first is used where the GPU reports it). The query lists no pods:
   it takes every series that carries a pod label (in each configured spelling, ``pod`` and
   ``exported_pod``; within ``kubernetes.namespaces`` where that is set), so its length does not
   grow with the pods; the answer is matched to the running pods here. A series carrying both
   spellings (the Helm chart's ``honorLabels: false``) comes back once: ``or`` keeps one of equal
   label sets.
2. **Detail** of the pods with a GPU below the threshold (one query per age class of those pods, at
   most four): their sample counts and least framebuffer in use over the window, and per GPU the
   latest time within the lookback its utilization was at or above the threshold: a subquery over
   the lookback whose every step takes the maximum of the samples since the step before,
   ``max_over_time(timestamp(max_over_time(util[step]) >= threshold)[lookback:step])``, so that a
   short burst between two steps still counts. Only these pods are listed (a
   regex of their names in a form body, whose budget holds thousands of names). The lookback
   reaches back no further than the oldest pod of its class got its GPUs (capped, a week by
   default), and its step is at least ``lookback / busy_steps``: a subquery costs a step per series,
   so "last busy" is as precise as a minute for pods of a few hours and as half an hour for a
   week-old one, at the same cost.

Everything is evaluated ``@ now``, so a round answers for the moment it was asked about, whenever it
runs. ``observe(..., listed=True)`` lists the pods in the window query too (regex, chunked by the
body budget): what the benchmark's one-pod-at-a-time baseline uses with a single pod.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.batching import DEFAULT_MAX_URL_BYTES, PodWindow, chunk_pods, url_length
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
# Idle pods are asked about in classes of age (6 h, a day, three days, older), each with the
# lookback its oldest member needs: at most four detail queries.
AGE_CLASSES = (6 * 3600.0, 86400.0, 3 * 86400.0)


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
    # Resolution of "last busy": a subquery step of at least this, and at most `busy_steps` steps
    # (an older pod's stretch is read at a coarser step, at the same cost).
    busy_step_seconds: float = 60.0
    busy_steps: int = 240
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
        # The detail query needs only what tells GPUs apart; the window query brought the rest.
        self._key_by = ", ".join(dict.fromkeys([*spelt, "gpu", "UUID", "GPU_I_ID", *labels.hostname]))
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
            build = functools.partial(self._window_query, window=window, at=at)
            queries = [p for _, p in self._chunks(windows, build)]
        else:
            queries = [self._window_query(None, self._namespaces(), window, at)]
        gpus = self._assemble(targets, await self._run(queries), create=True)

        # Per pod with a GPU below the threshold, the metrics its idle GPUs are judged by.
        sources: dict[str, set[str]] = {}
        for uid, per_gpu in gpus.items():
            for stats in per_gpu.values():
                if _below(stats, idle_util_percent):
                    sources.setdefault(uid, set()).add(
                        q.GR_ENGINE_ACTIVE if _uses_prof(stats) else q.GPU_UTIL
                    )
        candidates = set(sources)
        detail: list[str] = []
        for lookback, step, members in self._age_classes([w for w in windows if w.uid in candidates], now):
            build = functools.partial(
                self._detail_query,
                window=window,
                lookback=lookback,
                step=step,
                at=at,
                threshold=idle_util_percent,
            )
            detail += self._split(members, sources, build)
        if detail:
            self._assemble(
                [t for t in targets if t.uid in candidates], await self._run(detail), create=False, into=gpus
            )
        return {
            uid: tuple(_window(stats) for _, stats in sorted(per_gpu.items()))
            for uid, per_gpu in gpus.items()
        }

    def _age_classes(
        self, windows: Sequence[PodWindow], now: datetime
    ) -> list[tuple[int, int, list[PodWindow]]]:
        """(lookback, step, pods) per age class: pods of similar age share a lookback that reaches
        the oldest of them, with a step that keeps the subquery at about `busy_steps` steps."""
        cfg = self._config
        classes: dict[int, list[PodWindow]] = {}
        for w in windows:
            age = (now - w.held_from).total_seconds()
            bound = next((i for i, edge in enumerate(AGE_CLASSES) if age <= edge), len(AGE_CLASSES))
            classes.setdefault(bound, []).append(w)
        found = []
        for _, members in sorted(classes.items()):
            oldest = max((now - w.held_from).total_seconds() for w in members)
            reach = min(cfg.lookback_seconds, oldest)
            step = max(1, math.ceil(cfg.busy_step_seconds), math.ceil(reach / cfg.busy_steps))
            found.append((step * math.ceil((reach + step) / step), step, members))
        return found

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
            (
                f"max by ({by}) ({self._over('max_over_time', q.GR_ENGINE_ACTIVE, m, window, at)}) * 100",
                "prof_max",
            ),
        ]
        return _tagged(parts)

    def _detail_query(
        self,
        by_metric: Mapping[str, Sequence[PodWindow]],
        window: int,
        lookback: int,
        step: int,
        at: float,
        threshold: float,
    ) -> str:
        """Samples, least framebuffer and last busy time of the listed pods' GPUs, each utilization
        metric asked only about the pods judged by it (a subquery's steps are the cost)."""
        by = self._key_by
        everyone = [w for pods in by_metric.values() for w in pods]
        namespaces = q.regex_alternation([w.namespace for w in everyone])
        listed = self._matchers(q.regex_alternation([w.pod for w in everyone]), namespaces)
        parts = [(f"min by ({by}) ({self._over('min_over_time', q.FB_USED, listed, window, at)})", "fb_min")]
        for metric, pods in by_metric.items():
            prof = metric == q.GR_ENGINE_ACTIVE
            tag, limit = ("prof", threshold / 100) if prof else ("util", threshold)
            m = self._matchers(q.regex_alternation([w.pod for w in pods]), namespaces)
            # Each step looks at the samples of the step before it (tiles, so that no sample falls
            # between steps): the last step whose tile held a busy sample is when the GPU was last
            # busy, read at most a step late. One subquery per spelling, joined after.
            busy = " or ".join(
                f"max_over_time((timestamp(max_over_time({metric}{{{x}}}[{step}s]) >= {limit:g}))"
                f"[{lookback}s:{step}s] @ {at:.3f})"
                for x in m
            )
            parts += [
                (f"sum by ({by}) ({self._over('count_over_time', metric, m, window, at)})", f"{tag}_samples"),
                (f"max by ({by}) ({busy})", f"{tag}_busy"),
            ]
        return _tagged(parts)

    def _split(
        self,
        members: Sequence[PodWindow],
        sources: Mapping[str, set[str]],
        build: Callable[[Mapping[str, Sequence[PodWindow]]], str],
    ) -> list[str]:
        """The detail query of `members`, in halves while it is longer than the body budget."""
        by_metric: dict[str, list[PodWindow]] = {}
        for w in members:
            for metric in sorted(sources.get(w.uid, ())):
                by_metric.setdefault(metric, []).append(w)
        promql = build(by_metric)
        cfg = self._config
        budget = cfg.max_body_bytes if self._client.config.form_body else cfg.max_url_bytes
        if len(members) <= 1 or url_length(promql) <= budget:
            return [promql]
        middle = len(members) // 2
        return self._split(members[:middle], sources, build) + self._split(members[middle:], sources, build)

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

    def _assemble(
        self,
        targets: Sequence[LiveTarget],
        samples: list[Sample],
        *,
        create: bool,
        into: dict[str, dict[_GpuKey, dict[str, object]]] | None = None,
    ) -> dict[str, dict[_GpuKey, dict[str, object]]]:
        """Stats per target uid and GPU; `create` False only adds to GPUs already seen."""
        by_name = {(t.namespace, t.pod): t for t in targets}
        gpus: dict[str, dict[_GpuKey, dict[str, object]]] = into if into is not None else defaultdict(dict)
        for sample in samples:
            labels = sample["metric"]
            target = self._target_of(labels, by_name)
            value = _value(sample)
            if target is None or value is None:
                continue
            key = self._gpu_key(labels)
            stats = gpus[target.uid].get(key) if target.uid in gpus else None
            if stats is None:
                if not create:
                    continue
                stats = gpus[target.uid][key] = {"labels": labels}
            stats[labels.get(_STAT, "")] = value
        return gpus


def _tagged(parts: Sequence[tuple[str, str]]) -> str:
    return " or ".join(f'label_replace({expr}, "{_STAT}", "{stat}", "", "")' for expr, stat in parts)


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
    """GR_ENGINE_ACTIVE where the GPU reports it in the window (MIG instances report nothing else)."""
    return _stat(stats, "prof_max") is not None


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
