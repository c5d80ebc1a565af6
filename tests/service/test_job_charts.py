"""Every channel carries the job's chart: the dispatcher with the real clients and local servers.

The usage round draws a summary's chart in the chart workers (service.job_charts.ChartDrawer) and
stores it with the job's series; the send reads it from there, so a dispatcher that has just taken
over draws nothing. The chart travels inline (CID) in the e-mail's HTML with its alt text, as a
photo with the summary as caption on Telegram, as an upload into the post's thread on Slack. A
grouped message gets one picture for its jobs, drawn at the send, and so is the chart of a job
stored without one; either is drawn once however many channels it goes to. A job without a series
goes as text only, and so does one whose chart cannot be drawn. The workers are processes, one per
core the container may use: they draw the same bytes as a drawing in this process, a hung one is
replaced, and they end when the leader's work stops.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import multiprocessing
import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from email.message import EmailMessage
from pathlib import Path

import pytest

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.channels.job_chart import ChartJob, render_job_png
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store
from inno_notify.domain.model import (
    DeliveryStatus,
    DirectoryUser,
    JobRecord,
    SeriesLine,
    SeriesPod,
    Usage,
    UsageSeries,
)
from inno_notify.domain.routing import Directory, plan_summary
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.job_charts import ChartDrawer, JobCharts, usable_cores
from inno_notify.service.message_composer import MessageParts
from inno_notify.service.ratelimit import UNLIMITED
from tests import stored
from tests.adapters.channels.fake_slack import FakeSlack
from tests.adapters.channels.fake_smtp import RecordingHandler
from tests.adapters.channels.fake_telegram import FakeTelegram

from .support import ALL_CHANNELS, T0, FakeClock, all_rows, finished_job

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

PNG = b"\x89PNG\r\n\x1a\n"
ALICE = DirectoryUser(
    "alice@example.com",
    "Alice",
    slack_user_id="U0ALICE",
    telegram_chat_id=111,
    channels=("telegram", "slack", "email"),
)
LOGS = (
    "https://grafana.example.org/explore?pods={{ pod_regex | urlencode }}&node={{ node }}"
    "&from={{ start }}&to={{ end }}"
)


def series(busy: float = 80.0) -> UsageSeries:
    n = 30
    return UsageSeries(
        step_seconds=120,
        start=T0 - timedelta(hours=1) + timedelta(minutes=2),
        gpu_util=(
            SeriesLine("node-a/0", "pod-0", (busy,) * n),
            SeriesLine("node-a/1", "pod-0", (0.0,) * n),
        ),
        gpu_memory=(SeriesLine("node-a/0", "pod-0", (20.0 * 2**30,) * n),),
        memory=(SeriesLine("pod-0", "pod-0", (8.0 * 2**30,) * n),),
        pods=(SeriesPod("train-x-0", "node-a"),),
    )


async def summarize(
    store: Store,
    job: JobRecord,
    with_series: UsageSeries | None,
    now: datetime = T0,
    *,
    chart: bytes | None = None,
) -> None:
    await stored.upsert_jobs(store, [job])
    rows = plan_summary(job, Directory({ALICE.email: ALICE}, {}), ALL_CHANNELS, now, 30.0).notifications
    usage = Usage(gpu_minutes=120.0, used_gpu_minutes=48.0, gpus_idle=1, gpu_util_mean_percent=40.0)
    await store.jobs.complete_summary(
        job.cluster, job.uid, usage, [], rows, usage_series=with_series, chart=chart
    )


@pytest.fixture
def drawer() -> Iterator[ChartDrawer]:
    """The usage round's chart workers, ended with the test."""
    made = ChartDrawer(workers=1)
    yield made
    made.close()


@pytest.fixture
async def charts(store: Store) -> AsyncIterator[JobCharts]:
    """The dispatcher's charts, with workers of their own (started only if a send draws)."""
    made = JobCharts(store, workers=1)
    yield made
    made.close()


def dispatcher(store: Store, senders: dict[str, Sender], charts: JobCharts, clock: FakeClock) -> Dispatcher:
    renderer = Renderer(dashboard_url="https://inno.example.org", log_url_template=LOGS)
    return Dispatcher(
        store,
        senders,
        renderer,
        DispatchOptions(limits=UNLIMITED, rand=lambda: 0.5),
        clock=clock,
        sleep=clock.sleep,
        parts=MessageParts(charts=charts),
    )


def related_png(mail: EmailMessage) -> tuple[str, bytes]:
    (related,) = [p for p in mail.walk() if p.get_content_type() == "multipart/related"]
    _html, image = related.iter_parts()
    png = image.get_content()
    assert isinstance(png, bytes)
    return str(image["Content-ID"]).strip("<>"), png


async def test_a_job_stored_without_its_chart_gets_it_drawn_at_the_send_once_for_every_channel(
    store: Store,
    senders: dict[str, Sender],
    charts: JobCharts,
    telegram_api: tuple[FakeTelegram, str],
    slack_api: tuple[FakeSlack, str],
    smtp_server: tuple[RecordingHandler, int],
) -> None:
    telegram, slack, smtp = telegram_api[0], slack_api[0], smtp_server[0]
    await summarize(store, finished_job("c1"), series())
    clock = FakeClock(now=T0 + timedelta(seconds=30))
    # Stored without a chart (measured before charts were stored, or its drawing failed then).
    assert await dispatcher(store, senders, charts, clock).run_once(clock.now) == 3
    assert charts.drawn == 1  # three channels, one drawing

    (mail,) = smtp.received
    cid, png = related_png(mail.message)
    assert png.startswith(PNG) and len(png) > 2000
    html = mail.message.get_body(preferencelist=("html",))
    assert html is not None
    page = html.get_content()
    assert f'src="cid:{cid}"' in page
    assert "node-a/1 mean 0 % (idle)" in page and "node-a/0 mean 80 %" in page  # the alt text
    # The log link got the job's pods, node and time range (5 minutes either side).
    start = int((T0 - timedelta(hours=1, minutes=5)).timestamp() * 1000)
    end = int((T0 - timedelta(minutes=1) + timedelta(minutes=5)).timestamp() * 1000)
    assert f"pods=train-x-0&amp;node=node-a&amp;from={start}&amp;to={end}" in page

    ((channel, post),) = slack.posted()
    assert channel == "U0ALICE" and "chart of its GPUs is in the thread" in str(post["blocks"])
    ((asked,),) = [[c.params] for c in slack.calls_to("files.getUploadURLExternal")]
    assert "node-a/1 mean 0 % (idle)" in asked["alt_txt"]
    ((uploaded,),) = [list(slack.uploads.values())]
    assert uploaded == png
    ((completed,),) = [[c.params] for c in slack.calls_to("files.completeUploadExternal")]
    assert completed["thread_ts"] == "1796000000.000001"

    assert telegram.sent() == []  # the summary is the photo's caption
    (photo,) = telegram.photos()
    assert photo.files["photo"][1] == png and "train-c1" in photo.params["caption"]

    rows = await all_rows(store)
    assert all(r.status is DeliveryStatus.SENT for r in rows) and len(rows) == 3


async def test_a_sweep_gets_one_picture_and_a_job_without_series_goes_as_text(
    store: Store,
    senders: dict[str, Sender],
    charts: JobCharts,
    telegram_api: tuple[FakeTelegram, str],
    smtp_server: tuple[RecordingHandler, int],
) -> None:
    telegram, smtp = telegram_api[0], smtp_server[0]
    for i in range(3):
        await summarize(store, finished_job(f"s{i}", group_key="sweep-1"), series(busy=30.0 * i))
    clock = FakeClock(now=T0 + timedelta(seconds=30))
    d = dispatcher(store, senders, charts, clock)
    assert await d.run_once(clock.now) == 9
    assert charts.drawn == 1
    (mail,) = smtp.received
    assert sum(p.get_content_type() == "image/png" for p in mail.message.walk()) == 1
    html = mail.message.get_body(preferencelist=("html",))
    assert html is not None and "face-research/train-s0: 2 GPUs, mean 0 %, 2 idle" in html.get_content()
    (photo,) = telegram.photos()
    assert photo.files["photo"][1].startswith(PNG)

    await summarize(store, finished_job("plain"), None, now=T0 + timedelta(minutes=10))
    clock.now = T0 + timedelta(minutes=11)
    assert await d.run_once(clock.now) == 3
    assert len(telegram.photos()) == 1 and len(telegram.sent()) == 1
    assert sum(p.get_content_type() == "image/png" for p in smtp.received[-1].message.walk()) == 0


async def test_a_new_leader_sends_the_charts_the_usage_round_stored_without_drawing_any(
    store: Store,
    senders: dict[str, Sender],
    drawer: ChartDrawer,
    telegram_api: tuple[FakeTelegram, str],
    slack_api: tuple[FakeSlack, str],
    smtp_server: tuple[RecordingHandler, int],
) -> None:
    job = finished_job("stored")
    # As the usage round does: drawn in the workers, stored with the summary and its series.
    (png,) = await drawer.job_charts([(job, series())])
    assert png is not None and png.startswith(PNG)
    await summarize(store, job, series(), chart=png)
    assert (await store.usage.charts_of(job.cluster, [job.uid]))[job.uid].chart == png

    # A replica that has just taken over: a dispatcher and charts of its own, nothing in memory.
    fresh = JobCharts(store, workers=1)
    try:
        clock = FakeClock(now=T0 + timedelta(seconds=30))
        assert await dispatcher(store, senders, fresh, clock).run_once(clock.now) == 3
        assert fresh.drawn == 0
    finally:
        fresh.close()
    (photo,) = telegram_api[0].photos()
    assert photo.files["photo"][1] == png
    assert list(slack_api[0].uploads.values()) == [png]
    (mail,) = smtp_server[0].received
    assert related_png(mail.message)[1] == png


async def test_a_chart_that_cannot_be_drawn_is_left_out_and_the_summary_goes_without_it(
    store: Store,
    senders: dict[str, Sender],
    drawer: ChartDrawer,
    charts: JobCharts,
    telegram_api: tuple[FakeTelegram, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = finished_job("odd")
    # A grid of zero-second steps: no rule expects it, and the layout divides by it.
    odd = replace(series(), step_seconds=0)
    with caplog.at_level(logging.ERROR, "inno_notify.service.job_charts"):
        assert await drawer.job_charts([(job, odd)]) == [None]  # the usage round stores it without
        await summarize(store, job, odd)
        clock = FakeClock(now=T0 + timedelta(seconds=30))
        assert await dispatcher(store, senders, charts, clock).run_once(clock.now) == 3
    assert charts.drawn == 0 and drawer.drawn == 0
    assert sum("could not be drawn" in r.getMessage() for r in caplog.records) == 2  # once each
    assert telegram_api[0].photos() == [] and len(telegram_api[0].sent()) == 1
    assert all(r.status is DeliveryStatus.SENT for r in await all_rows(store))


def _workers() -> set[int]:
    return {child.pid for child in multiprocessing.active_children() if child.pid is not None}


async def test_the_workers_draw_what_this_process_draws_and_end_when_the_leader_work_stops() -> None:
    before = _workers()
    drawer = ChartDrawer(workers=2)
    job = finished_job("w")
    unmeasured = UsageSeries(pods=(SeriesPod("train-w-0", "node-a"),))
    drawn = await drawer.job_charts([(job, series()), (job, None), (job, unmeasured), (job, series(10.0))])
    assert drawn[1:3] == [None, None] and drawer.drawn == 2
    ref = f"{job.namespace}/{job.name}"
    assert drawn[0] == render_job_png(ChartJob(ref, series(), job.started_at))
    assert drawn[3] == render_job_png(ChartJob(ref, series(10.0), job.started_at))
    assert _workers() - before  # processes, not threads

    stop = asyncio.Event()
    component = asyncio.create_task(drawer.run(stop))  # as the runtime runs it, beside the dispatcher
    stop.set()
    await component
    assert _workers() - before == set()
    assert await drawer.job_charts([(job, series())]) == [None]  # asked after the stop: left out


async def test_a_drawing_that_hangs_is_left_out_and_the_workers_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    drawer = ChartDrawer(workers=1, timeout_seconds=0.5)
    try:
        with caplog.at_level(logging.WARNING, "inno_notify.service.job_charts"):
            assert await drawer.draw(functools.partial(time.sleep, 60)) is None
        assert "took over 0.5 s" in caplog.text
        # The next chart is drawn by fresh workers, not queued behind the hung one.
        (png,) = await drawer.job_charts([(finished_job("after"), series())])
        assert png is not None and png.startswith(PNG)
    finally:
        drawer.close()


@pytest.mark.parametrize(
    ("cpu_max", "limit"),
    [
        (None, None),  # no cgroup v2 file: the cores the process may run on
        ("max 100000\n", None),  # no CPU limit
        ("200000 100000\n", 2),  # limits.cpu: "2"
        ("150000 100000\n", 2),  # "1500m": a second worker for the half core
        ("50000 100000\n", 1),  # "500m": still one worker
        ("garbage\n", None),
    ],
)
def test_the_workers_are_as_many_as_the_cores_the_container_may_use(
    tmp_path: Path, cpu_max: str | None, limit: int | None
) -> None:
    path = tmp_path / "cpu.max"
    if cpu_max is not None:
        path.write_text(cpu_max)
    cores = len(os.sched_getaffinity(0))
    assert usable_cores(path) == (cores if limit is None else min(cores, limit))
