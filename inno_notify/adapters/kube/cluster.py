"""Everything the service watches in one cluster: Jobs, Pods, Events and, optionally, Kueue Workloads.

The service is ready (`/readyz`) only once every initial LIST has been handed to the consumer:
before that, a job that finished while we were down could be summarized late or not at all.
This composes one ResourceWatcher per resource and decides about Kueue per
`kubernetes.kueue` (auto | true | false).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Literal

from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters.kube.discovery import detect_kueue
from inno_notify.adapters.kube.protocol import EVENTS, JOBS, PODS, Resource, workloads
from inno_notify.adapters.kube.watching import OnEvent, OnRelist, ResourceWatcher, WatchOptions

log = logging.getLogger(__name__)

KueueMode = Literal["auto"] | bool
DEFAULT_RESOURCES: tuple[Resource, ...] = (JOBS, PODS, EVENTS)


class ClusterWatcher:
    """Runs the watchers of one cluster until cancelled; `ready` once all initial lists are applied.

    With kueue=True and no Kueue installed, discovery is repeated every `kueue_recheck_seconds`
    (quietly) so a Kueue installed later is picked up; with "auto" the answer at start stands.
    """

    def __init__(
        self,
        api: ApiClient,
        on_event: OnEvent,
        on_relist: OnRelist,
        *,
        namespaces: Sequence[str] = (),
        kueue: KueueMode = "auto",
        resources: Sequence[Resource] = DEFAULT_RESOURCES,
        options: WatchOptions | None = None,
        kueue_recheck_seconds: float = 300.0,
    ) -> None:
        self.api = api
        self.on_event = on_event
        self.on_relist = on_relist
        self.namespaces = tuple(namespaces)
        self.kueue: KueueMode = kueue
        self.options = options or WatchOptions()
        self.kueue_recheck_seconds = kueue_recheck_seconds
        self.watchers: dict[str, ResourceWatcher] = {r.kind: self._watcher(r) for r in resources}
        # None until discovery answered; then the served version, or "" when Kueue is absent.
        self.kueue_version: str | None = None if kueue is not False else ""
        self._kueue_decided = asyncio.Event()
        if kueue is False:
            self._kueue_decided.set()

    @property
    def ready(self) -> bool:
        return self._kueue_decided.is_set() and all(w.synced.is_set() for w in self.watchers.values())

    async def wait_ready(self) -> None:
        await self._kueue_decided.wait()
        for watcher in list(self.watchers.values()):
            await watcher.synced.wait()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for watcher in self.watchers.values():
                group.create_task(watcher.run(), name=f"watch-{watcher.kind}")
            if self.kueue is not False:
                group.create_task(self._kueue(group), name="kueue-discovery")

    async def _kueue(self, group: asyncio.TaskGroup) -> None:
        announced = False
        while True:
            version = await detect_kueue(self.api, self.options.backoff(), self.options.sleep)
            if version is not None:
                watcher = self._watcher(workloads(version))
                # Registered before the decision is published, so readiness waits for its list.
                self.watchers[watcher.kind] = watcher
                self.kueue_version = version
                self._kueue_decided.set()
                log.info("Kueue found: watching Workloads %s", version)
                group.create_task(watcher.run(), name="watch-Workload")
                return
            self.kueue_version = ""
            self._kueue_decided.set()
            if self.kueue == "auto":
                log.info("Kueue is not installed: Workloads are not watched")
                return
            if not announced:
                log.warning(
                    "kubernetes.kueue is true but Kueue is not installed; checking again every %g s",
                    self.kueue_recheck_seconds,
                )
                announced = True
            await self.options.sleep(self.kueue_recheck_seconds)

    def _watcher(self, resource: Resource) -> ResourceWatcher:
        return ResourceWatcher(
            self.api,
            resource,
            self.on_event,
            self.on_relist,
            namespaces=self.namespaces,
            options=self.options,
        )
