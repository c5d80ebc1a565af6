"""Job charts: drawn in worker processes when a job is measured, stored with its series, read by the send.

Every summary carries its job's chart (or, for a grouped message, one picture of its jobs). A
chart is milliseconds of CPU; a send is a fraction of one. So charts are kept off the send path:

- the usage round draws the chart of each summary it is about to store (`ChartDrawer.job_charts`)
  and stores the PNG in `usage_series.chart`, beside the series it is drawn from, in the same
  transaction as the summary (store.jobs.complete_summaries). Nothing is shared in memory between
  the usage service and the dispatcher: a replica that takes over, or a restart, finds the charts
  in the database as the previous leader left them;
- the dispatcher reads the series of every summary in a claim with their charts, one query per
  cluster, the first time a message of the round asks (`RoundCharts`, store.usage.charts_of), and
  sends the stored chart as it is. It draws only what nothing stored: a grouped message's picture
  (a panel per job) and the chart of a job stored without one (measured by an earlier release, or
  its drawing failed). Those are shared while being drawn and kept in a small LRU, so a message on
  three channels is drawn once;
- drawing runs in worker processes (`ChartDrawer`), one per core the container may use
  (`usable_cores`), never on the event loop and never under the GIL of the process that sends.
  The pool starts at the first drawing (in a thread: starting processes blocks), from a fork
  server that has the drawing code imported, and the runtime closes it when the leader's work
  stops. The render functions (adapters/channels/job_chart.py) are top-level functions of
  picklable arguments.

A chart is never worth a summary: one that cannot be drawn (a bug, data no rule expected, a worker
that died or hangs) is logged and left out, and the summary is stored, or the message sent,
without it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import math
import multiprocessing
import os
import re
import signal
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from inno_notify.adapters.channels.base import InlineImage
from inno_notify.adapters.channels.job_chart import (
    ChartJob,
    chartable,
    group_alt_text,
    job_alt_text,
    render_group_png,
    render_job_png,
)
from inno_notify.adapters.db import Store
from inno_notify.adapters.db.outbox_repository import Summary
from inno_notify.adapters.db.series import StoredSeries
from inno_notify.domain.model import JobRecord, UsageSeries

log = logging.getLogger(__name__)

JobKey = tuple[str, str]  # (cluster, job uid)
# Charts drawn at the send (groups, jobs stored without one) kept for the next channel or round.
DEFAULT_CACHE_SIZE = 256
# A chart is milliseconds of CPU: one not drawn in this long (its wait in the queue included) is
# left out, and the workers replaced in case one hangs.
DRAW_TIMEOUT_SECONDS = 30.0
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")
# Imported once by the fork server, so that each worker forked from it starts with Pillow and the
# layout loaded. (A worker still imports the program's main module, as multiprocessing does: for
# `inno-notify`, the CLI, a few tenths of a second once per worker.)
_PRELOAD = ["inno_notify.adapters.channels.job_chart"]
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def usable_cores(cpu_max: Path = CPU_MAX) -> int:
    """The cores this process may keep busy: those it may run on, fewer where its cgroup's CPU
    limit (`cpu.max`, cgroup v2: a Kubernetes CPU limit) allows less. `os.cpu_count()` counts the
    node's, which a pod limited to 2 CPUs on a 64-core node must not start a worker for each of."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass  # no limit, or not cgroup v2
    return max(1, cores)


def chart_job(job: JobRecord, series: UsageSeries | None) -> ChartJob | None:
    """What a job's chart draws; None when its series has nothing to draw."""
    if series is None or not chartable(series):
        return None
    return ChartJob(f"{job.namespace}/{job.name}", series, job.started_at)


class ChartDrawer:
    """Draws charts in a pool of worker processes; one per leader, shared by the usage round (which
    stores what it draws) and the dispatcher (which draws what nothing stored)."""

    def __init__(
        self,
        *,
        idle_percent: float = 5.0,
        workers: int | None = None,
        timeout_seconds: float = DRAW_TIMEOUT_SECONDS,
    ) -> None:
        self._idle = idle_percent
        self._workers = max(1, workers if workers is not None else usable_cores())
        self._timeout = timeout_seconds
        self._pool: ProcessPoolExecutor | None = None
        self._starting = asyncio.Lock()
        self._closed = False
        self.drawn = 0  # PNGs drawn: tests and benchmarks read it

    @property
    def idle_percent(self) -> float:
        return self._idle

    async def job_charts(self, jobs: Sequence[tuple[JobRecord, UsageSeries | None]]) -> list[bytes | None]:
        """The chart of each job (None where its series has nothing to draw or drawing failed),
        drawn side by side in the pool; returns when all are done."""
        charts = [chart_job(job, series) for job, series in jobs]
        drawn = iter(await asyncio.gather(*(self.job_png(chart) for chart in charts if chart is not None)))
        return [None if chart is None else next(drawn) for chart in charts]

    async def job_png(self, chart: ChartJob) -> bytes | None:
        return await self.draw(functools.partial(render_job_png, chart, idle_percent=self._idle))

    async def group_png(self, charts: Sequence[ChartJob]) -> bytes | None:
        return await self.draw(functools.partial(render_group_png, tuple(charts), idle_percent=self._idle))

    async def draw(self, render: Callable[[], bytes | None]) -> bytes | None:
        """`render` run in a worker process: a partial of a top-level function of picklable
        arguments. None, logged, when it raises or takes over `timeout_seconds` (queueing
        included), or when the pool is closed."""
        pool = await self._started()
        if pool is None:
            log.info("a chart was asked for after the drawing stopped; it is left out")
            return None
        try:
            drawing = asyncio.get_running_loop().run_in_executor(pool, render)
            png = await asyncio.wait_for(drawing, self._timeout)
        except TimeoutError:
            # A worker that hangs would hold every chart after it, and the summaries waiting for them.
            log.warning("a chart took over %g s to draw: left out, the chart workers replaced", self._timeout)
            self._retire(pool)
            return None
        except BrokenProcessPool:
            log.warning(
                "a chart worker died (killed for memory?): its charts are left out, the workers replaced"
            )
            self._retire(pool)
            return None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise
            return None  # not this task's cancellation: the pool was replaced under its drawing
        except Exception:
            log.exception("a chart could not be drawn; it is left out")
            return None
        self.drawn += 1
        return png

    async def _started(self) -> ProcessPoolExecutor | None:
        """The pool, started at the first drawing (None once closed)."""
        if self._pool is not None or self._closed:
            return self._pool
        async with self._starting:
            if self._pool is None and not self._closed:
                pool = await asyncio.to_thread(_start_pool, self._workers)
                if self._closed:  # closed while it started
                    pool.shutdown(wait=False)
                else:
                    self._pool = pool
        return self._pool

    def _retire(self, pool: ProcessPoolExecutor) -> None:
        """Ends `pool` now, its workers killed (one may hang); the next drawing starts a fresh one."""
        if self._pool is pool:
            self._pool = None
        # Python 3.14 has pool.terminate_workers(); before it, the pool's own map of its processes.
        workers = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            worker.terminate()

    def close(self) -> None:
        """No drawing starts after this; those in flight finish, and the worker processes are
        joined (blocking: from the event loop, `run` or asyncio.to_thread)."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    async def run(self, stop: asyncio.Event) -> None:
        """The runtime's component: the pool lives until `stop`, with the leader's other work."""
        await stop.wait()
        await asyncio.to_thread(self.close)


def _start_pool(workers: int) -> ProcessPoolExecutor:
    """A pool with its `workers` processes running. Blocking (starting the fork server the first
    time, then a fork per worker): a thread's work, not the event loop's."""
    # Not fork: the process runs threads (the event loop's executors, database drivers), and a
    # fork taken while one of them holds a lock can deadlock the child.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    # Ctrl-C in a terminal reaches the whole process group: the workers leave it to the service,
    # which closes them, rather than each printing a KeyboardInterrupt.
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN)
    )
    # A worker is started by a submission that finds none idle: these start them all, here.
    for started in [pool.submit(os.getpid) for _ in range(workers)]:
        started.result()
    return pool


@dataclass(frozen=True, slots=True)
class MessageCharts:
    """What one message gets: its jobs' series (by job key) and its picture, if any."""

    series: Mapping[JobKey, UsageSeries]
    images: tuple[InlineImage, ...] = ()


class JobCharts:
    """The dispatcher's charts: the stored ones read per claim, the rest drawn at the send."""

    def __init__(
        self,
        store: Store,
        drawer: ChartDrawer | None = None,
        *,
        idle_percent: float = 5.0,
        workers: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        """`drawer`: the leader's (closed by whoever made it); None: one of its own, with
        `idle_percent` and `workers`, closed by `close`."""
        self._store = store
        self._owned = drawer is None
        self._drawer = drawer or ChartDrawer(idle_percent=idle_percent, workers=workers)
        self._cache: OrderedDict[tuple[object, ...], bytes | None] = OrderedDict()
        self._cache_size = max(1, cache_size)
        self._drawing: dict[tuple[object, ...], asyncio.Future[bytes | None]] = {}
        self.drawn = 0  # PNGs this dispatcher drew at the send: tests and benchmarks read it

    def for_round(self, summaries: Mapping[JobKey, Summary]) -> RoundCharts:
        """The charts of one claim's summaries."""
        return RoundCharts(self, summaries)

    def close(self) -> None:
        if self._owned:
            self._drawer.close()

    @property
    def idle_percent(self) -> float:
        return self._drawer.idle_percent

    async def job_png(self, key: JobKey, chart: ChartJob) -> bytes | None:
        """One job's chart drawn at the send (nothing was stored)."""
        return await self.png(("job", key, hash(chart.series)), lambda: self._drawer.job_png(chart))

    async def group_png(self, keys: Sequence[JobKey], charts: Sequence[ChartJob]) -> bytes | None:
        """A grouped message's picture, drawn at the send."""
        key = ("group", tuple(keys), tuple(hash(chart.series) for chart in charts))
        return await self.png(key, lambda: self._drawer.group_png(charts))

    async def png(self, key: tuple[object, ...], draw: Callable[[], Awaitable[bytes | None]]) -> bytes | None:
        """The PNG under `key`: cached, being drawn (shared), or drawn now."""
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        pending = self._drawing.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self._drawing[key] = future
        png: bytes | None = None
        try:
            png = await draw()
        finally:
            # A drawing cancelled with its message leaves those waiting on it without a chart.
            del self._drawing[key]
            future.set_result(png)
        if png is not None:
            self.drawn += 1
        # A chart that could not be drawn is remembered as such: not tried again on every channel.
        self._cache[key] = png
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return png

    async def stored(self, keys: Sequence[JobKey]) -> dict[JobKey, StoredSeries]:
        """The stored series and charts of these jobs: one query per cluster."""
        found: dict[JobKey, StoredSeries] = {}
        for cluster in sorted({c for c, _ in keys}):
            uids = [uid for c, uid in keys if c == cluster]
            for uid, stored in (await self._store.usage.charts_of(cluster, uids)).items():
                found[(cluster, uid)] = stored
        return found


class RoundCharts:
    """One claim's charts: its series and stored charts read once, on the first message that asks."""

    def __init__(self, charts: JobCharts, summaries: Mapping[JobKey, Summary]) -> None:
        self._charts = charts
        self._summaries = summaries
        self._loading: asyncio.Task[dict[JobKey, StoredSeries]] | None = None

    async def for_message(self, keys: Sequence[JobKey]) -> MessageCharts:
        """The series of the message's jobs and its picture (none when no job has a chartable series)."""
        try:
            stored = await self._stored()
        except Exception:
            # The database hiccuped: the message still goes, without pods for its links or a chart.
            log.exception("usage series for %d message job(s) could not be read", len(keys))
            return MessageCharts({})
        mine = {key: stored[key].series for key in keys if key in stored}
        jobs = [self._chart_job(key, mine.get(key)) for key in keys]
        drawable = [job for job in jobs if job is not None]
        if not drawable:
            return MessageCharts(mine)
        idle = self._charts.idle_percent
        if len(keys) == 1:
            (job,) = drawable
            png = stored[keys[0]].chart or await self._charts.job_png(keys[0], job)
            alt = job_alt_text(job, idle_percent=idle)
            name = keys[0][1]
        else:
            png = await self._charts.group_png(keys, drawable)
            alt = group_alt_text(drawable, idle_percent=idle)
            name = "-".join(k[1] for k in keys)
        if png is None:
            return MessageCharts(mine)
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        filename = _UNSAFE_FILENAME.sub("-", drawable[0].ref if len(keys) == 1 else "jobs")[:80]
        image = InlineImage(f"chart-{digest}@inno-notify", png, f"{filename}-gpus.png", alt_text=alt)
        return MessageCharts(mine, (image,))

    def _chart_job(self, key: JobKey, series: UsageSeries | None) -> ChartJob | None:
        if key not in self._summaries:
            return None
        return chart_job(self._summaries[key][0], series)

    async def _stored(self) -> dict[JobKey, StoredSeries]:
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._charts.stored(list(self._summaries)))
        return await asyncio.shield(self._loading)
