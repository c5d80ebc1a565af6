"""`inno-notify serve`: the service's resources entered once, its components run in one TaskGroup.

Every replica runs the REST API, the probes, the telemetry sampler, memory trimming and the
leadership loop; the leader's work (`term.LeaderTerm`) is built afresh for each term. Resources
(the store, the lease repository, the meter, the senders, the bot, the Kubernetes client, the
probe server) are entered on one `AsyncExitStack` as they are made, and closed in reverse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Mapping
from functools import partial

from aiohttp import web
from prometheus_client import CollectorRegistry

from inno_notify.adapters.db.leases import UNFENCED, LeaseFence, LeaseRepository
from inno_notify.adapters.db.migrate import migrate
from inno_notify.adapters.prometheus import build_meter
from inno_notify.api.app import ApiConfigError, api_enabled, create_api_store, create_app
from inno_notify.api.keys import EventRouting, MattermostRequests, SlackRequests, TelegramWebhook
from inno_notify.api.probes import create_probe_app, start_probes
from inno_notify.memory import malloc_trim, return_freed_memory
from inno_notify.runtime.builders import (
    Component,
    build_digest_accounting,
    build_job_page_renderer,
    build_me_page_renderer,
    build_renderer,
    build_senders,
    configured_channels,
    election_enabled,
    election_timings,
    kube_client,
    page_links,
    service_store,
    utc_now,
)
from inno_notify.runtime.configuration import seed_directory
from inno_notify.runtime.term import LeaderTerm
from inno_notify.service.budgets import Budgets
from inno_notify.service.digest_pages import digest_provider
from inno_notify.service.job_pages import job_page_provider, workflow_page_provider
from inno_notify.service.leadership import Elector, replica_identity
from inno_notify.service.mattermost_commands import MattermostBot
from inno_notify.service.me_pages import me_page_provider
from inno_notify.service.single_instance import single_instance
from inno_notify.service.slack_bot import SlackBot
from inno_notify.service.stopping import StopSignal
from inno_notify.service.telegram_updates import TelegramBot
from inno_notify.service.telemetry_sampler import telemetry_component
from inno_notify.settings import Settings
from inno_notify.telemetry import Telemetry

log = logging.getLogger("inno_notify.runtime")


def api_component(
    settings: Settings,
    telemetry: Telemetry,
    readiness: Callable[[], Mapping[str, bool]],
    telegram_webhook: TelegramWebhook | None = None,
    slack_requests: SlackRequests | None = None,
    mattermost_requests: MattermostRequests | None = None,
) -> Component | None:
    """The REST API on `api.listen`, or None when it is switched off or has no tokens (fail closed)."""
    if not api_enabled(settings.api):
        log.info("api: disabled (api.listen is empty)")
        return None
    # The API reads through a store of its own (no per-request liveness ping on its pool, its
    # statements bounded by the handler timeout), digests included: a burst of API requests must not
    # take the connections the service's ingest and dispatch need.
    api_store = create_api_store(settings.database_url, settings.database_statement_timeout_seconds)
    pages = build_job_page_renderer(settings)
    try:
        app = create_app(
            api_store,
            settings.api,
            readiness,
            telemetry=telemetry,
            digest_provider=digest_provider(
                api_store,
                settings.digest.timezone,
                utc_now,
                links=page_links(settings),
                accounting=build_digest_accounting(settings, api_store, utc_now),
            ),
            job_pages=job_page_provider(api_store, pages),
            workflow_pages=workflow_page_provider(api_store, pages),
            me_pages=me_page_provider(api_store, build_me_page_renderer(settings), utc_now),
            link_key=settings.links.key,
            close_store=True,
            warm_reports=True,
            event_routing=EventRouting(
                configured_channels(settings),
                settings.notify.allowed_email_domains,
                settings.notify.group_wait_seconds,
            ),
            telegram_webhook=telegram_webhook,
            slack_requests=slack_requests,
            mattermost_requests=mattermost_requests,
            trends_timezone=settings.digest.timezone,
            rates=settings.accounting.rates,
            budgets=Budgets(
                api_store, settings.budgets, settings.accounting.rates, settings.digest.timezone, utc_now
            ).reports
            if settings.budgets
            else None,
        )
    except ApiConfigError as exc:
        log.error('api: not started: %s (set api.tokens, or api.listen: "" to turn it off)', exc)
        return None
    host, _, port = settings.api.listen.rpartition(":")

    async def run(stop: asyncio.Event) -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host.strip("[]") or None, int(port)).start()
            log.info("api: listening on %s", settings.api.listen)
            await stop.wait()
        finally:
            await runner.cleanup()

    return run


async def serve(settings: Settings, stop: asyncio.Event | StopSignal | None = None) -> None:
    """Runs the service until `stop` is set (by SIGTERM/SIGINT when not given, or when a
    StopSignal installed earlier is given). A stop during start-up (the migration, the directory,
    the Kubernetes client, binding the probes) cancels the start-up: `serve` returns at once."""
    election = election_enabled(settings)
    if not isinstance(stop, asyncio.Event):
        stop = (stop or StopSignal()).event()
    started = asyncio.Event()
    with single_instance(settings.database_url):
        serving = asyncio.ensure_future(_serve(settings, stop, election, started))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not serving.done() and not started.is_set():
                # Stopped before it was ready: nothing is in flight yet that a graceful stop would
                # wait for, so the start-up is cancelled (its own clean-up runs).
                log.info("stopping during start-up")
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
                log.info("stopped")
                return
            await serving
        finally:
            stopping.cancel()
            if not serving.done():
                serving.cancel()
    log.info("stopped")


async def _serve(settings: Settings, stop: asyncio.Event, election: bool, started: asyncio.Event) -> None:
    applied = await migrate(settings.database_url)
    if applied:
        log.info("database migrated to %s", applied[-1])
    if settings.notify.dashboard_url:
        log.warning(
            "notify.dashboard_url is deprecated: set links.public_url instead%s",
            "" if settings.links.public_url is None else " (links.public_url is set and wins)",
        )
    identity = replica_identity(settings.ha.identity, os.environ, socket.gethostname(), os.getpid())
    fence = LeaseFence(settings.cluster, identity) if election else None
    telemetry = Telemetry.create(CollectorRegistry())
    async with contextlib.AsyncExitStack() as resources:
        store = service_store(settings, fence or UNFENCED)
        resources.push_async_callback(store.close)
        meter = build_meter(settings.prometheus)
        resources.callback(meter.client.close)
        term = LeaderTerm(settings, store, meter, telemetry, election)
        term.bot = TelegramBot.build(
            settings.channels.telegram, settings.digest.timezone, store, utc_now, telemetry
        )
        if term.bot is not None:
            resources.push_async_callback(term.bot.aclose)
        term.slack = SlackBot.build(settings.channels.slack, settings.digest.timezone, store, utc_now)
        if term.slack is not None:
            resources.push_async_callback(term.slack.aclose)
        mattermost = MattermostBot.build(
            settings.channels.mattermost, settings.digest.timezone, store, utc_now, build_renderer(settings)
        )
        if mattermost is not None:
            resources.push_async_callback(mattermost.aclose)
        await seed_directory(store, settings)
        term.senders = build_senders(settings)
        for sender in term.senders.values():
            resources.push_async_callback(sender.aclose)
        term.kube = await kube_client(settings)
        if term.kube is not None:
            resources.push_async_callback(term.kube.close)
        components: list[tuple[str, Component]] = [
            ("telemetry", telemetry_component(store, telemetry, None)),
            ("memory", partial(return_freed_memory, trim=malloc_trim())),
        ]
        if fence is not None:
            leases = LeaseRepository.from_url(
                settings.database_url, idle_in_transaction_seconds=settings.ha.lease_seconds
            )
            resources.push_async_callback(leases.close)
            elector = Elector(leases, fence, election_timings(settings), telemetry)
            components.append(("leadership", partial(elector.run, lead=term.run)))
        else:
            components.append(("leadership", term.alone))
        bot = term.bot
        hook = (
            TelegramWebhook(bot.secret, bot.webhook) if bot and bot.secret and bot.mode == "webhook" else None
        )
        slack = term.slack
        slack_http = (
            SlackRequests(slack.signing_secret, slack.http) if slack and slack.signing_secret else None
        )
        mattermost_http = (
            MattermostRequests(mattermost.command_token, mattermost.handle) if mattermost else None
        )
        http = api_component(settings, telemetry, term.readiness, hook, slack_http, mattermost_http)
        if http is not None:
            components.append(("api", http))
        # Bound before anything runs: a probe port in use ends `serve` at once, with its own message.
        probes = await start_probes(
            create_probe_app(store, term.readiness, telemetry.registry), settings.probes.listen
        )
        resources.push_async_callback(probes.cleanup)
        log.info("probes: /healthz /readyz /metrics on %s", settings.probes.listen)
        async with asyncio.TaskGroup() as group:
            for name, component in components:
                group.create_task(component(stop), name=name)
            started.set()
            log.info(
                "inno-notify ready: cluster=%s database=%s kubernetes=%s channels=%s api=%s ha=%s",
                settings.cluster,
                settings.database_url_redacted,
                "configured" if term.kube is not None else "not configured",
                ",".join(sorted(term.senders)) or "none",
                settings.api.listen if http is not None else "off",
                f"election as {identity}" if election else "off (this instance leads)",
            )
            await stop.wait()
            log.info("stopping: finishing in-flight work")
