"""The pipeline a leader runs (and the demo, against a simulated cluster): ingestion with its
recorders, usage collection, workflow summaries and dispatch, built from the settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.kube import ClusterWatcher
from inno_notify.domain.kinds import OPTIONAL_KINDS
from inno_notify.options import derive
from inno_notify.runtime.builders import Clock, Component, build_chart_drawer, build_charts, build_dispatcher
from inno_notify.runtime.configuration import parse_config
from inno_notify.service.budgets import Budgets
from inno_notify.service.dispatcher import Dispatcher
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.kueue_queues import QueueTracker
from inno_notify.service.planner import DirectoryPlanner
from inno_notify.service.serving import ServingAnnouncer
from inno_notify.service.usage import CollectorOptions, UsageCollector, UsageSource
from inno_notify.service.workflow_tracking import (
    WorkflowOptions,
    WorkflowParts,
    WorkflowSummarizer,
    join_recorder,
)
from inno_notify.settings import Settings
from inno_notify.telemetry import Telemetry


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
    # One check of the budgets now, as the leader's "budgets" component runs it every few minutes
    # (the demo calls it once its simulated work is done); returns the alerts the outbox took.
    check_budgets: Callable[[], Awaitable[int]] | None = None


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
        derive(IngestOptions, settings),
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
    # One pool of chart workers for the term: the usage round draws the charts it stores, the
    # dispatcher those it finds missing; it is closed when the term's work stops.
    drawer = build_chart_drawer(settings)
    collector = UsageCollector(
        store,
        source,
        settings.rightsizing,
        planner,
        derive(CollectorOptions, settings, poll_seconds=poll_seconds),
        clock,
        telemetry,
        drawer,
    )
    charts = build_charts(settings, store, drawer)
    budgets = Budgets(store, settings.budgets, settings.accounting.rates, settings.digest.timezone, clock)
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
            ("charts", drawer.run),
            *([("budgets", functools.partial(budgets.run, planner))] if settings.budgets else []),
            *workflows.components,
        ],
        workflows=workflows,
        check_budgets=functools.partial(budgets.alert, planner),
    )


def watch_component(watcher: ClusterWatcher) -> Component:
    async def run(stop: asyncio.Event) -> None:
        task = asyncio.create_task(watcher.run(), name="watch")
        await stop.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return run


def cluster_watcher(settings: Settings, api: Any, ingestor: Ingestor) -> ClusterWatcher | None:
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
        namespace_owner_key=settings.workloads.namespace_owner_annotation,
        on_namespace_owners=ingestor.watch_namespace_owners,
        on_listed=ingestor.on_listed,
        known=ingestor,
    )


def workflow_options(settings: Settings, poll_seconds: float = 5.0) -> WorkflowOptions:
    return derive(WorkflowOptions, settings, poll_seconds=poll_seconds)


def build_workflows(
    settings: Settings,
    store: Store,
    planner: DirectoryPlanner,
    ingestor: Ingestor,
    clock: Clock,
    *,
    started_at: datetime,
    poll_seconds: float = 5.0,
) -> WorkflowParts:
    """The workflow parts, the recorder joined to `ingestor`'s pipeline."""
    options = workflow_options(settings, poll_seconds)
    domains = settings.notify.allowed_email_domains
    announcer = ServingAnnouncer(
        store,
        planner.directory,
        planner.enabled_channels,
        started_at,
        options.catch_up_seconds,
        allowed_email_domains=domains,
    )
    recorder = join_recorder(ingestor, options, announcer)
    summarizer = WorkflowSummarizer(
        store,
        planner.directory,
        planner.enabled_channels,
        options,
        clock,
        started_at,
        allowed_email_domains=domains,
    )
    return WorkflowParts(recorder, summarizer, announcer)
