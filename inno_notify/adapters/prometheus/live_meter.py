"""What the GPUs of running pods did over the last window, in a few PromQL queries whatever the pod count.

The live check asks, every interval, about all running GPU pods at once. A round is at most four
queries:

1. **Window** (one query): per GPU series of dcgm-exporter, the highest utilization over
   ``[now - window, now]``, as ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (× 100, which MIG instances need) and
   as ``DCGM_FI_DEV_GPU_UTIL`` (the first is used where the GPU reports it). The query lists no pods:
   it takes every series that carries a pod label (in each configured spelling, ``pod`` and
   ``exported_pod``; within ``kubernetes.namespaces`` where that is set), so its length does not
   grow with the pods; the answer is matched to the running pods here. A series carrying both
   spellings (the Helm chart's ``honorLabels: false``) comes back once: ``or`` keeps one of equal
   label sets. It carries only what tells GPUs apart; what describes them comes with the detail.
2. **Detail** of the pods with a GPU below the threshold (``detail_queries`` queries, two, sent
   together: Prometheus evaluates queries in parallel): their sample counts and least framebuffer in
   use over the window, and per GPU the last coarse tile of the lookback that held a sample at or
   above the threshold, ``max_over_time(timestamp(max_over_time(util[tile]) >= threshold)[lookback:tile])``:
   every sample counts (a short burst between two steps is not missed), in about
   ``busy_coarse_steps`` tiles whatever the lookback. Each utilization metric is asked only about the
   pods it judges, and only these pods are listed (regexes of their names in a form body, whose
   budget holds thousands of names). The lookback reaches back to when the oldest of them got its
   GPUs (capped, a week by default); a series has no samples from before its pod, so a young pod
   costs no more for it.
3. **Refine** (one query): each coarse tile that held a last busy sample is read again at
   ``busy_step_seconds``, for the GPUs whose tile it was (grouped by tile: a query part per distinct
   tile, not per GPU). So "idle since" is exact to the minute for a pod of an hour or of a week.

Everything is evaluated ``@ now``, so a round answers for the moment it was asked about, whenever it
runs. ``observe(..., listed=True)`` lists the pods in the window query too (regex, chunked by the
body budget): what the benchmark's one-pod-at-a-time baseline uses with a single pod.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus.batching import DEFAULT_MAX_URL_BYTES, PodWindow, chunk_pods, url_length
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient, Sample, sample_value
from inno_notify.domain.live import GpuWindow
from inno_notify.settings import PrometheusSettings

__all__ = [
    "DEFAULT_LOOKBACK_SECONDS",
    "IDENTITY_ENCODING",
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
IDENTITY_ENCODING = {"Accept-Encoding": "identity"}


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
    # Resolution of "last busy". The lookback is first read in about `busy_coarse_steps` steps; the
    # step whose tile held the last busy sample is then read again at this step.
    busy_step_seconds: float = 60.0
    busy_coarse_steps: int = 48
    # The detail of the idle pods is asked in this many queries at once (Prometheus evaluates
    # queries in parallel; a few cores each).
    detail_queries: int = 2
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
        # What tells GPUs apart, without what describes them.
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
        """Per target uid with a GPU that stayed below ``idle_util_percent`` over
        ``[now - window, now]``, all its GPUs as seen then; ``busy_at`` is filled for the ones below
        it. Targets without GPU series, or whose GPUs all stayed at or above it, are absent.

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
            for gpu in per_gpu.values():
                if gpu.below(idle_util_percent):
                    sources.setdefault(uid, set()).add(q.GR_ENGINE_ACTIVE if gpu.uses_prof else q.GPU_UTIL)
        candidates = set(sources)
        # A pod whose GPUs all stayed at or above the threshold has nothing to report.
        gpus = {uid: per_gpu for uid, per_gpu in gpus.items() if uid in candidates}
        if not candidates:
            return {}
        idle_targets = [t for t in targets if t.uid in candidates]
        # Detail: the idle pods in `detail_queries` parts asked at once (Prometheus evaluates
        # queries in parallel), one lookback for all, reaching the oldest (a series has no samples
        # from before its pod started, so a young pod costs no more for it).
        members = [w for w in windows if w.uid in candidates]
        lookback, step = self._lookback(members, now)
        share = math.ceil(len(members) / max(1, self._config.detail_queries))
        build = functools.partial(
            self._detail_query,
            window=window,
            lookback=lookback,
            step=step,
            at=at,
            threshold=idle_util_percent,
        )
        parts = [
            promql
            for start in range(0, len(members), share)
            for promql in self._detail_parts(members[start : start + share], sources, build)
        ]
        self._assemble(idle_targets, await self._run(parts), create=False, into=gpus)
        # Refine: where a coarse tile held the last busy sample, read that tile at the fine step.
        refine = self._refine_parts(gpus, step, idle_util_percent)
        if refine:
            found = await self._run(self._joined([promql for promql, _ in refine]))
            self._assemble_refined(idle_targets, found, gpus, {key for _, keys in refine for key in keys})
        return _windows(gpus)

    def _lookback(self, windows: Sequence[PodWindow], now: datetime) -> tuple[int, int]:
        """(lookback, coarse step): back to when the oldest pod got its GPUs (capped), in about
        `busy_coarse_steps` steps, each a multiple of the fine step so that refining falls on tiles."""
        cfg = self._config
        reach = min(cfg.lookback_seconds, max((now - w.held_from).total_seconds() for w in windows))
        fine = max(1, math.ceil(cfg.busy_step_seconds))
        step = fine * max(1, math.ceil(reach / cfg.busy_coarse_steps / fine))
        return step * math.ceil((reach + step) / step), step

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
        # Only what tells GPUs apart: the answer has a sample per GPU series of the cluster, and
        # what describes a GPU (model, MIG profile) is asked of the idle ones only.
        by = self._key_by
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
        *,
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
        described = self._by
        parts = [
            (f"min by ({described}) ({self._over('min_over_time', q.FB_USED, listed, window, at)})", "fb_min")
        ]
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

    def _detail_parts(
        self,
        members: Sequence[PodWindow],
        sources: Mapping[str, set[str]],
        build: Callable[[Mapping[str, Sequence[PodWindow]]], str],
    ) -> list[str]:
        """The detail query of `members`, in halves while it is longer than the body budget (past
        a few thousand pods)."""
        by_metric: dict[str, list[PodWindow]] = {}
        for w in members:
            for metric in sorted(sources.get(w.uid, ())):
                by_metric.setdefault(metric, []).append(w)
        promql = build(by_metric)
        if len(members) <= 1 or url_length(promql) <= self._budget:
            return [promql]
        middle = len(members) // 2
        return [
            *self._detail_parts(members[:middle], sources, build),
            *self._detail_parts(members[middle:], sources, build),
        ]

    @property
    def _budget(self) -> int:
        cfg = self._config
        return cfg.max_body_bytes if self._client.config.form_body else cfg.max_url_bytes

    def _joined(self, parts: Sequence[str]) -> list[str]:
        """The parts as few queries as the body budget allows (their rows differ by their labels)."""
        queries: list[str] = []
        for part in parts:
            if queries and url_length(queries[-1]) + url_length(part) <= self._budget:
                queries[-1] = f"{queries[-1]} or {part}"
            else:
                queries.append(part)
        return queries

    def _refine_parts(
        self, gpus: Mapping[str, Mapping[_GpuKey, _Gpu]], step: int, threshold: float
    ) -> list[tuple[str, set[tuple[str, _GpuKey]]]]:
        """Per metric and coarse tile that held a GPU's last busy sample, a subquery over that tile
        at the fine step, for the GPUs whose last busy sample it held (by pod and UUID)."""
        fine = max(1, math.ceil(self._config.busy_step_seconds))
        tiles: dict[tuple[str, float, int], list[tuple[str, _GpuKey, _Gpu]]] = {}
        if step <= fine:
            return []
        for uid, per_gpu in gpus.items():
            for key, gpu in per_gpu.items():
                busy = gpu.prof_busy if gpu.uses_prof else gpu.util_busy
                if busy is not None and gpu.below(threshold):
                    metric = q.GR_ENGINE_ACTIVE if gpu.uses_prof else q.GPU_UTIL
                    tiles.setdefault((metric, busy, step), []).append((uid, key, gpu))
        parts = []
        for (metric, end, step), members in sorted(tiles.items()):
            limit = threshold / 100 if metric == q.GR_ENGINE_ACTIVE else threshold
            tag = "prof_busy" if metric == q.GR_ENGINE_ACTIVE else "util_busy"
            labels = [gpu.labels for _, _, gpu in members]
            uuids = q.regex_alternation([key[2] for _, key, _ in members])
            subqueries = []
            for pod_label, ns_label in self._spellings:
                pods = q.regex_alternation([lb.get(pod_label, "") for lb in labels if lb.get(pod_label)])
                spaces = q.regex_alternation([lb.get(ns_label, "") for lb in labels if lb.get(ns_label)])
                if not pods:
                    continue
                selector = f'{metric}{{{ns_label}=~"{spaces}",{pod_label}=~"{pods}",UUID=~"{uuids}"}}'
                subqueries.append(
                    f"max_over_time((timestamp(max_over_time({selector}[{fine}s]) >= {limit:g}))"
                    f"[{step}s:{fine}s] @ {end:.3f})"
                )
            expr = f"max by ({self._key_by}) ({' or '.join(subqueries)})"
            parts.append((_tagged([(expr, tag)]), {(uid, key) for uid, key, _ in members}))
        return parts

    def _assemble_refined(
        self,
        targets: Sequence[LiveTarget],
        samples: list[Sample],
        gpus: dict[str, dict[_GpuKey, _Gpu]],
        asked: set[tuple[str, _GpuKey]],
    ) -> None:
        """The fine "last busy" of the GPUs it was asked for (another GPU of a listed pod that a
        refining subquery also matched keeps its own)."""
        refined: dict[str, dict[_GpuKey, _Gpu]] = {
            uid: {key: _Gpu(gpu.labels) for key, gpu in per_gpu.items()} for uid, per_gpu in gpus.items()
        }
        self._assemble(targets, samples, create=False, into=refined)
        for uid, key in asked:
            fine = refined[uid][key]
            gpu = gpus[uid][key]
            if fine.util_busy is not None:
                gpu.util_busy = fine.util_busy
            if fine.prof_busy is not None:
                gpu.prof_busy = fine.prof_busy

    def _chunks(
        self, windows: Sequence[PodWindow], build: Callable[[str, str], str]
    ) -> list[tuple[tuple[PodWindow, ...], str]]:
        return chunk_pods(
            windows,
            lambda pods, ns, _window: build(pods, ns),
            max_url_bytes=self._budget,
            scrape_seconds=self._config.scrape_interval_seconds,
        )

    async def _run(self, queries: list[str]) -> list[Sample]:
        self.last_queries += len(queries)
        answers = await asyncio.gather(*(self._client.query(promql) for promql in queries))
        return [sample for answer in answers for sample in answer]

    # --- answers ------------------------------------------------------------------------------------

    def _assemble(
        self,
        targets: Sequence[LiveTarget],
        samples: list[Sample],
        *,
        create: bool,
        into: dict[str, dict[_GpuKey, _Gpu]] | None = None,
    ) -> dict[str, dict[_GpuKey, _Gpu]]:
        """What each answer row says, per target uid and GPU; `create` False only adds to GPUs
        already seen. Runs for every GPU of the cluster each round: plain loops, local names."""
        by_name = {(t.namespace, t.pod): t.uid for t in targets}
        gpus: dict[str, dict[_GpuKey, _Gpu]] = into if into is not None else {}
        spellings = self._spellings
        hostnames = self._config.labels.hostname
        for sample in samples:
            labels = sample["metric"]
            uid = None
            for pod_label, ns_label in spellings:
                uid = by_name.get((labels.get(ns_label, ""), labels.get(pod_label, "")))
                if uid is not None:
                    break
            stat = _STATS.get(labels.get(_STAT, ""))
            value = sample_value(sample)
            if uid is None or stat is None or value is None:
                continue
            host = next((labels[h] for h in hostnames if labels.get(h)), "")
            key = (host, labels.get("gpu", ""), labels.get("UUID", ""), labels.get("GPU_I_ID", ""))
            per_pod = gpus.get(uid)
            gpu = per_pod.get(key) if per_pod is not None else None
            if gpu is None:
                if not create:
                    continue
                gpu = gpus.setdefault(uid, {})[key] = _Gpu(labels)
            if stat == "fb_min":
                # The row that carries the GPU's model and MIG profile.
                gpu.labels = labels
            setattr(gpu, stat, value)
        return gpus


class _Gpu:
    """One GPU's figures as the answers bring them in."""

    __slots__ = (
        "fb_min",
        "labels",
        "prof_busy",
        "prof_max",
        "prof_samples",
        "util_busy",
        "util_max",
        "util_samples",
    )

    def __init__(self, labels: Mapping[str, str]) -> None:
        self.labels = labels
        self.util_max: float | None = None
        self.prof_max: float | None = None
        self.util_samples: float | None = None
        self.prof_samples: float | None = None
        self.fb_min: float | None = None
        self.util_busy: float | None = None
        self.prof_busy: float | None = None

    @property
    def uses_prof(self) -> bool:
        """GR_ENGINE_ACTIVE where the GPU reports it in the window (MIG instances report nothing else)."""
        return self.prof_max is not None

    @property
    def util(self) -> float | None:
        return self.prof_max if self.prof_max is not None else self.util_max

    def below(self, threshold: float) -> bool:
        util = self.util
        return util is not None and util < threshold

    def window(self) -> GpuWindow:
        labels = self.labels
        prof = self.uses_prof
        busy = self.prof_busy if prof else self.util_busy
        samples = self.prof_samples if prof else self.util_samples
        return GpuWindow(
            gpu=labels.get("gpu", ""),
            uuid=labels.get("UUID") or None,
            model=labels.get("modelName") or None,
            mig_profile=labels.get("GPU_I_PROFILE") or None,
            host=labels.get("Hostname") or labels.get("hostname") or None,
            util_max_percent=self.util,
            samples=int(samples or 0),
            fb_held_mib=self.fb_min,
            busy_at=None if busy is None else datetime.fromtimestamp(busy, tz=UTC),
        )


# The stats the queries tag their rows with (the `stat` label), each a field of _Gpu.
_STATS = {name: name for name in _Gpu.__slots__ if name != "labels"}


def _windows(gpus: Mapping[str, Mapping[_GpuKey, _Gpu]]) -> dict[str, tuple[GpuWindow, ...]]:
    return {uid: tuple(gpu.window() for _, gpu in sorted(per_gpu.items())) for uid, per_gpu in gpus.items()}


def _tagged(parts: Sequence[tuple[str, str]]) -> str:
    assert all(stat in _STATS for _, stat in parts)
    return " or ".join(f'label_replace({expr}, "{_STAT}", "{stat}", "", "")' for expr, stat in parts)


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
    # The window's answer is a sample per GPU of the cluster, about a megabyte for a thousand GPUs,
    # asked every few minutes: compressing it cost Prometheus more time than the answer takes on
    # a cluster network (docs/nudges.md has the figures).
    client = PrometheusClient(
        ClientConfig(
            url=settings.url,
            timeout_seconds=settings.timeout_seconds,
            max_workers=max_workers,
            headers=IDENTITY_ENCODING,
        )
    )
    return LiveMeter(
        client,
        LiveConfig(
            scrape_interval_seconds=settings.scrape_interval_seconds,
            labels=labels,
            namespaces=tuple(namespaces),
        ),
    )
