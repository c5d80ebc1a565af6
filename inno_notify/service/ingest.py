"""The ingestion pipeline: watch events in, job and pod records out, each terminal transition once.

The watchers hand over raw objects; one consumer drains them into batches, so events of one object
are applied in the order they came (per-uid ordering) while writes are batched across objects: a
batch is one read of what is stored, pure merging (domain.parsing), and one write transaction.
Replays are harmless: upserts are idempotent, merges never undo a terminal state, and the store
records a job's end only the first time (`mark_terminal`), which is what plans its summary.

A relist (after `410 Gone` or a restart) is reconciled: jobs we hold as open that are no longer in
the cluster were deleted during the gap and are closed out with what we know of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from inno_notify.adapters.db.repository import IngestTransaction, Store, SummaryState, TerminalMark
from inno_notify.domain.model import JobRecord, JobStatus, KueueInfo, PodRecord
from inno_notify.domain.parsing import (
    ParseConfig,
    ParseError,
    apply_pods_to_job,
    merge_job,
    merge_kueue,
    parse_bare_gpu_pod,
    parse_job,
    parse_pod,
    parse_workload,
    relevant_event,
)
from inno_notify.domain.parsing.fields import timestamp
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

JsonObj = dict[str, Any]
Clock = Callable[[], datetime]

JOB, POD, EVENT, WORKLOAD = "Job", "Pod", "Event", "Workload"
_RELIST = "relist"
# Kueue admissions seen before their job; kept until the job arrives, bounded.
_MAX_PENDING_KUEUE = 10_000


@dataclass(frozen=True, slots=True)
class IngestOptions:
    catch_up_seconds: float = 3600.0
    metrics_delay_seconds: float = 60.0
    batch_max: int = 2000
    # When the queue runs dry, wait this long for more events before writing: a few ms of latency
    # buy batches of hundreds instead of a transaction per handful of events.
    batch_linger_seconds: float = 0.02
    queue_max: int = 20_000
    namespaces: tuple[str, ...] = ()


@dataclass(slots=True)
class IngestStats:
    events: int = 0
    batches: int = 0
    terminal_marked: int = 0
    parse_errors: int = 0
    write_errors: int = 0
    relists: int = 0
    closed_in_gap: int = 0
    last_commit_at: datetime | None = None
    by_kind: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Batch:
    """What one batch learned, coalesced per object: the last state of each uid wins."""

    jobs: dict[str, tuple[str, JsonObj]] = field(default_factory=dict)
    pods: dict[str, tuple[str, JsonObj]] = field(default_factory=dict)
    workloads: dict[str, JsonObj] = field(default_factory=dict)
    events: dict[str, JsonObj] = field(default_factory=dict)
    relists: list[tuple[str, list[JsonObj]]] = field(default_factory=list)

    def add(self, kind: str, event_type: str, obj: JsonObj) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        if not uid:
            return
        if kind == JOB:
            self.jobs[uid] = (event_type, obj)
        elif kind == POD:
            self.pods[uid] = (event_type, obj)
        elif kind == WORKLOAD and event_type != "DELETED":
            self.workloads[uid] = obj
        elif kind == EVENT and event_type != "DELETED":
            self.events[uid] = obj


# The reason of a job whose success we inferred from its pods: its Complete condition was never seen.
INFERRED_SUCCESS = "SucceededPerPods"


def succeeded_by_pods(job: JobRecord, pods: Sequence[PodRecord]) -> bool:
    """A job deleted while we were away "finished if we can tell": every pod we saw has ended and
    as many succeeded as the job needed. Anything less (a failed pod, a pod still running when we
    last looked) leaves it `deleted`: we do not guess a failure."""
    if not pods or any(p.finished_at is None and p.deleted_at is None for p in pods):
        return False
    needed = job.requested.completions or job.requested.parallelism or 1
    return sum(1 for p in pods if p.phase == "Succeeded") >= needed and all(
        p.phase == "Succeeded" for p in pods
    )


def _event_count(obj: JsonObj) -> int:
    series = obj.get("series") or {}
    count = obj.get("count") or series.get("count") or obj.get("deprecatedCount") or 1
    return int(count)


class Ingestor:
    """Consumes watch events (`on_event`, `on_relist` are the watcher's callbacks) into the store."""

    def __init__(
        self,
        store: Store,
        parse_config: ParseConfig,
        options: IngestOptions,
        clock: Clock,
        started_at: datetime,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.store = store
        self.telemetry = telemetry
        self.cfg = parse_config
        self.options = options
        self.clock = clock
        self.started_at = started_at
        self.stats = IngestStats()
        self._queue: asyncio.Queue[tuple[str, str, Any]] = asyncio.Queue(options.queue_max)
        self._pending_kueue: dict[str, KueueInfo] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    # --- the watcher's callbacks: cheap, they only enqueue (bounded: back-pressure on the watch) ---

    async def on_event(self, kind: str, event_type: str, obj: JsonObj) -> None:
        self._idle.clear()
        if self.telemetry is not None:
            self.telemetry.watch_events.labels(kind, event_type).inc()
        await self._queue.put((kind, event_type, obj))

    async def on_relist(self, kind: str, objects: list[JsonObj]) -> None:
        self._idle.clear()
        await self._queue.put((_RELIST, kind, objects))

    async def drained(self) -> None:
        """Waits until everything handed over so far is committed (tests, benchmarks, shutdown)."""
        await self._idle.wait()

    # --- the consumer ------------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            items = [await self._queue.get()]
            first_at = loop.time()
            deadline = loop.time() + self.options.batch_linger_seconds
            while len(items) < self.options.batch_max:
                if not self._queue.empty():
                    items.append(self._queue.get_nowait())
                    continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    items.append(await asyncio.wait_for(self._queue.get(), remaining))
                except TimeoutError:
                    break
            await self._apply_until_done(items)
            if self.telemetry is not None:
                # The oldest event of the batch waited longest: its lag bounds the batch's.
                self.telemetry.ingest_lag.observe(loop.time() - first_at)
            if self._queue.empty():
                self._idle.set()

    async def _apply_until_done(self, items: Sequence[tuple[str, str, Any]]) -> None:
        """Applies a batch, retrying with backoff while the database fails: events are never dropped
        (the watch is held back meanwhile by the bounded queue)."""
        delay = 0.1
        while True:
            try:
                await self.apply(items)
                return
            except (SQLAlchemyError, OSError) as exc:
                self.stats.write_errors += 1
                log.warning("writing %d event(s) failed (%s); retrying in %.1f s", len(items), exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def apply(self, items: Sequence[tuple[str, str, Any]]) -> None:
        """Applies items in order; a relist closes the segment before it so reconciliation sees it."""
        batch = _Batch()
        for kind, event_type, obj in items:
            if kind == _RELIST:
                batch.relists.append((event_type, obj))
                await self._apply_batch(batch)
                batch = _Batch()
                continue
            batch.add(kind, event_type, obj)
            self.stats.events += 1
            self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
        await self._apply_batch(batch)

    async def _apply_batch(self, batch: _Batch) -> None:
        now = self.clock()
        new_jobs, pods = self._parse_jobs_and_pods(batch, now)
        kueue = self._parse_workloads(batch)
        event_hits = self._parse_events(batch)
        if not (new_jobs or pods or kueue or event_hits or batch.relists):
            return
        async with self.store.ingest_transaction() as tx:
            marked = await self._merge_and_write(tx, batch, now, new_jobs, pods, kueue, event_hits)
        self.stats.terminal_marked += marked
        self.stats.batches += 1
        self.stats.last_commit_at = self.clock()

    async def _merge_and_write(
        self,
        tx: IngestTransaction,
        batch: _Batch,
        now: datetime,
        new_jobs: dict[str, JobRecord],
        pods: list[PodRecord],
        kueue: dict[str, KueueInfo],
        event_hits: list[tuple[str, str, str, int]],
    ) -> int:

        pod_to_job = {p.uid: p.job_uid for p in pods if p.job_uid}
        event_pod_uids = [uid for uid, kind, _, _ in event_hits if kind == POD and uid not in pod_to_job]
        if event_pod_uids:
            pod_to_job.update(await tx.job_uids_of_pods(self.cfg.cluster, event_pod_uids))

        touched = set(new_jobs) | {p.job_uid for p in pods if p.job_uid} | set(kueue)
        touched |= {uid if kind == JOB else pod_to_job.get(uid, "") for uid, kind, _, _ in event_hits}
        touched |= set(self._pending_kueue) & set(new_jobs)
        touched.discard("")
        stored = await tx.get_jobs(self.cfg.cluster, sorted(touched))

        merged: dict[str, JobRecord] = {}
        for uid in touched:
            record = stored.get(uid)
            if uid in new_jobs:
                record = merge_job(record, new_jobs[uid])
            if record is not None:
                merged[uid] = record
        for uid, info in kueue.items():
            if uid in merged:
                merged[uid] = replace(merged[uid], kueue=merge_kueue(merged[uid].kueue, info))
            elif len(self._pending_kueue) < _MAX_PENDING_KUEUE:
                self._pending_kueue[uid] = merge_kueue(self._pending_kueue.get(uid), info) or info
        for uid in set(self._pending_kueue) & set(merged):
            info = self._pending_kueue.pop(uid)
            merged[uid] = replace(merged[uid], kueue=merge_kueue(merged[uid].kueue, info))
        for uid, kind, reason, count in event_hits:
            job_uid = uid if kind == JOB else pod_to_job.get(uid)
            if job_uid in merged:
                record = merged[job_uid]
                counts = dict(record.event_counts)
                counts[reason] = max(counts.get(reason, 0), count)
                merged[job_uid] = replace(record, event_counts=counts)

        job_pods = await self._pods_for(tx, merged, pods)
        for uid, record in merged.items():
            merged[uid] = apply_pods_to_job(record, job_pods.get(uid, ()))

        for relist_kind, objects in batch.relists:
            self.stats.relists += 1
            if relist_kind == JOB:
                await self._close_out_missing(tx, objects, merged, now)

        terminals = [
            self._terminal_mark(record, now)
            for uid, record in merged.items()
            if record.status.is_terminal and not (uid in stored and stored[uid].status.is_terminal)
        ]
        return await tx.write(self.cfg.cluster, list(merged.values()), pods, terminals)

    # --- parsing -------------------------------------------------------------------------------------

    def _parse_jobs_and_pods(
        self, batch: _Batch, now: datetime
    ) -> tuple[dict[str, JobRecord], list[PodRecord]]:
        jobs: dict[str, JobRecord] = {}
        for uid, (event_type, obj) in batch.jobs.items():
            try:
                record = parse_job(obj, self.cfg)
            except ParseError as exc:
                self._parse_error(JOB, uid, exc)
                continue
            jobs[uid] = self._deleted(record, obj, now) if event_type == "DELETED" else record
        pods: list[PodRecord] = []
        for uid, (event_type, obj) in batch.pods.items():
            try:
                pod = parse_pod(obj, self.cfg)
                bare = None if pod.job_uid else parse_bare_gpu_pod(obj, self.cfg)
            except ParseError as exc:
                self._parse_error(POD, uid, exc)
                continue
            if bare is not None:
                jobs[bare.uid] = self._deleted(bare, obj, now) if event_type == "DELETED" else bare
                pod = replace(pod, job_uid=bare.uid)
            if pod.job_uid is None:
                continue  # not a job's pod, nor a GPU workload with an owner: none of our business
            if event_type == "DELETED" and pod.deleted_at is None:
                pod = replace(pod, deleted_at=now)
            pods.append(pod)
        return jobs, pods

    @staticmethod
    def _deleted(record: JobRecord, obj: JsonObj, now: datetime) -> JobRecord:
        """The object of a DELETED event is its last state; one that never ended was deleted."""
        if record.status.is_terminal:
            return record
        deleted_at = timestamp(obj.get("metadata") or {}, "deletionTimestamp") or now
        return replace(record, status=JobStatus.DELETED, finished_at=record.finished_at or deleted_at)

    def _parse_workloads(self, batch: _Batch) -> dict[str, KueueInfo]:
        found: dict[str, KueueInfo] = {}
        for uid, obj in batch.workloads.items():
            try:
                job_uid, info = parse_workload(obj)
            except ParseError as exc:
                self._parse_error(WORKLOAD, uid, exc)
                continue
            if job_uid:
                found[job_uid] = merge_kueue(found.get(job_uid), info) or info
        return found

    @staticmethod
    def _parse_events(batch: _Batch) -> list[tuple[str, str, str, int]]:
        hits = []
        for obj in batch.events.values():
            kept = relevant_event(obj)
            if kept is not None:
                uid, kind, reason = kept
                hits.append((uid, kind, reason, _event_count(obj)))
        return hits

    def _parse_error(self, kind: str, uid: str, exc: Exception) -> None:
        self.stats.parse_errors += 1
        log.warning("skipping %s %s: %s", kind, uid, exc)

    # --- reads, reconciliation, the terminal transition -------------------------------------------

    async def _pods_for(
        self, tx: IngestTransaction, merged: dict[str, JobRecord], batch_pods: Iterable[PodRecord]
    ) -> dict[str, list[PodRecord]]:
        by_job = await tx.pods_of_jobs(self.cfg.cluster, sorted(merged))
        for pod in batch_pods:  # this batch's pods are newer than what is stored
            if pod.job_uid in merged:
                siblings = [p for p in by_job.get(pod.job_uid, []) if p.uid != pod.uid]
                by_job[pod.job_uid] = [*siblings, pod]
        return by_job

    async def _close_out_missing(
        self, tx: IngestTransaction, objects: list[JsonObj], merged: dict[str, JobRecord], now: datetime
    ) -> None:
        present = {(o.get("metadata") or {}).get("uid") for o in objects}
        open_jobs = await tx.open_jobs(self.cfg.cluster, self.options.namespaces, kind="job")
        gone = [j for j in open_jobs if j.uid not in present and j.uid not in merged]
        if not gone:
            return
        pods = await tx.pods_of_jobs(self.cfg.cluster, [j.uid for j in gone])
        for job in gone:
            job_pods = pods.get(job.uid, [])
            closed = apply_pods_to_job(replace(job, status=JobStatus.DELETED), job_pods)
            if succeeded_by_pods(job, job_pods):
                closed = replace(closed, status=JobStatus.SUCCEEDED, reason=INFERRED_SUCCESS)
            merged[job.uid] = replace(closed, finished_at=closed.finished_at or now)
            self.stats.closed_in_gap += 1
        log.info("closed out %d job(s) deleted while the watch was away", len(gone))

    def _terminal_mark(self, job: JobRecord, now: datetime) -> TerminalMark:
        ended = job.finished_at or now
        horizon = self.started_at - timedelta(seconds=self.options.catch_up_seconds)
        if ended < horizon:
            return TerminalMark(job.uid, now, SummaryState.SILENT, None)
        due = ended + timedelta(seconds=self.options.metrics_delay_seconds)
        return TerminalMark(job.uid, now, SummaryState.AWAITING_USAGE, due)
