"""Usage collection: finished jobs in, measured usage, advice and planned notifications out.

A job that ended is due here `prometheus.metrics_delay_seconds` after its end (the store's
`claim_usage_due`, leased so that a collector that dies leaves the job to the next round). Each round
measures all claimed jobs together — the metrics source batches them into a fixed number of
queries — then, per job, computes the figures (domain.accounting), the advice
(domain.rightsizing, with the family's earlier runs) and the notifications (routing, injected), and
stores all three in one transaction. When Prometheus cannot answer, the round is retried with
backoff; after `prometheus.give_up_after_seconds` the summary goes out with the figures missing and
the reason, never with invented numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from inno_notify.adapters.db.repository import Store, SummaryState
from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.errors import PrometheusError
from inno_notify.adapters.prometheus.measure import PodMeasurement
from inno_notify.domain.accounting import compute_usage
from inno_notify.domain.gpu_sharing import requests_shared_gpu
from inno_notify.domain.model import JobRecord, MissingReason, Notification, PodRecord
from inno_notify.domain.rightsizing import FamilyRun, RightsizingPolicy, current_run, recommend
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
# Decides who gets a job's summary on which channel (domain.routing, composed by the runtime).
PlanNotifications = Callable[[JobRecord, datetime], Awaitable[list[Notification]]]


class UsageSource(Protocol):
    """What measures pods: the Prometheus meter in production, the simulator in the demo."""

    async def measure_pods(self, targets: Sequence[PodWindow]) -> Mapping[str, PodMeasurement]: ...


@dataclass(frozen=True, slots=True)
class CollectorOptions:
    give_up_after_seconds: float = 1800.0
    idle_util_percent: float = 5.0
    scrape_interval_seconds: float = 15.0
    batch_size: int = 500
    poll_seconds: float = 5.0
    # Retries after a failed round wait a quarter of the job's age, within these bounds.
    retry_min_seconds: float = 15.0
    retry_max_seconds: float = 300.0
    family_runs: int = 20
    # After giving up, a job summarized with figures missing is measured again (its stored usage and
    # advice are updated, nothing is re-sent) every `remeasure_every_seconds` for this long.
    remeasure_for_seconds: float = 86400.0
    remeasure_every_seconds: float = 900.0


@dataclass(slots=True)
class CollectorStats:
    rounds: int = 0
    jobs_summarized: int = 0
    jobs_given_up: int = 0
    failed_rounds: int = 0
    notifications_planned: int = 0
    last_round_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def pod_window(pod: PodRecord, job: JobRecord, now: datetime) -> PodWindow | None:
    """The interval the pod held its resources (CONTRACT.md §4); None if it was never scheduled."""
    held_from = pod.scheduled_at or pod.started_at
    if held_from is None:
        return None
    held_until = pod.finished_at or pod.deleted_at or job.finished_at or now
    return PodWindow(
        pod.namespace,
        pod.name,
        pod.uid,
        held_from,
        max(held_from, held_until),
        shared_resource=requests_shared_gpu(pod),
    )


class UsageCollector:
    def __init__(
        self,
        store: Store,
        source: UsageSource,
        policy: RightsizingPolicy,
        plan: PlanNotifications,
        options: CollectorOptions,
        clock: Clock,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.store = store
        self.telemetry = telemetry
        self.source = source
        self.policy = policy
        self.plan = plan
        self.options = options
        self.clock = clock
        self.stats = CollectorStats()
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Asks for a round now (the pipeline calls it when jobs end)."""
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                done = await self.run_once(self.clock())
            except Exception:
                # The database went away or a bug surfaced: claimed jobs come back after their
                # lease, so waiting and trying again loses nothing.
                log.exception("usage round failed; trying again in %.1f s", self.options.poll_seconds)
                done = 0
            if done:
                continue
            self._wake.clear()
            waiters = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())}
            _, pending = await asyncio.wait(
                waiters, timeout=self.options.poll_seconds, return_when="FIRST_COMPLETED"
            )
            for task in pending:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def run_once(self, now: datetime) -> int:
        """One round over the jobs due at `now`; returns how many jobs it settled."""
        jobs = await self.store.claim_usage_due(now, self.options.batch_size)
        if not jobs:
            return 0
        self.stats.rounds += 1
        started = self.clock()
        settled = 0
        for cluster in sorted({j.cluster for j in jobs}):
            settled += await self._round(cluster, [j for j in jobs if j.cluster == cluster], now)
        self.stats.last_round_seconds = (self.clock() - started).total_seconds()
        return settled

    async def _round(self, cluster: str, jobs: list[JobRecord], now: datetime) -> int:
        pods = await self.store.pods_of_jobs(cluster, [j.uid for j in jobs])
        states = await self.store.summary_states(cluster, [j.uid for j in jobs])
        again = {uid for uid, state in states.items() if state is SummaryState.REMEASURE}
        windows = [
            window
            for job in jobs
            for pod in pods.get(job.uid, [])
            if (window := pod_window(pod, job, now)) is not None
        ]
        began = time.monotonic()
        try:
            measured = await self.source.measure_pods(windows) if windows else {}
        except PrometheusError as exc:
            self.stats.failed_rounds += 1
            self.stats.errors = [*self.stats.errors[-9:], str(exc)]
            log.warning("usage round for %d job(s) failed: %s", len(jobs), exc)
            return await self._after_failure(jobs, pods, again, now, exc)
        finally:
            if self.telemetry is not None and windows:
                # One batched round queries every metric; its duration is what bounds the summaries.
                self.telemetry.prometheus_query_seconds.labels("round").observe(time.monotonic() - began)
        for job in jobs:
            await self._settle(job, pods.get(job.uid, []), measured, now, None, remeasured=job.uid in again)
        self.stats.jobs_summarized += len(jobs)
        return len(jobs)

    async def _after_failure(
        self,
        jobs: list[JobRecord],
        pods: Mapping[str, list[PodRecord]],
        again: set[str],
        now: datetime,
        exc: PrometheusError,
    ) -> int:
        settled = 0
        for job in jobs:
            ended = job.finished_at or now
            age = (now - ended).total_seconds()
            if job.uid in again:
                # Already summarized with figures missing: try later, or stop trying.
                if age >= self.options.remeasure_for_seconds or not exc.retryable:
                    await self.store.set_summary_state(job.cluster, job.uid, SummaryState.SUMMARIZED)
                else:
                    later = now + timedelta(seconds=self.options.remeasure_every_seconds)
                    await self.store.reschedule_usage(job.cluster, job.uid, later)
                continue
            if age >= self.options.give_up_after_seconds or not exc.retryable:
                await self._settle(job, pods.get(job.uid, []), {}, now, MissingReason.PROMETHEUS_UNAVAILABLE)
                self.stats.jobs_given_up += 1
                settled += 1
            else:
                delay = min(self.options.retry_max_seconds, max(self.options.retry_min_seconds, age / 4))
                await self.store.reschedule_usage(job.cluster, job.uid, now + timedelta(seconds=delay))
        return settled

    async def _settle(
        self,
        job: JobRecord,
        pods: list[PodRecord],
        measured: Mapping[str, PodMeasurement],
        now: datetime,
        missing: MissingReason | None,
        *,
        remeasured: bool = False,
    ) -> None:
        gpus = [g for p in pods if p.uid in measured for g in measured[p.uid].gpus]
        pod_usage = [measured[p.uid].pod for p in pods if p.uid in measured]
        usage = compute_usage(
            job,
            pods,
            gpus,
            pod_usage,
            self.options.idle_util_percent,
            now,
            missing,
            scrape_interval_seconds=self.options.scrape_interval_seconds,
        )
        history = await self._history(job, now)
        recs = recommend(job, usage, pods, history, self.policy, now)
        # A job measured again was already summarized: its rows exist, planning again adds nothing.
        notifications = [] if remeasured else await self.plan(job, now)
        if missing is None:
            state, remeasure_at = SummaryState.SUMMARIZED, None
        else:
            state = SummaryState.REMEASURE
            remeasure_at = now + timedelta(seconds=self.options.remeasure_every_seconds)
        added = await self.store.complete_summary(
            job.cluster, job.uid, usage, recs, notifications, state, remeasure_at
        )
        self.stats.notifications_planned += added
        if self.telemetry is not None:
            self.telemetry.jobs_summarized.labels("missing" if missing else "summarized").inc()

    async def _history(self, job: JobRecord, now: datetime) -> list[FamilyRun]:
        if not job.family:
            return []
        before = job.finished_at or now
        runs = await self.store.family_history(
            job.cluster, job.namespace, job.family, before, self.options.family_runs
        )
        if not runs:
            return []
        pods = await self.store.pods_of_jobs(job.cluster, [run.uid for run, _ in runs])
        return [current_run(run, usage, pods.get(run.uid, []), self.policy, now) for run, usage in runs]
