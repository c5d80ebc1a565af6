"""Every link in every message the demo sends opens its page, in headless Chromium, without a login.

The demo plays its workload (job summaries, a grouped sweep, an Argo and an Airflow workflow
summary, a model serving, idle nudges, a PyTorchJob) with signed links and e-mails every message.
The demo sends e-mail only, and no digest: so every message it sent is sent once more through the
service's dispatcher (runtime.build_dispatcher, the demo's settings) on Slack and Telegram, and each
team's weekly digest on all three channels, to senders that keep what they are given. Every http(s)
link of all of it (e-mails' text and HTML parts, Telegram's HTML, Slack's mrkdwn, the digest text
the demo prints) is collected; the ones under `links.public_url` are opened in Chromium (over the
DevTools protocol, which reports each document's status) against the service's own API component
(runtime.api_component, what `serve` runs) on the demo's database with the demo's key, and must
answer 200 with a page naming their run, team or person (every message's footer links its
recipient's own page, /me). A link to any other host is a system the demo does
not run: it must be one of OUTSIDE, with the reason it is not followed, so a new kind of outside
link fails here until someone names it.
"""

from __future__ import annotations

import asyncio
import email
import io
import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import default
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import aiohttp
import pytest
from aiohttp.test_utils import unused_port
from prometheus_client import CollectorRegistry
from rich.console import Console

from inno_notify.adapters.channels.base import (
    MailMessage,
    MattermostMessage,
    Recipient,
    RenderedMessage,
    SlackMessage,
    TelegramMessage,
    WebhookMessage,
)
from inno_notify.adapters.db import Store
from inno_notify.demo import PUBLIC_URL, DemoResult, demo_settings, run_demo
from inno_notify.domain.model import Channel, DeliveryStatus, Notification, NotificationKind
from inno_notify.domain.weeks import week_of
from inno_notify.runtime import api_component, build_dispatcher
from inno_notify.service.digest import digest_dedup_key
from inno_notify.settings import ApiSettings, ApiToken, Settings
from inno_notify.telemetry import Telemetry
from tests.pages.browser import CHROMIUM, Browser
from tests.waiting import eventually

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (Debian chromium)"),
]

# A past week, as tests/test_demo.py plays it: the sweep's three summaries share one e-mail.
START = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
# Hosts of links to systems the demo does not run, and why each is not followed.
OUTSIDE = {
    "resnet-serve.face-research.example.org": "the served model's own endpoint (KServe status.url)",
}
# Ends where text, HTML or Slack's `<url|title>` end a URL.
URL = re.compile(r"https?://[^\s<>\"'|)\]]+")


@dataclass(frozen=True, slots=True)
class Link:
    url: str
    # Which message carried it: the file and subject, and the part.
    origin: str


class _Anchors(HTMLParser):
    """Every href and src of an HTML part, and the URLs written in its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("href", "src") and v and URL.match(v)]

    def handle_data(self, data: str) -> None:
        self.urls += URL.findall(data)


def links_of_mail(path: Path) -> Iterator[Link]:
    message = email.message_from_bytes(path.read_bytes(), policy=default)
    assert isinstance(message, EmailMessage)
    for part in message.walk():
        kind = part.get_content_type()
        if kind not in ("text/plain", "text/html"):
            continue
        body = part.get_content()
        if kind == "text/html":
            anchors = _Anchors()
            anchors.feed(body)
            urls = anchors.urls
        else:
            urls = URL.findall(body)
        for url in dict.fromkeys(urls):
            yield Link(url, f"{path.name} {message['Subject']!r} ({kind})")


def links_of_html(html: str, origin: str) -> list[Link]:
    anchors = _Anchors()
    anchors.feed(html)
    return [Link(url, origin) for url in dict.fromkeys(anchors.urls)]


def slack_unescaped(text: str) -> str:
    """What Slack makes of its three escapes (the only ones it knows) where it shows or follows text."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


class Keeper:
    """A sender of any channel that keeps what it is given."""

    def __init__(self, channel: str) -> None:
        self.channel = channel
        self.sent: list[tuple[Recipient, RenderedMessage]] = []

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        self.sent.append((recipient, message))
        return f"{self.channel}-{len(self.sent)}"

    async def aclose(self) -> None:
        return None

    def links(self) -> Iterator[Link]:
        for i, (recipient, message) in enumerate(self.sent, 1):
            origin = f"{self.channel} message {i} to {recipient.email}"
            if isinstance(message, MailMessage):
                origin += f" {message.subject!r}"
                yield from (
                    Link(u, f"{origin} (text/plain)") for u in dict.fromkeys(URL.findall(message.text))
                )
                yield from links_of_html(message.html, f"{origin} (text/html)")
            elif isinstance(message, TelegramMessage):
                yield from links_of_html(message.html, f"{origin} {message.html.splitlines()[0]!r}")
            elif isinstance(message, SlackMessage):
                mrkdwn = json.dumps([message.text, *message.blocks])
                for url in dict.fromkeys(URL.findall(mrkdwn)):
                    yield Link(slack_unescaped(url), f"{origin} {message.text!r}")
            elif isinstance(message, MattermostMessage):
                first = message.markdown.splitlines()[0]
                urls = dict.fromkeys(URL.findall(message.markdown))
                yield from (Link(u, f"{origin} {first!r}") for u in urls)
            elif isinstance(message, WebhookMessage):
                title = message.title
                yield from (Link(link.url, f"{origin} {title!r} ({link.rel})") for link in message.links)


async def sent_again(settings: Settings, result: DemoResult) -> list[Link]:
    """Every message the demo sent, sent again on Slack and Telegram, and each team's digest of the
    demo's week on every channel, through the service's dispatcher: their links."""
    now = datetime.now(UTC)
    week = week_of(result.workload.start, "UTC")
    store = Store.from_url(result.database_url)
    try:
        sent, _ = await store.outbox.list_notifications(DeliveryStatus.SENT, limit=500)
        again = [
            replace(
                row,
                dedup_key=f"{row.dedup_key}/again/{channel.value}",
                channel=channel,
                status=DeliveryStatus.PENDING,
                provider_message_id=None,
                sent_at=None,
                id=None,
            )
            for row in sent
            for channel in (Channel.SLACK, Channel.TELEGRAM)
        ]
        digests = [
            Notification(
                dedup_key=digest_dedup_key(team.name, week, channel.value, team.lead),
                kind=NotificationKind.DIGEST,
                channel=channel,
                recipient=team.lead,
                due_at=now,
                created_at=now,
                payload={"team": team.name, "week": week, "timezone": "UTC"},
            )
            for team in result.workload.teams
            for channel in Channel
        ]
        await store.outbox.enqueue([*again, *digests])
        keepers = {channel.value: Keeper(channel.value) for channel in Channel}
        dispatcher = build_dispatcher(settings, store, keepers, clock=lambda: now)
        while await dispatcher.run_once(now):
            pass
        pending, _ = await store.outbox.list_notifications(DeliveryStatus.PENDING, limit=1)
        assert not pending, "a message was not sent again"
    finally:
        await store.close()
    assert {len(k.sent) > 0 for k in keepers.values()} == {True}
    return [link for keeper in keepers.values() for link in keeper.links()]


def local(url: str, port: int) -> str:
    """The link with the public URL's origin replaced by the local API's."""
    split = urlsplit(url)
    return split._replace(scheme="http", netloc=f"127.0.0.1:{port}").geturl()


def names_its_page(url: str, html: str) -> str | None:
    """What the page must name for the link to have opened the right one: the run (its name and uid)
    or the team; None when it does."""
    path, query = urlsplit(url).path, parse_qs(urlsplit(url).query)
    text = unescape(re.sub(r"<[^>]+>", " ", html))
    if path.startswith(("/jobs/", "/workflows/")):
        wanted = [unquote(path.split("/")[3]), *query.get("uid", [])]
    elif path.startswith("/teams/"):
        wanted = [f"GPU digest — {unquote(path.split('/')[2])}, {query['week'][0]}"]
    elif path == "/me":
        wanted = [*query["email"], "Runs", "Your settings"]
    else:
        return f"no page kind known for {path}"
    missing = [w for w in wanted if w not in text]
    return f"the page does not name {missing}" if missing else None


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[int]:
    """The service's API component over the demo's database, on a free port; its port."""
    port = unused_port()
    # A token exists (the API refuses to start without one); no request here uses it.
    token = ApiToken(name="admin", sha256="0" * 64, role="admin", teams=None, recipients=None)
    served = settings.model_copy(update={"api": ApiSettings(listen=f"127.0.0.1:{port}", tokens=(token,))})
    run = api_component(served, Telemetry.create(CollectorRegistry()), lambda: {})
    assert run is not None
    stop = asyncio.Event()
    task = asyncio.create_task(run(stop))

    async def up() -> bool:
        assert not task.done(), "the API component ended"
        try:
            async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz"):
                return True
        except aiohttp.ClientConnectionError:
            return False

    await eventually(up, within=30, what="the API listening")
    try:
        yield port
    finally:
        stop.set()
        await task


@pytest.fixture
async def demo(tmp_path: Path) -> tuple[Settings, list[Link]]:
    key = tmp_path / "link-key"
    key.write_text("k3y-that-signs-the-demo-links-0123456789")
    result = await run_demo(
        jobs=10,
        speed=1000,
        out=tmp_path / "demo",
        console=Console(file=io.StringIO(), width=100),
        start=START,
        timeout_seconds=120,
        training=True,
        links_secret_file=key,
    )
    settings = demo_settings(result.workload, result.database_url, key)
    found = [link for mail in sorted((result.out / "mail").glob("*.eml")) for link in links_of_mail(mail)]
    for team, (text, _) in result.digests.items():
        found += [
            Link(u, f"the demo's weekly digest of team {team} (text)")
            for u in dict.fromkeys(URL.findall(text))
        ]
    return settings, found + await sent_again(settings, result)


@pytest.fixture
def settings(demo: tuple[Settings, list[Link]]) -> Settings:
    return demo[0]


async def test_every_link_in_every_message_of_the_demo_opens_its_page(
    demo: tuple[Settings, list[Link]], api: int, tmp_path: Path
) -> None:
    _, links = demo
    public = urlsplit(PUBLIC_URL).hostname
    ours = [link for link in links if urlsplit(link.url).hostname == public]
    outside = [link for link in links if urlsplit(link.url).hostname != public]
    unknown = [
        f"{link.url} (from {link.origin})" for link in outside if urlsplit(link.url).hostname not in OUTSIDE
    ]
    assert not unknown, "links to hosts that are neither the public URL nor named in OUTSIDE:\n" + "\n".join(
        unknown
    )
    # The outside links are the ones named, no fewer (OUTSIDE stays true).
    assert {urlsplit(link.url).hostname for link in outside} == set(OUTSIDE)
    # Every message kind that carries a page link was played and carried one.
    paths = {urlsplit(link.url).path.split("/")[1] for link in ours}
    assert paths == {"jobs", "teams", "workflows", "me"}
    # Every channel the demo sends on (Telegram, Slack, e-mail) ends its messages with the link to
    # their recipient's own page.
    for channel in (Channel.TELEGRAM, Channel.SLACK, Channel.EMAIL):
        assert any(
            urlsplit(link.url).path == "/me" and link.origin.startswith(f"{channel.value} ") for link in ours
        ), f"no {channel.value} message linked its recipient's own page"
    assert any("jobs finished" in link.origin for link in ours), "no grouped summary linked its jobs"
    # The PyTorchJob's page (sim.workload.demo_training_run, "asr-ddp-…"), from its own summary or,
    # when a loaded machine let others finish within its group wait, from a grouped one.
    run_pages = [urlsplit(link.url).path.split("/") for link in ours]
    assert any(p[1] == "jobs" and p[3].startswith("asr-ddp-") for p in run_pages if len(p) > 3), (
        "no summary linked the PyTorchJob's page"
    )
    workflow_links = [link for link in ours if urlsplit(link.url).path.startswith("/workflows/")]
    assert any("Airflow" in link.origin for link in workflow_links), "the DAG run's summary linked no page"
    assert any("Argo" in link.origin for link in workflow_links), "the Argo summary linked no page"
    for channel in Channel:
        assert any(link.origin.startswith(f"{channel.value} ") for link in ours), f"no {channel.value} links"

    failures = []
    async with Browser(tmp_path / "profile") as browser:
        for url in dict.fromkeys(link.url for link in ours):
            opened = await browser.open(local(url, api))
            wrong = (
                opened.error
                or (f"answered {opened.status}" if opened.status != 200 else None)
                or names_its_page(url, opened.html)
            )
            if wrong:
                origins = "; ".join(link.origin for link in ours if link.url == url)
                failures.append(f"{url}\n  from {origins}\n  {wrong}")
    assert not failures, "links that do not open their page:\n" + "\n".join(failures)
