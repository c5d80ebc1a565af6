"""Usage collection: finished jobs in, measured usage, advice and planned notifications out.

A job that ended is due here `prometheus.metrics_delay_seconds` after its end (the store's
`claim_usage`, leased under a claim token so that a collector that dies leaves the job to the next
round). Each round reads what it needs for all claimed jobs at once — their pods, their families'
earlier runs and previous advice, in a fixed number of statements (adapters.db.usage_round) —
measures them together (the metrics source batches them into a fixed number of queries), then,
per job, computes the figures (domain.accounting), the advice (domain.rightsizing, with the
family's earlier runs, including those the round summarized before it) and the notifications
(routing, injected; a planner with `for_round` reads the directory once per round), and stores
every summary of the round in one transaction (issue 32: "batch, don't loop"). A write that fails
is split in halves down to the job whose summary cannot be stored. When Prometheus cannot answer,
the round is retried with backoff; after `prometheus.give_up_after_seconds` the summary goes out
with the figures missing and the reason, never with invented numbers.

One job must not hold up the others. When measuring a round raises anything but a Prometheus
error, the round is halved until each job whose own measurement raises stands alone; such a job,
and one whose figures or advice cannot be computed, is summarized with every figure null for the
reason `measurement_error` (logged once, with its uid) and is not measured again, while the rest
of the round is measured and summarized as usual. A job whose summary cannot be planned or stored
is set aside while the others go on; several such jobs in a row fail the round, because then it
is the database or the directory that is away, not the jobs. (A run set aside after its summary
was computed may have counted in a later run's history in the same round: the round computes all
its summaries before it stores them.)

A claim the round cannot settle is released when the round ends, not left to its lease (issue
32: a summary waited out the whole lease after the database's backends were terminated). The
store already tried the write once more on a fresh connection; what still failed is released due
again after the same backoff as a Prometheus retry (a quarter of the job's age, within
`retry_min_seconds`..`retry_max_seconds`), so that a job that fails on its own is not retried
every poll. When the release cannot be written either, the database is away: the collector keeps
the claim and releases it first thing in the next round that reaches the database, due at once,
so that a job that finished during the fault is summarized within a poll of the database
answering again. A collector that dies meanwhile leaves the claim to its lease (or to the next
leader, which takes the claims of an ended term at once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from inno_notify.adapters.db.leases import LostLeadership
from inno_notify.adapters.db.repository import Store, SummaryState
from inno_notify.adapters.db.usage_round import JobSummary, RoundReads, RunsAsked
from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.errors import PrometheusError
from inno_notify.adapters.prometheus.measure import PodMeasurement
from inno_notify.domain.accounting import (
    GPU_MEMORY_FIGURES,
    GPU_UTIL_FIGURES,
    POD_FIGURES,
    compute_usage,
    held_interval,
)
from inno_notify.domain.adoption import Adoption, judge
from inno_notify.domain.gpu_sharing import requests_shared_gpu
from inno_notify.domain.model import (
    JobRecord,
    MissingFigure,
    MissingReason,
    Notification,
    PodRecord,
    Recommendation,
    SeriesPod,
    Usage,
    UsageSeries,
)
from inno_notify.domain.rightsizing import RightsizingPolicy, current_run, recommend
from inno_notify.domain.series import job_series
from inno_notify.options import from_setting
from inno_notify.service.batches import Piece, PieceWriter, PipelineStats
from inno_notify.service.job_charts import ChartDrawer
from inno_notify.service.pausing import rounds
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

# Every job figure of CONTRACT.md §4; a job that could not be measured has each of them null.
ALL_FIGURES = ("gpu_minutes", *GPU_UTIL_FIGURES, *GPU_MEMORY_FIGURES, *POD_FIGURES)

Clock = Callable[[], datetime]
# Decides who gets a job's summary on which channel (domain.routing, composed by the runtime).
PlanNotifications = Callable[[JobRecord, datetime], Awaitable[list[Notification]]]


@runtime_checkable
class PlansRounds(Protocol):
    """A planner that plans a whole round's summaries with one read of what it needs (the
    runtime's service.planner.DirectoryPlanner); any other planner is asked job by job."""

    async def for_round(self) -> Callable[[JobRecord, datetime], list[Notification]]: ...


class UsageSource(Protocol):
    """What measures pods: the Prometheus meter in production, the simulator in the demo."""

    async def measure_pods(self, targets: Sequence[PodWindow]) -> Mapping[str, PodMeasurement]: ...


@dataclass(frozen=True, slots=True)
class CollectorOptions:
    give_up_after_seconds: float = from_setting("prometheus.give_up_after_seconds", 1800.0)
    idle_util_percent: float = from_setting("rightsizing.idle_gpu_util_percent", 5.0)
    scrape_interval_seconds: float = from_setting("prometheus.scrape_interval_seconds", 15.0)
    batch_size: int = 500
    poll_seconds: float = 5.0
    # Retries after a failed round wait a quarter of the job's age, within these bounds.
    retry_min_seconds: float = 15.0
    retry_max_seconds: float = 300.0
    # After giving up, a job summarized with figures missing is measured again (its stored usage and
    # advice are updated, nothing is re-sent) every `remeasure_every_seconds` for this long.
    remeasure_for_seconds: float = 86400.0
    remeasure_every_seconds: float = 900.0
    # Jobs in a row that cannot be stored even with null figures: then it is the database, not them,
    # and the round fails (its unsettled jobs are released for a later round).
    max_unsettled_in_a_row: int = 3
    # The cluster whose jobs this collector measures, with that cluster's Prometheus (None: every
    # cluster in the database, for a database of one cluster).
    cluster: str | None = from_setting("cluster", None)


@dataclass(slots=True)
class CollectorStats:
    rounds: int = 0
    jobs_summarized: int = 0
    jobs_given_up: int = 0
    measurement_errors: int = 0
    failed_rounds: int = 0
    # Jobs a round claimed and could not settle, handed back for a later round.
    jobs_released: int = 0
    notifications_planned: int = 0
    adoptions_judged: int = 0
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
        job_uid=job.uid,
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
        charts: ChartDrawer | None = None,
    ) -> None:
        self.store = store
        self.telemetry = telemetry
        # Draws each summary's chart, stored with it (service.job_charts); None: the send draws them.
        self.charts = charts
        self.source = source
        self.policy = policy
        self.plan = plan
        self.options = options
        self.clock = clock
        self.stats = CollectorStats()
        self._wake = asyncio.Event()
        # The usage claim of the round in progress: the writes that settle its jobs check it.
        self._claim: str | None = None
        # Jobs of the round in progress that could not be settled, released when it ends.
        self._unsettled: list[JobRecord] = []
        # Claims a round could not release (the database was away): (token, cluster, uids).
        self._unreleased: list[tuple[str, str, list[str]]] = []

    def wake(self) -> None:
        """Asks for a round now (the pipeline calls it when jobs end)."""
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds until `stop`: at once after one that measured jobs, else after `poll_seconds` or
        a `wake`. A failed round (the database went away, a bug surfaced) released its claims, or
        releases them next time, so waiting and trying again loses nothing."""
        await rounds(
            self._next_round,
            stop,
            log=log,
            what="usage round",
            retry_seconds=self.options.poll_seconds,
            after=self.release_sent_charts,
            wake=self._wake,
        )

    async def _next_round(self) -> float:
        """One round; the seconds until the next (none after one that measured jobs)."""
        return 0.0 if await self.run_once(self.clock()) else self.options.poll_seconds

    async def release_sent_charts(self) -> int:
        """Releases the stored charts whose messages are all sent (a chart is ~20 KB, needed only
        until then); never raises: a chart kept a round longer costs nothing but its bytes."""
        try:
            return await self.store.usage.release_sent_charts()
        except LostLeadership:
            raise
        except Exception:
            log.exception("stored charts could not be released; trying again after the next round")
            return 0

    async def run_once(self, now: datetime) -> int:
        """One round over the jobs due at `now`; returns how many jobs it settled.

        Raises what failed the round, after releasing the claims it could not settle."""
        await self._release_unreleased(now)
        claim = await self.store.jobs.claim_usage(now, self.options.batch_size, cluster=self.options.cluster)
        self._claim, jobs = claim.token, list(claim.jobs)
        if not jobs:
            return 0
        self.stats.rounds += 1
        started = self.clock()
        settled = 0
        self._unsettled = []
        try:
            for cluster in sorted({j.cluster for j in jobs}):
                settled += await self._round(cluster, [j for j in jobs if j.cluster == cluster], now)
        except LostLeadership:
            raise  # the next leader takes this term's claims at once (leases.taken_over)
        except Exception:
            # The jobs it settled or rescheduled are no longer held by the claim: the release
            # leaves them as they are.
            await self._release(claim.token, jobs, now)
            raise
        if self._unsettled:
            await self._release(claim.token, self._unsettled, now)
        self.stats.last_round_seconds = (self.clock() - started).total_seconds()
        return settled

    async def _release(self, token: str, jobs: Sequence[JobRecord], now: datetime) -> None:
        """Hands the claimed `jobs` that `token` still holds back to a later round, due after the
        retry backoff of the youngest of them (module docstring). Raises only LostLeadership: a
        release that fails is kept and made by the next round (_release_unreleased)."""
        for cluster in sorted({j.cluster for j in jobs}):
            of_cluster = [j for j in jobs if j.cluster == cluster]
            uids = [j.uid for j in of_cluster]
            due = now + timedelta(seconds=min(self._retry_delay(j, now) for j in of_cluster))
            try:
                released = await self.store.jobs.release_usage(cluster, uids, due, claim=token)
            except LostLeadership:
                raise
            except Exception as exc:
                self._unreleased.append((token, cluster, uids))
                log.warning(
                    "could not release %d claimed job(s) of cluster %r (%s: %s); the next round "
                    "releases them once the database answers",
                    len(uids),
                    cluster,
                    type(exc).__name__,
                    exc,
                )
                continue
            self.stats.jobs_released += released
            if released:
                log.info("%d job(s) of cluster %r not summarized: due again at %s", released, cluster, due)

    async def _release_unreleased(self, now: datetime) -> None:
        """Makes the releases earlier rounds could not, due at once: the database, which answers
        again, was what failed them. Raises while it still does not answer (the round fails)."""
        while self._unreleased:
            token, cluster, uids = self._unreleased[0]
            try:
                released = await self.store.jobs.release_usage(cluster, uids, now, claim=token)
            except LostLeadership:
                self._unreleased.clear()  # the next leader takes this term's claims at once
                raise
            del self._unreleased[0]
            self.stats.jobs_released += released
            log.info("released %d job(s) of cluster %r claimed before the database fault", released, cluster)

    def _retry_delay(self, job: JobRecord, now: datetime) -> float:
        """Seconds until a job that could not be summarized now is tried again: a quarter of its
        age since it ended, within the retry bounds."""
        age = (now - (job.finished_at or now)).total_seconds()
        return min(self.options.retry_max_seconds, max(self.options.retry_min_seconds, age / 4))

    async def _round(self, cluster: str, jobs: list[JobRecord], now: datetime) -> int:
        asks = _FamilyAsks(jobs, now, self.policy.family_max_runs - 1)
        families = _Families(
            await self.store.jobs.read_round(cluster, [j.uid for j in jobs], asks.asks), asks
        )
        pods = families.reads.pods
        again = {uid for uid, state in families.reads.states.items() if state is SummaryState.REMEASURE}
        windows: dict[str, list[PodWindow]] = {}
        broken: set[str] = set()
        for job in jobs:
            try:
                windows[job.uid] = [
                    window
                    for pod in pods.get(job.uid, [])
                    if (window := pod_window(pod, job, now)) is not None
                ]
            except Exception as exc:  # one job's odd record must not stop the round
                self._measurement_failed(job, exc)
                broken.add(job.uid)
        measurable = [job for job in jobs if job.uid not in broken]
        began = time.monotonic()
        try:
            measured, failed = await self._measure(measurable, windows)
        except PrometheusError as exc:
            self.stats.failed_rounds += 1
            self.stats.errors = [*self.stats.errors[-9:], str(exc)]
            log.warning("usage round for %d job(s) failed: %s", len(measurable), exc)
            settled = await self._after_failure(cluster, measurable, families, again, now, exc)
            return settled + await self._settle_all(
                cluster, [j for j in jobs if j.uid in broken], broken, families, {}, again, now
            )
        finally:
            if self.telemetry is not None and any(windows.values()):
                # One batched round queries every metric; its duration is what bounds the summaries.
                self.telemetry.prometheus_query_seconds.labels("round").observe(time.monotonic() - began)
        return await self._settle_all(cluster, jobs, broken | failed, families, measured, again, now)

    async def _measure(
        self, jobs: Sequence[JobRecord], windows: Mapping[str, list[PodWindow]]
    ) -> tuple[dict[str, PodMeasurement], set[str]]:
        """The jobs' pods measured together, and the uids of jobs whose own measurement raised.

        A PrometheusError is the source's answer for everyone and propagates. Anything else is
        somebody's bad data or a bug: the batch is halved until the jobs that raise stand alone."""
        targets = [window for job in jobs for window in windows[job.uid]]
        if not targets:
            return {}, set()
        try:
            return dict(await self.source.measure_pods(targets)), set()
        except PrometheusError:
            raise
        except Exception as exc:
            if len(jobs) == 1:
                self._measurement_failed(jobs[0], exc)
                return {}, {jobs[0].uid}
            log.warning("measuring %d jobs at once failed (%r): measuring them apart", len(jobs), exc)
        half = len(jobs) // 2
        first, first_failed = await self._measure(jobs[:half], windows)
        second, second_failed = await self._measure(jobs[half:], windows)
        return {**first, **second}, first_failed | second_failed

    async def _settle_all(
        self,
        cluster: str,
        jobs: Sequence[JobRecord],
        broken: set[str],
        families: _Families,
        measured: Mapping[str, PodMeasurement],
        again: set[str],
        now: datetime,
        missing: MissingReason | None = None,
    ) -> int:
        """Summarizes each job, with the figures `missing` for that reason if given (`broken`
        jobs: every figure null for `measurement_error`), then stores the summaries together
        (_store). A job whose summary cannot be planned or stored is set aside for release
        (run_once) and the others go on; several in a row mean the database or the directory is
        away, and the round fails (after storing the summaries computed before them)."""
        if not jobs:
            return 0
        plan = await self._round_plan()
        summaries: list[_Summary] = []
        unsettled_in_a_row = 0
        failure: Exception | None = None
        for job in jobs:
            try:
                summaries.append(
                    await self._summarize(
                        job,
                        families,
                        measured,
                        now,
                        missing,
                        plan,
                        remeasured=job.uid in again,
                        measurable=job.uid not in broken,
                    )
                )
            except Exception as exc:
                unsettled_in_a_row += 1
                if unsettled_in_a_row >= self.options.max_unsettled_in_a_row:
                    failure = exc
                    break
                self._set_aside(job, exc)
                continue
            unsettled_in_a_row = 0
        settled = await self._store(cluster, summaries)
        if failure is not None:
            raise failure
        return settled

    async def _round_plan(self) -> Callable[[JobRecord, datetime], Awaitable[list[Notification]]]:
        """The planner of this batch of summaries: one that plans a whole round reads what it
        needs once (service.planner.DirectoryPlanner.for_round); any other is asked job by job."""
        if not isinstance(self.plan, PlansRounds):
            return self.plan
        planned = await self.plan.for_round()

        async def plan(job: JobRecord, now: datetime) -> list[Notification]:
            return planned(job, now)

        return plan

    def _set_aside(self, job: JobRecord, exc: Exception) -> None:
        self._unsettled.append(job)
        log.error(
            "job %r (uid %r): not summarized now; it is released for a later round",
            job.name,
            job.uid,
            exc_info=exc,
        )

    async def _store(self, cluster: str, summaries: Sequence[_Summary]) -> int:
        """Stores the summaries in one transaction (the store tries it once more on a fresh
        connection when its connection was lost). One that fails is split in halves, written in
        order, down to the job whose summary cannot be stored (service.batches.PieceWriter, as
        ingestion writes): that job is set aside, and several in a row fail the round, as in
        _settle_all. Returns how many were stored."""
        summaries = await self._with_charts(summaries)
        settled = unsettled_in_a_row = 0

        async def transaction(piece: Piece[_Summary, None]) -> None:
            nonlocal settled, unsettled_in_a_row
            added = await self.store.jobs.complete_summaries(
                cluster, [s.summary for s in piece.units], claim=self._claim
            )
            unsettled_in_a_row = 0
            for summary in piece.units:
                self._stored(summary, added.get(summary.job.uid, 0))
            settled += len(piece.units)

        def refused(piece: Piece[_Summary, None], exc: Exception) -> None:
            nonlocal unsettled_in_a_row
            unsettled_in_a_row += 1
            if unsettled_in_a_row >= self.options.max_unsettled_in_a_row:
                raise exc
            self._set_aside(piece.units[0].job, exc)

        if summaries:
            writer: PieceWriter[_Summary, None] = PieceWriter(refused, PipelineStats(), retry_transient=False)
            await writer.write(Piece(list(summaries)), transaction)
        return settled

    async def _with_charts(self, summaries: Sequence[_Summary]) -> Sequence[_Summary]:
        """The summaries to be sent, each with its job's chart drawn (in the drawer's processes:
        the loop goes on meanwhile) to be stored with its series, so that whichever replica sends
        finds it drawn. One that cannot be drawn is left out (the drawer logs it): the summary goes
        without it. A job measured again plans nothing to send: its chart is not drawn."""
        if self.charts is None:
            return summaries
        sent = [s for s in summaries if s.summary.notifications and s.summary.usage_series is not None]
        charts = await self.charts.job_charts([(s.job, s.summary.usage_series) for s in sent])
        drawn = {s.job.uid: chart for s, chart in zip(sent, charts, strict=True) if chart is not None}
        if not drawn:
            return summaries
        return [
            replace(s, summary=replace(s.summary, chart=drawn[s.job.uid])) if s.job.uid in drawn else s
            for s in summaries
        ]

    def _stored(self, stored: _Summary, added: int) -> None:
        """The bookkeeping of a summary once it is stored with `added` new notifications."""
        if stored.summary.adoption is not None:
            self.stats.adoptions_judged += 1
        self.stats.notifications_planned += added
        if stored.missing is None:
            self.stats.jobs_summarized += 1
        elif stored.missing is MissingReason.PROMETHEUS_UNAVAILABLE:
            self.stats.jobs_given_up += 1
        if self.telemetry is not None:
            self.telemetry.jobs_summarized.labels("missing" if stored.missing else "summarized").inc()

    def _measurement_failed(self, job: JobRecord, exc: Exception) -> None:
        self.stats.measurement_errors += 1
        self.stats.errors = [*self.stats.errors[-9:], f"{job.uid}: {exc!r}"]
        log.warning(
            "usage of job %r/%r (uid %r) could not be measured (%r): its figures are null (%s)",
            job.namespace,
            job.name,
            job.uid,
            exc,
            MissingReason.MEASUREMENT_ERROR.value,
            exc_info=exc,
        )

    async def _after_failure(
        self,
        cluster: str,
        jobs: list[JobRecord],
        families: _Families,
        again: set[str],
        now: datetime,
        exc: PrometheusError,
    ) -> int:
        give_up = []
        for job in jobs:
            ended = job.finished_at or now
            age = (now - ended).total_seconds()
            if job.uid in again:
                # Already summarized with figures missing: try later, or stop trying.
                if age >= self.options.remeasure_for_seconds or not exc.retryable:
                    await self.store.jobs.set_summary_state(
                        job.cluster, job.uid, SummaryState.SUMMARIZED, claim=self._claim
                    )
                else:
                    later = now + timedelta(seconds=self.options.remeasure_every_seconds)
                    await self.store.jobs.reschedule_usage(job.cluster, job.uid, later, claim=self._claim)
                continue
            if age >= self.options.give_up_after_seconds or not exc.retryable:
                give_up.append(job)
            else:
                later = now + timedelta(seconds=self._retry_delay(job, now))
                await self.store.jobs.reschedule_usage(job.cluster, job.uid, later, claim=self._claim)
        return await self._settle_all(
            cluster, give_up, set(), families, {}, set(), now, MissingReason.PROMETHEUS_UNAVAILABLE
        )

    async def _summarize(
        self,
        job: JobRecord,
        families: _Families,
        measured: Mapping[str, PodMeasurement],
        now: datetime,
        missing: MissingReason | None,
        plan: Callable[[JobRecord, datetime], Awaitable[list[Notification]]],
        *,
        remeasured: bool = False,
        measurable: bool = True,
    ) -> _Summary:
        """Computes the job's figures and advice and plans its summary, to be stored with the others.

        Planning raises as it is (the caller sets the job aside); the computation itself
        (domain.accounting, domain.rightsizing) raising, or a job that is not `measurable`, gives
        every figure null for `measurement_error`, no advice, and no re-measurement: the same data
        would raise again."""
        pods = families.reads.pods.get(job.uid, [])
        figures: tuple[Usage, list[Recommendation]] | None = None
        history: list[tuple[JobRecord, Usage, list[PodRecord]]] | None = None
        if measurable:
            history = families.history(job)
            try:
                figures = self._figures(job, pods, measured, history, now, missing)
            except Exception as exc:  # one job's data no rule expected: its figures, not the round
                self._measurement_failed(job, exc)
        if figures is None:
            figures, missing = (_unmeasured(now), []), MissingReason.MEASUREMENT_ERROR
        usage, recs = figures
        # A job measured again was already judged; a family's first measured run has no previous run
        # (none finished before it ended, so none before it was created).
        adoption = None if remeasured else self._adopt(job, families, now, first_run=history == [])
        # A job measured again was already summarized: its rows exist, planning again adds nothing.
        notifications = [] if remeasured else await plan(job, now)
        if missing is None or missing is MissingReason.MEASUREMENT_ERROR:
            state, remeasure_at = SummaryState.SUMMARIZED, None
        else:
            state = SummaryState.REMEASURE
            remeasure_at = now + timedelta(seconds=self.options.remeasure_every_seconds)
        series = _series(job, pods, measured, usage)
        families.settled(job, usage, recs)
        summary = JobSummary(job.uid, usage, recs, notifications, state, remeasure_at, series, adoption)
        return _Summary(job, summary, missing)

    def _adopt(
        self, job: JobRecord, families: _Families, now: datetime, *, first_run: bool = False
    ) -> Adoption | None:
        """Whether this run followed its family's previous advice (domain.adoption), to be stored
        with its summary, in the same transaction and once. A run that cannot be judged is logged
        and gets none, never fatal to its summary. `first_run`: the family's history is known to be
        empty, so there is no previous run."""
        if not job.family:
            return None
        found = None if first_run else families.previous(job)
        previous, advice = found if found is not None else (None, [])
        try:
            return judge(job, previous, advice, now)
        except Exception:  # one job's odd requests: its summary still goes out
            log.exception("adoption of job %r (uid %r) could not be judged", job.name, job.uid)
            return None

    def _figures(
        self,
        job: JobRecord,
        pods: list[PodRecord],
        measured: Mapping[str, PodMeasurement],
        history: Sequence[tuple[JobRecord, Usage, list[PodRecord]]],
        now: datetime,
        missing: MissingReason | None,
    ) -> tuple[Usage, list[Recommendation]]:
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
        runs = [
            current_run(run, run_usage, run_pods, self.policy, now) for run, run_usage, run_pods in history
        ]
        return usage, _with_window(recommend(job, usage, pods, runs, self.policy, now), job, pods, now)

    async def _history(self, job: JobRecord, now: datetime) -> list[tuple[JobRecord, Usage, list[PodRecord]]]:
        """Earlier measured runs of the job's family, with their pods (right-sizing learns from them):
        at most `rightsizing.family_max_runs` runs in all, this one included."""
        asks = _FamilyAsks([job], now, self.policy.family_max_runs - 1)
        return _Families(await self.store.jobs.read_round(job.cluster, [], asks.asks), asks).history(job)


@dataclass(frozen=True, slots=True)
class _Summary:
    """A job's summary computed by a round, waiting to be stored with the others."""

    job: JobRecord
    summary: JobSummary
    missing: MissingReason | None


class _FamilyAsks:
    """What a round asks the store about its jobs' families: for each job of a family, its
    earlier measured runs (right-sizing: at most `earlier`, finished before it ended) and its
    previous run with that run's advice (adoption: the newest finished before it was created)."""

    def __init__(self, jobs: Sequence[JobRecord], now: datetime, earlier: int) -> None:
        self.asks: list[RunsAsked] = []
        # uid -> (the index of its ask, the time the runs it asks for finished before)
        self.history: dict[str, tuple[int, datetime]] = {}
        self.previous: dict[str, tuple[int, datetime]] = {}
        self.earlier = earlier
        for job in jobs:
            if not job.family:
                continue
            if earlier > 0:
                ended = job.finished_at or now
                self.history[job.uid] = (len(self.asks), ended)
                self.asks.append(RunsAsked(job.namespace, job.family, ended, earlier, with_pods=True))
            created = job.created_at or job.started_at or job.finished_at or now
            self.previous[job.uid] = (len(self.asks), created)
            self.asks.append(RunsAsked(job.namespace, job.family, created, 1, job.uid, with_advice=True))


class _Families:
    """Each job's family runs: those the round read before it began, and the runs the round has
    summarized since (the round writes its summaries together at its end, and a later run of a
    family learns from an earlier one of the same round as if each had been stored at once)."""

    def __init__(self, reads: RoundReads, asks: _FamilyAsks) -> None:
        self.reads = reads
        self._asks = asks
        self._settled: dict[str, tuple[JobRecord, Usage, list[Recommendation]]] = {}
        # The same runs by (namespace, family): a job looks only at its own family's.
        self._by_family: dict[
            tuple[str, str | None], list[tuple[JobRecord, Usage, list[Recommendation]]]
        ] = {}

    def settled(self, job: JobRecord, usage: Usage, recs: list[Recommendation]) -> None:
        self._settled[job.uid] = (job, usage, recs)
        self._by_family.setdefault((job.namespace, job.family), []).append((job, usage, recs))

    def history(self, job: JobRecord) -> list[tuple[JobRecord, Usage, list[PodRecord]]]:
        """The earlier measured runs of the job's family, newest first (right-sizing)."""
        if job.uid not in self._asks.history:
            return []
        ask, before = self._asks.history[job.uid]
        runs = {
            run.uid: (run, self._settled[run.uid][1] if run.uid in self._settled else usage)
            for run, usage in self.reads.runs[ask]
        }
        for run, usage, _ in self._settled_before(job, before):
            runs.setdefault(run.uid, (run, usage))
        newest = sorted(runs.values(), key=lambda r: _newest(r[0]), reverse=True)[: self._asks.earlier]
        return [(run, usage, self.reads.pods.get(run.uid, [])) for run, usage in newest]

    def previous(self, job: JobRecord) -> tuple[JobRecord, list[Recommendation]] | None:
        """The family's newest measured run that finished before the job was created, and its
        advice (adoption)."""
        if job.uid not in self._asks.previous:
            return None
        ask, before = self._asks.previous[job.uid]
        found = [
            (
                run,
                self._settled[run.uid][2] if run.uid in self._settled else self.reads.advice.get(run.uid, []),
            )
            for run, _ in self.reads.runs[ask]
        ]
        found += [(run, recs) for run, _, recs in self._settled_before(job, before)]
        return max(found, key=lambda r: _newest(r[0])) if found else None

    def _settled_before(
        self, job: JobRecord, before: datetime
    ) -> list[tuple[JobRecord, Usage, list[Recommendation]]]:
        """The runs of the job's family this round summarized that finished before `before`."""
        return [
            (run, usage, recs)
            for run, usage, recs in self._by_family.get((job.namespace, job.family), [])
            if run.uid != job.uid and run.finished_at is not None and run.finished_at < before
        ]


def _newest(run: JobRecord) -> tuple[datetime, str]:
    """The order of a family's runs, as the store ranks them (descending): finish time, then uid."""
    return (run.finished_at or datetime.min.replace(tzinfo=UTC), run.uid)


def _with_window(
    recs: Iterable[Recommendation], job: JobRecord, pods: Sequence[PodRecord], now: datetime
) -> list[Recommendation]:
    """Each recommendation's evidence with the window its figures were measured over: from the
    first pod's start to the last pod's end (CONTRACT.md §4's held time), as ISO-8601 UTC."""
    held = [h for h in (held_interval(p, job, now) for p in pods) if h is not None]
    if not held:
        return list(recs)
    window = {
        "window_start": min(h.start for h in held).astimezone(UTC).isoformat(),
        "window_end": max(h.end for h in held).astimezone(UTC).isoformat(),
    }
    return [replace(rec, evidence={**rec.evidence, **window}) for rec in recs]


def _series(
    job: JobRecord, pods: Sequence[PodRecord], measured: Mapping[str, PodMeasurement], usage: Usage
) -> UsageSeries:
    """The job's usage over time for its chart, and its pods and nodes for its links (kept even
    when nothing was measured). A chart is never worth a summary: a series that cannot be built
    is left out, logged."""
    listed = [SeriesPod(p.name, p.node) for p in pods]
    points = [m.points for p in pods if (m := measured.get(p.uid)) is not None and m.points is not None]
    try:
        return job_series(points, gpus=usage.gpus, pods=listed)
    except Exception:  # one job's odd data: its summary still goes out, without a chart
        log.exception("usage series of job %r (uid %r) could not be built", job.name, job.uid)
        return UsageSeries(pods=tuple(listed))


def _unmeasured(now: datetime) -> Usage:
    """Every figure null, for `measurement_error`."""
    return Usage(
        missing=tuple(MissingFigure(figure, MissingReason.MEASUREMENT_ERROR) for figure in ALL_FIGURES),
        collected_at=now,
    )
