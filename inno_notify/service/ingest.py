"""The ingestion pipeline: watch events in, job and pod records out, each terminal transition once.

The watchers hand over raw objects; one consumer drains them into batches, so events of one object
are applied in the order they came (per-uid ordering) while writes are batched across objects: a
batch is one read of what is stored, pure merging (domain.parsing), and one write transaction.
Replays are harmless: upserts are idempotent, merges never undo a terminal state, and the store
records a job's end only the first time (`mark_terminal`), which is what plans its summary.

A relist (after `410 Gone` or a restart) is reconciled: jobs we hold as open that are no longer in
the cluster were deleted during the gap and are closed out with what we know of them. A start's
first relists come over what the store holds (the resourceVersion each run and pod was written
from): what is stored as it is is passed over unparsed, before the queue (`on_listed`), and the
watcher asks for little more than its metadata (`holds`, `unknown`: docs/scale.md, issue 32).

Every object is hostile until parsed, and one bad object must never stop the others (see
docs/hardening.md). An object that cannot be parsed is set aside at once; a write that the database
refuses because of the data (a data or integrity error, an index row too large…) is split in halves,
each written on its own in order, until the one object it cannot take is found; that object is set
aside and the rest commit. Only failures of the database itself (connection lost, timeouts) are
retried, with capped backoff. An object set aside is counted
(`inno_notify_rejected_objects_total{resource,reason}`), logged once per uid and reason, and stored
in the rejected_objects table. The queue, the split write and the set-aside bookkeeping are
service.batches'.

It is the one pipeline for every kind: kinds kept in tables of their own (Argo Workflows, Airflow
runs, InferenceServices: service.workflows' `WorkflowRecorder`) are `Recorder`s of it. They share
its queue (per-uid order across all kinds), its batches, its relist segments and its one
`Rejections`; each segment is handed to them after the jobs and pods of it are written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from inno_notify.adapters.db.repository import IngestTransaction, Store, SummaryState, TerminalMark
from inno_notify.domain.kinds import KINDS, LINK_DEPTH, Link, kind_spec
from inno_notify.domain.model import JobRecord, JobStatus, KueueInfo, PodRecord
from inno_notify.domain.parsing import (
    ParseConfig,
    SetAside,
    apply_pods_to_job,
    event_count,
    identity,
    merge_job,
    merge_kueue,
    parse_bare_gpu_pod,
    parse_pod,
    parse_workload,
    relevant_event,
)
from inno_notify.domain.parsing.annotations import namespace_owners
from inno_notify.domain.parsing.fields import mapping, timestamp
from inno_notify.options import from_setting
from inno_notify.service.batches import (
    BatchQueue,
    Clock,
    JsonObj,
    Piece,
    PieceWriter,
    PipelineStats,
    Rejections,
    Sleep,
    Unit,
    refusal,
    summary_due,
    why_no_uid,
)
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

JOB, POD, EVENT, WORKLOAD = "Job", "Pod", "Event", "Workload"
# What this pipeline merges into jobs and pods: the registered workload kinds (domain.kinds), their
# pods, Kueue's Workloads and Events; other kinds (Workflows, InferenceServices) are its recorders'.
INGESTED_KINDS = frozenset({POD, EVENT, WORKLOAD, *(spec.kind for spec in KINDS)})
_RELIST = "relist"
# Objects parsed between two turns of the event loop.
_PARSE_SLICE = 200
# Kueue admissions seen before their job; kept until the job arrives, bounded.
_MAX_PENDING_KUEUE = 10_000


class Tap(Protocol):
    """Another consumer of the same watch that writes at once (Kueue's queues: few, rarely
    changing): it sees every event first."""

    async def on_event(self, kind: str, event_type: str, obj: JsonObj) -> None: ...

    async def on_relist(self, kind: str, uids: frozenset[str]) -> None: ...


class Recorder(Protocol):
    """Kinds this pipeline queues and batches but that are stored in tables of their own."""

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds whose events may be its (`wants` decides per object)."""
        ...

    @property
    def relisted(self) -> frozenset[str]:
        """The kinds whose relists it reconciles."""
        ...

    def wants(self, kind: str, obj: JsonObj) -> bool: ...

    async def record(
        self, items: Sequence[tuple[str, str, JsonObj]], relists: Sequence[frozenset[str]], now: datetime
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class IngestOptions:
    catch_up_seconds: float = from_setting("kubernetes.catch_up_seconds", 3600.0)
    metrics_delay_seconds: float = from_setting("prometheus.metrics_delay_seconds", 60.0)
    batch_max: int = 2000
    # When the queue runs dry, wait this long for more events before writing: a few ms of latency
    # buy batches of hundreds instead of a transaction per handful of events.
    batch_linger_seconds: float = 0.02
    # Events waiting while a batch is written: one more batch's worth keeps the writer busy, and
    # bounds what a relist of a large cluster holds in memory (each object parsed from JSON takes
    # several times its size on the wire); the watchers wait when it is full.
    queue_max: int = 2_000
    namespaces: tuple[str, ...] = from_setting("kubernetes.namespaces", ())
    # A write the database failed for reasons of its own is retried after 0.1 s, doubling to this.
    retry_cap_seconds: float = 10.0
    # How many (object, reason) pairs are remembered as already logged; the oldest are forgotten.
    logged_once_max: int = 10_000


@dataclass(slots=True)
class IngestStats(PipelineStats):
    events: int = 0
    batches: int = 0
    terminal_marked: int = 0
    # Objects set aside because they could not be parsed (parse_errors) or stored (unstorable).
    parse_errors: int = 0
    unstorable: int = 0
    rejected_values: int = 0
    relists: int = 0
    closed_in_gap: int = 0
    # Objects of the first relist after a start that were stored as they are (the same
    # resourceVersion): neither parsed nor written again.
    unchanged: int = 0
    last_commit_at: datetime | None = None
    by_kind: dict[str, int] = field(default_factory=dict)

    @property
    def rejected(self) -> int:
        return self.parse_errors + self.unstorable


@dataclass(slots=True)
class _Batch:
    """What one batch learned, coalesced per object: the last state of each uid wins."""

    # Objects of the workload kinds (domain.kinds): kind, event type, object.
    runs: dict[str, tuple[str, str, JsonObj]] = field(default_factory=dict)
    pods: dict[str, tuple[str, JsonObj]] = field(default_factory=dict)
    workloads: dict[str, JsonObj] = field(default_factory=dict)
    events: dict[str, JsonObj] = field(default_factory=dict)
    # Each recorder's events (by id of the recorder), in order.
    recorded: dict[int, list[tuple[str, str, JsonObj]]] = field(default_factory=dict)

    def add(self, kind: str, event_type: str, uid: str, obj: JsonObj) -> None:
        if kind_spec(kind) is not None:
            self.runs[uid] = (kind, event_type, obj)
        elif kind == POD:
            self.pods[uid] = (event_type, obj)
        elif kind == WORKLOAD and event_type != "DELETED":
            self.workloads[uid] = obj
        elif kind == EVENT and event_type != "DELETED":
            self.events[uid] = obj


@dataclass(slots=True)
class _Unit(Unit):
    job: JobRecord | None = None
    pod: PodRecord | None = None
    kueue: tuple[str, KueueInfo] | None = None
    event: tuple[str, str, str, int] | None = None
    link: Link | None = None


# Units written in one transaction, and the relist (kind, uids) that closes the segment.
_Piece = Piece[_Unit, tuple[str, frozenset[str]]]


@dataclass(frozen=True, slots=True)
class _Written:
    """What a committed write changed outside the database (applied only once it committed)."""

    marked: int
    pending_kueue: dict[str, KueueInfo]
    relists: int
    closed_in_gap: int


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


def _stored_as_listed(
    stored: Mapping[str, str], recorders: Sequence[Recorder], kind: str, obj: JsonObj
) -> bool:
    """Whether a listed object is stored from the same resourceVersion and no recorder wants it."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return False
    uid = metadata.get("uid")
    version = stored.get(uid) if isinstance(uid, str) else None
    return (
        version is not None
        and version == metadata.get("resourceVersion")
        and not any(r.wants(kind, obj) for r in recorders)
    )


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
        *,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.store = store
        self.telemetry = telemetry
        self.cfg = parse_config
        self.options = options
        self.clock = clock
        self.started_at = started_at
        self.stats = IngestStats()
        self._queue: BatchQueue[tuple[str, str, Any]] = BatchQueue(
            "ingesting", options.queue_max, options.batch_max, options.batch_linger_seconds
        )
        self._writer: PieceWriter[_Unit, tuple[str, frozenset[str]]] = PieceWriter(
            self._refused, self.stats, retry_cap_seconds=options.retry_cap_seconds, sleep=sleep
        )
        # The one set-aside bookkeeping of the pipeline, its recorders' included.
        self.rejections = Rejections(
            parse_config.cluster,
            telemetry,
            options.logged_once_max,
            backoff=self._writer.backoff,
            sleep=sleep,
        )
        self._pending_kueue: dict[str, KueueInfo] = {}
        # uid → resourceVersion of what is stored, until the first relists of Jobs and pods are in:
        # a restart's relist hands over every object again, and most are stored as they are.
        self._stored_versions: dict[str, str] = {}
        self._versions_loaded = False
        self._loading_versions = asyncio.Lock()
        self._first_relists = {JOB, POD}
        self.taps: list[Tap] = []
        self.recorders: list[Recorder] = []

    def watch_kinds(self, owner_kinds: frozenset[str]) -> None:
        """The controllers whose pods and Jobs belong to a watched run (ParseConfig.owner_kinds), as
        the cluster's discovery found them; called before the first Job or pod is handed over."""
        if owner_kinds != self.cfg.owner_kinds:
            log.info("workload kinds watched: %s", ", ".join(sorted(owner_kinds)) or "Jobs and pods only")
        self.cfg = replace(self.cfg, owner_kinds=owner_kinds)

    def watch_namespace_owners(self, annotations: Mapping[str, str]) -> None:
        """What the namespaces' owner annotation says (namespace → value), as the watch read it: the
        owner of a run that names none (ParseConfig.namespace_owners)."""
        owners = namespace_owners(annotations)
        if owners != self.cfg.namespace_owners:
            log.info("namespaces naming their owner: %d", len(owners))
            self.cfg = replace(self.cfg, namespace_owners=owners)

    # --- the watcher's callbacks: cheap, they only enqueue (bounded: back-pressure on the watch) ---

    async def on_event(self, kind: str, event_type: str, obj: JsonObj) -> None:
        if self.telemetry is not None:
            self.telemetry.watch_events.labels(kind, event_type).inc()
        for tap in self.taps:
            await tap.on_event(kind, event_type, obj)
        if kind in INGESTED_KINDS or any(kind in r.kinds for r in self.recorders):
            await self._queue.put((kind, event_type, obj))

    async def on_listed(self, kind: str, objects: list[JsonObj]) -> None:
        """One LIST page at once (the watcher's `on_listed`): each object as `on_event(kind, "SYNC",
        obj)` would take it, except that what the start's first relists find stored as it is (the
        same resourceVersion) is passed over here, before the queue. A restart lists the whole
        cluster again, and a queue slot, a batch and a coroutine per object cost it more than
        reading the page did."""
        if self.telemetry is not None:
            self.telemetry.watch_events.labels(kind, "SYNC").inc(len(objects))
        for tap in self.taps:
            for obj in objects:
                await tap.on_event(kind, "SYNC", obj)
        if kind in INGESTED_KINDS:
            if not self._versions_loaded:
                await self.load_stored_versions()
            if self._stored_versions:
                objects = self._pass_over_stored(kind, objects)
        elif not any(kind in r.kinds for r in self.recorders):
            return
        for obj in objects:
            await self._queue.put((kind, "SYNC", obj))

    async def holds(self, kind: str) -> bool:
        """Whether the start's first relist of `kind` is still to come over stored versions of it
        (the watcher's `KnownObjects`: its LIST then asks for metadata first)."""
        if kind != POD and kind_spec(kind) is None:
            return False  # only runs and pods are stored by resourceVersion
        if not self._versions_loaded:
            await self.load_stored_versions()
        return bool(self._stored_versions)

    def unknown(self, kind: str, items: list[JsonObj]) -> list[JsonObj]:
        """Of a LIST page's metadata, what is not stored as it is: the watcher fetches those whole.
        Nothing is taken yet: the watcher says how many it passed over once its list is done
        (`passed_over`), and should it take the list whole after all, that comes through
        `on_listed`, which passes over the same objects again."""
        stored = self._stored_versions
        recorders = [r for r in self.recorders if kind in r.kinds]
        return [item for item in items if not _stored_as_listed(stored, recorders, kind, item)]

    def passed_over(self, kind: str, count: int) -> None:
        """`count` objects of a finished LIST were stored as they are (told by their metadata)."""
        if self.telemetry is not None:
            self.telemetry.watch_events.labels(kind, "SYNC").inc(count)
        self._count_unchanged(kind, count)

    def _pass_over_stored(self, kind: str, objects: list[JsonObj]) -> list[JsonObj]:
        """The objects that are not stored as they are (those are counted and dropped). An object a
        recorder wants goes on whole: the recorder sees it, and `apply` skips the rest of it."""
        stored = self._stored_versions
        recorders = [r for r in self.recorders if kind in r.kinds]
        kept: list[JsonObj] = []
        for obj in objects:
            if _stored_as_listed(stored, recorders, kind, obj):
                del stored[obj["metadata"]["uid"]]
            else:
                kept.append(obj)
        self._count_unchanged(kind, len(objects) - len(kept))
        return kept

    def _count_unchanged(self, kind: str, count: int) -> None:
        if count:
            self.stats.events += count
            self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + count
            self.stats.unchanged += count
            if self.telemetry is not None:
                self.telemetry.ingest_objects.labels("unchanged").inc(count)

    async def on_relist(self, kind: str, uids: frozenset[str]) -> None:
        for tap in self.taps:
            await tap.on_relist(kind, uids)
        if kind in INGESTED_KINDS or any(kind in r.relisted for r in self.recorders):
            await self._queue.put((_RELIST, kind, uids))

    async def drained(self) -> None:
        """Waits until everything handed over so far is committed (tests, benchmarks, shutdown)."""
        await self._queue.drained()

    # --- the consumer ------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.load_stored_versions()
        # The oldest event of a batch waited longest: its lag bounds the batch's.
        lag = self.telemetry.ingest_lag.observe if self.telemetry is not None else None
        await self._queue.run(self.apply, self.stats, lag=lag)

    async def load_stored_versions(self) -> None:
        """What is stored, by resourceVersion, so the first relist skips it; without it (the
        database away at start) every object is parsed and merged, which is only slower. Read once,
        by the consumer or the first LIST page, whichever comes first."""
        async with self._loading_versions:
            if self._versions_loaded:
                return
            try:
                self._stored_versions = await self.store.jobs.stored_versions(self.cfg.cluster)
            except Exception as exc:
                log.warning("reading stored versions failed (%s); the first relist parses everything", exc)
                self._stored_versions = {}
            self._versions_loaded = True

    def _stored_as_is(self, uid: str, event_type: str, obj: JsonObj) -> bool:
        """Whether this is the first sighting since the start of an object stored as it is."""
        stored = self._stored_versions.pop(uid, None)
        if stored is None or event_type == "DELETED":
            return False
        metadata = obj.get("metadata")
        return isinstance(metadata, dict) and metadata.get("resourceVersion") == stored

    async def apply(self, items: Sequence[tuple[str, str, Any]]) -> None:
        """Applies items in order; a relist closes the segment before it so reconciliation sees it.

        Returns once every item is committed or set aside; a database that is away is waited for.
        """
        batch = _Batch()
        passed_over = 0
        for kind, event_type, obj in items:
            if kind == _RELIST:
                await self._apply_segment(batch, (event_type, obj))
                batch = _Batch()
                self._first_relists.discard(event_type)
                if not self._first_relists:
                    self._stored_versions = {}  # only a start's first relist is skipped through
                continue
            self.stats.events += 1
            self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
            for recorder in self.recorders:
                if kind in recorder.kinds and recorder.wants(kind, obj):
                    batch.recorded.setdefault(id(recorder), []).append((kind, event_type, obj))
            if kind not in INGESTED_KINDS:
                continue
            uid, _, _ = identity(obj)
            if uid is None:
                self.stats.parse_errors += 1
                self.rejections.object(kind, obj, "", *why_no_uid(obj))
                continue
            if self._stored_versions and self._stored_as_is(uid, event_type, obj):
                self.stats.unchanged += 1
                passed_over += 1
                continue
            batch.add(kind, event_type, uid, obj)
        await self._apply_segment(batch, None)
        if self.telemetry is not None and passed_over:
            # Once per call, not per object: a restart passes over every object of the cluster.
            self.telemetry.ingest_objects.labels("unchanged").inc(passed_over)

    async def _apply_segment(self, batch: _Batch, relist: tuple[str, frozenset[str]] | None) -> None:
        now = self.clock()
        units = await self._parse(batch, now)
        ours = relist is not None and relist[0] in INGESTED_KINDS
        if units or ours:
            piece: _Piece = Piece(units, [relist] if relist is not None and ours else [])
            await self._writer.write(piece, lambda current: self._transaction(current, now))
        for recorder in self.recorders:
            relists = [relist[1]] if relist is not None and relist[0] in recorder.relisted else []
            items = batch.recorded.get(id(recorder), [])
            if items or relists:
                await recorder.record(items, relists, now)
        await self.rejections.store(self.store, now)

    # --- writing (service.batches splits a refused write down to the object) --------------------

    async def _transaction(self, piece: _Piece, now: datetime) -> None:
        async with self.store.jobs.ingest_transaction() as tx:
            written = await self._merge_and_write(tx, piece, now)
        self._pending_kueue = written.pending_kueue
        self.stats.terminal_marked += written.marked
        self.stats.relists += written.relists
        self.stats.closed_in_gap += written.closed_in_gap
        self.stats.batches += 1
        self.stats.last_commit_at = self.clock()

    def _refused(self, piece: _Piece, exc: Exception) -> None:
        """The database refused this one object (or our merge failed on it): set it aside."""
        reason, detail = refusal(exc)
        if piece.units:
            unit = piece.units[0]
            self.stats.unstorable += 1
            self.rejections.object(unit.kind, unit.obj, unit.uid, reason, detail)
        elif piece.closing:
            # Nothing to store for a relist: the objects in it were written on their own.
            kind = piece.closing[0][0]
            log.error("reconciling the %s relist failed (%s); the next relist tries again", kind, detail)
            self.rejections.count(kind, reason)

    async def _merge_and_write(self, tx: IngestTransaction, piece: _Piece, now: datetime) -> _Written:
        new_jobs: dict[str, JobRecord] = {}
        pods: list[PodRecord] = []
        kueue: dict[str, KueueInfo] = {}
        event_hits: list[tuple[str, str, str, int]] = []
        links: dict[str, str] = {}
        for unit in piece.units:
            if unit.link is not None:
                links[unit.link.uid] = unit.link.parent_uid
            if unit.job is not None:
                new_jobs[unit.job.uid] = unit.job
            if unit.pod is not None:
                pods.append(unit.pod)
            if unit.kueue is not None:
                kueue_uid, info = unit.kueue
                kueue[kueue_uid] = merge_kueue(kueue.get(kueue_uid), info) or info
            if unit.event is not None:
                event_hits.append(unit.event)
        # Changed here, kept only if the transaction commits.
        pending = dict(self._pending_kueue)

        pods, moved = await self._attribute(tx, pods, links, now)
        pod_to_job = {p.uid: p.job_uid for p in pods if p.job_uid}
        event_pod_uids = [uid for uid, kind, _, _ in event_hits if kind == POD and uid not in pod_to_job]
        if event_pod_uids:
            pod_to_job.update(await tx.job_uids_of_pods(self.cfg.cluster, event_pod_uids))

        touched = set(new_jobs) | {p.job_uid for p in pods if p.job_uid} | set(kueue) | moved
        touched |= {uid if kind == JOB else pod_to_job.get(uid, "") for uid, kind, _, _ in event_hits}
        touched |= set(pending) & set(new_jobs)
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
            elif len(pending) < _MAX_PENDING_KUEUE:
                pending[uid] = merge_kueue(pending.get(uid), info) or info
        for uid in set(pending) & set(merged):
            info = pending.pop(uid)
            merged[uid] = replace(merged[uid], kueue=merge_kueue(merged[uid].kueue, info))
        for subject, kind, reason, count in event_hits:
            job_uid = subject if kind == JOB else pod_to_job.get(subject)
            if job_uid in merged:
                record = merged[job_uid]
                counts = dict(record.event_counts)
                counts[reason] = max(counts.get(reason, 0), count)
                merged[job_uid] = replace(record, event_counts=counts)

        job_pods, stored_pods = await self._pods_for(tx, merged, pods)
        for uid, record in merged.items():
            merged[uid] = apply_pods_to_job(record, job_pods.get(uid, ()))

        closed = 0
        for kind, present in piece.closing:
            relisted = kind_spec(kind)
            if relisted is not None and relisted.stored is not None:
                closed += await self._close_out_missing(tx, relisted.stored.value, present, merged, now)

        terminals = [
            self._terminal_mark(record, now)
            for uid, record in merged.items()
            if record.status.is_terminal and not (uid in stored and stored[uid].status.is_terminal)
        ]
        # Only records that differ from what is stored are written: a relist after a restart hands
        # over every object again, and most are exactly as they were.
        changed_jobs = [record for uid, record in merged.items() if stored.get(uid) != record]
        changed_pods = [pod for pod in pods if stored_pods.get(pod.uid) != pod]
        marked = await tx.write(self.cfg.cluster, changed_jobs, changed_pods, terminals)
        return _Written(marked, pending, len(piece.closing), closed)

    # --- parsing: each object on its own ------------------------------------------------------------

    async def _parse(self, batch: _Batch, now: datetime) -> list[_Unit]:
        units: list[_Unit] = []
        work = [
            *((kind, uid, event_type, obj) for uid, (kind, event_type, obj) in batch.runs.items()),
            *((POD, uid, event_type, obj) for uid, (event_type, obj) in batch.pods.items()),
            *((WORKLOAD, uid, "", obj) for uid, obj in batch.workloads.items()),
            *((EVENT, uid, "", obj) for uid, obj in batch.events.items()),
        ]
        for n, (kind, uid, event_type, obj) in enumerate(work, 1):
            self._parse_one(units, kind, uid, event_type, obj, now)
            if n % _PARSE_SLICE == 0:
                # A batch of thousands takes a good part of a second to parse: probes, API requests
                # and the other watch streams get their turn in between.
                await asyncio.sleep(0)
        self.stats.rejected_values = self.rejections.values
        if self.telemetry is not None and work:
            self.telemetry.ingest_objects.labels("parsed").inc(len(work))
        return units

    def _parse_one(
        self, units: list[_Unit], kind: str, uid: str, event_type: str, obj: JsonObj, now: datetime
    ) -> None:
        def parse(notes: list[SetAside]) -> _Unit | None:
            if kind_spec(kind) is not None:
                return self._parse_run(kind, obj, event_type, now, notes)
            if kind == POD:
                return self._parse_pod(obj, event_type, now, notes)
            if kind == WORKLOAD:
                return self._parse_workload(obj)
            return self._parse_event(obj)

        unit = self.rejections.parse(kind, uid, obj, parse, self._parse_refused)
        if unit is not None:
            unit.uid = uid  # the object's own uid (an Event's unit carries the uid it is about)
            units.append(unit)

    def _parse_run(
        self, kind: str, obj: JsonObj, event_type: str, now: datetime, notes: list[SetAside]
    ) -> _Unit | None:
        spec = kind_spec(kind)
        parsed = spec.parse(obj, self.cfg, notes) if spec is not None else None
        if parsed is None:
            return None
        if isinstance(parsed, Link):
            # A link outlives its object: the pods it led to stay the run's.
            return _Unit(kind, parsed.uid, obj, link=parsed)
        record = self._deleted(parsed, obj, now) if event_type == "DELETED" else parsed
        return _Unit(kind, record.uid, obj, job=record)

    def _parse_pod(self, obj: JsonObj, event_type: str, now: datetime, notes: list[SetAside]) -> _Unit | None:
        pod = parse_pod(obj, self.cfg, notes)
        unit = _Unit(POD, pod.uid, obj)
        if pod.job_uid is None:
            bare = parse_bare_gpu_pod(obj, self.cfg, notes, pod=pod)
            if bare is None:
                return None  # not a job's pod, nor a GPU workload with an owner: none of our business
            unit.job = self._deleted(bare, obj, now) if event_type == "DELETED" else bare
            pod = replace(pod, job_uid=bare.uid)
        if event_type == "DELETED" and pod.deleted_at is None:
            pod = replace(pod, deleted_at=now)
        unit.pod = pod
        return unit

    @staticmethod
    def _parse_workload(obj: JsonObj) -> _Unit | None:
        job_uid, info = parse_workload(obj)
        if not job_uid:
            return None
        return _Unit(WORKLOAD, "", obj, kueue=(job_uid, info))

    @staticmethod
    def _parse_event(obj: JsonObj) -> _Unit | None:
        kept = relevant_event(obj)
        if kept is None:
            return None
        uid, kind, reason = kept
        return _Unit(EVENT, "", obj, event=(uid, kind, reason, event_count(obj)))

    @staticmethod
    def _deleted(record: JobRecord, obj: JsonObj, now: datetime) -> JobRecord:
        """The object of a DELETED event is its last state; one that never ended was deleted."""
        if record.status.is_terminal:
            return record
        deleted_at = timestamp(mapping(obj, "metadata"), "deletionTimestamp") or now
        return replace(record, status=JobStatus.DELETED, finished_at=record.finished_at or deleted_at)

    def _parse_refused(self) -> None:
        self.stats.parse_errors += 1

    # --- reads, reconciliation, the terminal transition -------------------------------------------

    async def _pods_for(
        self, tx: IngestTransaction, merged: dict[str, JobRecord], batch_pods: Iterable[PodRecord]
    ) -> tuple[dict[str, list[PodRecord]], dict[str, PodRecord]]:
        """The pods of each merged job (this batch's over the stored ones), and the stored pods read
        on the way, by uid."""
        by_job = await tx.pods_of_jobs(self.cfg.cluster, sorted(merged))
        stored = {pod.uid: pod for group in by_job.values() for pod in group}
        for pod in batch_pods:  # this batch's pods are newer than what is stored
            if pod.job_uid in merged:
                siblings = [p for p in by_job.get(pod.job_uid, []) if p.uid != pod.uid]
                by_job[pod.job_uid] = [*siblings, pod]
        return by_job, stored

    async def _attribute(
        self, tx: IngestTransaction, pods: list[PodRecord], links: dict[str, str], now: datetime
    ) -> tuple[list[PodRecord], set[str]]:
        """Each pod under its run: a pod names its controller, which may be a link to the run (a
        JobSet's child Job, a RayJob's RayCluster) learnt in this batch or stored. The batch's links
        are stored, and pods stored under a link before it was known move to its run. Returns the
        pods and the runs whose pods moved."""
        asked = {p.job_uid for p in pods if p.job_uid} | set(links) | set(links.values())
        if not asked:
            return pods, set()
        stored = await tx.runs_of(self.cfg.cluster, sorted(asked))

        def run_of(uid: str) -> str:
            for _ in range(LINK_DEPTH):
                parent = links.get(uid)
                if parent is None:
                    return stored.get(uid, uid)
                uid = parent
            return uid

        # A relist hands every link over again: only new ones (or a changed parent) are written.
        moves = {child: run for child in links if (run := run_of(child)) != stored.get(child)}
        if moves:
            await tx.save_links(self.cfg.cluster, {child: links[child] for child in moves}, moves, now)
        attributed = [
            replace(p, job_uid=run) if p.job_uid and (run := run_of(p.job_uid)) != p.job_uid else p
            for p in pods
        ]
        return attributed, set(moves.values())

    async def _close_out_missing(
        self,
        tx: IngestTransaction,
        kind: str,
        present: frozenset[str],
        merged: dict[str, JobRecord],
        now: datetime,
    ) -> int:
        """Closes out the open runs of `kind` missing from its relist (`present`: the uids it listed);
        returns how many."""
        open_jobs = await tx.open_jobs(self.cfg.cluster, self.options.namespaces, kind=kind)
        gone = [j for j in open_jobs if j.uid not in present and j.uid not in merged]
        if not gone:
            return 0
        pods = await tx.pods_of_jobs(self.cfg.cluster, [j.uid for j in gone])
        for job in gone:
            job_pods = pods.get(job.uid, [])
            closed = apply_pods_to_job(replace(job, status=JobStatus.DELETED), job_pods)
            if succeeded_by_pods(job, job_pods):
                closed = replace(closed, status=JobStatus.SUCCEEDED, reason=INFERRED_SUCCESS)
            merged[job.uid] = replace(closed, finished_at=closed.finished_at or now)
        log.info("closed out %d job(s) deleted while the watch was away", len(gone))
        return len(gone)

    def _terminal_mark(self, job: JobRecord, now: datetime) -> TerminalMark:
        due = summary_due(job.finished_at, now, self.started_at, self.options)
        if due is None:
            return TerminalMark(job.uid, now, SummaryState.SILENT, None)
        return TerminalMark(job.uid, now, SummaryState.AWAITING_USAGE, due)
