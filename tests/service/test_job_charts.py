"""Every channel carries the job's chart: the dispatcher with the real clients and local servers.

The summary's chart is drawn from the usage series stored with the job: inline (CID) in the
e-mail's HTML with its alt text, a photo with the summary as caption on Telegram, an upload into
the post's thread on Slack. A grouped message gets one picture for its jobs. A job without a
series goes as text only; a chart is drawn once per job however many channels it goes to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from email.message import EmailMessage

import pytest

from inno_notify.adapters.channels.base import Sender
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
from inno_notify.domain.routing import plan_summary
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.job_charts import JobCharts
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
    store: Store, job: JobRecord, with_series: UsageSeries | None, now: datetime = T0
) -> None:
    await stored.upsert_jobs(store, [job])
    rows = plan_summary(job, {ALICE.email: ALICE}, {}, ALL_CHANNELS, now, 30.0).notifications
    usage = Usage(gpu_minutes=120.0, used_gpu_minutes=48.0, gpus_idle=1, gpu_util_mean_percent=40.0)
    await store.jobs.complete_summary(job.cluster, job.uid, usage, [], rows, usage_series=with_series)


@pytest.fixture
async def charts(store: Store) -> AsyncIterator[JobCharts]:
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


async def test_each_channel_carries_the_jobs_chart_drawn_once(
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


async def test_a_chart_drawn_when_the_job_was_measured_is_not_drawn_again_at_the_send(
    store: Store,
    senders: dict[str, Sender],
    charts: JobCharts,
    telegram_api: tuple[FakeTelegram, str],
) -> None:
    job = finished_job("ahead")
    await summarize(store, job, series())
    charts.draw_ahead(job, series())
    await charts.drawn_ahead()
    assert charts.drawn == 1
    clock = FakeClock(now=T0 + timedelta(seconds=30))
    # The series read back from the database is the one drawn from: the send finds the chart.
    assert await dispatcher(store, senders, charts, clock).run_once(clock.now) == 3
    assert charts.drawn == 1
    (photo,) = telegram_api[0].photos()
    assert photo.files["photo"][1].startswith(PNG)
