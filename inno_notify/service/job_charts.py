"""The charts of a dispatch round's summaries: series read once per round, PNGs drawn off the loop.

The dispatcher asks, per message, for the series of its jobs (the view needs their pods and nodes
for the log and Grafana links) and the picture that goes with it: one job's chart, or for a
grouped message one panel per job. `JobCharts` keeps the costs off the send path:

- the series of every summary in a claim are read with one query per cluster, the first time a
  message of the round asks (`RoundCharts`), not one per message;
- PNGs are drawn in a small thread pool (Pillow's drawing and zlib run outside the GIL for much of
  the time, and the event loop keeps sending meanwhile), bounded so that charts never take more
  than `workers` threads;
- a drawn PNG is cached per job and series (LRU, `cache_size`), and a chart being drawn is
  shared, so a job summarized on three channels is drawn once;
- the usage service, which runs in the same (leader) process, asks for each job's chart as soon
  as the job is measured (`draw_ahead`): it is drawn in the background while the summary waits
  out `notify.group_wait_seconds`, and the send finds it in the cache. A replica that takes over
  (or a restart) starts with an empty cache and draws at the send.

A chart that cannot be drawn (a bug, data no rule expected) is logged and left out: the message
goes without it, never later because of it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

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
from inno_notify.domain.model import JobRecord, UsageSeries

log = logging.getLogger(__name__)

JobKey = tuple[str, str]  # (cluster, job uid)
DEFAULT_WORKERS = 2
# Enough for a round of measured jobs to wait in the cache for their sends (a chart is ~20 KB).
DEFAULT_CACHE_SIZE = 1024
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class MessageCharts:
    """What one message gets: its jobs' series (by job key) and its picture, if any."""

    series: Mapping[JobKey, UsageSeries]
    images: tuple[InlineImage, ...] = ()


class JobCharts:
    """Draws the charts of summaries for the dispatcher; one per dispatcher, shared by its rounds."""

    def __init__(
        self,
        store: Store,
        *,
        idle_percent: float = 5.0,
        workers: int = DEFAULT_WORKERS,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self._store = store
        self._idle = idle_percent
        self._executor = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="chart")
        self._cache: OrderedDict[tuple[object, ...], bytes | None] = OrderedDict()
        self._cache_size = max(1, cache_size)
        self._drawing: dict[tuple[object, ...], asyncio.Future[bytes | None]] = {}
        self._ahead: set[asyncio.Future[bytes | None]] = set()
        self.drawn = 0  # PNGs actually drawn (not taken from the cache): tests and benchmarks read it

    def for_round(self, summaries: Mapping[JobKey, Summary]) -> RoundCharts:
        """The charts of one claim's summaries."""
        return RoundCharts(self, summaries)

    def close(self) -> None:
        for task in self._ahead:
            task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def draw_ahead(self, job: JobRecord, series: UsageSeries) -> None:
        """Starts drawing the chart the job's summary will carry (the usage service calls it when the
        job is measured); returns at once. Nothing happens for a series without a chart."""
        if not chartable(series):
            return
        chart = ChartJob(f"{job.namespace}/{job.name}", series, job.started_at)
        task = asyncio.ensure_future(self.job_png((job.cluster, job.uid), chart))
        self._ahead.add(task)
        task.add_done_callback(self._ahead.discard)

    async def drawn_ahead(self) -> None:
        """Waits for the charts being drawn ahead (tests and benchmarks)."""
        while self._ahead:
            await asyncio.gather(*self._ahead, return_exceptions=True)

    async def job_png(self, key: JobKey, chart: ChartJob) -> bytes | None:
        """One job's chart, as its summary carries it."""
        idle = self._idle
        draw = functools.partial(render_job_png, chart, idle_percent=idle)
        return await self.png(("job", key, hash(chart.series), idle), draw)

    async def png(self, key: tuple[object, ...], draw: Callable[[], bytes | None]) -> bytes | None:
        """The PNG under `key`: cached, being drawn (shared), or drawn now in the pool."""
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        pending = self._drawing.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes | None] = loop.create_future()
        self._drawing[key] = future
        try:
            png = await loop.run_in_executor(self._executor, draw)
            self.drawn += 1
        except Exception:
            log.exception("a chart could not be drawn; the message goes without it")
            png = None
        finally:
            del self._drawing[key]
        future.set_result(png)
        self._cache[key] = png
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return png

    @property
    def idle_percent(self) -> float:
        return self._idle

    async def series_of(self, keys: Sequence[JobKey]) -> dict[JobKey, UsageSeries]:
        found: dict[JobKey, UsageSeries] = {}
        for cluster in sorted({c for c, _ in keys}):
            uids = [uid for c, uid in keys if c == cluster]
            for uid, series in (await self._store.usage.series_of(cluster, uids)).items():
                found[(cluster, uid)] = series
        return found


class RoundCharts:
    """One claim's charts: its series read once, on the first message that asks."""

    def __init__(self, charts: JobCharts, summaries: Mapping[JobKey, Summary]) -> None:
        self._charts = charts
        self._summaries = summaries
        self._loading: asyncio.Task[dict[JobKey, UsageSeries]] | None = None

    async def for_message(self, keys: Sequence[JobKey]) -> MessageCharts:
        """The series of the message's jobs and its picture (none when no job has a chartable series)."""
        try:
            series = await self._series()
        except Exception:
            # The database hiccuped: the message still goes, without pods for its links or a chart.
            log.exception("usage series for %d message job(s) could not be read", len(keys))
            return MessageCharts({})
        mine = {key: series[key] for key in keys if key in series}
        jobs = [self._chart_job(key, mine.get(key)) for key in keys]
        drawable = [job for job in jobs if job is not None]
        if not drawable:
            return MessageCharts(mine)
        idle = self._charts.idle_percent
        if len(keys) == 1:
            (job,) = drawable
            png = await self._charts.job_png(keys[0], job)
            alt = job_alt_text(job, idle_percent=idle)
            name = keys[0][1]
        else:
            key = ("group", tuple((k, hash(mine.get(k))) for k in keys), idle)
            png = await self._charts.png(
                key, functools.partial(render_group_png, drawable, idle_percent=idle)
            )
            alt = group_alt_text(drawable, idle_percent=idle)
            name = "-".join(k[1] for k in keys)
        if png is None:
            return MessageCharts(mine)
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        filename = _UNSAFE_FILENAME.sub("-", drawable[0].ref if len(keys) == 1 else "jobs")[:80]
        image = InlineImage(f"chart-{digest}@inno-notify", png, f"{filename}-gpus.png", alt_text=alt)
        return MessageCharts(mine, (image,))

    def _chart_job(self, key: JobKey, series: UsageSeries | None) -> ChartJob | None:
        if series is None or not chartable(series) or key not in self._summaries:
            return None
        job = self._summaries[key][0]
        return ChartJob(f"{job.namespace}/{job.name}", series, job.started_at)

    async def _series(self) -> dict[JobKey, UsageSeries]:
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._charts.series_of(list(self._summaries)))
        return await asyncio.shield(self._loading)
