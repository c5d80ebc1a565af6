"""The app factory: builds the aiohttp application of the admin REST API from what it is given.

Nothing here reads a global: the store, the API settings, the service's readiness and the metrics
registry are passed in by the composition root (runtime.py) or a test. The app refuses to be built
without tokens, so a deployment can never expose the API unauthenticated by forgetting them; an
empty `api.listen` is how the API is switched off (see `api_enabled`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db import Store, create_engine
from inno_notify.adapters.db.directory_cache import CachedDirectory
from inno_notify.adapters.db.engine import (
    DEFAULT_STATEMENT_TIMEOUT_SECONDS,
    POSTGRES_MAX_OVERFLOW,
    POSTGRES_POOL_SIZE,
)
from inno_notify.adapters.db.pipeline_events import EventLimits
from inno_notify.api import keys, openapi, routes
from inno_notify.api.auth import ApiConfigError, SignedPages, TokenTable, auth_middleware
from inno_notify.api.cache import ResultCache
from inno_notify.api.deadline import HANDLER_TIMEOUT_SECONDS, deadline_middleware
from inno_notify.api.errors import error_middleware
from inno_notify.api.throttle import RecentAccepts
from inno_notify.api.views import budgets as budget_views
from inno_notify.api.views import mattermost, slack, telegram, usage
from inno_notify.domain.costs import Rates
from inno_notify.settings import ApiSettings
from inno_notify.telemetry import Telemetry

__all__ = ["ApiConfigError", "api_enabled", "create_api_store", "create_app"]

log = logging.getLogger("inno_notify.api")

USAGE_FRESH_SECONDS = 30.0
USAGE_MAX_STALE_SECONDS = 300.0
# A team's digest changes only as its late jobs get measured; the page with its chart is dear to build.
DIGEST_FRESH_SECONDS = 60.0
DIGEST_MAX_STALE_SECONDS = 300.0
DIGEST_MAX_KEYS = 128
DIGEST_MAX_INFLIGHT = 4
# Pipeline messages past the cheap refusals that may use the database at once (each holds a pooled
# connection through a locked write): a flood of posts queues here, in memory, and every other
# request still finds a free connection in the pool (docs/hardening.md).
EVENT_WRITERS_LIMIT = max(1, POSTGRES_POOL_SIZE // 2)
# The API's connections: as many as the service's pool may hold at most, all kept once opened. With
# overflow connections, a burst of requests (a stall of a few tens of milliseconds on a busy host
# makes one) opened connections only to close them when they came back, each new one costing the
# API and Postgres CPU just when they had none to spare (docs/api.md). A request beyond them waits
# for a connection to come back instead, within the handler's limit.
API_POOL_SIZE = POSTGRES_POOL_SIZE + POSTGRES_MAX_OVERFLOW


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _always_ready() -> Mapping[str, bool]:
    return {}


def api_enabled(settings: ApiSettings) -> bool:
    """False when `api.listen` is empty: the API is switched off and needs no tokens."""
    return bool(settings.listen)


def create_api_store(
    database_url: str,
    statement_timeout_seconds: float | None = DEFAULT_STATEMENT_TIMEOUT_SECONDS,
    handler_timeout_seconds: float = HANDLER_TIMEOUT_SECONDS,
) -> Store:
    """A store of the API's own, without the pool's liveness ping (one round trip per request
    saved on the hottest path) and with API_POOL_SIZE connections kept, never more; pass it to
    create_app with `close_store=True`.

    Its statements stop at the handler's time limit at the latest (sooner when
    `statement_timeout_seconds`, the service's setting, is shorter; 0 or None: no statement limit,
    the handler's cancellation alone ends them)."""
    timeout = None
    if statement_timeout_seconds:
        timeout = min(statement_timeout_seconds, handler_timeout_seconds)
    engine = create_engine(
        database_url,
        pool_size=API_POOL_SIZE,
        max_overflow=0,
        pre_ping=False,
        statement_timeout_seconds=timeout,
    )
    return Store(engine)


def create_app(
    store: Store,
    settings: ApiSettings,
    readiness: keys.Readiness = _always_ready,
    metrics_registry: CollectorRegistry | None = None,
    *,
    telemetry: Telemetry | None = None,
    digest_provider: keys.DigestProvider | None = None,
    clock: Callable[[], datetime] = _utc_now,
    monotonic: Callable[[], float] = time.monotonic,
    usage_fresh_seconds: float = USAGE_FRESH_SECONDS,
    digest_fresh_seconds: float = DIGEST_FRESH_SECONDS,
    handler_timeout_seconds: float = HANDLER_TIMEOUT_SECONDS,
    close_store: bool = False,
    warm_reports: bool = False,
    event_routing: keys.EventRouting | None = None,
    job_pages: keys.JobPageProvider | None = None,
    workflow_pages: keys.JobPageProvider | None = None,
    me_pages: keys.MePageProvider | None = None,
    link_key: bytes | None = None,
    telegram_webhook: keys.TelegramWebhook | None = None,
    slack_requests: keys.SlackRequests | None = None,
    mattermost_requests: keys.MattermostRequests | None = None,
    trends_timezone: str = "UTC",
    rates: Rates | None = None,
    budgets: keys.BudgetProvider | None = None,
) -> web.Application:
    """The REST API application.

    `readiness` reports the service's parts (e.g. {"watchers_synced": True, "dispatcher_alive":
    True}); /readyz adds the database. `metrics_registry` is what /metrics serves (default: the
    `telemetry`'s registry, else a new one with a Telemetry on it); the API times its requests on
    `api_request_seconds` of the telemetry, when it has one. With `close_store` the app disposes of the
    store's engine when it shuts down (when the app is the store's only user). With `warm_reports`
    the usage report of all time and every budget's report are computed in the background as the
    app starts (its task is `app[keys.REPORTS_WARMUP]`), so that no request waits on the first,
    slowest computation; it is off by default because an app built before its data (tests, fresh
    demos) would cache nothing.
    Digests from `digest_provider` are cached per (team, week) for `digest_fresh_seconds`. A
    handler still running after `handler_timeout_seconds` is cancelled and answers 503.
    `event_routing` is what pipeline messages (POST /api/v1/events) are routed with besides the
    directory (the runtime passes the configured channels and the group wait; default: every
    channel, no wait); `settings.events` limits them.
    `job_pages` and `workflow_pages` render the run pages (GET /jobs/…, /workflows/…; the team pages
    come from `digest_provider`); `me_pages` renders the personal page (GET /me);
    `link_key` is the key the links in messages are signed with (`links.secret_file`): a request
    for a page with a link it signed needs no token (auth.SignedPages), and the personal page's
    forms carry CSRF tokens made with it.
    `telegram_webhook`, when the bot takes its updates by webhook, routes POST /telegram/webhook,
    which takes Telegram's secret header instead of a token (views/telegram.py); it is Telegram's
    interface, not a resource of this API, so it is no row of routes.ENDPOINTS.
    `slack_requests`, when the Slack app is answered over HTTP, routes POST /slack/events,
    /slack/commands and /slack/interactive alike: Slack's signature instead of a token
    (views/slack.py).
    `mattermost_requests`, when the Mattermost slash command is configured, routes POST
    /mattermost/commands: the command's token instead of ours (views/mattermost.py).
    `trends_timezone` is the zone GET /api/v1/trends counts weeks in (the runtime passes
    digest.timezone). `rates` (`accounting.rates`) price the jobs and usage groups it serves;
    `budgets` (service.budgets) reports what GET /api/v1/budgets answers (None: no budgets).

    Raises ApiConfigError when no tokens are configured.
    """
    tokens = TokenTable(settings.tokens)
    if metrics_registry is None:
        if telemetry is None:
            telemetry = Telemetry.create(CollectorRegistry())
        metrics_registry = telemetry.registry
    registry = metrics_registry

    app = web.Application(
        middlewares=[
            error_middleware,
            deadline_middleware(handler_timeout_seconds),
            auth_middleware(
                tokens,
                routes.open_paths()
                | (telegram.OPEN_PATHS if telegram_webhook is not None else frozenset())
                | (slack.OPEN_PATHS if slack_requests is not None else frozenset())
                | (mattermost.OPEN_PATHS if mattermost_requests is not None else frozenset()),
                routes.roles_of(),
                routes.only_named(),
                SignedPages(link_key, clock, routes.signed_subject()),
            ),
        ]
    )
    app[keys.STORE] = store
    app[keys.TOKENS] = tokens
    app[keys.CLOCK] = clock
    app[keys.READINESS] = readiness
    app[keys.REGISTRY] = registry
    app[keys.DIGESTS] = digest_provider
    app[keys.JOB_PAGES] = job_pages
    app[keys.WORKFLOW_PAGES] = workflow_pages
    app[keys.ME_PAGES] = me_pages
    app[keys.LINK_KEY] = link_key
    app[keys.USAGE_CACHE] = ResultCache(monotonic, clock, usage_fresh_seconds, USAGE_MAX_STALE_SECONDS)
    app[keys.TRENDS_TIMEZONE] = trends_timezone
    app[keys.RATES] = rates or Rates()
    app[keys.BUDGETS] = budgets
    # A budget's figures move as its team's jobs finish: the digest's freshness suits them.
    app[keys.BUDGET_CACHE] = ResultCache(
        monotonic, clock, digest_fresh_seconds, DIGEST_MAX_STALE_SECONDS, max_keys=DIGEST_MAX_KEYS
    )
    app[keys.DIGEST_CACHE] = ResultCache(
        monotonic,
        clock,
        digest_fresh_seconds,
        DIGEST_MAX_STALE_SECONDS,
        max_keys=DIGEST_MAX_KEYS,
        max_inflight=DIGEST_MAX_INFLIGHT,
    )
    app[keys.OPENAPI] = openapi.encoded()
    app[keys.EVENT_ROUTING] = event_routing or keys.EventRouting()
    app[keys.EVENT_LIMITS] = EventLimits(
        per_token=settings.events.per_token_per_minute, per_recipient=settings.events.per_recipient_per_hour
    )
    app[keys.RECENT_EVENTS] = RecentAccepts()
    app[keys.DIRECTORY] = CachedDirectory(store.directory)
    app[keys.EVENT_WRITERS] = asyncio.Semaphore(EVENT_WRITERS_LIMIT)
    if telemetry is not None:
        app[keys.TELEMETRY] = telemetry
        app.middlewares.insert(0, _timing_middleware(telemetry, monotonic))
    routes.add_routes(app)
    if telegram_webhook is not None:
        app[keys.TELEGRAM_WEBHOOK] = telegram_webhook
        app.router.add_post(telegram.WEBHOOK_PATH, telegram.telegram_webhook)
    if slack_requests is not None:
        app[keys.SLACK_REQUESTS] = slack_requests
        slack.add_routes(app)
    if mattermost_requests is not None:
        app[keys.MATTERMOST_REQUESTS] = mattermost_requests
        mattermost.add_routes(app)

    async def resources(app: web.Application) -> AsyncIterator[None]:
        if warm_reports:
            app[keys.REPORTS_WARMUP] = asyncio.create_task(_warm_reports(app))
        yield
        if warm_reports:
            app[keys.REPORTS_WARMUP].cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await app[keys.REPORTS_WARMUP]
        await app[keys.USAGE_CACHE].close()
        await app[keys.DIGEST_CACHE].close()
        if close_store:
            await store.close()

    app.cleanup_ctx.append(resources)
    return app


async def _warm_reports(app: web.Application) -> None:
    for name, warm in (("usage", usage.warm), ("budgets", budget_views.warm)):
        try:
            await warm(app)
        except Exception as exc:  # the first request computes it then; the API itself is fine
            log.warning("%s warm-up failed: %s", name, exc)


def _timing_middleware(telemetry: Telemetry, monotonic: Callable[[], float]) -> Middleware:
    @web.middleware
    async def timed(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = monotonic()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        finally:
            resource = request.match_info.route.resource
            route = resource.canonical if resource is not None else "unmatched"
            telemetry.api_request_seconds.labels(route, request.method, str(status)).observe(
                monotonic() - started
            )

    return timed
