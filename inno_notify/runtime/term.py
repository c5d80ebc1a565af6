"""One leader term: what the leader runs (watchers and ingestion, usage, dispatch, digests, live
checks, the Telegram bot's updates, the Slack app's Socket Mode), built afresh for each term and
ended with it.

A `LeaderTerm` is handed the resources that outlive terms (the store, the meter, the senders, the
Kubernetes client, the bot); `run(stop)` builds the term's pipeline, runs its components until
`stop` is set, and answers `readiness()` while it runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.kube import ClusterWatcher
from inno_notify.memory import collect_garbage
from inno_notify.runtime.builders import Component, digest_component, live_component, utc_now
from inno_notify.runtime.pipeline import build_pipeline, cluster_watcher, watch_component
from inno_notify.service.slack_bot import SlackBot
from inno_notify.service.telegram_updates import TelegramBot
from inno_notify.service.telemetry_sampler import telemetry_component
from inno_notify.service.usage import UsageSource
from inno_notify.settings import Settings
from inno_notify.telemetry import Telemetry

log = logging.getLogger("inno_notify.runtime")


@dataclass(slots=True)
class _Running:
    """A term in progress, as readiness sees it."""

    watcher: ClusterWatcher | None
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def readiness(self) -> dict[str, bool]:
        # Per watched resource ("watch:Job", …: listed, and heard from recently), then the rest.
        checks = dict(self.watcher.readiness()) if self.watcher is not None else {}
        checks["dispatcher_alive"] = "dispatch" in self.tasks and not self.tasks["dispatch"].done()
        return checks


@dataclass(slots=True)
class LeaderTerm:
    """Runs the leader's work for a term at a time (`run`), and says how ready it is."""

    settings: Settings
    store: Store
    meter: UsageSource
    telemetry: Telemetry
    election: bool
    senders: Mapping[str, Sender] = field(default_factory=dict)
    kube: Any = None
    bot: TelegramBot | None = None
    # The Slack app's self-service (its Socket Mode connection is leader work).
    slack: SlackBot | None = None
    _current: list[_Running] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        """The leader-only components of one term, built afresh, until `stop` is set."""
        try:
            await self._run(stop)
        finally:
            # The ended term's objects hold reference cycles: freed now, not at a distant full
            # collection (memory.py says why), and the next trim hands their pages back.
            log.info("leader work ended: %d unreachable object(s) collected", collect_garbage("term ended"))

    async def _run(self, stop: asyncio.Event) -> None:
        settings, store, senders = self.settings, self.store, self.senders
        pipeline = build_pipeline(
            settings, store, self.meter, senders, utc_now, started_at=utc_now(), telemetry=self.telemetry
        )
        watcher = cluster_watcher(settings, self.kube, pipeline.ingestor)
        components: list[tuple[str, Component]] = list(pipeline.components)
        components.append(("digest", digest_component(settings, store, senders)))
        components.append(
            ("live", live_component(settings, store, frozenset(senders), utc_now, self.telemetry))
        )
        components += self.bot.leader_components() if self.bot is not None else []
        components += self.slack.leader_components() if self.slack is not None else []
        if watcher is not None:
            components.append(("watch", watch_component(watcher)))
            components.append(
                ("watch-telemetry", telemetry_component(store, self.telemetry, watcher, sample_outbox=False))
            )
        running = _Running(watcher)
        self._current.append(running)
        try:
            async with asyncio.TaskGroup() as group:
                for name, component in components:
                    running.tasks[name] = group.create_task(component(stop), name=name)
                if watcher is not None:
                    ready = asyncio.ensure_future(watcher.wait_ready())
                    stopping = asyncio.ensure_future(stop.wait())
                    await asyncio.wait({ready, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    for task in (ready, stopping):
                        task.cancel()
                    if ready.done() and not ready.cancelled():
                        log.info("leader work running: the watchers have listed")
        finally:
            self._current.remove(running)

    async def alone(self, stop: asyncio.Event) -> None:
        """Without election: the one instance does the leader work from start to stop."""
        self.telemetry.leader.set(1)
        try:
            await self.run(stop)
        finally:
            self.telemetry.leader.set(0)

    def readiness(self) -> dict[str, bool]:
        # A follower is ready when it can serve the API (the probe checks the database itself);
        # without election this instance leads from the start, and is not ready before it does.
        checks: dict[str, bool] = {} if self.election else {"dispatcher_alive": False}
        if self._current:
            checks = self._current[-1].readiness()
        if self.kube is None:
            # No Kubernetes configuration was found: no watcher runs on any replica, so none is
            # ready (readiness means "watchers live"), and the failed check says why.
            checks["kubernetes_configured"] = False
        return checks
