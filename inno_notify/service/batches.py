"""What every ingestion pipeline shares: the bounded queue drained in batches, the write split down
to the one object the database refuses, and the bookkeeping of objects set aside.

The ingestor (service.ingest) and its workflow recorder (service.workflow_tracking) differ in what
they parse and how they merge a batch; how events reach a batch, how a batch is written and what
happens to a bad object is one mechanism, here, so the two cannot drift apart (see
docs/hardening.md). The usage round (service.usage) writes its summaries with the same
`PieceWriter`, without its retries:

- `BatchQueue`: watchers put events (waiting when it is full: back-pressure on the watch); one
  consumer takes the first, then lingers a moment to collect up to `batch_max`, and applies them.
  A batch that fails outside the per-object handling (a bug) is dropped and logged; the consumer
  goes on. `drained()` waits until everything handed over was applied.
- `PieceWriter`: one transaction per piece, retried with capped backoff while the database itself
  fails (connection lost, timeouts); a failure due to the data splits the piece in halves, written
  in order (events of one uid keep their order), down to the one unit it refuses, set aside.
  `LostLeadership` is no object's fault: it ends the write, nothing is set aside.
- `Rejections`: an object set aside is counted (`inno_notify_rejected_objects_total`), logged once
  per (kind, uid, reason) with a bounded memory, and stored in rejected_objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from inno_notify.adapters.db import failures
from inno_notify.adapters.db.leases import LostLeadership
from inno_notify.adapters.db.repository import Store
from inno_notify.domain.backoff import Backoff
from inno_notify.domain.model import RejectedObject
from inno_notify.domain.parsing import ParseError, SetAside, identity
from inno_notify.domain.parsing.fields import BAD_KEY, MISSING_FIELD
from inno_notify.service.planner import FirstTimes, shown
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

T = TypeVar("T")
U = TypeVar("U")
R = TypeVar("R")
JsonObj = dict[str, Any]
Clock = Callable[[], datetime]
Sleep = Callable[[float], Awaitable[None]]

# Reasons of objects set aside by the write path (parsing gives its own, see domain.parsing.fields).
UNSTORABLE = "unstorable"
INTERNAL_ERROR = "internal_error"


def write_backoff(cap_seconds: float) -> Backoff:
    """Database writes: 0.1 s doubling to the cap, no jitter (one writer, nothing to spread)."""
    return Backoff(0.1, 2.0, max(0.1, cap_seconds), low=1.0, high=1.0)


def why_no_uid(obj: object) -> tuple[str, str]:
    """The reason and detail of an object whose uid cannot key it (identity gave None)."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(metadata, dict) and metadata.get("uid") not in (None, ""):
        return BAD_KEY, "metadata.uid is not usable as a key"
    return MISSING_FIELD, "no metadata.uid"


class Horizon(Protocol):
    """The options that say when a summary is due (ingest's and the workflow tracker's)."""

    @property
    def catch_up_seconds(self) -> float: ...

    @property
    def metrics_delay_seconds(self) -> float: ...


def summary_due(
    ended: datetime | None, now: datetime, started_at: datetime, opts: Horizon
) -> datetime | None:
    """When the summary of what ended at `ended` (unknown: now) is due, once its metrics are in;
    None for what ended before the catch-up horizon of this start: recorded, never announced."""
    ended = ended or now
    if ended < started_at - timedelta(seconds=opts.catch_up_seconds):
        return None
    return ended + timedelta(seconds=opts.metrics_delay_seconds)


# --- the queue and its consumer ---------------------------------------------------------------------


class BatchQueue(Generic[T]):
    """A bounded queue drained by one consumer in batches of up to `batch_max`."""

    def __init__(self, name: str, queue_max: int, batch_max: int, linger_seconds: float = 0.0) -> None:
        self.name = name
        self.batch_max = batch_max
        # When the queue runs dry, wait this long for more before applying: a few ms of latency buy
        # batches of hundreds instead of a transaction per handful of events.
        self.linger_seconds = linger_seconds
        self._queue: asyncio.Queue[T] = asyncio.Queue(queue_max)
        self._idle = asyncio.Event()
        self._idle.set()

    async def put(self, item: T) -> None:
        self._idle.clear()
        await self._queue.put(item)

    async def drained(self) -> None:
        """Waits until everything put so far is applied (tests, benchmarks, shutdown)."""
        await self._idle.wait()

    async def run(
        self,
        apply: Callable[[list[T]], Awaitable[None]],
        stats: PipelineStats,
        stop: asyncio.Event | None = None,
        *,
        lag: Callable[[float], None] | None = None,
    ) -> None:
        """Applies batches until `stop` is set (then finishes what is queued), or for ever.

        `lag` is given how long the oldest item of each batch waited from being taken until applied.
        """
        loop = asyncio.get_running_loop()
        while True:
            first = await self._first(stop)
            if not first:
                return
            items = first
            first_at = loop.time()
            deadline = first_at + self.linger_seconds
            while len(items) < self.batch_max:
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
            await self._apply_guarded(apply, items, stats)
            if lag is not None:
                lag(loop.time() - first_at)
            if self._queue.empty():
                self._idle.set()

    async def _first(self, stop: asyncio.Event | None) -> list[T]:
        """The first item of a batch; none once `stop` is set and the queue is empty."""
        if stop is None:
            return [await self._queue.get()]
        getter = asyncio.ensure_future(self._queue.get())
        stopping = asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait({getter, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            stopping.cancel()
            return [getter.result()]
        getter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await getter
        return [] if self._queue.empty() else [self._queue.get_nowait()]

    async def _apply_guarded(
        self, apply: Callable[[list[T]], Awaitable[None]], items: list[T], stats: PipelineStats
    ) -> None:
        """`apply` sets bad objects aside itself; should anything still escape it (a bug), the batch
        is dropped and logged rather than ending the consumer and with it the service."""
        try:
            await apply(items)
        except LostLeadership:
            raise  # not this batch's fault: the leader work ends (service.leadership)
        except Exception:
            stats.dropped_batches += 1
            log.exception("%s: %d event(s) failed unexpectedly; they are dropped", self.name, len(items))


# --- the write, split down to the unit the database refuses -------------------------------------------


@dataclass(slots=True)
class Unit:
    """One object of a batch, parsed: the smallest thing a failing write is split down to, and what
    is set aside when the database refuses it. Each pipeline adds what it parsed the object into."""

    kind: str
    uid: str
    obj: JsonObj


@dataclass(slots=True)
class Piece(Generic[U, R]):
    """Units written in one transaction, then what closes them (relists reconciled after them)."""

    units: list[U]
    closing: list[R] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.units) + len(self.closing)

    def halves(self) -> tuple[Piece[U, R], Piece[U, R]]:
        """The units in halves, in order (the closing goes with the second); closings alone in halves."""
        if not self.units:
            middle = (len(self.closing) + 1) // 2
            return Piece([], self.closing[:middle]), Piece([], self.closing[middle:])
        middle = (len(self.units) + 1) // 2
        return Piece(self.units[:middle]), Piece(self.units[middle:], self.closing)


Transaction = Callable[[Piece[U, R]], Awaitable[None]]


@dataclass(slots=True)
class PipelineStats:
    # Batches that failed outside the per-object handling (a bug): their events were dropped.
    dropped_batches: int = 0
    # Writes the database failed for reasons of its own, each retried; and how many distinct
    # writes needed a retry at all.
    write_errors: int = 0
    retried_writes: int = 0
    # Writes split in two to find the object the database refuses.
    splits: int = 0


class PieceWriter(Generic[U, R]):
    """Writes pieces, each with `transaction` (one transaction, applying what it changed outside the
    database only once it committed); `refused` is told of the single unit or closing it refuses
    (and may raise, to stop the write: the usage round gives up after several in a row).

    `retry_transient`: a transaction the database itself failed is tried again with capped backoff
    (ingestion: the events wait in their queue); without it every failure splits, down to the
    unit, as the usage round wants (its store already tries once more on a fresh connection, and a
    round whose writes keep failing lets go of its claims at once rather than hold them)."""

    def __init__(
        self,
        refused: Callable[[Piece[U, R], Exception], None],
        stats: PipelineStats,
        *,
        retry_cap_seconds: float = 10.0,
        retry_transient: bool = True,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._refused = refused
        self.stats = stats
        self.backoff = write_backoff(retry_cap_seconds)
        self._retry_transient = retry_transient
        self._sleep = sleep

    async def write(self, piece: Piece[U, R], transaction: Transaction[U, R]) -> None:
        """Writes the piece; if the database refuses it for its data, writes each half in order, down
        to the single unit it refuses. Halves are written one after the other, earlier events first."""
        todo: deque[Piece[U, R]] = deque([piece])
        while todo:
            current = todo.popleft()
            try:
                if self._retry_transient:
                    await self._retrying(current, transaction)
                else:
                    await transaction(current)
            except LostLeadership:
                raise  # no object is at fault: nothing is split or set aside
            except Exception as exc:
                if current.size > 1:
                    self.stats.splits += 1
                    first, second = current.halves()
                    todo.extendleft((second, first))
                    continue
                self._refused(current, exc)

    async def _retrying(self, piece: Piece[U, R], transaction: Transaction[U, R]) -> None:
        """One transaction, retried with capped backoff while the database itself fails; a failure
        due to the data is raised."""
        attempts = 0
        while True:
            try:
                await transaction(piece)
                return
            except Exception as exc:
                if not failures.is_transient(exc):
                    raise
                attempts += 1
                delay = self.backoff.ceiling(attempts)
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


def refusal(exc: Exception) -> tuple[str, str]:
    """Why the write path sets an object aside (the database refused it, or our merge failed on
    it), and the detail."""
    reason = UNSTORABLE if failures.is_database_error(exc) else INTERNAL_ERROR
    detail = failures.describe(exc)
    if reason == INTERNAL_ERROR:
        log.error("merging failed on one object (%s)", detail, exc_info=exc)
    return reason, detail


# --- objects set aside ----------------------------------------------------------------------------------


class Rejections:
    """Objects set aside: counted, logged once per (kind, uid, reason), stored in rejected_objects."""

    def __init__(
        self,
        cluster: str,
        telemetry: Telemetry | None,
        logged_max: int,
        *,
        backoff: Backoff | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.cluster = cluster
        self.telemetry = telemetry
        self.pending: list[RejectedObject] = []
        self.values = 0
        # (kind, uid, what) already logged; bounded, since uids are the cluster's.
        self._first_time = FirstTimes(logged_max)
        self._backoff = backoff or write_backoff(10.0)
        self._sleep = sleep

    def object(self, kind: str, obj: object, uid: str, reason: str, detail: str) -> None:
        """Sets aside the object `obj` of `kind` (uid "" when it has none usable)."""
        _, namespace, name = identity(obj)
        self.count(kind, reason)
        if self._first_time((kind, uid or f"{namespace}/{name}", reason)):
            log.warning(
                "set aside %s uid=%s namespace=%s name=%s: %s (%s)",
                kind,
                shown(uid),
                shown(namespace),
                shown(name),
                reason,
                shown(detail),
            )
        self.pending.append(RejectedObject(self.cluster, kind, uid, reason, namespace, name, detail))

    def value(self, kind: str, uid: str, note: SetAside) -> None:
        """A value of an object dropped while parsing it (the rest of the object is kept)."""
        self.values += 1
        if self.telemetry is not None:
            self.telemetry.rejected_values.labels(kind, note.field, note.reason).inc()
        if self._first_time((kind, uid, f"{note.field}:{note.reason}")):
            log.warning("%s uid=%s: %s dropped (%s)", kind, shown(uid), note.field, note.reason)

    def count(self, kind: str, reason: str) -> None:
        if self.telemetry is not None:
            self.telemetry.rejected_objects.labels(kind, reason).inc()

    def parse(
        self,
        kind: str,
        uid: str,
        obj: Any,
        parse: Callable[[list[SetAside]], T],
        refused: Callable[[], None],
    ) -> T | None:
        """`parse(notes)`, one object on its own: refused (ParseError, or a bug in a parser, which
        must cost one object, not the service) it is set aside and `refused` called; the values it
        dropped are noted."""
        notes: list[SetAside] = []
        try:
            parsed = parse(notes)
        except ParseError as exc:
            refused()
            self.object(kind, obj, uid, exc.reason, str(exc))
            return None
        except Exception as exc:
            log.error("parsing %s %s failed unexpectedly", kind, shown(uid), exc_info=exc)
            refused()
            self.object(kind, obj, uid, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
            return None
        for note in notes:
            self.value(kind, uid, note)
        return parsed

    async def store(self, store: Store, now: datetime) -> None:
        """Stores what was set aside; the database being away is waited for like any write, but a
        record it refuses is only logged: bookkeeping must not stop ingestion."""
        if not self.pending:
            return
        rejected, self.pending = self.pending, []
        attempts = 0
        while True:
            try:
                await store.jobs.record_rejected(rejected, now)
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
                await self._sleep(self._backoff.ceiling(attempts))
