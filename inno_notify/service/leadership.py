"""Leadership: of several replicas, one at a time does the leader-only work (watch, measure, send,
plan digests); every replica serves the API and the probes.

The Elector runs in every replica, on the database lease of adapters/db/leases.py, with the
timings of client-go's leader election (docs/ha.md):

- A candidate tries to acquire the lease every retry period. Once it holds it, it arms the store's
  fence with the new term, starts the leader work (`lead`, given a stop event) and renews the
  lease every retry period.
- Lost: no renewal succeeded for `renew_deadline` (measured on this process's monotonic clock from
  the start of the last renewal that succeeded, so the lease written then outlasts it by the
  margin up to `lease_seconds`), a renewal found the lease held by someone else, or a leader-only
  write was fenced out. The fence is disarmed at once (no leader-only write reaches the database
  from then on), the leader work is told to stop and cancelled after half the margin, so that it
  is over before the lease can expire and be taken; the replica is a candidate again.
- Stop (SIGTERM): the leader work is told to stop (no new claims) while renewals go on; it gets
  up to `shutdown_grace` to finish what is in flight; then the lease is released (it expires now)
  and a follower takes over at its next try.

Every change is one log line with the term, and `inno_notify_leader`, `inno_notify_leader_term`
and `inno_notify_leader_changes_total` follow it. The lines "leading …" and "leader work stopped
…" bound the interval in which a replica may act as leader (bench/failover.py sums their overlaps).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from inno_notify.adapters.db.leases import FencedOut, Lease, LeaseFence
from inno_notify.options import from_setting
from inno_notify.service.pausing import pause
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

# Runs the leader work until the event is set, then returns once it has finished.
Lead = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
# After the grace, the leader work is cancelled; this is how long its cancellation may take before
# the elector moves on without it (a statement stuck on a dead connection).
CANCEL_WAIT_SECONDS = 1.0


class Leases(Protocol):
    """What the elector needs of the lease rows (adapters/db/leases.LeaseRepository)."""

    async def acquire(self, name: str, holder: str, lease_seconds: float) -> Lease | None: ...

    async def renew(self, name: str, holder: str, term: int, lease_seconds: float) -> bool: ...

    async def release(self, name: str, holder: str, term: int) -> bool: ...


@dataclass(frozen=True, slots=True)
class Timings:
    """client-go's defaults; `ha.*` in the settings."""

    lease_seconds: float = from_setting("ha.lease_seconds", 15.0)
    renew_deadline_seconds: float = from_setting("ha.renew_deadline_seconds", 10.0)
    retry_period_seconds: float = from_setting("ha.retry_period_seconds", 2.0)
    shutdown_grace_seconds: float = from_setting("ha.shutdown_grace_seconds", 20.0)

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_seconds < self.renew_deadline_seconds < self.lease_seconds:
            raise ValueError("needs 0 < retry period < renew deadline < lease duration")

    @property
    def loss_grace_seconds(self) -> float:
        """How long leader work may take to stop after the renew deadline: half of what is left
        of the lease, so it is over well before anyone else may take the lease."""
        return (self.lease_seconds - self.renew_deadline_seconds) / 2


def replica_identity(configured: str | None, env: Mapping[str, str], host: str, pid: int) -> str:
    """`ha.identity`, else $POD_NAME, else the host name; plus the process id and a random suffix,
    so that a restarted process (same pod name) is a new holder."""
    base = configured or env.get("POD_NAME") or host or "inno-notify"
    return f"{base}-{pid}-{secrets.token_hex(3)}"


class Elector:
    """Campaigns for the lease `fence.name` as `fence.holder` and runs the leader work while it holds it."""

    def __init__(
        self,
        leases: Leases,
        fence: LeaseFence,
        timings: Timings,
        telemetry: Telemetry | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._leases = leases
        self._fence = fence
        self._timings = timings
        self._telemetry = telemetry
        self._monotonic = monotonic
        self._rand = rand
        self._failing = False
        self._set_leader(None)

    @property
    def name(self) -> str:
        return self._fence.name

    @property
    def holder(self) -> str:
        return self._fence.holder

    @property
    def term(self) -> int | None:
        """The term this replica leads in, None while it does not lead."""
        return self._fence.term

    async def run(self, stop: asyncio.Event, lead: Lead) -> None:
        """Candidate, leader, candidate … until `stop` is set; a leader hands over before returning.

        Leader work that fails (other than being fenced out) releases the lease and is raised."""
        log.info("leadership: campaigning for %r as %s", self.name, self.holder)
        while not stop.is_set():
            acquired = await self._try_acquire()
            if acquired is None:
                await pause(self._timings.retry_period_seconds * (1.0 + 0.2 * self._rand()), stop)
                continue
            lease, renewed_from = acquired
            await self._lead(lease.term, renewed_from, stop, lead)

    # --- candidate ----------------------------------------------------------------------------------

    async def _try_acquire(self) -> tuple[Lease, float] | None:
        started = self._monotonic()
        try:
            # Bounded by the renew deadline, not the retry period: after a freeze or a restart of
            # Postgres the acquire opens new connections first, and a bound shorter than that
            # (0.5 s retry periods) cancels every attempt, so the candidate never leads again.
            lease = await asyncio.wait_for(
                self._leases.acquire(self.name, self.holder, self._timings.lease_seconds),
                self._timings.renew_deadline_seconds,  # always above the retry period (Timings)
            )
        except Exception as exc:  # the database is away: a candidate simply tries again
            self._failed("acquiring the lease", exc)
            return None
        self._reached()
        return None if lease is None else (lease, started)

    # --- leader -------------------------------------------------------------------------------------

    async def _lead(self, term: int, renewed_from: float, stop: asyncio.Event, lead: Lead) -> None:
        self._fence.arm(term, renewed_from + self._timings.renew_deadline_seconds)
        self._set_leader(term, "acquired")
        log.info("leadership: leading %r in term %d as %s", self.name, term, self.holder)
        work_stop = asyncio.Event()
        work = asyncio.create_task(lead(work_stop), name="leader-work")
        renewing = asyncio.create_task(self._renew_until_lost(term, renewed_from), name="lease-renewal")
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({work, renewing, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if renewing.done():
                await self._step_down(term, work, work_stop, renewing.result())
            elif work.done():
                await self._after_work_ended(term, work, work_stop)
            else:
                await self._hand_over(term, work, work_stop, renewing)
        finally:
            for task in (renewing, stopping):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self._fence.disarm()

    async def _renew_until_lost(self, term: int, renewed_from: float) -> str:
        """Renews every retry period; returns why the lease is lost (never returns while it holds)."""
        timings = self._timings
        next_try = renewed_from + timings.retry_period_seconds
        while True:
            now = self._monotonic()
            deadline = renewed_from + timings.renew_deadline_seconds
            if now >= deadline:
                return f"not renewed for {timings.renew_deadline_seconds:g} s"
            await asyncio.sleep(max(0.0, min(next_try, deadline) - now))
            started = self._monotonic()
            if started >= deadline:
                continue
            next_try = started + timings.retry_period_seconds
            try:
                held = await asyncio.wait_for(
                    self._leases.renew(self.name, self.holder, term, timings.lease_seconds),
                    deadline - started,
                )
            except Exception as exc:  # TimeoutError included: the deadline decides
                self._failed("renewing the lease", exc)
                continue
            self._reached()
            if not held:
                return "the lease expired or another replica holds it"
            renewed_from = started
            self._fence.extend(renewed_from + timings.renew_deadline_seconds)

    async def _step_down(
        self, term: int, work: asyncio.Task[None], work_stop: asyncio.Event, why: str
    ) -> None:
        """Lost: no leader-only write from now on, the work stops within the loss grace."""
        self._fence.disarm()
        work_stop.set()
        self._set_leader(None, "lost")
        log.warning("leadership: lost %r term %d (%s); stopping leader work", self.name, term, why)
        await self._finish(work, self._timings.loss_grace_seconds)
        log.info("leadership: leader work stopped, term %d", term)

    async def _after_work_ended(self, term: int, work: asyncio.Task[None], work_stop: asyncio.Event) -> None:
        failure = None if work.cancelled() else work.exception()
        if failure is not None and _fenced_out(failure):
            await self._step_down(term, work, work_stop, f"fenced out: {_first_line(failure)}")
            return
        # The leader work must run until told to stop: ending on its own is a failure. Hand the
        # lease over at once rather than leave it to expire, then let the process fail.
        self._fence.disarm()
        self._set_leader(None, "released")
        log.info("leadership: leader work stopped, term %d", term)
        await self._release(term)
        if failure is not None:
            raise failure
        raise RuntimeError("the leader work ended without being asked to stop")

    async def _hand_over(
        self, term: int, work: asyncio.Task[None], work_stop: asyncio.Event, renewing: asyncio.Task[str]
    ) -> None:
        """Shutdown: stop claiming, let work in flight finish within the grace, release the lease."""
        work_stop.set()
        log.info("leadership: handing %r over (term %d): finishing work in flight", self.name, term)
        deadline = self._monotonic() + self._timings.shutdown_grace_seconds
        lost: str | None = None
        while not work.done():
            if lost is None and renewing.done():
                lost = renewing.result()
                self._fence.disarm()
                deadline = min(deadline, self._monotonic() + self._timings.loss_grace_seconds)
                log.warning("leadership: lost %r term %d while stopping (%s)", self.name, term, lost)
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                break
            waiting: set[asyncio.Future[Any]] = {work} if lost is not None else {work, renewing}
            await asyncio.wait(waiting, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        await self._finish(work, 0.0)
        self._fence.disarm()
        renewing.cancel()
        self._set_leader(None, "lost" if lost is not None else "released")
        log.info("leadership: leader work stopped, term %d", term)
        if lost is None:
            await self._release(term)

    async def _release(self, term: int) -> None:
        try:
            released = await asyncio.wait_for(
                self._leases.release(self.name, self.holder, term), self._timings.retry_period_seconds
            )
        except Exception as exc:
            log.warning(
                "leadership: could not release %r (%s); it expires within %g s",
                self.name,
                _first_line(exc),
                self._timings.lease_seconds,
            )
            return
        if released:
            log.info("leadership: released %r term %d", self.name, term)

    async def _finish(self, work: asyncio.Task[None], grace: float) -> None:
        """Waits up to `grace` for the work to end, then cancels it; logs how it ended."""
        if not work.done() and grace > 0:
            await asyncio.wait({work}, timeout=grace)
        if not work.done():
            work.cancel()
            await asyncio.wait({work}, timeout=CANCEL_WAIT_SECONDS)
            if not work.done():
                log.error("leadership: leader work did not stop when cancelled; going on without it")
                return
        if work.cancelled():
            return
        failure = work.exception()
        if failure is not None and not _fenced_out(failure):
            log.error("leadership: leader work failed while stopping", exc_info=failure)

    # --- bookkeeping --------------------------------------------------------------------------------

    def _set_leader(self, term: int | None, change: str | None = None) -> None:
        if self._telemetry is None:
            return
        self._telemetry.leader.set(0 if term is None else 1)
        self._telemetry.leader_term.set(term or 0)
        if change is not None:
            self._telemetry.leader_changes.labels(change).inc()

    def _failed(self, what: str, exc: BaseException) -> None:
        # The first failure of a streak is a warning; the rest would repeat it every retry period.
        level = logging.DEBUG if self._failing else logging.WARNING
        self._failing = True
        log.log(level, "leadership: %s failed: %s", what, _first_line(exc) or type(exc).__name__)

    def _reached(self) -> None:
        if self._failing:
            log.info("leadership: the database answers again")
        self._failing = False


def _fenced_out(exc: BaseException) -> bool:
    """A FencedOut, or a group (the leader work's TaskGroup) of nothing but FencedOut."""
    if isinstance(exc, BaseExceptionGroup):
        _, rest = exc.split(FencedOut)
        return rest is None
    return isinstance(exc, FencedOut)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
