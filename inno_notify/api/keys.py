"""Typed application keys: what the app factory puts in the app and the views take out."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from aiohttp import web
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db import Store
from inno_notify.adapters.db.directory_cache import CachedDirectory
from inno_notify.adapters.db.pipeline_events import EventLimits
from inno_notify.api.auth import TokenTable
from inno_notify.api.cache import ResultCache
from inno_notify.api.resources import ProvidedDigest
from inno_notify.api.throttle import RecentAccepts
from inno_notify.domain.budgets import BudgetReport
from inno_notify.domain.costs import Rates
from inno_notify.domain.personal_page import PageOpening
from inno_notify.telemetry import Telemetry

# (team, ISO week like "2026-W48" or None for the last complete week) -> the digest, or None when
# the team is unknown. A key "html" holds the page a lead reads; the rest is the JSON document.
DigestProvider = Callable[[str, str | None], Awaitable[ProvidedDigest | None]]
Readiness = Callable[[], Mapping[str, bool]]
# Every configured budget's report as it stands now (service.budgets.Budgets.reports).
BudgetProvider = Callable[[], Awaitable[list[BudgetReport]]]
# (namespace, name, uid or None for the newest run) -> the run's page, or None when there is no such
# run (the runtime passes service.job_pages' job_page_provider and workflow_page_provider).
JobPageProvider = Callable[[str, str, str | None], Awaitable[str | None]]
# How the personal page was opened -> the page (the runtime passes service.me_pages' provider).
MePageProvider = Callable[[PageOpening], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class EventRouting:
    """What routing a pipeline's message needs besides the directory: the channels the service has
    configured and `notify.allowed_email_domains`."""

    channels: frozenset[str] = frozenset({"telegram", "slack", "email"})
    allowed_email_domains: tuple[str, ...] = ()
    # `notify.group_wait_seconds`: events to one recipient within it go out as one message.
    group_wait_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class TelegramWebhook:
    """The bot's webhook (`channels.telegram.updates: webhook`): the secret Telegram must send, and
    the service's handler of one update (service.telegram_updates, given by the runtime)."""

    secret: str
    handle: Callable[[Mapping[str, object]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class SlackRequests:
    """The Slack app's requests over HTTP (`channels.slack.signing_secret`): the secret their
    signatures are made with, and the service's handler of one verified payload (service.slack_bot,
    given by the runtime), called with its kind (`events_api`, `slash_commands`, `interactive`)."""

    signing_secret: str
    handle: Callable[[str, Mapping[str, object]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class MattermostRequests:
    """Mattermost's `/inno` slash command (`channels.mattermost.command_token`): the token each
    request must carry, and the service's handler of one checked form (service.mattermost_commands,
    given by the runtime), which answers the Markdown to show the person (None: who typed it could
    not be found out right now; nothing changed)."""

    token: str
    handle: Callable[[Mapping[str, str]], Awaitable[str | None]]


STORE = web.AppKey("store", Store)
TOKENS = web.AppKey("tokens", TokenTable)
CLOCK: web.AppKey[Callable[[], datetime]] = web.AppKey("clock")
READINESS: web.AppKey[Readiness] = web.AppKey("readiness")
REGISTRY = web.AppKey("registry", CollectorRegistry)
TELEMETRY = web.AppKey("telemetry", Telemetry)
DIGESTS: web.AppKey[DigestProvider | None] = web.AppKey("digests")
JOB_PAGES: web.AppKey[JobPageProvider | None] = web.AppKey("job_pages")
WORKFLOW_PAGES: web.AppKey[JobPageProvider | None] = web.AppKey("workflow_pages")
ME_PAGES: web.AppKey[MePageProvider | None] = web.AppKey("me_pages")
# The key the links in messages are signed with (links.secret_file), for the personal page's CSRF
# tokens (domain.page_links.form_token); None: no links, no forms.
LINK_KEY: web.AppKey[bytes | None] = web.AppKey("link_key")
USAGE_CACHE = web.AppKey("usage_cache", ResultCache)
DIGEST_CACHE = web.AppKey("digest_cache", ResultCache)
# The zone trends count weeks in (digest.timezone), so a team's newest week is its digest's.
TRENDS_TIMEZONE = web.AppKey("trends_timezone", str)
RATES = web.AppKey("rates", Rates)
BUDGETS: web.AppKey[BudgetProvider | None] = web.AppKey("budgets")
BUDGET_CACHE = web.AppKey("budget_cache", ResultCache)
OPENAPI = web.AppKey("openapi", bytes)
REPORTS_WARMUP: web.AppKey[asyncio.Task[None]] = web.AppKey("reports_warmup")
EVENT_ROUTING = web.AppKey("event_routing", EventRouting)
EVENT_LIMITS = web.AppKey("event_limits", EventLimits)
RECENT_EVENTS = web.AppKey("recent_events", RecentAccepts)
# The directory pipeline messages are routed through, read through its version (directory_cache).
DIRECTORY = web.AppKey("directory", CachedDirectory)
# Event posts past the cheap refusals, at most this many at once (EVENT_WRITERS_LIMIT in app.py).
EVENT_WRITERS = web.AppKey("event_writers", asyncio.Semaphore)
TELEGRAM_WEBHOOK = web.AppKey("telegram_webhook", TelegramWebhook)
SLACK_REQUESTS = web.AppKey("slack_requests", SlackRequests)
MATTERMOST_REQUESTS = web.AppKey("mattermost_requests", MattermostRequests)
