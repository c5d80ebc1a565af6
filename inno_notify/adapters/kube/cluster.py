"""Everything the service watches in one cluster: Jobs, Pods, Events and, optionally, Kueue Workloads.

This composes one ResourceWatcher per resource and decides about Kueue per `kubernetes.kueue`
(auto | true | false). Each watcher is supervised: whatever ends it (a bug, a consumer error, an
exception no one foresaw) is logged with its traceback and the watcher is started again after a
capped, jittered backoff, so one resource's trouble never stops the others or the service.

Readiness (`/readyz`) is per resource (`watch:Job`, `watch:Pod`, …): ready once its initial LIST
was handed to the consumer (before that, a job that finished while we were down could be summarized
late or not at all) and only while each of its streams has been heard from within `stale_after`
(an event or a bookmark; the API server sends a bookmark about every minute on a quiet stream).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Literal

from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters.kube.discovery import detect_kueue
from inno_notify.adapters.kube.protocol import EVENTS, JOBS, PODS, Resource, workloads
from inno_notify.adapters.kube.watching import OnEvent, OnRelist, ResourceWatcher, WatchOptions

log = logging.getLogger(__name__)

KueueMode = Literal["auto"] | bool
DEFAULT_RESOURCES: tuple[Resource, ...] = (JOBS, PODS, EVENTS)
WORKLOAD_CHECK = "watch:Workload"


def check_name(kind: str) -> str:
    """The readiness entry of a resource's watch."""
    return f"watch:{kind}"


class ClusterWatcher:
    """Runs the watchers of one cluster until cancelled, each restarted whenever it ends.

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

    # readiness --------------------------------------------------------------------------------

    def not_ready_reasons(self) -> dict[str, str]:
        """One line per readiness entry that is false, saying why (entries as in `readiness`)."""
        reasons = {
            check_name(kind): reason
            for kind, watcher in list(self.watchers.items())
            if (reason := watcher.not_live_reason()) is not None
        }
        if not self._kueue_decided.is_set():
            reasons[WORKLOAD_CHECK] = "Kueue discovery has not answered yet"
        return reasons

    def readiness(self) -> Mapping[str, bool]:
        """Per resource: {"watch:Job": True, "watch:Pod": False, …}; see the module docstring."""
        reasons = self.not_ready_reasons()
        checks = {check_name(kind): check_name(kind) not in reasons for kind in list(self.watchers)}
        if WORKLOAD_CHECK in reasons:
            checks[WORKLOAD_CHECK] = False
        return checks

    @property
    def ready(self) -> bool:
        return all(self.readiness().values())

    async def wait_ready(self) -> None:
        """Waits for Kueue's discovery and every initial list (not for liveness, which can come and go)."""
        await self._kueue_decided.wait()
        for watcher in list(self.watchers.values()):
            await watcher.synced.wait()

    # running -----------------------------------------------------------------------------------

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for watcher in self.watchers.values():
                group.create_task(self._supervised(watcher), name=f"watch-{watcher.kind}")
            if self.kueue is not False:
                group.create_task(
                    self._restarted("Kueue discovery", lambda: self._kueue(group), finishes=True),
                    name="kueue-discovery",
                )

    async def _supervised(self, watcher: ResourceWatcher) -> None:
        def heard() -> int:
            stats = watcher.stats
            return stats.lists + stats.events + stats.bookmarks

        def crashed() -> None:
            watcher.stats.crashes += 1

        await self._restarted(f"{watcher.kind} watcher", watcher.run, heard, crashed)

    async def _restarted(
        self,
        what: str,
        run: Callable[[], Awaitable[None]],
        progress: Callable[[], int] = lambda: 0,
        on_crash: Callable[[], None] = lambda: None,
        *,
        finishes: bool = False,
    ) -> None:
        """Runs `run` again whenever it ends, after a capped, jittered backoff (reset once it made
        progress), logging the exception that ended it. With `finishes`, returning is `run`'s way of
        saying it is done (Kueue decided); otherwise returning is one more way to end."""
        backoff = self.options.backoff()
        while True:
            before = progress()
            try:
                await run()
                if finishes:
                    return
                error: Exception | None = None
            except Exception as exc:  # whatever ended it: the supervisor's whole point
                error = exc
            on_crash()
            if progress() != before:
                backoff.reset()
            delay = backoff.next_delay()
            log.error(
                "%s ended (%s); restarting in %.2f s",
                what,
                repr(error) if error is not None else "returned",
                delay,
                exc_info=error,
            )
            await self.options.sleep(delay)

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
                group.create_task(self._supervised(watcher), name="watch-Workload")
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
