"""Everything the service watches in one cluster: Jobs, Pods, Events and, optionally, Kueue Workloads
(with Kueue's ClusterQueues and LocalQueues), Argo Workflows and KServe InferenceServices.

This composes one ResourceWatcher per resource and decides about each optional API by its setting
(`kubernetes.kueue`, `workflows.argo`, `workflows.kserve`: auto | true | false): discovery says
whether the CRD is served, and in which version. Each watcher is supervised: whatever ends it (a
bug, a consumer error, an exception no one foresaw) is logged with its traceback and the watcher
is started again after a capped, jittered backoff, so one resource's trouble never stops the others
or the service.

Readiness (`/readyz`) is per resource (`watch:Job`, `watch:Pod`, …): ready once its initial LIST
was handed to the consumer (before that, a job that finished while we were down could be summarized
late or not at all) and only while each of its streams has been heard from within `stale_after`
(an event or a bookmark; the API server sends a bookmark about every minute on a quiet stream).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from kubernetes_asyncio.client import ApiClient

from inno_notify.adapters.kube.discovery import KUEUE_VERSIONS_PREFERRED, detect, namespace_annotations
from inno_notify.adapters.kube.protocol import (
    ARGO_GROUP,
    EVENTS,
    JOBS,
    KSERVE_GROUP,
    KUEUE_GROUP,
    PODS,
    Resource,
    cluster_queues,
    local_queues,
)
from inno_notify.adapters.kube.watching import (
    KnownObjects,
    OnEvent,
    OnListed,
    OnRelist,
    ResourceWatcher,
    WatchOptions,
)
from inno_notify.domain.kinds import KindSpec, owner_kinds

log = logging.getLogger(__name__)

KueueMode = Literal["auto"] | bool
# auto: watch when the CRD is served at start; True: also keep looking for it; False: never.
OptionalMode = Literal["auto"] | bool
DEFAULT_RESOURCES: tuple[Resource, ...] = (JOBS, PODS, EVENTS)
WORKLOAD_CHECK = "watch:Workload"


@dataclass(frozen=True, slots=True)
class OptionalApi:
    """An API the cluster may or may not serve: the project that brings it and its setting."""

    name: str
    setting: str
    kind: str
    group: str
    plural: str
    versions: tuple[str, ...]


KUEUE = OptionalApi(
    "Kueue", "kubernetes.kueue", "Workload", KUEUE_GROUP, "workloads", KUEUE_VERSIONS_PREFERRED
)
ARGO = OptionalApi("Argo Workflows", "workflows.argo", "Workflow", ARGO_GROUP, "workflows", ("v1alpha1",))
KSERVE = OptionalApi(
    "KServe", "workflows.kserve", "InferenceService", KSERVE_GROUP, "inferenceservices", ("v1beta1",)
)


def workload_api(spec: KindSpec) -> OptionalApi:
    """A workload kind of the registry (domain.kinds) as an optional API."""
    return OptionalApi(
        spec.kind, f"workloads.kinds.{spec.setting}", spec.kind, spec.group, spec.plural, spec.versions
    )


def check_name(kind: str) -> str:
    """The readiness entry of a resource's watch."""
    return f"watch:{kind}"


class ClusterWatcher:
    """Runs the watchers of one cluster until cancelled, each restarted whenever it ends.

    With an optional API's mode True and the API not served, discovery is repeated every
    `kueue_recheck_seconds` (quietly) so a project installed later is picked up; with "auto" the
    answer at start stands.
    """

    def __init__(
        self,
        api: ApiClient,
        on_event: OnEvent,
        on_relist: OnRelist,
        *,
        namespaces: Sequence[str] = (),
        kueue: KueueMode = "auto",
        argo: OptionalMode = False,
        kserve: OptionalMode = False,
        resources: Sequence[Resource] = DEFAULT_RESOURCES,
        options: WatchOptions | None = None,
        kueue_recheck_seconds: float = 300.0,
        workloads: Iterable[tuple[KindSpec, OptionalMode]] = (),
        on_kinds: Callable[[frozenset[str]], None] = lambda _: None,
        namespace_owner_key: str = "",
        on_namespace_owners: Callable[[Mapping[str, str]], None] = lambda _: None,
        on_listed: OnListed | None = None,
        known: KnownObjects | None = None,
    ) -> None:
        self.api = api
        self.on_event = on_event
        self.on_relist = on_relist
        self.on_listed = on_listed
        self.known = known
        self.namespaces = tuple(namespaces)
        self.kueue: KueueMode = kueue
        self.options = options or WatchOptions()
        self.kueue_recheck_seconds = kueue_recheck_seconds
        self.watchers: dict[str, ResourceWatcher] = {r.kind: self._watcher(r) for r in resources}
        self.optional: dict[str, tuple[OptionalApi, OptionalMode]] = {
            spec.kind: (spec, mode) for spec, mode in ((KUEUE, kueue), (ARGO, argo), (KSERVE, kserve))
        }
        # The workload kinds (domain.kinds): which of them are served decides what a Job or a pod is
        # (a pod of a watched PyTorchJob is that run's, else a bare GPU pod), so the base watchers
        # start once their discovery answered and `on_kinds` was told.
        self.workload_kinds: dict[str, KindSpec] = {}
        for kind_spec, mode in workloads:
            self.optional[kind_spec.kind] = (workload_api(kind_spec), mode)
            self.workload_kinds[kind_spec.kind] = kind_spec
        self.on_kinds = on_kinds
        # The namespaces' owner annotation (a Kubeflow profile's `owner`): read before the base
        # watchers start, so a run is parsed with its namespace's owner, and every recheck after.
        self.namespace_owner_key = namespace_owner_key
        self.on_namespace_owners = on_namespace_owners
        # Per optional kind: None until discovery answered; then the served version, or "" when absent.
        self.served: dict[str, str | None] = {
            kind: "" if mode is False else None for kind, (_, mode) in self.optional.items()
        }
        self._decided: dict[str, asyncio.Event] = {kind: asyncio.Event() for kind in self.optional}
        for kind, (_, mode) in self.optional.items():
            if mode is False:
                self._decided[kind].set()

    @property
    def kueue_version(self) -> str | None:
        """None until Kueue's discovery answered; then the Workload version watched, or ""."""
        return self.served["Workload"]

    def watching(self, kind: str) -> bool:
        """Whether an optional API (by kind: "Workflow", "InferenceService", …) is found and watched."""
        return bool(self.served.get(kind))

    # readiness --------------------------------------------------------------------------------

    def not_ready_reasons(self) -> dict[str, str]:
        """One line per readiness entry that is false, saying why (entries as in `readiness`)."""
        reasons = {
            check_name(kind): reason
            for kind, watcher in list(self.watchers.items())
            if (reason := watcher.not_live_reason()) is not None
        }
        for kind, (spec, _) in self.optional.items():
            if not self._decided[kind].is_set():
                reasons[check_name(kind)] = f"{spec.name} discovery has not answered yet"
        return reasons

    def readiness(self) -> Mapping[str, bool]:
        """Per resource: {"watch:Job": True, "watch:Pod": False, …}; see the module docstring."""
        reasons = self.not_ready_reasons()
        checks = {check_name(kind): check_name(kind) not in reasons for kind in list(self.watchers)}
        for kind in self.optional:
            if check_name(kind) in reasons:
                checks[check_name(kind)] = False
        return checks

    @property
    def ready(self) -> bool:
        return all(self.readiness().values())

    async def wait_ready(self) -> None:
        """Waits for every discovery and every initial list (not for liveness, which can come and go)."""
        for decided in self._decided.values():
            await decided.wait()
        for watcher in list(self.watchers.values()):
            await watcher.synced.wait()

    # running -----------------------------------------------------------------------------------

    def _announce_kinds(self) -> None:
        served = [spec for kind, spec in self.workload_kinds.items() if self.served.get(kind)]
        self.on_kinds(owner_kinds(served))

    async def _start_base(self, base: list[ResourceWatcher], group: asyncio.TaskGroup) -> None:
        for kind in self.workload_kinds:
            await self._decided[kind].wait()
        self._announce_kinds()
        if self.namespace_owner_key and await self._read_namespace_owners():
            group.create_task(self._reread_namespace_owners(), name="namespace-owners")
        for watcher in base:
            group.create_task(self._supervised(watcher), name=f"watch-{watcher.kind}")

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._start_base(list(self.watchers.values()), group), name="watch-base")
            for spec, mode in self.optional.values():
                if mode is not False:
                    group.create_task(
                        self._restarted(
                            f"{spec.name} discovery",
                            lambda spec=spec, mode=mode: self._discover(spec, mode, group),  # type: ignore[misc]
                            finishes=True,
                        ),
                        name=f"{spec.kind.lower()}-discovery",
                    )

    async def _read_namespace_owners(self) -> bool:
        """Hands over what the namespaces say of their owners; False when listing them is
        forbidden (no more tries: the service was not given it)."""
        try:
            found = await namespace_annotations(self.api, self.namespace_owner_key)
        except Exception as exc:  # the API server away, a bad answer: the next recheck tries again
            log.warning(
                "listing namespaces failed (%r); trying again in %g s", exc, self.kueue_recheck_seconds
            )
            return True
        if found is None:
            log.warning(
                "listing namespaces is forbidden: no namespace names an owner (grant list on namespaces, "
                'or set workloads.namespace_owner_annotation: "")'
            )
            return False
        self.on_namespace_owners(found)
        return True

    async def _reread_namespace_owners(self) -> None:
        while True:
            await self.options.sleep(self.kueue_recheck_seconds)
            if not await self._read_namespace_owners():
                return

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

    async def _discover(self, spec: OptionalApi, mode: OptionalMode, group: asyncio.TaskGroup) -> None:
        announced = False
        while True:
            version = await detect(
                self.api,
                spec.name,
                spec.group,
                spec.plural,
                spec.versions,
                self.options.backoff(),
                self.options.sleep,
            )
            if version is not None:
                resources = [Resource(spec.kind, spec.group, version, spec.plural)]
                if spec is KUEUE:
                    # The queues carry the nominal quotas a team's share is measured against.
                    resources += [cluster_queues(version), local_queues(version)]
                watchers = [self._watcher(resource) for resource in resources]
                # Registered before the decision is published, so readiness waits for their lists.
                for watcher in watchers:
                    self.watchers[watcher.kind] = watcher
                self.served[spec.kind] = version
                if spec.kind in self.workload_kinds and self._decided[spec.kind].is_set():
                    self._announce_kinds()  # found after start (mode true): its pods are its own now
                self._decided[spec.kind].set()
                log.info(
                    "%s found: watching %s %s", spec.name, ", ".join(f"{w.kind}s" for w in watchers), version
                )
                for watcher in watchers:
                    group.create_task(self._supervised(watcher), name=f"watch-{watcher.kind}")
                return
            self.served[spec.kind] = ""
            self._decided[spec.kind].set()
            if mode == "auto":
                log.info("%s is not installed: %ss are not watched", spec.name, spec.kind)
                return
            if not announced:
                log.warning(
                    "%s is true but %s is not installed; checking again every %g s",
                    spec.setting,
                    spec.name,
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
            on_listed=self.on_listed,
            known=self.known,
        )
