"""Composition root: builds the adapters from the settings and runs the service's parts together.

`serve` runs every component in one TaskGroup until SIGTERM/SIGINT, then asks them to stop and
waits for them (graceful: in-flight sends finish). Its parts are of two kinds:

- every replica: the REST API, the probes, the outbox-depth sampler, and the leadership loop;
- leader only (`lead`): watchers and ingestion, usage collection, dispatch, the digest scheduler,
  the Telegram bot's update polling (or its webhook's registration), built afresh for each term
  (watchers list afresh) and stopped when the term ends.

With leader election (`ha.enabled`; auto: on Postgres) the leadership loop is service.leadership's
Elector, and the store's leader-only writes are fenced by the term (adapters/db/leases.py).
Without it (SQLite, or `ha.enabled: false`) this instance leads from the start; with SQLite a
second `serve` on the same file refuses to start (service.single_instance).

`build_pipeline` is shared with the demo, which runs the same pipeline against a simulated
cluster; the builders (`build_senders`, `service_store`, the renderers, `build_dispatcher`) with the
one-shot commands (inno_notify.commands: `check`, `digest`). This module only composes: what the
parts do lives in service/ (the telemetry sampler, the digest sent now, the settings as domain
values in service.configuration) and in the commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.email import EmailSender
from inno_notify.adapters.channels.pages import JobPageRenderer
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.channels.telegram import TelegramSender
from inno_notify.adapters.db.leases import UNFENCED, Fence, LeaseFence, LeaseRepository
from inno_notify.adapters.db.migrate import migrate
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.kube import ClusterWatcher, KubeConfigError, load_api_client
from inno_notify.adapters.prometheus import build_meter
from inno_notify.api.app import ApiConfigError, api_enabled, create_api_store, create_app
from inno_notify.api.keys import EventRouting, TelegramWebhook
from inno_notify.api.probes import create_probe_app, start_probes
from inno_notify.domain.kinds import OPTIONAL_KINDS
from inno_notify.domain.page_links import PageLinks
from inno_notify.memory import collect_garbage, malloc_trim, return_freed_memory
from inno_notify.service.configuration import parse_config, seed_directory
from inno_notify.service.digest import DigestScheduler
from inno_notify.service.digest_pages import digest_provider
from inno_notify.service.dispatcher import Dispatcher
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.job_charts import JobCharts
from inno_notify.service.job_pages import job_page_provider
from inno_notify.service.kueue_queues import QueueTracker
from inno_notify.service.leadership import Elector, Timings, replica_identity
from inno_notify.service.live import live_component
from inno_notify.service.planner import DirectoryPlanner
from inno_notify.service.single_instance import single_instance
from inno_notify.service.stopping import StopSignal
from inno_notify.service.telegram_updates import TelegramBot, link_offer
from inno_notify.service.telemetry_sampler import telemetry_component
from inno_notify.service.usage import CollectorOptions, UsageCollector, UsageSource
from inno_notify.service.workflows import WorkflowParts, build_workflows
from inno_notify.settings import ConfigError, Settings, secret_value
from inno_notify.telemetry import Telemetry

log = logging.getLogger("inno_notify.runtime")

Clock = Callable[[], datetime]

# A component runs until the stop event is set, then returns after finishing its in-flight work.
Component = Callable[[asyncio.Event], Coroutine[Any, Any, None]]


def utc_now() -> datetime:
    return datetime.now(UTC)


# --- settings → adapters ----------------------------------------------------


def configured_channels(settings: Settings) -> frozenset[str]:
    """The channels `build_senders` builds a sender for, without building them."""
    channels = settings.channels
    configured = {
        "telegram": bool(secret_value(channels.telegram.token)),
        "slack": bool(secret_value(channels.slack.token)),
        "email": bool(channels.email.host),
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
            allowed_domains=settings.notify.allowed_email_domains,
        )
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


def build_digest_renderer(settings: Settings) -> DigestRenderer:
    return DigestRenderer(_template_dir(settings), links=page_links(settings), clock=utc_now)


def build_dispatcher(
    settings: Settings,
    store: Store,
    senders: Mapping[str, Sender],
    clock: Clock,
    poll_seconds: float = 1.0,
    telemetry: Telemetry | None = None,
    charts: JobCharts | None = None,
) -> Dispatcher:
    return Dispatcher(
        store,
        senders,
        build_renderer(settings),
        clock=clock,
        group_wait_seconds=settings.notify.group_wait_seconds,
        give_up_after_seconds=settings.notify.give_up_after_seconds,
        poll_seconds=poll_seconds,
        digest_renderer=build_digest_renderer(settings),
        # A team's digest sums every cluster in the database; the claims are this cluster's.
        digest_cluster=None,
        cluster=settings.cluster,
        telemetry=telemetry,
        charts=charts or build_charts(settings, store),
        telegram_link=link_offer(settings),
    )


def build_charts(settings: Settings, store: Store) -> JobCharts:
    return JobCharts(store, idle_percent=settings.rightsizing.idle_gpu_util_percent)


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


# --- the pipeline -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Pipeline:
    """The service's moving parts, built once from the settings."""

    store: Store
    ingestor: Ingestor
    collector: UsageCollector
    dispatcher: Dispatcher
    senders: Mapping[str, Sender]
    components: list[tuple[str, Component]] = field(default_factory=list)
    workflows: WorkflowParts | None = None


def build_pipeline(
    settings: Settings,
    store: Store,
    source: UsageSource,
    senders: Mapping[str, Sender],
    clock: Clock,
    *,
    started_at: datetime,
    poll_seconds: float = 5.0,
    telemetry: Telemetry | None = None,
) -> Pipeline:
    ingestor = Ingestor(
        store,
        parse_config(settings),
        IngestOptions(
            catch_up_seconds=settings.kubernetes.catch_up_seconds,
            metrics_delay_seconds=settings.prometheus.metrics_delay_seconds,
            namespaces=settings.kubernetes.namespaces,
        ),
        clock,
        started_at,
        telemetry,
    )
    planner = DirectoryPlanner(
        store,
        frozenset(senders),
        settings.notify.group_wait_seconds,
        clock,
        allowed_email_domains=settings.notify.allowed_email_domains,
    )
    workflows = build_workflows(
        settings, store, planner, ingestor, clock, started_at=started_at, poll_seconds=poll_seconds
    )
    ingestor.taps.append(
        QueueTracker(
            store,
            settings.cluster,
            settings.accounting.gpu_resources,
            clock,
            namespaces=settings.kubernetes.namespaces,
            telemetry=telemetry,
        )
    )
    charts = build_charts(settings, store)
    collector = UsageCollector(
        store,
        source,
        settings.rightsizing,
        planner,
        CollectorOptions(
            give_up_after_seconds=settings.prometheus.give_up_after_seconds,
            idle_util_percent=settings.rightsizing.idle_gpu_util_percent,
            scrape_interval_seconds=settings.prometheus.scrape_interval_seconds,
            poll_seconds=poll_seconds,
            cluster=settings.cluster,
        ),
        clock,
        telemetry,
        charts,
    )
    dispatcher = build_dispatcher(settings, store, senders, clock, min(1.0, poll_seconds), telemetry, charts)

    async def run_ingestor(stop: asyncio.Event) -> None:
        consumer = asyncio.create_task(ingestor.run(), name="ingest-consumer")
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({consumer, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if consumer.done():
                consumer.result()  # the consumer never returns on its own: surface its failure
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ingestor.drained(), timeout=10)
        finally:
            stopping.cancel()
            consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await consumer

    return Pipeline(
        store=store,
        ingestor=ingestor,
        collector=collector,
        dispatcher=dispatcher,
        senders=senders,
        components=[
            ("ingest", run_ingestor),
            ("usage", collector.run),
            ("dispatch", dispatcher.run),
            *workflows.components,
        ],
        workflows=workflows,
    )


def watch_component(watcher: ClusterWatcher) -> Component:
    async def run(stop: asyncio.Event) -> None:
        task = asyncio.create_task(watcher.run(), name="watch")
        await stop.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return run


# --- inno-notify serve -----------------------------------------------------------------------------------


async def _kube_client(settings: Settings) -> Any:
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


def _cluster_watcher(settings: Settings, api: Any, ingestor: Ingestor) -> ClusterWatcher | None:
    if api is None:
        return None
    return ClusterWatcher(
        api,
        ingestor.on_event,
        ingestor.on_relist,
        namespaces=settings.kubernetes.namespaces,
        kueue=settings.kubernetes.kueue,
        argo=settings.argo_mode,
        kserve=settings.workflows.kserve,
        workloads=[(spec, settings.workloads.kinds.mode(spec.setting)) for spec in OPTIONAL_KINDS],
        on_kinds=ingestor.watch_kinds,
    )


def election_enabled(settings: Settings) -> bool:
    """Whether `serve` elects a leader: `ha.enabled`, where auto means "on Postgres"."""
    postgres = settings.database_url.startswith("postgresql")
    if settings.ha.enabled is True and not postgres:
        raise ConfigError(
            "ha.enabled: true needs Postgres (database_url); with SQLite one instance runs alone"
        )
    return postgres if settings.ha.enabled == "auto" else bool(settings.ha.enabled)


def election_timings(settings: Settings) -> Timings:
    ha = settings.ha
    return Timings(
        lease_seconds=ha.lease_seconds,
        renew_deadline_seconds=ha.renew_deadline_seconds,
        retry_period_seconds=ha.retry_period_seconds,
        shutdown_grace_seconds=ha.shutdown_grace_seconds,
    )


@dataclass(slots=True)
class _LeaderWork:
    """The leader-only part of one term, as readiness sees it."""

    watcher: ClusterWatcher | None
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def readiness(self) -> dict[str, bool]:
        # Per watched resource ("watch:Job", …: listed, and heard from recently), then the rest.
        checks = dict(self.watcher.readiness()) if self.watcher is not None else {}
        checks["dispatcher_alive"] = "dispatch" in self.tasks and not self.tasks["dispatch"].done()
        return checks


def api_component(
    settings: Settings,
    telemetry: Telemetry,
    readiness: Callable[[], Mapping[str, bool]],
    telegram_webhook: TelegramWebhook | None = None,
) -> Component | None:
    """The REST API on `api.listen`, or None when it is switched off or has no tokens (fail closed)."""
    if not api_enabled(settings.api):
        log.info("api: disabled (api.listen is empty)")
        return None
    # The API reads through a store of its own (no per-request liveness ping on its pool, its
    # statements bounded by the handler timeout), digests included: a burst of API requests must not
    # take the connections the service's ingest and dispatch need.
    api_store = create_api_store(settings.database_url, settings.database_statement_timeout_seconds)
    try:
        app = create_app(
            api_store,
            settings.api,
            readiness,
            telemetry=telemetry,
            digest_provider=digest_provider(
                api_store, settings.digest.timezone, utc_now, links=page_links(settings)
            ),
            job_pages=job_page_provider(api_store, build_job_page_renderer(settings)),
            link_key=settings.links.key,
            close_store=True,
            warm_usage=True,
            event_routing=EventRouting(
                configured_channels(settings),
                settings.notify.allowed_email_domains,
                settings.notify.group_wait_seconds,
            ),
            telegram_webhook=telegram_webhook,
            trends_timezone=settings.digest.timezone,
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
    store = service_store(settings, fence or UNFENCED)
    leases = (
        LeaseRepository.from_url(settings.database_url, idle_in_transaction_seconds=settings.ha.lease_seconds)
        if election
        else None
    )
    telemetry = Telemetry.create(CollectorRegistry())
    meter = build_meter(settings.prometheus)
    senders: Mapping[str, Sender] = {}
    api: Any = None
    bot = TelegramBot.build(settings, store, utc_now, telemetry)
    current: list[_LeaderWork] = []  # the leader work of the term in progress, if any

    async def lead(work_stop: asyncio.Event) -> None:
        """The leader-only components of one term, built afresh, until `work_stop` is set."""
        try:
            await run_term(work_stop)
        finally:
            # The ended term's objects hold reference cycles: freed now, not at a distant full
            # collection (memory.py says why), and the next trim hands their pages back.
            log.info("leader work ended: %d unreachable object(s) collected", collect_garbage("term ended"))

    async def run_term(work_stop: asyncio.Event) -> None:
        pipeline = build_pipeline(
            settings, store, meter, senders, utc_now, started_at=utc_now(), telemetry=telemetry
        )
        watcher = _cluster_watcher(settings, api, pipeline.ingestor)
        components = list(pipeline.components)
        components.append(("digest", digest_component(settings, store, senders)))
        components.append(("live", live_component(settings, store, frozenset(senders), utc_now, telemetry)))
        components += bot.leader_components() if bot is not None else []
        if watcher is not None:
            components.append(("watch", watch_component(watcher)))
            components.append(
                ("watch-telemetry", telemetry_component(store, telemetry, watcher, sample_outbox=False))
            )
        work = _LeaderWork(watcher)
        current.append(work)
        try:
            async with asyncio.TaskGroup() as group:
                for name, component in components:
                    work.tasks[name] = group.create_task(component(work_stop), name=name)
                if watcher is not None:
                    ready = asyncio.ensure_future(watcher.wait_ready())
                    stopping = asyncio.ensure_future(work_stop.wait())
                    await asyncio.wait({ready, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    for task in (ready, stopping):
                        task.cancel()
                    if ready.done() and not ready.cancelled():
                        log.info("leader work running: the watchers have listed")
        finally:
            current.remove(work)

    def readiness() -> dict[str, bool]:
        # A follower is ready when it can serve the API (the probe checks the database itself);
        # without election this instance leads from the start, and is not ready before it does.
        checks: dict[str, bool] = {} if election else {"dispatcher_alive": False}
        if current:
            checks = current[-1].readiness()
        if api is None:
            # No Kubernetes configuration was found: no watcher runs on any replica, so none is
            # ready (readiness means "watchers live"), and the failed check says why.
            checks["kubernetes_configured"] = False
        return checks

    probes: web.AppRunner | None = None
    try:
        await seed_directory(store, settings)
        senders = build_senders(settings)
        api = await _kube_client(settings)
        components: list[tuple[str, Component]] = [
            ("telemetry", telemetry_component(store, telemetry, None)),
            ("memory", partial(return_freed_memory, trim=malloc_trim())),
        ]
        if leases is not None and fence is not None:
            elector = Elector(leases, fence, election_timings(settings), telemetry)
            components.append(("leadership", partial(elector.run, lead=lead)))
        else:
            components.append(("leadership", partial(_lead_alone, lead=lead, telemetry=telemetry)))
        hook = (
            TelegramWebhook(bot.secret, bot.webhook)
            if bot is not None and bot.secret and bot.mode == "webhook"
            else None
        )
        http = api_component(settings, telemetry, readiness, hook)
        if http is not None:
            components.append(("api", http))
        # Bound before anything runs: a probe port in use ends `serve` at once, with its own message.
        probes = await start_probes(
            create_probe_app(store, readiness, telemetry.registry), settings.probes.listen
        )
        log.info("probes: /healthz /readyz /metrics on %s", settings.probes.listen)
        async with asyncio.TaskGroup() as group:
            for name, component in components:
                group.create_task(component(stop), name=name)
            started.set()
            log.info(
                "inno-notify ready: cluster=%s database=%s kubernetes=%s channels=%s api=%s ha=%s",
                settings.cluster,
                settings.database_url_redacted,
                "configured" if api is not None else "not configured",
                ",".join(sorted(senders)) or "none",
                settings.api.listen if http is not None else "off",
                f"election as {identity}" if election else "off (this instance leads)",
            )
            await stop.wait()
            log.info("stopping: finishing in-flight work")
    finally:
        if probes is not None:
            await probes.cleanup()
        for sender in senders.values():
            await sender.aclose()
        if bot is not None:
            await bot.aclose()
        meter.client.close()
        if api is not None:
            await api.close()
        if leases is not None:
            await leases.close()
        await store.close()


async def _lead_alone(stop: asyncio.Event, *, lead: Component, telemetry: Telemetry) -> None:
    """Without election: the one instance does the leader work from start to stop."""
    telemetry.leader.set(1)
    try:
        await lead(stop)
    finally:
        telemetry.leader.set(0)
