"""The ingestion pipeline: watch events in, job and pod records out, each terminal transition once.

The watchers hand over raw objects; one consumer drains them into batches, so events of one object
are applied in the order they came (per-uid ordering) while writes are batched across objects: a
batch is one read of what is stored, pure merging (domain.parsing), and one write transaction.
Replays are harmless: upserts are idempotent, merges never undo a terminal state, and the store
records a job's end only the first time (`mark_terminal`), which is what plans its summary.

A relist (after `410 Gone` or a restart) is reconciled: jobs we hold as open that are no longer in
the cluster were deleted during the gap and are closed out with what we know of them.

Every object is hostile until parsed, and one bad object must never stop the others (see
docs/hardening.md). An object that cannot be parsed is set aside at once; a write that the database
refuses because of the data (a data or integrity error, an index row too large…) is split in halves,
each written on its own in order, until the one object it cannot take is found; that object is set
aside and the rest commit. Only failures of the database itself (connection lost, timeouts) are
retried, with capped backoff. An object set aside is counted
(`inno_notify_rejected_objects_total{resource,reason}`), logged once per uid and reason, and stored
in the rejected_objects table.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from inno_notify.adapters.db import failures
from inno_notify.adapters.db.leases import LostLeadership
from inno_notify.adapters.db.repository import IngestTransaction, Store, SummaryState, TerminalMark
from inno_notify.domain.backoff import Backoff
from inno_notify.domain.kinds import KINDS, Link, kind_spec
from inno_notify.domain.model import JobRecord, JobStatus, KueueInfo, PodRecord, RejectedObject
from inno_notify.domain.parsing import (
    ParseConfig,
    ParseError,
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
from inno_notify.domain.parsing.fields import BAD_KEY, MISSING_FIELD, mapping, timestamp
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

JsonObj = dict[str, Any]
Clock = Callable[[], datetime]
Sleep = Callable[[float], Awaitable[None]]

JOB, POD, EVENT, WORKLOAD = "Job", "Pod", "Event", "Workload"
# What this pipeline records: the registered workload kinds (domain.kinds), their pods, Kueue's
# Workloads and Events; other kinds (Workflows, InferenceServices) are only its taps'.
INGESTED_KINDS = frozenset({POD, EVENT, WORKLOAD, *(spec.kind for spec in KINDS)})
_RELIST = "relist"
# Kueue admissions seen before their job; kept until the job arrives, bounded.
_MAX_PENDING_KUEUE = 10_000
# Reasons of objects set aside by the write path (parsing gives its own, see domain.parsing.fields).
UNSTORABLE = "unstorable"
INTERNAL_ERROR = "internal_error"
# Values in logs are shown with repr, cut to this many characters.
_SHOWN = 200


class Tap(Protocol):
    """Another consumer of the same watch (the workflow tracker): it sees every event first."""

    async def on_event(self, kind: str, event_type: str, obj: JsonObj) -> None: ...

    async def on_relist(self, kind: str, uids: frozenset[str]) -> None: ...


@dataclass(frozen=True, slots=True)
class IngestOptions:
    catch_up_seconds: float = 3600.0
    metrics_delay_seconds: float = 60.0
    batch_max: int = 2000
    # When the queue runs dry, wait this long for more events before writing: a few ms of latency
    # buy batches of hundreds instead of a transaction per handful of events.
    batch_linger_seconds: float = 0.02
    # Events waiting while a batch is written: one more batch's worth keeps the writer busy, and
    # bounds what a relist of a large cluster holds in memory (each object parsed from JSON takes
    # several times its size on the wire); the watchers wait when it is full.
    queue_max: int = 2_000
    namespaces: tuple[str, ...] = ()
    # A write the database failed for reasons of its own is retried after 0.1 s, doubling to this.
    retry_cap_seconds: float = 10.0
    # How many (object, reason) pairs are remembered as already logged; the oldest are forgotten.
    logged_once_max: int = 10_000


@dataclass(slots=True)
class IngestStats:
    events: int = 0
    batches: int = 0
    terminal_marked: int = 0
    # Objects set aside because they could not be parsed (parse_errors) or stored (unstorable).
    parse_errors: int = 0
    unstorable: int = 0
    rejected_values: int = 0
    # Writes the database failed for reasons of its own, each retried; and how many distinct
    # writes needed a retry at all.
    write_errors: int = 0
    retried_writes: int = 0
    # Writes split in two to find the object the database refuses.
    splits: int = 0
    # Batches that failed outside the per-object handling (a bug): their events were dropped.
    dropped_batches: int = 0
    relists: int = 0
    closed_in_gap: int = 0
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
class _Unit:
    """One object of a batch, parsed: the smallest thing a failing write is split down to."""

    kind: str
    uid: str
    obj: JsonObj
    job: JobRecord | None = None
    pod: PodRecord | None = None
    kueue: tuple[str, KueueInfo] | None = None
    event: tuple[str, str, str, int] | None = None
    link: Link | None = None


@dataclass(slots=True)
class _Piece:
    """Units written in one transaction, and the relist that closes the segment (on the last piece)."""

    units: list[_Unit]
    relist: tuple[str, frozenset[str]] | None = None

    @property
    def size(self) -> int:
        return len(self.units) + (self.relist is not None)

    def halves(self) -> tuple[_Piece, _Piece]:
        middle = (len(self.units) + 1) // 2
        return _Piece(self.units[:middle]), _Piece(self.units[middle:], self.relist)


@dataclass(frozen=True, slots=True)
class _Written:
    """What a committed write changed outside the database (applied only once it committed)."""

    marked: int
    pending_kueue: dict[str, KueueInfo]
    relists: int
    closed_in_gap: int


def _why_no_uid(obj: object) -> tuple[str, str]:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(metadata, dict) and metadata.get("uid") not in (None, ""):
        return BAD_KEY, "metadata.uid is not usable as a key"
    return MISSING_FIELD, "no metadata.uid"


def _shown(value: object) -> str:
    """A value for a log line: repr (so control characters and NUL show as escapes), capped."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


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
        # Database writes: 0.1 s doubling to the cap, no jitter (one writer, nothing to spread).
        self._write_backoff = Backoff(0.1, 2.0, max(0.1, options.retry_cap_seconds), low=1.0, high=1.0)
        self.clock = clock
        self.started_at = started_at
        self.stats = IngestStats()
        self._sleep = sleep
        self._queue: asyncio.Queue[tuple[str, str, Any]] = asyncio.Queue(options.queue_max)
        self._pending_kueue: dict[str, KueueInfo] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        # (kind, uid, what) already logged, oldest first; bounded, since uids are the cluster's.
        self._logged: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._rejected: list[RejectedObject] = []
        self.taps: list[Tap] = []

    def watch_kinds(self, owner_kinds: frozenset[str]) -> None:
        """The controllers whose pods and Jobs belong to a watched run (ParseConfig.owner_kinds), as
        the cluster's discovery found them; called before the first Job or pod is handed over."""
        if owner_kinds != self.cfg.owner_kinds:
            log.info("workload kinds watched: %s", ", ".join(sorted(owner_kinds)) or "Jobs and pods only")
        self.cfg = replace(self.cfg, owner_kinds=owner_kinds)

    # --- the watcher's callbacks: cheap, they only enqueue (bounded: back-pressure on the watch) ---

    async def on_event(self, kind: str, event_type: str, obj: JsonObj) -> None:
        if self.telemetry is not None:
            self.telemetry.watch_events.labels(kind, event_type).inc()
        for tap in self.taps:
            await tap.on_event(kind, event_type, obj)
        if kind not in INGESTED_KINDS:
            return
        self._idle.clear()
        await self._queue.put((kind, event_type, obj))

    async def on_relist(self, kind: str, uids: frozenset[str]) -> None:
        for tap in self.taps:
            await tap.on_relist(kind, uids)
        if kind not in INGESTED_KINDS:
            return
        self._idle.clear()
        await self._queue.put((_RELIST, kind, uids))

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
            await self._apply_guarded(items)
            if self.telemetry is not None:
                # The oldest event of the batch waited longest: its lag bounds the batch's.
                self.telemetry.ingest_lag.observe(loop.time() - first_at)
            if self._queue.empty():
                self._idle.set()

    async def _apply_guarded(self, items: Sequence[tuple[str, str, Any]]) -> None:
        """`apply`, which sets bad objects aside itself; should anything still escape it (a bug), the
        batch is dropped and logged rather than ending the consumer and with it the service."""
        try:
            await self.apply(items)
        except LostLeadership:
            raise  # not this batch's fault: the leader work ends (service.leadership)
        except Exception:
            self.stats.dropped_batches += 1
            log.exception("ingesting %d event(s) failed unexpectedly; they are dropped", len(items))

    async def apply(self, items: Sequence[tuple[str, str, Any]]) -> None:
        """Applies items in order; a relist closes the segment before it so reconciliation sees it.

        Returns once every item is committed or set aside; a database that is away is waited for.
        """
        batch = _Batch()
        for kind, event_type, obj in items:
            if kind == _RELIST:
                await self._apply_segment(batch, (event_type, obj))
                batch = _Batch()
                continue
            self.stats.events += 1
            self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
            uid, namespace, name = identity(obj)
            if uid is None:
                self.stats.parse_errors += 1
                self._set_aside(kind, "", namespace, name, *_why_no_uid(obj))
                continue
            batch.add(kind, event_type, uid, obj)
        await self._apply_segment(batch, None)

    async def _apply_segment(self, batch: _Batch, relist: tuple[str, frozenset[str]] | None) -> None:
        now = self.clock()
        units = self._parse(batch, now)
        if units or relist is not None:
            await self._write(_Piece(units, relist), now)
        await self._store_rejected(now)

    # --- writing, split down to the object the database refuses ----------------------------------

    async def _write(self, piece: _Piece, now: datetime) -> None:
        """Writes the piece; if the database refuses it for its data, writes each half in order,
        down to the single object it refuses, which is set aside. Events of one uid keep their order:
        halves are written one after the other, earlier events first."""
        todo: deque[_Piece] = deque([piece])
        while todo:
            current = todo.popleft()
            try:
                await self._write_retrying(current, now)
            except LostLeadership:
                raise  # no object is at fault: nothing is split or set aside
            except Exception as exc:
                if current.size > 1:
                    self.stats.splits += 1
                    first, second = current.halves()
                    todo.extendleft((second, first))
                    continue
                self._refused(current, exc)

    async def _write_retrying(self, piece: _Piece, now: datetime) -> None:
        """One transaction for the piece, retried with capped backoff while the database itself fails;
        a failure due to the data is raised."""
        attempts = 0
        while True:
            try:
                async with self.store.jobs.ingest_transaction() as tx:
                    written = await self._merge_and_write(tx, piece, now)
                break
            except Exception as exc:
                if not failures.is_transient(exc):
                    raise
                attempts += 1
                delay = self._write_backoff.ceiling(attempts)
                self.stats.write_errors += 1
                if attempts == 1:
                    self.stats.retried_writes += 1
                log.warning(
                    "writing %d object(s) failed (%s); retrying in %.1f s",
                    piece.size,
                    failures.describe(exc),
                    delay,
                )
                await self._sleep(delay)
        self._pending_kueue = written.pending_kueue
        self.stats.terminal_marked += written.marked
        self.stats.relists += written.relists
        self.stats.closed_in_gap += written.closed_in_gap
        self.stats.batches += 1
        self.stats.last_commit_at = self.clock()

    def _refused(self, piece: _Piece, exc: Exception) -> None:
        """The database refused this one object (or our merge failed on it): set it aside."""
        reason = UNSTORABLE if failures.is_database_error(exc) else INTERNAL_ERROR
        detail = failures.describe(exc)
        if reason == INTERNAL_ERROR:
            log.error("merging failed on one object (%s)", detail, exc_info=exc)
        if piece.units:
            unit = piece.units[0]
            _, namespace, name = identity(unit.obj)
            self.stats.unstorable += 1
            self._set_aside(unit.kind, unit.uid, namespace, name, reason, detail)
        elif piece.relist is not None:
            # Nothing to store for a relist: the objects in it were written on their own.
            kind = piece.relist[0]
            log.error("reconciling the %s relist failed (%s); the next relist tries again", kind, detail)
            self._count(kind, reason)

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
        relisted = kind_spec(piece.relist[0]) if piece.relist is not None else None
        if piece.relist is not None and relisted is not None and relisted.stored is not None:
            closed = await self._close_out_missing(tx, relisted.stored.value, piece.relist[1], merged, now)

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
        return _Written(marked, pending, int(piece.relist is not None), closed)

    # --- parsing: each object on its own ------------------------------------------------------------

    def _parse(self, batch: _Batch, now: datetime) -> list[_Unit]:
        units: list[_Unit] = []
        for uid, (kind, event_type, obj) in batch.runs.items():
            self._parse_one(units, kind, uid, event_type, obj, now)
        for uid, (event_type, obj) in batch.pods.items():
            self._parse_one(units, POD, uid, event_type, obj, now)
        for uid, obj in batch.workloads.items():
            self._parse_one(units, WORKLOAD, uid, "", obj, now)
        for uid, obj in batch.events.items():
            self._parse_one(units, EVENT, uid, "", obj, now)
        return units

    def _parse_one(
        self, units: list[_Unit], kind: str, uid: str, event_type: str, obj: JsonObj, now: datetime
    ) -> None:
        notes: list[SetAside] = []
        try:
            if kind_spec(kind) is not None:
                unit: _Unit | None = self._parse_run(kind, obj, event_type, now, notes)
            elif kind == POD:
                unit = self._parse_pod(obj, event_type, now, notes)
            elif kind == WORKLOAD:
                unit = self._parse_workload(obj)
            else:
                unit = self._parse_event(obj)
        except ParseError as exc:
            self._parse_refused(kind, uid, obj, exc.reason, str(exc))
            return
        except Exception as exc:  # a bug in a parser must cost one object, not the service
            log.error("parsing %s %s failed unexpectedly", kind, _shown(uid), exc_info=exc)
            self._parse_refused(kind, uid, obj, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
            return
        for note in notes:
            self._value_set_aside(kind, uid, note)
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

    # --- setting aside: counted, logged once, stored -----------------------------------------------

    def _parse_refused(self, kind: str, uid: str, obj: JsonObj, reason: str, detail: str) -> None:
        self.stats.parse_errors += 1
        _, namespace, name = identity(obj)
        self._set_aside(kind, uid, namespace, name, reason, detail)

    def _set_aside(
        self,
        kind: str,
        uid: str,
        namespace: str | None,
        name: str | None,
        reason: str,
        detail: str,
    ) -> None:
        self._count(kind, reason)
        if self._first_time(kind, uid or f"{namespace}/{name}", reason):
            log.warning(
                "set aside %s uid=%s namespace=%s name=%s: %s (%s)",
                kind,
                _shown(uid),
                _shown(namespace),
                _shown(name),
                reason,
                _shown(detail),
            )
        self._rejected.append(
            RejectedObject(
                cluster=self.cfg.cluster,
                kind=kind,
                uid=uid,
                reason=reason,
                namespace=namespace,
                name=name,
                detail=detail,
            )
        )

    def _value_set_aside(self, kind: str, uid: str, note: SetAside) -> None:
        self.stats.rejected_values += 1
        if self.telemetry is not None:
            self.telemetry.rejected_values.labels(kind, note.field, note.reason).inc()
        if self._first_time(kind, uid, f"{note.field}:{note.reason}"):
            log.warning("%s uid=%s: %s dropped (%s)", kind, _shown(uid), note.field, note.reason)

    def _count(self, kind: str, reason: str) -> None:
        if self.telemetry is not None:
            self.telemetry.rejected_objects.labels(kind, reason).inc()

    def _first_time(self, kind: str, uid: str, what: str) -> bool:
        key = (kind, uid, what)
        if key in self._logged:
            self._logged.move_to_end(key)
            return False
        self._logged[key] = None
        if len(self._logged) > self.options.logged_once_max:
            self._logged.popitem(last=False)
        return True

    async def _store_rejected(self, now: datetime) -> None:
        """Stores what was set aside; the database being away is waited for like any write, but a
        record it refuses is only logged: bookkeeping must not stop ingestion."""
        if not self._rejected:
            return
        rejected, self._rejected = self._rejected, []
        attempts = 0
        while True:
            try:
                await self.store.jobs.record_rejected(rejected, now)
                return
            except LostLeadership:
                raise
            except Exception as exc:
                if not failures.is_transient(exc):
                    log.error(
                        "recording %d set-aside object(s) failed: %s", len(rejected), failures.describe(exc)
                    )
                    return
                attempts += 1
                await self._sleep(self._write_backoff.ceiling(attempts))

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
            for _ in range(4):  # the links' depth (Pod → Job → JobSet), cycles end here
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
        ended = job.finished_at or now
        horizon = self.started_at - timedelta(seconds=self.options.catch_up_seconds)
        if ended < horizon:
            return TerminalMark(job.uid, now, SummaryState.SILENT, None)
        due = ended + timedelta(seconds=self.options.metrics_delay_seconds)
        return TerminalMark(job.uid, now, SummaryState.AWAITING_USAGE, due)
