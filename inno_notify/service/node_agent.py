"""The node agent's loop: every ``agent.interval_seconds`` sample NVML, map PIDs to pods, publish.

One sample: the NVML adapter reads every GPU (in a daemon thread: a lost GPU can hang a call, and a
hung call must neither block ``/healthz`` nor keep the process alive after SIGTERM), the /proc
reader maps the PIDs to pod UIDs, the pod directory names them, ``domain.agent.attribute`` joins
the three, and the metrics take the result as a whole. Nothing in a sample can stop the loop: a
failure is a gap with a reason in the metrics and a log line when it starts and when it clears.
``healthy`` turns false when no sample has completed for a while, so that the kubelet's liveness
probe restarts an agent whose NVML calls hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import Protocol, TypeVar

from inno_notify.domain.agent import CgroupRef, Gap, GapReason, NodeReading, PodIdentity, attribute
from inno_notify.service.agent_metrics import AgentMetrics, Snapshot
from inno_notify.service.agent_pods import PodDirectory

log = logging.getLogger(__name__)

T = TypeVar("T")
ReadCgroups = Callable[[Collection[int]], Mapping[int, CgroupRef | None]]


class Sampler(Protocol):
    """The NVML adapter as the loop sees it."""

    inits: int

    def sample(self) -> NodeReading: ...

    def close(self) -> None: ...


async def in_daemon_thread(call: Callable[[], T]) -> T:
    """``call()`` in a thread of its own that does not hold up interpreter exit if it never returns."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def work() -> None:
        try:
            outcome: tuple[T | None, BaseException | None] = (call(), None)
        except BaseException as exc:
            outcome = (None, exc)
        # RuntimeError: the loop is gone (the agent stopped while this call hung); nobody is waiting.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, outcome)

    threading.Thread(target=work, name="nvml-sample", daemon=True).start()
    return await future


def _settle(future: asyncio.Future[T], outcome: tuple[T | None, BaseException | None]) -> None:
    if future.done():
        return
    result, error = outcome
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


class NodeAgent:
    def __init__(
        self,
        sampler: Sampler,
        read_cgroups: ReadCgroups,
        pods: PodDirectory | None,
        metrics: AgentMetrics,
        *,
        interval_seconds: float,
        wall_clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sampler = sampler
        self.read_cgroups = read_cgroups
        self.pods = pods
        self.metrics = metrics
        self.interval = interval_seconds
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        self._started = monotonic()
        self._last_done: float | None = None
        self._open_gaps: set[Gap] = set()
        self.samples = 0

    @property
    def stale_after_seconds(self) -> float:
        """No sample completed for this long: the agent is not healthy."""
        return 3 * self.interval + 30.0

    def healthy(self) -> tuple[bool, str]:
        now = self._monotonic()
        since = self._last_done if self._last_done is not None else self._started
        if now - since > self.stale_after_seconds:
            what = "the last sample" if self._last_done is not None else "the agent started"
            return False, f"no sample completed for {now - since:.0f} s since {what}"
        return True, "ok"

    async def sample_once(self) -> Snapshot:
        began = self._monotonic()
        reading = await in_daemon_thread(self.sampler.sample)
        pids = reading.pids
        cgroups = await asyncio.to_thread(self.read_cgroups, pids) if pids else {}
        uids = {ref.pod_uid for ref in cgroups.values() if ref is not None}
        pods: Mapping[str, PodIdentity] | None
        known: int | None = None
        if self.pods is None:
            pods = {}  # agent.pods: none — nothing is named, everything is unattributed
        else:
            lookup = await self.pods.resolve(uids)
            pods = lookup.pods
            known = self.pods.size
            if lookup.error is not None:
                reading = replace(reading, gaps=(*reading.gaps, Gap("pods", GapReason.POD_LOOKUP_FAILED)))
        result = attribute(reading, cgroups, pods)
        snapshot = Snapshot(
            reading=reading,
            attribution=result,
            finished_at=self._wall_clock(),
            duration_seconds=self._monotonic() - began,
            pods_known=known,
        )
        self.metrics.publish(snapshot, inits=self.sampler.inits)
        self._log_gaps(result.gaps)
        self._last_done = self._monotonic()
        self.samples += 1
        return snapshot

    async def run(self, stop: asyncio.Event) -> None:
        """Samples at a fixed rate until ``stop`` is set; a sample still running then is abandoned."""
        next_at = self._monotonic()
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                sampling = asyncio.ensure_future(self.sample_once())
                await asyncio.wait({sampling, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not sampling.done():
                    sampling.cancel()
                    break
                if not sampling.cancelled() and sampling.exception() is not None:
                    log.error("sample failed", exc_info=sampling.exception())
                next_at += self.interval
                now = self._monotonic()
                if next_at < now:  # a sample took longer than the interval: do not catch up in a burst
                    next_at = now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(stopping), timeout=next_at - now)
        finally:
            stopping.cancel()

    def _log_gaps(self, gaps: tuple[Gap, ...]) -> None:
        current = set(gaps)
        for gap in sorted(current - self._open_gaps, key=str):
            # A capability the hardware lacks (utilization on MIG) is worth a line, not a warning.
            level = logging.WARNING if gap.reason.is_error else logging.INFO
            log.log(level, "no %s for %s: %s", gap.figure, gap.gpu_uuid or "the node", gap.reason.value)
        for gap in sorted(self._open_gaps - current, key=str):
            log.info("%s for %s is back (was %s)", gap.figure, gap.gpu_uuid or "the node", gap.reason.value)
        self._open_gaps = current
