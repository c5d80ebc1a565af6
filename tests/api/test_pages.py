"""The pages the links in messages open: a summary's signed link opens its job's page without a
token and shows its figures; a link with a value, its expiry or its signature changed, or past its
expiry, is 401; a viewer's or admin's token opens any page, a pipeline token none (403); the team
page likewise; no page hands out a link that lives longer than the one it was opened with. Real
app, real store, the service's own renderers and providers."""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from html import unescape
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from inno_notify.adapters.channels.base import MailMessage, TelegramMessage
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.pages import JobPageRenderer
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.adapters.db import Store
from inno_notify.domain.model import Channel, Team
from inno_notify.domain.page_links import PageLinks
from inno_notify.service.digest_pages import digest_provider
from inno_notify.service.job_pages import job_page_provider
from tests.adapters.channels.test_digest_render import digest
from tests.pages import sample

from .conftest import serve_api
from .support import NOW, Api

KEY = b"k3y-for-page-links-in-tests-000"
PUBLIC = "https://inno.example.org"
# The job pages with signed links, built once for the module (building the renderer compiles every
# template) as the service builds them once at startup.
PAGES = JobPageRenderer(Renderer(links=PageLinks(PUBLIC, KEY), clock=lambda: NOW))


@pytest.fixture
async def pages(store: Store) -> AsyncIterator[Api]:
    await sample.store_job(store)
    await store.directory.replace_teams([Team("face")])
    async with serve_api(
        store,
        digest_provider(store, "UTC", lambda: NOW, links=PageLinks(PUBLIC, KEY)),
        job_pages=job_page_provider(store, PAGES),
        link_key=KEY,
    ) as served:
        yield served


@functools.cache
def summary_link(at: datetime = NOW) -> str:
    """The job page link of the summary the dispatcher would send now (Telegram's HTML); the same
    for the same time (signed, no nonce), so rendered once per time (a renderer compiles every
    template)."""
    renderer = Renderer(links=PageLinks(PUBLIC, KEY, ttl_seconds=30 * 86400), clock=lambda: at)
    view = SummaryView.from_records(sample.job(), sample.usage(), sample.recommendations())
    message = renderer.render_summary(Channel.TELEGRAM, view)
    assert isinstance(message, TelegramMessage)
    (href,) = [unescape(h) for h in re.findall(r'<a href="([^"]+)">Dashboard</a>', message.html)]
    assert href.startswith(PUBLIC + "/jobs/")
    return href.removeprefix(PUBLIC)


# What a browser asks for when a person follows a link.
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


async def get(api: Api, path_and_query: str, role: str | None = None) -> tuple[int, str, dict[str, str]]:
    async with api.client.get(path_and_query, headers=api.headers(role, BROWSER)) as response:
        return response.status, await response.text(), dict(response.headers)


def with_query(path_and_query: str, **changes: str) -> str:
    split = urlsplit(path_and_query)
    query = {k: v[0] for k, v in parse_qs(split.query).items()}
    query.update(changes)
    return f"{split.path}?{urlencode(query)}"


async def test_a_summarys_link_opens_the_job_page_without_a_token_and_shows_its_figures(pages: Api) -> None:
    status, body, headers = await get(pages, summary_link())
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    text = unescape(re.sub(r"<[^>]+>", " ", body))
    for label, value in (
        ("Exit code", "137 (OOMKilled)"),
        ("Runtime", "3 h 12 min"),
        ("GPU (used / held)", "353 / 768 GPU-min"),
        ("GPU utilization", "46 % mean, 2 idle GPUs"),
        ("Peak RAM", "63.9 GiB of 64 GiB"),
    ):
        assert re.search(rf"{re.escape(label)}\s+{re.escape(value)}", text), label
    assert 'id="chart"' in body and "the kernel killed the trainer" in body
    # Nothing on the page may run or load, and following a link on it sends no Referer (the
    # signed link stays on this page).
    assert headers["Referrer-Policy"] == "no-referrer"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["Cache-Control"] == "private, no-store"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"sig": "A" * 43}, "invalid_link"),
        ({"uid": "another-run"}, "invalid_link"),  # a link to one run opens no other
        ({"exp": "4102444800"}, "invalid_link"),  # a later expiry
        ({"sig": ""}, "unauthorized"),
    ],
)
async def test_a_changed_link_is_401(pages: Api, change: dict[str, str], code: str) -> None:
    status, body, headers = await get(pages, with_query(summary_link(), **change))
    assert status == 401 and code in body
    assert headers["Content-Type"].startswith("text/html")  # a person reads it
    assert headers["WWW-Authenticate"].startswith("Bearer")


async def test_an_expired_link_is_401(pages: Api) -> None:
    old = summary_link(at=NOW - timedelta(days=31))
    status, body, _ = await get(pages, old)
    assert status == 401 and "link_expired" in body and "has expired" in body


async def test_a_link_to_another_page_does_not_open_this_one(pages: Api) -> None:
    split = urlsplit(summary_link())
    elsewhere = f"/jobs/face-research/another-job?{split.query}"
    assert (await get(pages, elsewhere))[0] == 401


@pytest.mark.parametrize("role", ["admin", "viewer"])
async def test_a_readers_token_opens_the_pages(pages: Api, role: str) -> None:
    status, body, _ = await get(pages, f"/jobs/face-research/train-resnet-7?uid={sample.UID}", role)
    assert status == 200 and "137 (OOMKilled)" in body
    assert (await get(pages, "/teams/face?week=2026-W48", role))[0] == 200
    # Any token still opens it when the link beside it is bad.
    assert (await get(pages, with_query(summary_link(), sig="B" * 43), role))[0] == 200


@pytest.mark.parametrize(
    "path", [f"/jobs/face-research/train-resnet-7?uid={sample.UID}", "/teams/face?week=2026-W48"]
)
async def test_a_pipeline_token_opens_no_page(pages: Api, path: str) -> None:
    """The token most likely to leak (it sits in CI and DAG definitions) reads no job or team: 403,
    as on the same data's JSON (issue 29)."""
    status, body, headers = await get(pages, path, "pipeline")
    assert status == 403 and "forbidden" in body and "137 (OOMKilled)" not in body
    assert headers["Content-Type"].startswith("text/html")
    # A signed link still opens its page, whoever else's token rides along.
    assert (await get(pages, summary_link(), "pipeline"))[0] == 200


def signed_expiries(body: str) -> list[int]:
    """The expiry of every signed link on a page."""
    hrefs = [unescape(h) for h in re.findall(r'href="([^"]+)"', body)]
    return [int(parse_qs(urlsplit(h).query)["exp"][0]) for h in hrefs if "exp=" in h]


async def test_no_page_mints_a_link_that_outlives_the_one_it_was_opened_with(pages: Api) -> None:
    """A team link about to expire opened the page, which carried a fresh 30-day link to itself
    (issue 29): every signed link on a page expires no later than the link that opened it."""
    short = PageLinks(PUBLIC, KEY, ttl_seconds=60)
    for link in (
        short.team("face", "2026-W48", NOW),
        short.job("face-research", "train-resnet-7", sample.UID, NOW),
    ):
        assert link is not None
        opened_with = int(parse_qs(urlsplit(link).query)["exp"][0])
        status, body, _ = await get(pages, link.removeprefix(PUBLIC))
        assert status == 200
        assert all(exp <= opened_with for exp in signed_expiries(body)), link
    # Opened with a token, likewise nothing that opens without one.
    for path in ("/teams/face?week=2026-W48", f"/jobs/face-research/train-resnet-7?uid={sample.UID}"):
        status, body, _ = await get(pages, path, "viewer")
        assert status == 200 and signed_expiries(body) == []


async def test_without_a_link_or_a_token_a_page_is_401_and_an_unknown_job_404(pages: Api) -> None:
    assert (await get(pages, "/jobs/face-research/train-resnet-7"))[0] == 401
    status, body, headers = await get(pages, "/jobs/face-research/no-such-job", "viewer")
    assert status == 404 and "job_not_found" in body and headers["Content-Type"].startswith("text/html")


async def test_the_team_page_opens_with_the_digests_signed_link(pages: Api) -> None:
    renderer = DigestRenderer(links=PageLinks(PUBLIC, KEY), clock=lambda: NOW)
    message = renderer.message(Channel.EMAIL, digest(), None)  # the face team's digest of 2026-W48
    assert isinstance(message, MailMessage)
    (digest_link,) = [
        line.split(": ", 1)[1] for line in message.text.splitlines() if line.startswith("Dashboard:")
    ]
    status, body, _ = await get(pages, digest_link.removeprefix(PUBLIC))
    assert status == 200 and "GPU digest — face, 2026-W48" in body
    assert (await get(pages, with_query(digest_link.removeprefix(PUBLIC), week="2026-W47")))[0] == 401


async def test_without_a_key_no_link_opens_a_page(store: Store) -> None:
    await sample.store_job(store)
    renderer = Renderer(links=PageLinks(PUBLIC, None), clock=lambda: NOW)
    async with serve_api(store, job_pages=job_page_provider(store, JobPageRenderer(renderer))) as api:
        assert (await get(api, summary_link()))[0] == 401


async def test_a_script_gets_the_apis_json_errors(pages: Api) -> None:
    status, body, _ = await pages.call("GET", with_query(summary_link(), sig="A" * 43), None)
    assert status == 401 and body["error"]["code"] == "invalid_link"
