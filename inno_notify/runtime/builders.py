"""Settings → adapters: each builder takes the settings and returns one part, built as `serve`, the
demo and the one-shot commands (inno_notify.commands: `check`, `digest`) need it. What a part does
lives in adapters/ and service/; here only which settings it is given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Coroutine, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.email import EmailSender
from inno_notify.adapters.channels.mattermost import MattermostSender
from inno_notify.adapters.channels.me_page import PersonalPageRenderer
from inno_notify.adapters.channels.pages import JobPageRenderer
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.channels.telegram import TelegramSender
from inno_notify.adapters.channels.webhook import WebhookSender
from inno_notify.adapters.db.leases import UNFENCED, Fence
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.kube import KubeConfigError, load_api_client
from inno_notify.adapters.prometheus.live_meter import build_live_meter
from inno_notify.domain.live import parse_quiet_hours
from inno_notify.domain.page_links import PageLinks
from inno_notify.options import derive
from inno_notify.service.budgets import Budgets
from inno_notify.service.digest import DigestScheduler
from inno_notify.service.digest_accounting import DigestAccounting
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.job_charts import ChartDrawer, JobCharts
from inno_notify.service.leadership import Timings
from inno_notify.service.live_check import LiveCheck, LiveOptions
from inno_notify.service.message_composer import MessageParts
from inno_notify.service.telegram_updates import link_offer
from inno_notify.settings import ConfigError, Settings, secret_value
from inno_notify.telemetry import Telemetry

log = logging.getLogger("inno_notify.runtime")

Clock = Callable[[], datetime]

# A component runs until the stop event is set, then returns after finishing its in-flight work.
Component = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


def utc_now() -> datetime:
    return datetime.now(UTC)


def configured_channels(settings: Settings) -> frozenset[str]:
    """The channels `build_senders` builds a sender for, without building them."""
    channels = settings.channels
    configured = {
        "telegram": bool(secret_value(channels.telegram.token)),
        "slack": bool(secret_value(channels.slack.token)),
        "email": bool(channels.email.host),
        "mattermost": bool(channels.mattermost.url and secret_value(channels.mattermost.token)),
        "webhook": bool(channels.webhook.url and secret_value(channels.webhook.secret)),
    }
    return frozenset(name for name, on in configured.items() if on)


def build_senders(settings: Settings) -> dict[str, Sender]:
    """A sender for every channel the configuration enables (a token or an SMTP host is set)."""
    channels = settings.channels
    senders: dict[str, Sender] = {}
    telegram_token = secret_value(channels.telegram.token)
    if telegram_token:
        senders["telegram"] = TelegramSender(telegram_token, channels.telegram.api_url)
    slack_token = secret_value(channels.slack.token)
    if slack_token:
        senders["slack"] = SlackSender(slack_token, channels.slack.api_url)
    email = channels.email
    if email.host:
        senders["email"] = EmailSender(
            email.host,
            email.sender or "inno-notify@localhost",
            port=email.port,
            starttls=email.starttls,
            tls=email.tls,
            username=email.username,
            password=secret_value(email.password),
            list_unsubscribe=email.list_unsubscribe,
            allowed_domains=settings.notify.allowed_email_domains,
        )
    mattermost_token = secret_value(channels.mattermost.token)
    if channels.mattermost.url and mattermost_token:
        senders["mattermost"] = MattermostSender(channels.mattermost.url, mattermost_token)
    webhook_secret = secret_value(channels.webhook.secret)
    if channels.webhook.url and webhook_secret:
        senders["webhook"] = WebhookSender(channels.webhook.url, webhook_secret)
    return senders


def _template_dir(settings: Settings) -> Path | None:
    return Path(settings.notify.template_dir) if settings.notify.template_dir else None


def page_links(settings: Settings) -> PageLinks:
    """The links messages carry to the service's pages (signed when `links.secret_file` is set)."""
    return PageLinks(settings.public_url, settings.links.key, settings.links.ttl_days * 86400)


def build_renderer(settings: Settings) -> Renderer:
    return Renderer(
        _template_dir(settings),
        log_url_template=settings.notify.log_url_template,
        links=page_links(settings),
        grafana_url_template=settings.links.grafana_url_template,
        clock=utc_now,
    )


def build_job_page_renderer(settings: Settings) -> JobPageRenderer:
    return JobPageRenderer(
        build_renderer(settings),
        _template_dir(settings),
        idle_percent=settings.rightsizing.idle_gpu_util_percent,
    )


def build_me_page_renderer(settings: Settings) -> PersonalPageRenderer:
    return PersonalPageRenderer(page_links(settings), _template_dir(settings))


def build_digest_renderer(settings: Settings) -> DigestRenderer:
    return DigestRenderer(_template_dir(settings), links=page_links(settings), clock=utc_now)


def build_digest_accounting(settings: Settings, store: Store, clock: Clock = utc_now) -> DigestAccounting:
    """What digests are priced and budgeted with: accounting.rates, and the budgets as they stand
    (service.budgets over `store`, in digest.timezone, at `clock`)."""
    budgets = (
        Budgets(store, settings.budgets, settings.accounting.rates, settings.digest.timezone, clock)
        if settings.budgets
        else None
    )
    return DigestAccounting(settings.accounting.rates, budgets)


def build_dispatcher(
    settings: Settings,
    store: Store,
    senders: Mapping[str, Sender],
    clock: Clock,
    poll_seconds: float = 1.0,
    telemetry: Telemetry | None = None,
    charts: JobCharts | None = None,
) -> Dispatcher:
    # A team's digest sums every cluster in the database (digest_cluster None); the claims are this
    # cluster's.
    options = derive(DispatchOptions, settings, poll_seconds=poll_seconds)
    parts = MessageParts(
        digest_renderer=build_digest_renderer(settings),
        charts=charts or build_charts(settings, store),
        telegram_link=link_offer(settings.channels.telegram),
        unsubscribe=page_links(settings).unsubscribe,
        personal_page=page_links(settings).me,
        digest_accounting=build_digest_accounting(settings, store, clock),
    )
    return Dispatcher(
        store, senders, build_renderer(settings), options, clock=clock, telemetry=telemetry, parts=parts
    )


def build_chart_drawer(settings: Settings) -> ChartDrawer:
    """The leader's chart workers: a process per core, started at the first chart."""
    return ChartDrawer(idle_percent=settings.rightsizing.idle_gpu_util_percent)


def build_charts(settings: Settings, store: Store, drawer: ChartDrawer | None = None) -> JobCharts:
    """The dispatcher's charts, drawing with `drawer` (None: workers of their own, started only if a
    send has to draw)."""
    return JobCharts(store, drawer, idle_percent=settings.rightsizing.idle_gpu_util_percent)


def service_store(settings: Settings, fence: Fence = UNFENCED) -> Store:
    """The service's store, its statements limited by `database_statement_timeout_seconds`, its
    leader-only writes checked by `fence` (when a leader is elected). With election, a transaction
    idle for a whole lease is ended by the server (engine.create_engine says why)."""
    return Store.from_url(
        settings.database_url,
        fence,
        statement_timeout_seconds=settings.database_statement_timeout_seconds,
        idle_in_transaction_seconds=settings.ha.lease_seconds if fence is not UNFENCED else None,
    )


async def kube_client(settings: Settings) -> Any:
    """The Kubernetes API client, or None when no configuration exists and none was named."""
    try:
        return await load_api_client(settings.kubernetes.kubeconfig, settings.kubernetes.context)
    except KubeConfigError as exc:
        if settings.kubernetes.kubeconfig is not None:
            raise
        log.warning(
            "kubernetes: %s; no jobs will be watched, and /readyz answers 503 (kubernetes_configured: "
            "false), until it is configured",
            exc,
        )
        return None


def election_enabled(settings: Settings) -> bool:
    """Whether `serve` elects a leader: `ha.enabled`, where auto means "on Postgres"."""
    postgres = settings.database_url.startswith("postgresql")
    if settings.ha.enabled is True and not postgres:
        raise ConfigError(
            "ha.enabled: true needs Postgres (database_url); with SQLite one instance runs alone"
        )
    return postgres if settings.ha.enabled == "auto" else bool(settings.ha.enabled)


def election_timings(settings: Settings) -> Timings:
    return derive(Timings, settings)


def digest_component(settings: Settings, store: Store, senders: Mapping[str, Sender]) -> Component:
    scheduler = DigestScheduler(
        store,
        schedule=settings.digest.schedule,
        timezone=settings.digest.timezone,
        channels=frozenset(senders),
        clock=utc_now,
        admin_recipients=settings.digest.admin_recipients,
    )
    return scheduler.run


def live_options(settings: Settings) -> LiveOptions:
    live = settings.live
    quiet = None if live.quiet_hours is None else parse_quiet_hours(live.quiet_hours, live.timezone)
    return derive(LiveOptions, settings, quiet_hours=quiet)


def live_component(
    settings: Settings,
    store: Store,
    channels: Collection[str],
    clock: Clock,
    telemetry: Telemetry | None = None,
) -> Callable[[asyncio.Event], Coroutine[Any, Any, None]]:
    """The live check as a component of `serve`, with its own Prometheus client (closed when it stops)."""

    async def run(stop: asyncio.Event) -> None:
        if not settings.live.enabled:
            log.info("live check: off (live.enabled: false)")
            await stop.wait()
            return
        meter = build_live_meter(settings.prometheus, settings.kubernetes.namespaces)
        try:
            check = LiveCheck(store, meter, live_options(settings), clock, channels, telemetry=telemetry)
            await check.run(stop)
        finally:
            meter.client.close()

    return run
