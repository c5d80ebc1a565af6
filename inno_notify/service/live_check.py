"""The live check: nudges the owners of running GPU pods and workspaces whose GPUs idle, while it matters.

Every `live.interval_seconds`, on the leader (it is leader-only work, and its one write, enqueueing
the nudges, is fenced like every leader-only write), one round reads the running GPU pods from the
store (Job pods, bare GPU pods and workspace pods, all recorded by ingestion), leaves out the pods
nudged less than `live.repeat_hours` ago (the outbox says when, so a restart does not nudge
again), asks the metrics source once about the rest (adapters/prometheus/live_meter.py: a fixed number
of queries whatever the pod count), decides which GPUs idled the whole sliding window
(domain.live), and routes a nudge per idle pod like a summary (domain.routing.plan_nudge): the
owner's channels, `notify: never` and a person's own `nudges: false` honoured; then bundles them
(domain.routing.bundle_nudges): one message per person and channel a round, listing all their
idle pods, however many pods name them as owner. Within `live.quiet_hours` no round runs. The
dispatcher sends the rows.

Report only. inno-notify never stops, scales or deletes a workload (docs/nudges.md says why). An
opt-in action would be a second consumer of a round's findings, next to routing in `run_once`, and
nothing else here would change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.prometheus.errors import PrometheusError
from inno_notify.adapters.prometheus.live_meter import DEFAULT_LOOKBACK_SECONDS, LiveTarget
from inno_notify.domain.digest import NudgeEntry
from inno_notify.domain.live import (
    GpuWindow,
    IdleFinding,
    IdlePolicy,
    QuietHours,
    find_idle,
    held_from,
    in_quiet_hours,
    nudge_due,
    nudge_entry,
)
from inno_notify.domain.model import JobRecord, Notification, NotifyMode, PodRecord
from inno_notify.domain.routing import bundle_nudges, plan_nudge
from inno_notify.options import from_setting
from inno_notify.service.pausing import rounds
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


class LiveSource(Protocol):
    """What GPUs of running pods did over the window: the Prometheus live meter, or the simulator."""

    async def observe(
        self, targets: Sequence[LiveTarget], now: datetime, window_seconds: float, idle_util_percent: float
    ) -> Mapping[str, Sequence[GpuWindow]]: ...


@dataclass(frozen=True, slots=True)
class LiveOptions:
    cluster: str = from_setting("cluster", "default")
    idle_minutes: float = from_setting("live.idle_minutes", 60.0)
    repeat_hours: float = from_setting("live.repeat_hours", 24.0)
    interval_seconds: float = from_setting("live.interval_seconds", 300.0)
    idle_util_percent: float = from_setting("rightsizing.idle_gpu_util_percent", 5.0)
    scrape_interval_seconds: float = from_setting("prometheus.scrape_interval_seconds", 15.0)
    lookback_seconds: float = DEFAULT_LOOKBACK_SECONDS
    quiet_hours: QuietHours | None = None  # parsed from live.quiet_hours in its timezone
    timezone: str = from_setting("live.timezone", "UTC")
    namespaces: tuple[str, ...] = from_setting("kubernetes.namespaces", ())
    allowed_email_domains: tuple[str, ...] = from_setting("notify.allowed_email_domains", ())

    @property
    def policy(self) -> IdlePolicy:
        return IdlePolicy(
            window_seconds=self.idle_minutes * 60,
            idle_util_percent=self.idle_util_percent,
            scrape_seconds=self.scrape_interval_seconds,
        )


@dataclass(frozen=True, slots=True)
class LiveRound:
    """What one round saw and did."""

    pods: int = 0
    # Idle pods among those not nudged within repeat_hours (the others are not looked at).
    findings: tuple[IdleFinding, ...] = ()
    nudged: tuple[str, ...] = ()  # pod uids that got rows
    rows: int = 0
    # Running pods left alone because they were nudged within repeat_hours.
    recently_nudged: int = 0
    # Idle pods with nobody (or no channel) to tell.
    silent: int = 0
    # Running pods whose workload says `inno-notify/notify: never` (not looked at).
    opted_out: int = 0
    quiet: bool = False


@dataclass(slots=True)
class LiveStats:
    rounds: int = 0
    failed_rounds: int = 0
    nudges: int = 0
    last_round_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


class LiveCheck:
    def __init__(
        self,
        store: Store,
        source: LiveSource,
        options: LiveOptions,
        clock: Clock,
        enabled_channels: Collection[str],
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.store = store
        self.telemetry = telemetry
        self.source = source
        self.options = options
        self.clock = clock
        self.enabled_channels = frozenset(enabled_channels)
        self.stats = LiveStats()
        self._sleep = sleep

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds every `interval_seconds` until `stop` is set. A failed round (the database went
        away, a bug surfaced) wrote nothing by half (rows are enqueued in one transaction), so the
        next round starts afresh."""
        await rounds(
            self._timed_round,
            stop,
            log=log,
            what="live check round",
            retry_seconds=self.options.interval_seconds,
            sleep=self._sleep,
            failed=lambda exc: self._failed(f"{type(exc).__name__}: {exc}"),
        )

    async def _timed_round(self) -> float:
        began = time.perf_counter()
        try:
            done = await self.run_once(self.clock())
            self._count_round("quiet" if done.quiet else "ok")
        except PrometheusError as exc:
            self._failed(f"Prometheus: {exc}")
            log.warning("live check: Prometheus did not answer (%s); trying again next round", exc)
        finally:
            self.stats.last_round_seconds = time.perf_counter() - began
        return self.options.interval_seconds

    def _count_round(self, outcome: str) -> None:
        if self.telemetry is not None:
            self.telemetry.live_rounds.labels(outcome).inc()

    def _failed(self, error: str) -> None:
        self._count_round("failed")
        self.stats.failed_rounds += 1
        self.stats.errors = [*self.stats.errors[-9:], error]

    async def run_once(self, now: datetime) -> LiveRound:
        """One round at `now`: observe, decide, enqueue. Returns what it saw and did."""
        self.stats.rounds += 1
        options = self.options
        if in_quiet_hours(now, options.quiet_hours):
            return LiveRound(quiet=True)
        window = options.idle_minutes * 60
        running = await self.store.live.running_gpu_pods(options.cluster, options.namespaces)
        # A pod held for less than the window cannot have idled all of it; a pod whose owner opted
        # out, or that was nudged within `repeat_hours`, is not nudged: none is worth a question to
        # Prometheus.
        candidates = [(job, pod) for job, pod in running if _held_since(pod, now, window)]
        old_enough = [(job, pod) for job, pod in candidates if job.notify is not NotifyMode.NEVER]
        last = await self.store.live.last_nudges(options.cluster, [pod.uid for _, pod in old_enough])
        due = [
            (job, pod) for job, pod in old_enough if nudge_due(last.get(pod.uid), now, options.repeat_hours)
        ]
        targets = [LiveTarget(pod.namespace, pod.name, pod.uid, held_from(pod) or now) for _, pod in due]
        seen = await self.source.observe(targets, now, window, options.idle_util_percent) if targets else {}
        lookback_start = now - timedelta(seconds=options.lookback_seconds)
        found: list[tuple[JobRecord, IdleFinding]] = []
        for job, pod in due:
            finding = find_idle(
                job,
                pod,
                seen.get(pod.uid, ()),
                now,
                options.policy,
                lookback_start,
                timezone=options.timezone,
            )
            if finding is not None:
                found.append((job, finding))
        recently = len(old_enough) - len(due)
        opted_out = len(candidates) - len(old_enough)
        if not found:
            return LiveRound(pods=len(running), recently_nudged=recently, opted_out=opted_out)
        # An opt-in action (docs/nudges.md) would take `found` here; routing only reports.
        # Read each round (every few minutes): edits made through the API apply at once.
        directory = await self.store.directory.snapshot()
        rows: list[Notification] = []
        ledger: dict[str, list[tuple[str, NudgeEntry]]] = {}
        nudged: list[str] = []
        silent = 0
        for job, finding in found:
            plan = plan_nudge(
                job,
                finding,
                directory,
                self.enabled_channels,
                now,
                options.repeat_hours,
                options.allowed_email_domains,
            )
            if plan.notifications:
                rows.extend(plan.notifications)
                if finding.team:
                    for row in plan.notifications:
                        ledger.setdefault(row.recipient.strip().lower(), []).append(
                            (finding.team, nudge_entry(finding))
                        )
                nudged.append(finding.pod_uid)
            else:
                silent += 1
                log.debug("no nudge about %s/%s: %s", finding.namespace, finding.pod, plan.silent_reason)
        bundles = bundle_nudges(rows, now, options.repeat_hours)
        planned: list[tuple[list[Notification], list[tuple[str, NudgeEntry]]]] = []
        for row in bundles:
            # A pod's ledger entry goes with its recipient's first row of the round (the ledger
            # keeps an entry once however often it is added).
            planned.append(([row], ledger.pop(row.recipient.strip().lower(), [])))
        written = (
            await self.store.live.enqueue_nudges(
                planned,
                nudged=[(options.cluster, uid) for uid in nudged],
                at=now,
                keep_after=now - timedelta(hours=options.repeat_hours),
            )
            if planned
            else 0
        )
        self.stats.nudges += len(nudged)
        if self.telemetry is not None:
            self.telemetry.nudges.inc(len(nudged))
        log.info(
            "live check: %d running GPU pod(s), %d nudged within %g h, %d idle, %d nudged (%d row(s) "
            "new), %d with nobody to tell",
            len(running),
            recently,
            options.repeat_hours,
            len(found),
            len(nudged),
            written,
            silent,
        )
        return LiveRound(
            pods=len(running),
            findings=tuple(f for _, f in found),
            nudged=tuple(nudged),
            rows=written,
            recently_nudged=recently,
            silent=silent,
            opted_out=opted_out,
        )


def _held_since(pod: PodRecord, now: datetime, window_seconds: float) -> bool:
    start = held_from(pod)
    return start is not None and (now - start).total_seconds() >= window_seconds
