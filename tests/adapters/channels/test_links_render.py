"""Links in messages: the job page signed and expiring, the team page too, and the log and Grafana
templates given the job's pods, nodes and time range."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from inno_notify.adapters.channels.base import MailMessage, TelegramMessage
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.render import Renderer, RenderError, link_variables
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.domain.model import Channel, SeriesPod, UsageSeries
from inno_notify.domain.page_links import JOB_PAGE, TEAM_PAGE, LinkVerdict, PageLinks, verify
from tests.adapters.channels.conftest import sample_job, sample_usage
from tests.adapters.channels.test_digest_render import digest as sample_digest

KEY = b"0123456789abcdef0123"
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
PODS = UsageSeries(pods=(SeriesPod("train-7-abc.x", "gpu-node-3"), SeriesPod("train-7-def", "gpu-node-4")))
GRAFANA = (
    "https://grafana.example.org/d/Oxed_c6Wz/nvidia-dcgm-exporter-dashboard?from={{ start }}&to={{ end }}"
    "&var-instance={{ node }}"
)
LOKI = (
    'https://grafana.example.org/explore?left={{ {"datasource": "loki", "queries": [{"expr": '
    '"{namespace=\\"" ~ namespace ~ "\\", pod=~\\"" ~ pod_regex ~ "\\"}"}], '
    '"range": {"from": start | string, "to": end | string}} | tojson | urlencode }}'
)


def view() -> SummaryView:
    return SummaryView.from_records(sample_job(), sample_usage(), series=PODS)


def test_the_job_link_is_signed_and_opens_its_page_until_it_expires() -> None:
    links = PageLinks("https://inno.example.org", KEY, ttl_seconds=7 * 86400)
    renderer = Renderer(links=links, clock=lambda: NOW)
    message = renderer.render_summary(Channel.TELEGRAM, view())
    assert isinstance(message, TelegramMessage)
    url = renderer.job_dashboard_url(view())
    assert url is not None and f'<a href="{url.replace("&", "&amp;")}">Dashboard</a>' in message.html
    split = urlsplit(url)
    assert split.path == "/jobs/face-research/train-resnet-7"
    q = {k: v[0] for k, v in parse_qs(split.query).items()}
    values = ["face-research", "train-resnet-7", view().uid]
    assert verify(KEY, JOB_PAGE, values, q["exp"], q["sig"], NOW) is LinkVerdict.VALID
    assert verify(KEY, JOB_PAGE, values, q["exp"], q["sig"], NOW + timedelta(days=7)) is LinkVerdict.EXPIRED


def test_the_older_dashboard_url_still_gives_plain_links() -> None:
    renderer = Renderer(dashboard_url="https://old.example.org/")
    assert renderer.job_dashboard_url(view()) == (
        "https://old.example.org/jobs/face-research/train-resnet-7?uid=0b7c5a8e-1111-4c4c-9a9a-2f2f2f2f2f2f"
    )


def test_the_team_link_of_a_digest_is_signed() -> None:
    renderer = DigestRenderer(links=PageLinks("https://inno.example.org", KEY), clock=lambda: NOW)
    digest = sample_digest()
    message = renderer.message(Channel.EMAIL, digest, None)
    assert isinstance(message, MailMessage)
    (url,) = [line.split(": ", 1)[1] for line in message.text.splitlines() if line.startswith("Dashboard:")]
    q = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert urlsplit(url).path == f"/teams/{digest.team}" and q["week"] == digest.week
    assert verify(KEY, TEAM_PAGE, [digest.team, digest.week], q["exp"], q["sig"], NOW) is LinkVerdict.VALID


def test_link_templates_get_pods_nodes_and_the_time_range_five_minutes_around_the_run() -> None:
    variables = link_variables(view())
    job = sample_job()
    assert job.started_at is not None and job.finished_at is not None
    assert variables["pods"] == ["train-7-abc.x", "train-7-def"]
    assert variables["pod_regex"] == "train-7-abc\\\\.x|train-7-def"
    assert variables["nodes"] == ["gpu-node-3", "gpu-node-4"] and variables["node"] == "gpu-node-3"
    assert variables["start"] == int((job.started_at - timedelta(minutes=5)).timestamp() * 1000)
    assert variables["end"] == int((job.finished_at + timedelta(minutes=5)).timestamp() * 1000)
    assert variables["started_ms"] == int(job.started_at.timestamp() * 1000)


def test_documented_grafana_and_loki_examples_render() -> None:
    renderer = Renderer(log_url_template=LOKI, grafana_url_template=GRAFANA)
    grafana = renderer.grafana_url(view())
    start, end = link_variables(view())["start"], link_variables(view())["end"]
    assert grafana == (
        "https://grafana.example.org/d/Oxed_c6Wz/nvidia-dcgm-exporter-dashboard"
        f"?from={start}&to={end}&var-instance=gpu-node-3"
    )
    logs = renderer.log_url(view())
    assert logs is not None
    left = parse_qs(urlsplit(logs).query)["left"][0]
    assert '"expr": "{namespace=\\"face-research\\", pod=~\\"train-7-abc\\\\\\\\.x|train-7-def\\"}"' in left
    assert f'"from": "{start}"' in left
    message = renderer.render_summary(Channel.EMAIL, view())
    assert isinstance(message, MailMessage) and "Grafana:   https://grafana.example.org/d/" in message.text


def test_a_job_without_pods_gets_empty_lists_and_no_node() -> None:
    bare = replace(view(), pods=(), nodes=())
    variables = link_variables(bare)
    assert variables["pods"] == [] and variables["pod_regex"] == "" and variables["node"] is None


def test_a_broken_grafana_template_fails_at_startup() -> None:
    with pytest.raises(RenderError):
        Renderer(grafana_url_template="https://g/{{ start ")
